"""Bounded memory in the sampling client: compressed answers are refused unread, and one
period's answers share one byte budget. Against a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import time

import numpy as np
import pytest
from dpwatch_sdk.protocol import parse_request
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.sampling.client import ByteBudget, MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.protocol import SAMPLING_REASONS, SamplingError, generate_secret
from app.sampling.safe_http import SafeAsyncClient, SafeHttpConfig
from tests.support.sampling_server import serve_app

pytestmark = pytest.mark.anyio
SECRET = generate_secret()
LOOPBACK = SafeHttpConfig(allow_networks=["127.0.0.0/8"])
CONFIG = SamplingClientConfig(backoff_initial=0.01, backoff_max=0.02, deadline_seconds=10, max_attempts=2)
# 16 MB of JSON that gzip turns into well under 1 MB: what a gzip bomb sends.
BOMB_MB = 16
_BOMB = gzip.compress(b'{"samples": [' + b"0.0, " * (BOMB_MB * 1024 * 1024 // 5) + b"0.0]}", compresslevel=1)
CALLS: list[str] = []


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _n(request: Request) -> int:
    CALLS.append(request.url.path)
    return parse_request(await request.body(), max_n=10**9).n


async def bomb(request: Request) -> Response:
    await _n(request)
    return Response(_BOMB, media_type="application/json", headers={"content-encoding": "gzip"})


async def bomb_500(request: Request) -> Response:
    CALLS.append(request.url.path)
    return Response(_BOMB, status_code=500, headers={"content-encoding": "gzip"})


async def identity(request: Request) -> Response:
    n = await _n(request)
    return Response(json.dumps({"samples": [0.5] * n}), media_type="application/json",
                    headers={"content-encoding": "identity"})


async def padded(request: Request) -> Response:
    """~200 KB per batch of 10 outputs."""
    n = await _n(request)
    return Response('{"samples": [' + ", ".join(["0.5"] * n) + "]" + " " * 200_000 + "}",
                    media_type="application/json")


APP = Starlette(routes=[Route("/bomb", bomb, methods=["POST"]), Route("/bomb-500", bomb_500, methods=["POST"]),
                        Route("/identity", identity, methods=["POST"]), Route("/padded", padded, methods=["POST"])])


@pytest.fixture(scope="module")
def base_url():
    with serve_app(APP) as url:
        yield url


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()


def _endpoint(base_url: str, path: str, **kw) -> MechanismEndpoint:
    return MechanismEndpoint(f"{base_url}{path}", secret=SECRET, **kw)


async def _sample(ep: MechanismEndpoint, n: int, config: SamplingClientConfig = CONFIG, **kw):
    async with SamplingClient(http_config=LOOPBACK, config=config) as client:
        return await client.sample(ep, [1], n, monitor_id="m", period=1, **kw)


async def test_a_gzip_answer_is_refused_without_decompressing_it(base_url):
    assert "content_encoding_refused" in SAMPLING_REASONS
    started = time.monotonic()
    with pytest.raises(SamplingError) as info:
        # the per-answer cap is far above the compressed size, far below the decompressed one
        await _sample(_endpoint(base_url, "/bomb"), 10, SamplingClientConfig(max_response_bytes=1024 * 1024))
    assert info.value.reason == "content_encoding_refused", info.value
    assert "gzip" in info.value.detail
    assert CALLS == ["/bomb"]  # refused at once, not retried
    assert time.monotonic() - started < 2.0  # decompressing 16 MB and parsing 3 M numbers takes longer


async def test_a_compressed_error_body_is_kept_as_sent(base_url):
    async with SafeAsyncClient(LOOPBACK) as http:
        resp = await http.request("POST", f"{base_url}/bomb-500", content=b"{}", identity_only=True)
    assert resp.status_code == 500 and resp.truncated
    assert len(resp.content) == 8192 and resp.content == _BOMB[:8192]  # raw gzip bytes, not 16 MB of JSON


async def test_identity_is_accepted(base_url):
    out = await _sample(_endpoint(base_url, "/identity"), 5)
    assert out.tolist() == [0.5] * 5


async def test_the_budget_counts_every_batch_of_a_period(base_url):
    ep = _endpoint(base_url, "/padded", max_batch=10)
    config = SamplingClientConfig(max_response_bytes=300_000, max_attempts=1)
    # Each ~200 KB answer fits the per-answer cap: without a budget, 8 batches (1.6 MB) pass.
    assert len(await _sample(ep, 80, config)) == 80
    # With a budget of 1 MB over the call, the same batches are refused.
    with pytest.raises(SamplingError) as info:
        await _sample(ep, 80, config, budget=ByteBudget(1_000_000))
    assert info.value.reason == "oversized" and "budget" in info.value.detail
    # And one budget spans several calls (a period's databases).
    budget = ByteBudget(700_000)
    async with SamplingClient(http_config=LOOPBACK, config=config) as client:
        await client.sample(ep, [0], 20, monitor_id="m", period=1, budget=budget)  # ~400 KB
        assert 400_000 <= budget.used <= 420_000
        with pytest.raises(SamplingError) as info:
            await client.sample(ep, [1], 20, monitor_id="m", period=1, budget=budget)
    assert info.value.reason == "oversized"


def test_the_period_runner_gives_each_period_one_budget():
    """The runner passes one ByteBudget of ``sampling_max_bytes`` to every database of a period."""
    import asyncio
    import uuid
    from datetime import UTC, datetime

    from app.monitors.runner import PeriodPlan, PeriodRunner
    from app.settings import Settings

    seen: list[ByteBudget] = []

    class Client:
        async def sample(self, endpoint, database, n, *, budget, **kw):
            seen.append(budget)
            return np.zeros(n)

    settings = Settings(_env_file=None, sampling_max_bytes=123_456)  # type: ignore[call-arg]
    runner = PeriodRunner(None, Client(), settings)  # type: ignore[arg-type]
    plan = PeriodPlan(monitor_id=uuid.uuid4(), scheduled=datetime.now(UTC), slot=datetime.now(UTC), skipped=0,
                      horizon_index=0, t=0, n=3, epsilon=1.0, endpoint=_endpoint("http://127.0.0.1:9", "/x"),
                      databases={"a": [0], "b": [1], "c": [2]}, checks=())
    asyncio.run(runner.sample(plan))
    assert len(seen) == 3 and len({id(b) for b in seen}) == 1 and seen[0].limit == 123_456
