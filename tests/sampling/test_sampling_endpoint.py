"""The service's sampling endpoints (app.reference.server: endpoint_app / endpoint_router, each
route a dpwatch_sdk.Endpoint) served by uvicorn on 127.0.0.1, called with raw httpx (to craft bad
requests) and with SamplingClient. The SDK's own tests (sdk/python/tests/test_endpoint.py) cover
the endpoint under every server; these check the service's use of it: output kinds and shapes
translated to the SDK's Output, the service's canonical outputs served, the client reading them."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest
from dpwatch_sdk import Output
from fastapi import FastAPI

from app.reference.server import endpoint_app, endpoint_router, sdk_output
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.sampling.protocol import (
    ACCEPT_BINARY,
    BINARY_MEDIA_TYPE,
    encode_request,
    generate_secret,
    parse_samples,
    sign_headers,
)
from app.sampling.safe_http import SafeHttpConfig
from app.stats.keyed import KeyedSamples, keyed_from_dense
from app.stats.shapes import ListSamples, OutputShape, conformance
from tests.support.sampling_server import serve_app

SECRET = generate_secret()
LOOPBACK = SafeHttpConfig(allow_networks=["127.0.0.0/8"])

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def laplace(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def vectors(database, n, rng):
    return rng.normal(size=(n, 3))


def votes(database, n, rng):
    return np.where(rng.random(n) < 0.7, "yes", "no")


def counts(database, n, rng):
    return np.floor(rng.exponential(3.0, n))  # integral floats -> int64


def short(database, n, rng):
    return np.zeros(n - 1)


def nans(database, n, rng):
    out = np.zeros(n)
    out[0] = np.nan
    return out


def raises(database, n, rng):
    raise ValueError("database must be a list of numbers")


BARRIER = threading.Barrier(2, timeout=5)


def rendezvous(database, n, rng):
    # Blocks until a second request is inside the function: passes only if
    # calls run concurrently in worker threads, not on the event loop.
    BARRIER.wait()
    return np.zeros(n)


ROUTES = {
    "/reference/laplace": (laplace, "real"),
    "/reference/vectors": (vectors, "vector"),
    "/reference/votes": (votes, "discrete"),
    "/reference/counts": (counts, "discrete"),
    "/bad/short": (short, "real"),
    "/bad/nans": (nans, "real"),
    "/bad/raises": (raises, "real"),
    "/rendezvous": (rendezvous, "real"),
}


@pytest.fixture(scope="module")
def signed_url():
    app = endpoint_app(ROUTES, secret=SECRET, max_n=10_000, max_body_bytes=4096)
    with serve_app(app) as url:
        yield url


def signed(payload: bytes, msg_id: str = "req-0", secret: str = SECRET, **kwargs) -> dict[str, str]:
    return {**sign_headers(secret, msg_id, payload, **kwargs), "content-type": "application/json"}


def post(url: str, payload: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=payload, headers=headers, timeout=10)


REQ = encode_request([1, 2, 3], 5, "req-0", "mon", 0)


# --------------------------------------------------------------------------- signatures


def test_valid_signature_is_accepted(signed_url):
    resp = post(f"{signed_url}/reference/laplace", REQ, signed(REQ))
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == "application/json"
    out = parse_samples(resp.content, resp.headers["content-type"], 5, "real")
    assert out.shape == (5,)


@pytest.mark.parametrize(
    "tamper",
    ["missing", "other_secret", "body_changed", "garbage_signature", "too_old", "too_new"],
)
def test_bad_or_missing_signature_is_401(signed_url, tamper):
    payload, headers = REQ, signed(REQ)
    now = int(time.time())
    if tamper == "missing":
        headers = {"content-type": "application/json"}
    elif tamper == "other_secret":
        headers = signed(REQ, secret=generate_secret())
    elif tamper == "body_changed":
        payload = REQ.replace(b'"n":5', b'"n":6')
    elif tamper == "garbage_signature":
        headers["webhook-signature"] = "not-a-signature"
    elif tamper == "too_old":
        headers = signed(REQ, timestamp=now - 600)
    elif tamper == "too_new":
        headers = signed(REQ, timestamp=now + 600)
    resp = post(f"{signed_url}/reference/laplace", payload, headers)
    assert resp.status_code == 401
    assert "signature" in resp.json()["detail"]


def test_clock_skew_within_tolerance_is_accepted(signed_url):
    for skew in (-120, 120):
        headers = signed(REQ, timestamp=int(time.time()) + skew)
        assert post(f"{signed_url}/reference/laplace", REQ, headers).status_code == 200


def test_non_utf8_body_is_401_not_500(signed_url):
    resp = post(f"{signed_url}/reference/laplace", b"\xff\xfe", signed(b"", "x"))
    assert resp.status_code == 401


def test_without_secret_unsigned_requests_are_served():
    app = endpoint_app({"/sample": (laplace, "real")}, secret=None)
    with serve_app(app) as url:
        resp = post(f"{url}/sample", REQ, {"content-type": "application/json"})
    assert resp.status_code == 200 and len(resp.json()["samples"]) == 5


# --------------------------------------------------------------------------- body validation


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"database": [1], "n": "5", "request_id": "r", "monitor_id": "m", "period": 0}, "n"),
        ({"database": [1], "n": 0, "request_id": "r", "monitor_id": "m", "period": 0}, "n"),
        ({"database": [1], "n": 20_000, "request_id": "r", "monitor_id": "m", "period": 0}, "n"),
        ({"database": [1], "n": 5, "monitor_id": "m", "period": 0}, "request_id"),
    ],
)
def test_invalid_body_is_422_with_the_field(signed_url, doc, field):
    payload = json.dumps(doc).encode()
    resp = post(f"{signed_url}/reference/laplace", payload, signed(payload))
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert any(field in map(str, err["loc"]) for err in detail), detail
    if doc.get("n") == 20_000:
        assert "max_n=10000" in detail[0]["msg"]


def test_non_json_body_is_422(signed_url):
    resp = post(f"{signed_url}/reference/laplace", b"{not json", signed(b"{not json"))
    assert resp.status_code == 422 and resp.json()["detail"][0]["type"] == "json_invalid"


def test_oversized_request_body_is_413(signed_url):
    payload = encode_request(list(range(2000)), 5, "r", "m", 0)  # > 4096 bytes
    resp = post(f"{signed_url}/reference/laplace", payload, signed(payload))
    assert resp.status_code == 413


def test_get_is_not_allowed(signed_url):
    assert httpx.get(f"{signed_url}/reference/laplace").status_code == 405


# --------------------------------------------------------------------------- answers


def test_binary_answer_when_preferred(signed_url):
    headers = {**signed(REQ), "accept": ACCEPT_BINARY}
    resp = post(f"{signed_url}/reference/laplace", REQ, headers)
    assert resp.headers["content-type"] == BINARY_MEDIA_TYPE
    assert len(resp.content) == 5 * 8
    assert "x-dpwatch-dim" not in resp.headers

    vec = encode_request(None, 4, "req-0", "mon", 0)
    resp = post(f"{signed_url}/reference/vectors", vec, {**signed(vec), "accept": ACCEPT_BINARY})
    assert resp.headers["content-type"] == BINARY_MEDIA_TYPE
    assert resp.headers["x-dpwatch-dim"] == "3" and len(resp.content) == 4 * 3 * 8


def test_discrete_answers_json_even_when_binary_preferred(signed_url):
    resp = post(f"{signed_url}/reference/votes", REQ, {**signed(REQ), "accept": ACCEPT_BINARY})
    assert resp.headers["content-type"] == "application/json"
    assert set(resp.json()["samples"]) <= {"yes", "no"}
    resp = post(f"{signed_url}/reference/counts", REQ, signed(REQ))
    assert all(type(x) is int for x in resp.json()["samples"])


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/bad/short", "invalid outputs: expected 5 outputs, got 4"),
        ("/bad/nans", "invalid outputs: the outputs contain NaN or infinity"),
        ("/bad/raises", "raised ValueError: database must be a list of numbers"),
    ],
)
def test_mechanism_failures_are_500_with_a_clear_message(signed_url, path, fragment):
    resp = post(f"{signed_url}{path}", REQ, signed(REQ))
    assert resp.status_code == 500
    assert fragment in resp.json()["detail"]


async def test_sync_mechanism_runs_in_a_threadpool(signed_url):
    import anyio

    payload = encode_request(None, 3, "req-0", "mon", 0)
    results: list[int] = []

    async def one() -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            r = await client.post(f"{signed_url}/rendezvous", content=payload, headers=signed(payload))
            results.append(r.status_code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert results == [200, 200]


@pytest.mark.parametrize(("path", "kind", "binary", "shape", "dtype"), [
    ("/reference/laplace", "real", False, (2500,), np.float64),
    ("/reference/laplace", "real", True, (2500,), np.float64),
    ("/reference/vectors", "vector", True, (2500, 3), np.float64),
    ("/reference/vectors", "vector", False, (2500, 3), np.float64),
    ("/reference/votes", "discrete", True, (2500,), object),
    ("/reference/counts", "discrete", False, (2500,), np.int64),
])
async def test_end_to_end_with_sampling_client(signed_url, path, kind, binary, shape, dtype):
    ep = MechanismEndpoint(f"{signed_url}{path}", SECRET, kind, max_batch=1000, prefer_binary=binary)
    async with SamplingClient(http_config=LOOPBACK) as client:
        out = await client.sample(ep, [10, 20], 2500, monitor_id="m", period=1)
    assert out.shape == shape and out.dtype == dtype
    if path == "/reference/laplace":
        assert abs(np.median(out) - 30.0) < 0.3  # Laplace(30, 1): the database reached f
        assert len(np.unique(out)) == 2500  # batches used different generators


def test_seeded_endpoints_are_reproducible_and_requests_differ():
    def draws(seed):
        app = endpoint_app({"/": (laplace, "real")}, secret=None, seed=seed)
        with serve_app(app) as url:
            return [tuple(post(f"{url}/", REQ, {}).json()["samples"]) for _ in range(2)]

    first, second = draws(123), draws(123)
    assert first == second
    assert first[0] != first[1]
    assert draws(124) != first


def test_router_can_be_mounted_in_another_app():
    app = FastAPI()
    app.include_router(endpoint_router({"/laplace": (laplace, "real")}, secret=SECRET),
                       prefix="/reference")
    with serve_app(app) as url:
        resp = post(f"{url}/reference/laplace", REQ, signed(REQ))
    assert resp.status_code == 200


def test_configuration_errors():
    with pytest.raises(ValueError, match="output_kind"):
        endpoint_app({"/": (laplace, "float")}, secret=None)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="whsec_"):
        endpoint_app({"/": (laplace, "real")}, secret="hunter2")
    with pytest.raises(ValueError, match="start with '/'"):
        endpoint_app({"reference/x": (laplace, "real")}, secret=None)
    with pytest.raises(TypeError, match="not callable"):
        endpoint_app({"/": (42, "real")}, secret=None)  # type: ignore[dict-item]


# --------------------------------------------------------------------------- kinds and shapes for the SDK


@pytest.mark.parametrize(("spec", "expected"), [
    ("real", Output("real")),
    ("discrete", Output("discrete")),
    ("vector", Output("vector")),
    ("keyed", Output("keyed", nullable=True)),
    (OutputShape(), Output("real")),
    (OutputShape(values="integer", bounds=(0, 9)), Output("integer")),
    (OutputShape(values="label", labels=["a", "b"]), Output("label")),
    (OutputShape(container="vector", length=3, nullable=True), Output("vector", length=3, nullable=True)),
    (OutputShape(container="list", values="integer", max_length=4), Output("list")),
    (OutputShape(container="keyed", keys=["a", "b"], max_keys=2, values="integer"),
     Output("keyed", keys=("a", "b"), max_keys=2, values="integer")),
    (Output("vector", length=2), Output("vector", length=2)),
])
def test_sdk_output_of_kinds_and_shapes(spec, expected):
    assert sdk_output(spec) == expected


def svt_rows(database, n, rng):  # the service's canonical list outputs, a null entry among them
    values = np.where(rng.random((n, 3)) < 0.3, np.nan, rng.integers(0, 5, (n, 3)).astype(float))
    return ListSamples(values, rng.integers(0, 4, n).astype(np.int64))


def partition_counts(database, n, rng):  # the service's canonical keyed outputs
    noisy = rng.laplace(10.0, 1.0, (n, 3))
    return keyed_from_dense(["a", "b", "c"], noisy > 10.0, noisy)


def nullable_vectors(database, n, rng):
    out = rng.normal(size=(n, 2))
    out[::2, 1] = np.nan  # NaN: a null entry of a nullable vector
    return out


@pytest.mark.parametrize("binary", [False, True])
async def test_the_service_canonical_outputs_are_served(binary):
    shapes = {
        "/svt": (svt_rows, OutputShape(container="list", values="integer", nullable=True, max_length=3)),
        "/keyed": (partition_counts, OutputShape(container="keyed", keys=["a", "b", "c"])),
        "/vectors": (nullable_vectors, OutputShape(container="vector", length=2, nullable=True)),
    }
    with serve_app(endpoint_app(shapes, secret=SECRET, seed=5)) as url:
        async with SamplingClient(http_config=LOOPBACK) as client:
            for path, (_, shape) in shapes.items():
                ep = MechanismEndpoint(f"{url}{path}", SECRET, shape=shape, max_batch=150, prefer_binary=binary)
                out = await client.sample(ep, [1, 2], 300, monitor_id="m", period=0)
                assert conformance(shape, out) is None, path
                if path == "/svt":
                    assert isinstance(out, ListSamples) and len(out) == 300
                    assert set(out.lengths.tolist()) <= {0, 1, 2, 3}
                elif path == "/keyed":
                    assert isinstance(out, KeyedSamples) and len(out) == 300
                    assert 0 < out.nnz < 900 and set(out.keys) <= {"a", "b", "c"}
                else:
                    assert out.shape == (300, 2) and np.isnan(out[::2, 1]).all() and np.isfinite(out[1::2]).all()
