"""make_endpoint_app / make_multi_endpoint_app served by uvicorn on 127.0.0.1,
called with raw httpx (to craft bad requests) and with SamplingClient."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from app.sampling.client import MechanismEndpoint, SamplingClient
from app.sampling.endpoint import (
    make_endpoint_app,
    make_endpoint_router,
    make_multi_endpoint_app,
    negotiate_binary,
    to_samples,
)
from app.sampling.protocol import (
    ACCEPT_BINARY,
    BINARY_MEDIA_TYPE,
    SamplingError,
    encode_request,
    generate_secret,
    parse_samples,
    sign_headers,
)
from app.sampling.safe_http import SafeHttpConfig
from tests.sampling_server import serve_app

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
    app = make_multi_endpoint_app(ROUTES, SECRET, max_n=10_000, max_body_bytes=4096)
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
    app = make_endpoint_app(laplace, secret=None, output_kind="real", path="/sample")
    with serve_app(app) as url:
        resp = post(f"{url}/sample", REQ, {"content-type": "application/json"})
    assert resp.status_code == 200 and len(resp.json()["samples"]) == 5


# --------------------------------------------------------------------------- body validation


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"n": 5, "request_id": "r", "monitor_id": "m", "period": 0}, "database"),
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
        ("/bad/short", "invalid output (wrong_count): expected 5 samples, got 4"),
        ("/bad/nans", "invalid output (non_finite)"),
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
        app = make_endpoint_app(laplace, secret=None, output_kind="real", seed=seed)
        with serve_app(app) as url:
            return [tuple(post(f"{url}/", REQ, {}).json()["samples"]) for _ in range(2)]

    first, second = draws(123), draws(123)
    assert first == second
    assert first[0] != first[1]
    assert draws(124) != first


def test_router_can_be_mounted_in_another_app():
    app = FastAPI()
    app.include_router(make_endpoint_router({"/laplace": (laplace, "real")}, secret=SECRET),
                       prefix="/reference")
    with serve_app(app) as url:
        resp = post(f"{url}/reference/laplace", REQ, signed(REQ))
    assert resp.status_code == 200


def test_configuration_errors():
    with pytest.raises(ValueError, match="output_kind"):
        make_endpoint_app(laplace, secret=None, output_kind="float")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="whsec_"):
        make_endpoint_app(laplace, secret="hunter2", output_kind="real")
    with pytest.raises(ValueError, match="start with '/'"):
        make_multi_endpoint_app({"reference/x": (laplace, "real")}, None)


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (ACCEPT_BINARY, True),
        (BINARY_MEDIA_TYPE, True),
        ("application/json", False),
        (None, False),
        ("*/*", False),
        ("application/json, application/x-dpwatch-float64;q=0.5", False),
        ("application/x-dpwatch-float64;q=0, application/json", False),
        ("application/x-dpwatch-float64;q=0.9, */*;q=0.1", True),
    ],
)
def test_negotiate_binary(accept, expected):
    assert negotiate_binary(accept) is expected


def test_to_samples_conversions_and_refusals():
    assert to_samples([1, 2.5], 2, "real").dtype == np.float64
    assert to_samples(np.array([3.0, 4.0]), 2, "discrete").tolist() == [3, 4]
    assert to_samples(np.array([3, 4], dtype=np.uint8), 2, "discrete").dtype == np.int64
    assert to_samples(["a", "b"], 2, "discrete").tolist() == ["a", "b"]
    assert to_samples([[1, 2], [3, 4]], 2, "vector").shape == (2, 2)
    for output, kind, reason in [
        ([True, False], "real", "wrong_type"),
        (["1", "2"], "real", "wrong_type"),
        ([1.5, 2.0], "discrete", "wrong_type"),
        ([True, False], "discrete", "wrong_type"),
        ([1.0, np.inf], "real", "non_finite"),
        ([1.0], "real", "wrong_count"),
        ([1.0, 2.0], "vector", "wrong_type"),
        (np.zeros((3, 2)), "vector", "wrong_count"),
        (np.zeros((2, 2)), "real", "wrong_type"),
        ([[1.0, 2.0], [3.0]], "vector", "wrong_type"),
        (3.0, "real", "wrong_type"),
    ]:
        with pytest.raises(SamplingError) as info:
            to_samples(output, 2, kind)
        assert info.value.reason == reason, (output, kind)
