"""Connections are never shared across mechanisms.

One raw server on one host and port serves several tenants' mechanisms at different paths, as a
shared host or a reverse proxy would. The attacker's path writes, after each of its well-framed
answers, a second complete HTTP response holding injected samples (666). Through one shared
sampling client (as in the worker), no other mechanism ever reads those bytes as its answer, and
the attacker's own next answer is not the injected one either: the connection that carried the
extra bytes is closed, never reused. Keep-alive still works within one mechanism.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.protocol import SamplingError, generate_secret
from app.sampling.safe_http import SafeHttpConfig
from tests.support.hostile_servers import RawReply, RawServer, response

pytestmark = pytest.mark.anyio
N = 8
INJECTED = 666.0
LOOPBACK = SafeHttpConfig(allow_networks=["127.0.0.0/8"])
CONFIG = SamplingClientConfig(max_attempts=1, deadline_seconds=5, max_concurrency=1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _samples(value: float, n: int = N) -> bytes:
    return json.dumps({"samples": [value] * n}).encode()


def _handler(request):  # noqa: ANN001, ANN202
    n = request.json()["n"]
    if request.path == "/attacker":
        smuggled = response(_samples(INJECTED, n))
        return RawReply([response(_samples(1.0, n)) + smuggled])
    if request.path == "/attacker-late":  # the extra response arrives after the answer
        return RawReply([response(_samples(1.0, n)), response(_samples(INJECTED, n))], pauses=[0, 0.05])
    if request.path == "/unavailable":
        return RawReply([response(b'{"detail":"down"}', status=503)])
    if request.path == "/hanging":
        return RawReply([response(_samples(0.5, n))], hang=1.0)
    return RawReply([response(_samples(0.5, n))])


def _endpoint(server: RawServer, path: str, key: str | None, **kw) -> MechanismEndpoint:
    return MechanismEndpoint(sampling_url=server.url(path), secret=generate_secret(), isolation_key=key, **kw)


async def _draw(client: SamplingClient, endpoint: MechanismEndpoint, period: int) -> np.ndarray | str:
    try:
        return await client.sample(endpoint, {"x": 1}, N, monitor_id="m", period=period)
    except SamplingError as exc:
        return exc.reason


async def test_no_injected_answer_reaches_another_mechanism_or_the_attacker_itself() -> None:
    with RawServer(_handler) as server:
        attacker = _endpoint(server, "/attacker", "mechanism:attacker")
        victims = {
            "honest": _endpoint(server, "/honest", "mechanism:victim"),
            "unavailable": _endpoint(server, "/unavailable", "mechanism:down"),
            "hanging": _endpoint(server, "/hanging", "mechanism:hang", timeout_seconds=0.3),
        }
        outcomes: dict[str, list] = {name: [] for name in ("attacker", *victims)}
        async with SamplingClient(http_config=LOOPBACK, config=CONFIG) as client:
            for period in range(12):
                outcomes["attacker"].append(await _draw(client, attacker, period))
                for name, endpoint in victims.items():
                    outcomes[name].append(await _draw(client, endpoint, period))
    injected = {name: sum(isinstance(o, np.ndarray) and bool((o == INJECTED).any()) for o in got)
                for name, got in outcomes.items()}
    assert injected == dict.fromkeys(outcomes, 0), injected
    assert all(isinstance(o, np.ndarray) and (o == 1.0).all() for o in outcomes["attacker"])
    assert all(isinstance(o, np.ndarray) and (o == 0.5).all() for o in outcomes["honest"])
    assert outcomes["unavailable"] == ["http_status"] * 12 and outcomes["hanging"] == ["timeout"] * 12


async def test_extra_bytes_arriving_after_the_answer_close_the_connection() -> None:
    with RawServer(_handler) as server:
        attacker = _endpoint(server, "/attacker-late", "mechanism:attacker")
        async with SamplingClient(http_config=LOOPBACK, config=CONFIG) as client:
            got = []
            for period in range(5):
                got.append(await _draw(client, attacker, period))
                import anyio

                await anyio.sleep(0.15)  # the extra response has arrived on the idle connection
    assert all(isinstance(o, np.ndarray) and (o == 1.0).all() for o in got), got
    assert server.connections == 5  # each tainted connection was dropped


async def test_keep_alive_is_kept_within_a_mechanism_and_never_shared_between_two() -> None:
    with RawServer(_handler) as server:
        secret = generate_secret()
        one = MechanismEndpoint(sampling_url=server.url("/honest"), secret=secret, isolation_key="mechanism:1")
        two = MechanismEndpoint(sampling_url=server.url("/honest"), secret=secret, isolation_key="mechanism:2")
        async with SamplingClient(http_config=LOOPBACK, config=CONFIG) as client:
            for period in range(10):
                await client.sample(one, None, N, monitor_id="m1", period=period)
            assert server.connections == 1  # one keep-alive connection served the ten requests
            for period in range(10):
                await client.sample(two, None, N, monitor_id="m2", period=period)
                await client.sample(one, None, N, monitor_id="m1", period=period)
        by_connection: dict[int, set[str]] = {}
        for request in server.requests:
            by_connection.setdefault(request.connection, set()).add(request.json()["monitor_id"])
    assert server.connections == 2 and sorted(map(sorted, by_connection.values())) == [["m1"], ["m2"]]


async def test_the_same_url_with_another_secret_gets_its_own_connections() -> None:
    """Without an isolation key (library use), URL and secret still separate the pools."""
    with RawServer(_handler) as server:
        a = MechanismEndpoint(sampling_url=server.url("/honest"), secret=generate_secret())
        b = MechanismEndpoint(sampling_url=server.url("/honest"), secret=generate_secret())
        assert a.pool_key != b.pool_key
        async with SamplingClient(http_config=LOOPBACK, config=CONFIG) as client:
            for period in range(3):
                await client.sample(a, None, N, monitor_id="a", period=period)
                await client.sample(b, None, N, monitor_id="b", period=period)
    assert server.connections == 2
