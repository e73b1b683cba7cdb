"""Hostile keyed answers: the bytes of a period do not bound the work of a key table. An answer of
30 MiB holding 2 million distinct keys used to cost a worker seconds of CPU on its event loop and
a gigabyte of memory per answer (docs/hardening.md, "Keyed answers"). Distinct keys and key
lengths are capped now, as the answer streams, and a refused answer's parse state is dropped at
once.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import numpy as np
import pytest

from app.mechanisms import contract as contract_module
from app.sampling.answers import MAX_KEY_LENGTH, MAX_KEYS, SMALL_JSON_BYTES, answer_reader
from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.protocol import SamplingError, generate_secret
from app.sampling.safe_http import ByteBudget, SafeHttpConfig
from app.settings import Settings
from app.stats.keyed import KeyedSamples, concat_keyed, keyed_from_rows
from app.stats.shapes import OutputShape
from tests.support.hostile_servers import RawReply, RawServer, response

LOOPBACK = SafeHttpConfig(allow_networks=["127.0.0.0/8"])
KEYED = OutputShape(container="keyed")


def _keyed_body(n: int, keys: int, *, distinct: bool = True, key: str = "k") -> bytes:
    rows = ("{" + ",".join(f'"{key}{i if distinct else 0}_{j}":1.5' for j in range(keys)) + "}" for i in range(n))
    return ('{"samples":[' + ",".join(rows) + "]}").encode()


def _read(body: bytes, n: int, *, announce: bool, **limits: int) -> object:
    headers = {"content-type": "application/json"}
    if announce:
        headers["content-length"] = str(len(body))
    reader = answer_reader(headers, n, "keyed", shape=KEYED, max_bytes=64 << 20, **limits)
    try:
        for start in range(0, len(body), 1 << 16):
            reader.feed(body[start:start + (1 << 16)])
        return reader.finish()
    except SamplingError as exc:
        exc.reader = reader  # type: ignore[attr-defined]
        return exc


def test_the_defaults_are_the_settings() -> None:
    settings = Settings()
    assert (settings.sampling_max_keys, settings.sampling_max_key_length) == (MAX_KEYS, MAX_KEY_LENGTH)
    assert SamplingClientConfig().max_keys == MAX_KEYS


@pytest.mark.parametrize("announce", [True, False], ids=["small, whole parse", "streamed"])
def test_too_many_distinct_keys_are_refused(announce: bool) -> None:
    body = _keyed_body(40, 50)  # 2 000 distinct keys
    assert (len(body) <= SMALL_JSON_BYTES) is True
    out = _read(body, 40, announce=announce, max_keys=1000)
    assert isinstance(out, SamplingError) and out.reason == "oversized", out
    assert "more than 1000 distinct keys" in out.detail and "DPWATCH_SAMPLING_MAX_KEYS" in out.detail
    # the same answer within the cap, and many entries over few keys, are read
    assert isinstance(_read(body, 40, announce=announce, max_keys=2000), KeyedSamples)
    shared = _read(_keyed_body(40, 50, distinct=False), 40, announce=announce, max_keys=50)
    assert isinstance(shared, KeyedSamples) and shared.nnz == 2000 and len(shared.keys) == 50


@pytest.mark.parametrize("announce", [True, False], ids=["announced", "chunked"])
def test_one_output_may_release_as_many_keys_as_the_setting_allows(announce: bool) -> None:
    """A group-by over a large key set releases many keys in one output. Without a declared
    ``max_keys`` the limit is DPWATCH_SAMPLING_MAX_KEYS (100 000 by default, docs/protocol.md §5);
    a streamed output was refused at 65 536 keys instead, whatever the setting, as ``wrong_type``
    ("keyed output 0 releases more than 65536 keys"), as if the output broke its shape."""
    body = _keyed_body(1, 70_000)  # 1.3 MiB: streamed
    assert len(body) > SMALL_JSON_BYTES
    out = _read(body, 1, announce=announce, max_keys=MAX_KEYS)
    assert isinstance(out, KeyedSamples) and len(out.keys) == 70_000, out
    over = _read(body, 1, announce=announce, max_keys=60_000)
    assert isinstance(over, SamplingError) and over.reason == "oversized", over
    assert "more than 60000 distinct keys" in over.detail and "DPWATCH_SAMPLING_MAX_KEYS" in over.detail
    declared = answer_reader({"content-type": "application/json"}, 1, "keyed",
                             shape=OutputShape(container="keyed", max_keys=10), max_bytes=64 << 20)
    with pytest.raises(SamplingError, match="more than 10 keys") as refused:  # a declared max_keys still holds
        declared.feed(body)
        declared.finish()
    assert refused.value.reason == "wrong_type"


def test_a_streamed_answer_is_refused_at_the_first_key_too_many_and_drops_its_state() -> None:
    body = _keyed_body(4000, 500)  # 30 MiB, 2 million distinct keys
    tracemalloc.start()
    try:
        t0 = time.process_time()
        out = _read(body, 4000, announce=True, max_keys=100_000)
        cpu = time.process_time() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(out, SamplingError) and out.reason == "oversized", out
    # Refused after ~1.3 MiB: before, the whole 30 MiB was parsed and 2 million keys tabled
    # (5-30 s, > 1 GB).
    assert peak < 64 << 20, peak / 2**20
    assert cpu < 5, cpu
    stream = out.reader._stream  # type: ignore[attr-defined]
    assert not stream.distinct_keys and not stream.parts and not stream.piece and stream.parser is None


@pytest.mark.parametrize("announce", [True, False], ids=["small, whole parse", "streamed"])
def test_a_key_too_long_is_refused(announce: bool) -> None:
    long_key = "x" * 5000
    body = json.dumps({"samples": [{"a": 1.0}, {long_key: 2.0}]}).encode()
    out = _read(body, 2, announce=announce, max_key_length=1000)
    assert isinstance(out, SamplingError) and out.reason == "oversized", out
    assert "a key of 5000 characters" in out.detail
    assert isinstance(_read(body, 2, announce=announce, max_key_length=5000), KeyedSamples)


@pytest.mark.parametrize(("batches", "size", "keys"), [(2, 10, 50), (40, 1, 50)], ids=["two batches", "forty small"])
def test_the_batches_of_a_call_share_the_cap(batches: int, size: int, keys: int) -> None:
    """Each answer within the cap (500 or 50 distinct keys), their union over it: refused as the
    answers arrive, before they are concatenated."""
    import itertools

    import anyio

    counter = itertools.count()
    server = RawServer(lambda _request: RawReply([response(_keyed_body(size, keys, key=f"b{next(counter)}_"),
                                                           content_type="application/json")]))

    async def draw(mechanism: MechanismEndpoint, config: SamplingClientConfig) -> object:
        async with SamplingClient(http_config=LOOPBACK, config=config) as client:
            try:
                return await client.sample(mechanism, None, batches * size, monitor_id="m", period=0,
                                           budget=ByteBudget(64 << 20))
            except SamplingError as exc:
                return exc

    with server:
        mechanism = MechanismEndpoint(sampling_url=server.url("/"), secret=generate_secret(), output_kind="keyed",
                                      max_batch=size, shape=KEYED)
        out = anyio.run(draw, mechanism, SamplingClientConfig(max_attempts=1, max_keys=600, max_call_keys=600))
        within = anyio.run(draw, mechanism, SamplingClientConfig(max_attempts=1, max_keys=600,
                                                                 max_call_keys=batches * size * keys))
    assert isinstance(out, SamplingError) and out.reason == "oversized", out
    assert "more than 600 distinct keys" in out.detail
    assert isinstance(within, KeyedSamples) and len(within.keys) == batches * size * keys


def test_concatenating_many_pieces_is_linear_in_their_keys() -> None:
    """4 000 pieces of 50 keys each over a union of 200 000: the old reindexing copied the union
    once per piece (8·10⁸ entries)."""
    pieces = [keyed_from_rows([{f"p{p}_{j}": float(j) for j in range(50)}], nullable=False, integer=False)
              for p in range(4000)]
    t0 = time.process_time()
    whole = concat_keyed(pieces)
    assert time.process_time() - t0 < 5
    assert len(whole) == 4000 and len(whole.keys) == 200_000 and whole.nnz == 200_000
    assert whole.row(1234) == pieces[1234].row(0)
    assert list(whole.keys) == sorted(whole.keys)
    for i in (0, 17, 3999):  # keys increasing within each output
        lo, hi = whole.indptr[i], whole.indptr[i + 1]
        assert np.all(np.diff(whole.key_index[lo:hi]) > 0)


def test_contract_detection_reads_a_bounded_number_of_keyed_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = keyed_from_rows([{f"k{j}": 1.0 for j in range(500)} for _ in range(2000)], nullable=False,
                              integer=False)  # 1 million entries
    seen: list[int] = []
    real = contract_module.detect_shape

    def spy(samples):  # noqa: ANN001, ANN202
        seen.append(samples.nnz)
        return real(samples)

    monkeypatch.setattr(contract_module, "detect_shape", spy)
    found = contract_module.detect_contract({"x": outputs, "y": outputs})
    assert found is not None and found[0].container == "keyed"
    assert seen and seen[0] <= 2 * contract_module.DETECTION_ENTRIES, seen
