"""Hostile sampling answers: a valid JSON answer must not take a worker's
memory, and parsing must not stall the event loop.

The hostile endpoint is a raw server on 127.0.0.1 (tests/hostile_servers.py). Memory is measured
with tracemalloc (every Python object the parse builds), event-loop lag with a 5 ms ticker.
"""

from __future__ import annotations

import json
import random
import time
import tracemalloc

import anyio
import numpy as np
import pydantic_core
import pytest

from app.sampling.answers import PIECE_VALUES, SMALL_JSON_BYTES, answer_reader
from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.protocol import BINARY_MEDIA_TYPE, SamplingError, generate_secret, parse_samples
from app.sampling.safe_http import ByteBudget, SafeHttpConfig
from app.stats.shapes import ListSamples, OutputShape
from tests.support.hostile_servers import RawReply, RawServer, json_flood, response

LOOPBACK = SafeHttpConfig(allow_networks=["127.0.0.0/8"])
CONFIG = SamplingClientConfig(max_attempts=1, deadline_seconds=30)
FLOOD = json_flood(24 << 20)  # 24 MiB of {},{},...: 8 million dicts once parsed


class _LagProbe:
    """The longest stretch of work the event loop did before coming back to a 5 ms sleep, in CPU
    seconds of the loop's thread (``time.thread_time``): the stall a loop would show on an idle
    machine. Wall-clock lag on this shared machine (load 6-15) is mostly other processes' turns;
    bench/hostile.py reports the wall-clock lag as well."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._running = True

    async def run(self) -> None:
        while self._running:
            t0 = time.thread_time()
            await anyio.sleep(0.005)
            self.worst = max(self.worst, time.thread_time() - t0)

    def stop(self) -> None:
        self._running = False


def _serve(body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None):  # noqa: ANN202
    payload = response(body, content_type=content_type, headers=headers, chunk=1 << 16)
    return RawServer(lambda _request: RawReply([payload]))


def _draw(url: str, n: int, budget: int = 64 << 20, trace: bool = True,
          **endpoint) -> tuple[object, float, float]:  # noqa: ANN003
    """(samples or the refusal, peak MiB traced, worst event-loop lag in s). tracemalloc slows
    every allocation several times: lags are measured without it (``trace=False``)."""
    mechanism = MechanismEndpoint(sampling_url=url, secret=generate_secret(), max_batch=n, **endpoint)

    async def run() -> tuple[object, float]:
        probe = _LagProbe()
        async with anyio.create_task_group() as tg, SamplingClient(http_config=LOOPBACK, config=CONFIG) as client:
            tg.start_soon(probe.run)
            await anyio.sleep(0.02)
            try:
                out: object = await client.sample(mechanism, None, n, monitor_id="m", period=0,
                                                  budget=ByteBudget(budget))
            except SamplingError as exc:
                out = exc
            probe.stop()
        return out, probe.worst

    if not trace:
        out, lag = anyio.run(run)
        return out, float("nan"), lag
    tracemalloc.start()
    try:
        out, lag = anyio.run(run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak / 2**20, lag


# ------------------------------------------------------------------------------- the attack


def test_a_valid_json_flood_is_refused_at_its_first_element_without_taking_memory() -> None:
    with _serve(FLOOD) as server:
        out, peak_mib, _ = _draw(server.url("/"), 1000)
        again, _, lag = _draw(server.url("/"), 1000, trace=False)
    assert isinstance(out, SamplingError) and out.reason == "wrong_type", out
    assert "sample 0 is an object" in out.detail and again.reason == "wrong_type"
    # The old client parsed 8 million dicts (> 1 GiB) on the event loop for seconds.
    assert peak_mib < 48, peak_mib
    assert lag < 0.1, lag


def test_too_many_outputs_are_refused_at_the_one_past_n() -> None:
    body = b'{"samples":[' + b",".join([b"0"] * (4 << 20)) + b"]}"  # 4 million zeros, 8 MiB
    with _serve(body) as server:
        out, peak_mib, _ = _draw(server.url("/"), 1000)
    assert isinstance(out, SamplingError) and out.reason == "wrong_count", out
    assert peak_mib < 32, peak_mib


def test_one_enormous_output_is_refused_at_its_first_entry_past_the_shape() -> None:
    body = b'{"samples":[[' + b",".join([b"0"] * (4 << 20)) + b"]]}"
    shape = OutputShape(container="vector", length=3)
    with _serve(body) as server:
        out, peak_mib, _ = _draw(server.url("/"), 1, shape=shape)
    assert isinstance(out, SamplingError) and out.reason == "wrong_type" and out.breach.kind == "length", out
    assert peak_mib < 32, peak_mib


def test_a_large_binary_answer_is_refused_past_n_rows() -> None:
    body = np.zeros(2 << 20).tobytes()  # 16 MiB for n = 1000 reals
    with _serve(body, content_type=BINARY_MEDIA_TYPE) as server:
        out, peak_mib, _ = _draw(server.url("/"), 1000, prefer_binary=True)
    assert isinstance(out, SamplingError) and out.reason == "wrong_count", out
    assert peak_mib < 32, peak_mib


def test_a_large_valid_answer_streams_without_stalling_the_loop() -> None:
    n = 200_000
    values = np.random.default_rng(1).standard_normal(n)
    body = pydantic_core.to_json({"meta": {"note": [1, 2, {"a": "]"}]}, "samples": values.tolist()})
    assert len(body) > 8 * SMALL_JSON_BYTES
    with _serve(body) as server:
        out, _, lag = _draw(server.url("/"), n, trace=False)
    assert isinstance(out, np.ndarray) and np.array_equal(out, values)
    assert lag < 0.1, lag


# ------------------------------------------------------------------------------- the parser


def _stream(body: bytes, n: int, output_kind="real", dim=None, shape=None, seed: int = 0):  # noqa: ANN001, ANN202
    """Feed ``body`` in random chunks to the reader (as the network would)."""
    rng = random.Random(seed)
    reader = answer_reader({"content-type": "application/json"}, n, output_kind, dim, shape=shape, max_bytes=1 << 30)
    i = 0
    while i < len(body):
        step = rng.randint(1, 1 << 17)
        reader.feed(body[i : i + step])
        i += step
    return reader.finish()


def _pad(samples: list) -> bytes:
    """An answer above the streaming threshold (a large extra member before the samples)."""
    return json.dumps({"pad": "x" * (SMALL_JSON_BYTES + 10), "samples": samples}).encode()


def _same(a, b) -> bool:  # noqa: ANN001
    if isinstance(a, ListSamples):
        return isinstance(b, ListSamples) and np.array_equal(a.lengths, b.lengths) and \
            np.array_equal(a.values, b.values, equal_nan=True)
    return a.dtype == b.dtype and a.shape == b.shape and (
        np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else bool((a == b).all()))


CASES = [
    ("real", None, None, lambda i: float(i) / 7),
    ("real", None, None, lambda i: i),
    ("discrete", None, None, lambda i: i % 5),
    ("discrete", None, None, lambda i: float(i % 5)),
    ("discrete", None, None, lambda i: f"label-{i % 3}, [x]"),
    ("vector", 3, None, lambda i: [i, i / 2, -1.5]),
    ("vector", None, None, lambda i: [i, 0.25]),
    (None, None, OutputShape(values="integer", nullable=True), lambda i: None if i % 3 == 0 else i),
    (None, None, OutputShape(values="integer", nullable=True), lambda i: None if i == 70_000 else i),
    (None, None, OutputShape(values="label"), lambda i: "yes" if i % 2 else "no"),
    (None, None, OutputShape(container="list", values="integer", max_length=4), lambda i: [1] * (i % 5)),
    (None, None, OutputShape(container="vector", length=2, nullable=True), lambda i: [None, i] if i % 2 else [i, 1.5]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_streaming_gives_exactly_what_the_whole_parse_gives(case: int) -> None:
    kind, dim, shape, make = CASES[case]
    first = make(1)
    n = 2 * PIECE_VALUES // (len(first) if isinstance(first, list) else 1) + 17  # three pieces
    samples = [make(i) for i in range(n)]
    body = _pad(samples)
    expected = parse_samples(body, "application/json", n, kind, dim, shape=shape)
    assert _same(_stream(body, n, kind, dim, shape), expected)


BAD = [
    # (samples, n, kind, dim, shape, reason, where the whole parse says it too)
    ([0.5] * 99 + ["x"], 100, "real", None, None, "wrong_type", "sample 99"),
    ([0.5] * 99 + [True], 100, "real", None, None, "wrong_type", "sample 99"),
    ([0.5] * 100, 101, "real", None, None, "wrong_count", "got 100"),
    ([0.5] * 101, 100, "real", None, None, "wrong_count", None),
    ([1] * 50_000 + ["a"] * 50_000, 100_000, "discrete", None, None, "wrong_type", "mix"),
    ([[1, 2]] * 10 + [[1, 2, 3]], 11, "vector", 2, None, "wrong_type", None),
    ([[1, 2]] * 10 + [[1]], 11, "vector", None, None, "wrong_type", None),
    ([0.5] * 70_000 + [None], 70_001, "real", None, None, "wrong_type", "sample 70000"),
    ([[0, 1]] * 10 + [[0, [1]]], 11, None, None, OutputShape(container="vector", length=2), "wrong_type", None),
    ([1] * 10 + [2.5], 11, None, None, OutputShape(values="integer"), "wrong_type", "output 10"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_streaming_refuses_what_the_whole_parse_refuses(case: int) -> None:
    samples, n, kind, dim, shape, reason, words = BAD[case]
    body = _pad(samples)
    with pytest.raises(SamplingError) as whole:
        parse_samples(body, "application/json", n, kind, dim, shape=shape)
    with pytest.raises(SamplingError) as streamed:
        _stream(body, n, kind, dim, shape)
    assert whole.value.reason == streamed.value.reason == reason, (whole.value, streamed.value)
    if words:
        assert words in streamed.value.detail, streamed.value.detail
    if shape is not None:
        assert streamed.value.breach is not None


@pytest.mark.parametrize(("body", "reason"), [
    (b'{"pad":"' + b"x" * SMALL_JSON_BYTES + b'","samples":[NaN]}', "non_finite"),
    (b'{"pad":"' + b"x" * SMALL_JSON_BYTES + b'","samples":[1e999]}', "non_finite"),
    (b'{"pad":"' + b"x" * SMALL_JSON_BYTES + b'","samples":[1]} trailing', "invalid_json"),
    (b'{"pad":"' + b"x" * SMALL_JSON_BYTES + b'","samples":[1]', "invalid_json"),
    (b'{"pad":"' + b"x" * SMALL_JSON_BYTES + b'","samples":5}', "invalid_json"),
    (b'{"pad":"' + b"x" * SMALL_JSON_BYTES + b'","samples":[1],"samples":[1]}', "invalid_json"),
    (b'{"pad":"' + b"x" * SMALL_JSON_BYTES + b'"}', "invalid_json"),
    (b'[' + b"1," * SMALL_JSON_BYTES + b'1]', "invalid_json"),
])
def test_malformed_large_answers(body: bytes, reason: str) -> None:
    with pytest.raises(SamplingError) as refused:
        _stream(body, 1)
    assert refused.value.reason == reason, refused.value
