"""SamplingClient against a real uvicorn server on 127.0.0.1 that serves good
and misbehaving endpoints."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import numpy as np
import pytest
import structlog
from dpwatch_sdk.protocol import SampleRequest, parse_request
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.protocol import (
    BINARY_MEDIA_TYPE,
    DIM_HEADER,
    SamplingError,
    generate_secret,
)
from app.sampling.safe_http import SafeAsyncClient, SafeHttpConfig
from tests.support.sampling_server import free_port, serve_app

SECRET = generate_secret()
OTHER_SECRET = generate_secret()
LOOPBACK = SafeHttpConfig(allow_networks=["127.0.0.0/8", "::1/128"])
FAST_RETRY = SamplingClientConfig(backoff_initial=0.01, backoff_max=0.05, deadline_seconds=10)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------- test server

SEEN: list[dict] = []  # one entry per request that reached a handler
ATTEMPTS: Counter[str] = Counter()  # attempts per (path, request_id)
IN_FLIGHT = {"now": 0, "max": 0}
WEBHOOK = Webhook(SECRET)


def batch_index(req: SampleRequest) -> int:
    return int(req.request_id.rsplit("-", 1)[1])


def attempt(request: Request, req: SampleRequest) -> int:
    return ATTEMPTS[f"{request.url.path}|{req.request_id}"]


async def read(request: Request) -> tuple[SampleRequest | None, Response | None]:
    raw = await request.body()
    try:
        WEBHOOK.verify(raw, dict(request.headers), json_parse=False)
    except Exception as exc:  # noqa: BLE001
        return None, Response(f"bad signature: {exc}", status_code=401)
    req = parse_request(raw, max_n=10**9)
    ATTEMPTS[f"{request.url.path}|{req.request_id}"] += 1
    SEEN.append(
        {
            "path": request.url.path,
            "n": req.n,
            "request_id": req.request_id,
            "monitor_id": req.monitor_id,
            "period": req.period,
            "database": req.database,
            "accept": request.headers.get("accept"),
            "webhook_id": request.headers.get("webhook-id"),
            "attempt": attempt(request, req),
        }
    )
    return req, None


def json_response(samples, status: int = 200) -> Response:
    return Response(json.dumps({"samples": samples}), status_code=status, media_type="application/json")


def values(req: SampleRequest, kind: str):
    """Outputs that reveal which batch produced them (checks ordering)."""
    base = batch_index(req) * 1_000_000
    if kind == "real":
        return (base + np.arange(req.n) + 0.5).tolist()
    if kind == "discrete":
        return [base + i for i in range(req.n)]
    if kind == "strings":
        return [f"b{batch_index(req)}" for _ in range(req.n)]
    return [[base + i, -1.0, 2.0] for i in range(req.n)]


async def good(request: Request) -> Response:
    req, err = await read(request)
    if err:
        return err
    kind = request.path_params["kind"]
    IN_FLIGHT["now"] += 1
    IN_FLIGHT["max"] = max(IN_FLIGHT["max"], IN_FLIGHT["now"])
    try:
        await asyncio.sleep(0.05)  # let concurrent batches overlap
    finally:
        IN_FLIGHT["now"] -= 1
    out = values(req, kind)
    if kind in ("real", "vector") and BINARY_MEDIA_TYPE in (request.headers.get("accept") or ""):
        arr = np.asarray(out, dtype="<f8")
        headers = {DIM_HEADER: str(arr.shape[1])} if arr.ndim == 2 else {}
        return Response(arr.tobytes(), media_type=BINARY_MEDIA_TYPE, headers=headers)
    return json_response(out)


async def garbage(request: Request) -> Response:
    await read(request)
    return Response("<html>Service Unavailable</html>", media_type="text/html")


async def wrong_count(request: Request) -> Response:
    req, _ = await read(request)
    return json_response([0.0] * (req.n - 1))


async def nan(request: Request) -> Response:
    req, _ = await read(request)
    return Response('{"samples": [NaN' + ", 1.0" * (req.n - 1) + "]}", media_type="application/json")


async def strings(request: Request) -> Response:
    req, _ = await read(request)
    return json_response(["1.0"] * req.n)


async def slow(request: Request) -> Response:
    req, _ = await read(request)
    await asyncio.sleep(1.0)
    return json_response([0.0] * req.n)


async def huge(request: Request) -> Response:
    req, _ = await read(request)
    return json_response([0.123456789] * 200_000)  # ~2.6 MB


async def flaky(request: Request) -> Response:
    req, _ = await read(request)
    if attempt(request, req) == 1:
        return Response("upstream hiccup", status_code=500)
    return json_response(values(req, "real"))


async def too_many(request: Request) -> Response:
    req, _ = await read(request)
    if attempt(request, req) == 1:
        return Response("slow down", status_code=429, headers={"retry-after": request.query_params["after"]})
    return json_response(values(req, "real"))


async def always(request: Request) -> Response:
    await read(request)
    return Response("nope", status_code=int(request.path_params["status"]))


async def redirect(request: Request) -> Response:
    await read(request)
    return RedirectResponse("/good/real", status_code=307)


async def bad_binary(request: Request) -> Response:
    await read(request)
    return Response(b"\x00" * 12, media_type=BINARY_MEDIA_TYPE)


async def mixed(request: Request) -> Response:
    req, _ = await read(request)
    return json_response(values(req, "discrete" if batch_index(req) == 0 else "strings"))


async def vecdim(request: Request) -> Response:
    req, _ = await read(request)
    d = 2 if batch_index(req) == 0 else 3
    return json_response([[0.0] * d] * req.n)


APP = Starlette(
    routes=[
        Route("/good/{kind}", good, methods=["POST"]),
        Route("/garbage", garbage, methods=["POST"]),
        Route("/wrong-count", wrong_count, methods=["POST"]),
        Route("/nan", nan, methods=["POST"]),
        Route("/strings", strings, methods=["POST"]),
        Route("/slow", slow, methods=["POST"]),
        Route("/huge", huge, methods=["POST"]),
        Route("/flaky", flaky, methods=["POST"]),
        Route("/429", too_many, methods=["POST"]),
        Route("/status/{status:int}", always, methods=["POST"]),
        Route("/redirect", redirect, methods=["POST"]),
        Route("/bad-binary", bad_binary, methods=["POST"]),
        Route("/mixed", mixed, methods=["POST"]),
        Route("/vecdim", vecdim, methods=["POST"]),
    ]
)


@pytest.fixture(scope="module")
def base_url():
    with serve_app(APP) as url:
        yield url


@pytest.fixture(autouse=True)
def _reset():
    SEEN.clear()
    ATTEMPTS.clear()
    IN_FLIGHT.update(now=0, max=0)


def endpoint(base_url: str, path: str, kind: str = "real", **kwargs) -> MechanismEndpoint:
    kwargs.setdefault("secret", SECRET)
    return MechanismEndpoint(f"{base_url}{path}", output_kind=kind, **kwargs)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[float, str]] = []

    def __call__(self, duration: float, outcome: str) -> None:
        self.calls.append((duration, outcome))

    @property
    def outcomes(self) -> list[str]:
        return [o for _, o in self.calls]


async def sample(ep: MechanismEndpoint, n: int, config: SamplingClientConfig = FAST_RETRY, **kwargs):
    rec = Recorder()
    async with SamplingClient(http_config=LOOPBACK, config=config, on_request=rec) as client:
        try:
            out = await client.sample(ep, kwargs.pop("database", {"x": [1, 2]}), n,
                                      monitor_id="mon-1", period=4, **kwargs)
        except SamplingError as exc:
            exc.recorder = rec  # type: ignore[attr-defined]
            raise
    return out, rec


async def failure(ep: MechanismEndpoint, n: int = 10, config: SamplingClientConfig = FAST_RETRY) -> SamplingError:
    with pytest.raises(SamplingError) as info:
        await sample(ep, n, config)
    return info.value


# --------------------------------------------------------------------------- good answers


@pytest.mark.parametrize("binary", [False, True])
async def test_real_json_and_binary(base_url, binary):
    out, rec = await sample(endpoint(base_url, "/good/real", prefer_binary=binary), 25,
                            request_id_prefix="run7")
    assert out.dtype == np.float64 and out.shape == (25,)
    assert np.array_equal(out, np.arange(25) + 0.5)
    assert rec.outcomes == ["ok"]
    (seen,) = SEEN
    assert seen["accept"] == ("application/x-dpwatch-float64, application/json;q=0.5" if binary
                              else "application/json")
    assert (seen["n"], seen["monitor_id"], seen["period"], seen["database"]) == (25, "mon-1", 4, {"x": [1, 2]})
    assert seen["request_id"] == seen["webhook_id"] == "run7-0"


@pytest.mark.parametrize("binary", [False, True])
async def test_vector_json_and_binary(base_url, binary):
    out, _ = await sample(endpoint(base_url, "/good/vector", "vector", prefer_binary=binary, vector_dim=3), 7)
    assert out.shape == (7, 3) and out.dtype == np.float64
    assert out[:, 0].tolist() == list(range(7)) and (out[:, 1] == -1).all()


async def test_vector_dim_mismatch_with_configuration(base_url):
    err = await failure(endpoint(base_url, "/good/vector", "vector", prefer_binary=True, vector_dim=4))
    assert err.reason == "wrong_type" and "expected 4" in err.detail


async def test_discrete_is_always_requested_as_json(base_url):
    out, _ = await sample(endpoint(base_url, "/good/discrete", "discrete", prefer_binary=True), 5)
    assert out.dtype == np.int64 and out.tolist() == [0, 1, 2, 3, 4]
    assert SEEN[0]["accept"] == "application/json"


async def test_batching_splits_bounds_concurrency_and_keeps_order(base_url):
    config = SamplingClientConfig(max_concurrency=2)
    out, rec = await sample(endpoint(base_url, "/good/real", max_batch=30), 200, config,
                            request_id_prefix="p")
    assert sorted(s["n"] for s in SEEN) == [20] + [30] * 6
    assert sorted(s["request_id"] for s in SEEN) == [f"p-{i}" for i in range(7)]
    assert IN_FLIGHT["max"] == 2
    expected = np.concatenate([i * 1_000_000 + np.arange(30 if i < 6 else 20) + 0.5 for i in range(7)])
    assert np.array_equal(out, expected)
    assert rec.outcomes == ["ok"] * 7


async def test_batches_with_different_vector_lengths_are_rejected(base_url):
    err = await failure(endpoint(base_url, "/vecdim", "vector", max_batch=5), n=10)
    assert err.reason == "wrong_type" and "length 3" in err.detail


async def test_batches_with_integers_and_strings_are_rejected(base_url):
    err = await failure(endpoint(base_url, "/mixed", "discrete", max_batch=5), n=10)
    assert err.reason == "wrong_type" and "strings" in err.detail


async def test_shared_safe_client_is_not_closed_by_sampling_client(base_url):
    async with SafeAsyncClient(LOOPBACK) as http:
        async with SamplingClient(http) as client:
            await client.sample(endpoint(base_url, "/good/real"), None, 3, monitor_id="m", period=0)
        async with SamplingClient(http) as client:  # still usable
            out = await client.sample(endpoint(base_url, "/good/real"), None, 3, monitor_id="m", period=0)
    assert out.shape == (3,)


# --------------------------------------------------------------------------- signatures


async def test_wrong_secret_gets_401_and_is_not_retried(base_url):
    err = await failure(endpoint(base_url, "/good/real", secret=OTHER_SECRET))
    assert err.reason == "http_status" and err.status_code == 401
    assert "bad signature" in err.detail
    assert err.recorder.outcomes == ["http_status"]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("path", "kind", "reason", "fragment"),
    [
        ("/garbage", "real", "invalid_json", "text/html"),
        ("/wrong-count", "real", "wrong_count", "expected 10 samples, got 9"),
        ("/nan", "real", "non_finite", "NaN"),
        ("/strings", "real", "wrong_type", "sample 0 is a string"),
        ("/bad-binary", "real", "invalid_binary", "8-byte rows"),
        ("/redirect", "real", "redirect", "redirects are not followed"),
        ("/status/400", "real", "http_status", "HTTP 400"),
        ("/status/404", "real", "http_status", "HTTP 404"),
    ],
)
async def test_non_retryable_failures_fail_fast(base_url, path, kind, reason, fragment):
    err = await failure(endpoint(base_url, path, kind))
    assert err.reason == reason
    assert fragment in err.detail
    assert err.recorder.outcomes == [reason]  # type: ignore[attr-defined]
    assert len(SEEN) == 1


async def test_slow_endpoint_times_out_per_attempt(base_url):
    config = SamplingClientConfig(max_attempts=2, backoff_initial=0.01)
    started = time.monotonic()
    err = await failure(endpoint(base_url, "/slow", timeout_seconds=0.2), config=config)
    assert err.reason == "timeout"
    assert err.recorder.outcomes == ["timeout", "timeout"]  # type: ignore[attr-defined]
    assert time.monotonic() - started < 0.9


async def test_huge_answer_is_oversized(base_url):
    config = SamplingClientConfig(max_response_bytes=1024 * 1024)
    err = await failure(endpoint(base_url, "/huge"), config=config)
    assert err.reason == "oversized"
    assert err.recorder.outcomes == ["oversized"]  # type: ignore[attr-defined]


async def test_500_then_success_is_retried(base_url):
    out, rec = await sample(endpoint(base_url, "/flaky", max_batch=4), 8, request_id_prefix="f")
    assert np.array_equal(out, np.concatenate([np.arange(4) + 0.5, 1_000_000 + np.arange(4) + 0.5]))
    assert Counter(rec.outcomes) == {"http_status": 2, "ok": 2}
    # each batch kept its webhook-id across the retry
    assert sorted((s["webhook_id"], s["attempt"]) for s in SEEN) == [
        ("f-0", 1), ("f-0", 2), ("f-1", 1), ("f-1", 2)
    ]


async def test_429_is_retried_after_retry_after(base_url):
    out, rec = await sample(endpoint(base_url, "/429?after=0"), 3)
    assert out.shape == (3,) and rec.outcomes == ["http_status", "ok"]


async def test_retry_after_beyond_the_deadline_gives_up_at_once(base_url):
    config = SamplingClientConfig(deadline_seconds=2, backoff_initial=0.01)
    started = time.monotonic()
    err = await failure(endpoint(base_url, "/429?after=30"), config=config)
    assert err.reason == "http_status" and err.status_code == 429 and err.retry_after == 30
    assert err.recorder.outcomes == ["http_status"]  # type: ignore[attr-defined]
    assert time.monotonic() - started < 1


async def test_5xx_retries_stop_at_max_attempts(base_url):
    config = SamplingClientConfig(max_attempts=3, backoff_initial=0.01, backoff_max=0.02)
    err = await failure(endpoint(base_url, "/status/503"), config=config)
    assert err.reason == "http_status" and err.status_code == 503
    assert err.recorder.outcomes == ["http_status"] * 3  # type: ignore[attr-defined]


async def test_retries_stop_at_the_deadline(base_url):
    config = SamplingClientConfig(max_attempts=1000, deadline_seconds=0.6, backoff_initial=0.05, backoff_max=0.1)
    started = time.monotonic()
    err = await failure(endpoint(base_url, "/status/502"), config=config)
    elapsed = time.monotonic() - started
    assert err.reason == "http_status"
    assert 3 <= len(err.recorder.outcomes) < 30  # type: ignore[attr-defined]
    assert elapsed < 1.0


async def test_connection_refused_is_retried_then_reported():
    config = SamplingClientConfig(max_attempts=3, backoff_initial=0.01, backoff_max=0.02)
    ep = MechanismEndpoint(f"http://127.0.0.1:{free_port()}/", SECRET)
    err = await failure(ep, config=config)
    assert err.reason == "connection_error"
    assert err.recorder.outcomes == ["connection_error"] * 3  # type: ignore[attr-defined]


async def test_refused_address_and_invalid_url_are_not_retried(base_url):
    async with SamplingClient(config=FAST_RETRY) as client:  # default policy: loopback refused
        with pytest.raises(SamplingError) as info:
            await client.sample(endpoint(base_url, "/good/real"), None, 3, monitor_id="m", period=0)
        assert info.value.reason == "refused_address"
        with pytest.raises(SamplingError) as info:
            await client.sample(
                MechanismEndpoint("ftp://example.com/x", SECRET), None, 3, monitor_id="m", period=0
            )
        assert info.value.reason == "invalid_url"
    assert SEEN == []


async def test_a_failing_batch_fails_the_call(base_url):
    # /flaky with max_attempts=1: every batch fails on its first attempt
    config = SamplingClientConfig(max_attempts=1)
    err = await failure(endpoint(base_url, "/flaky", max_batch=2), n=6, config=config)
    assert err.reason == "http_status" and err.status_code == 500


# --------------------------------------------------------------------------- hygiene


async def test_secret_and_url_query_never_logged(base_url):
    with structlog.testing.capture_logs() as logs:
        await sample(endpoint(base_url, "/good/real?token=hunter2", max_batch=5), 10)
        await failure(endpoint(base_url, "/flaky?token=hunter2", max_batch=5), n=10,
                      config=SamplingClientConfig(max_attempts=1))
        await failure(endpoint(base_url, "/status/503?token=hunter2"),
                      config=SamplingClientConfig(max_attempts=2, backoff_initial=0.01))
    text = repr(logs)
    assert {"sampling.done", "sampling.failed", "sampling.retry"} <= {e["event"] for e in logs}
    assert SECRET not in text and SECRET[6:] not in text
    assert "hunter2" not in text
    assert SECRET not in repr(endpoint(base_url, "/x"))


async def test_metrics_hook_errors_do_not_break_sampling(base_url):
    def broken(duration: float, outcome: str) -> None:
        raise RuntimeError("metrics backend down")

    async with SamplingClient(http_config=LOOPBACK, on_request=broken) as client:
        out = await client.sample(endpoint(base_url, "/good/real"), None, 4, monitor_id="m", period=0)
    assert out.shape == (4,)


async def test_on_request_reports_durations(base_url):
    _, rec = await sample(endpoint(base_url, "/good/real"), 4)
    ((duration, outcome),) = rec.calls
    assert outcome == "ok" and 0.05 <= duration < 5  # the handler sleeps 50 ms


def test_endpoint_configuration_is_validated():
    with pytest.raises(ValueError, match="output_kind"):
        MechanismEndpoint("http://x.example/", SECRET, output_kind="float")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_batch"):
        MechanismEndpoint("http://x.example/", SECRET, max_batch=0)
    with pytest.raises(ValueError, match="whsec_"):
        MechanismEndpoint("http://x.example/", "plain-password")
    with pytest.raises(ValueError, match="vector_dim"):
        MechanismEndpoint("http://x.example/", SECRET, output_kind="real", vector_dim=3)


async def test_invalid_arguments_raise_value_error(base_url):
    async with SamplingClient(http_config=LOOPBACK) as client:
        ep = endpoint(base_url, "/good/real")
        for kwargs in (
            {"n": 0},
            {"n": 5, "request_id_prefix": "has space"},
            {"n": 5, "database": float("nan")},
            {"n": 5, "monitor_id": 17},
            {"n": 5, "period": -1},
        ):
            args = {"database": None, "monitor_id": "m", "period": 0, **kwargs}
            with pytest.raises(ValueError):
                await client.sample(ep, args.pop("database"), args.pop("n"), **args)
    assert SEEN == []


