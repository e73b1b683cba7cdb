"""The safe HTTP client's keep-alive pools per isolation key, under concurrency.

Closing an idle pool awaits (its connections are shut down), so other requests run in the
meantime: new keys are acquired and other idle pools are pruned. No key may be popped twice
(a ``KeyError`` that crashed periods), a pool that is being closed is never handed to a new
request, and two first requests for the same key share one pool (none is leaked)."""

from __future__ import annotations

import asyncio
import ssl
import time

import pytest

from app.sampling.safe_http import AddressPolicy, _GuardedAsyncTransport, _Pool

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SlowClosingPool:
    """Stands in for an httpcore pool whose ``aclose`` yields to the event loop several times,
    as closing real connections does."""

    def __init__(self, name: str, turns: int = 5) -> None:
        self.name = name
        self.turns = turns
        self.closing = False
        self.closed = False

    async def aclose(self) -> None:
        self.closing = True
        for _ in range(self.turns):
            await asyncio.sleep(0)
        self.closed = True


def _transport(max_pools: int = 512) -> _GuardedAsyncTransport:
    transport = _GuardedAsyncTransport(AddressPolicy(), ssl.create_default_context(), max_connections=4,
                                       max_pools=max_pools)
    transport._new_pool = lambda *, keepalive: SlowClosingPool("new")  # type: ignore[method-assign]
    return transport


def _idle(transport: _GuardedAsyncTransport, names: list[str], age: float) -> dict[str, SlowClosingPool]:
    pools = {}
    for name in names:
        pools[name] = SlowClosingPool(name)
        transport._pools[name] = _Pool(pools[name], active=0, last_used=age)  # type: ignore[arg-type]
    return pools


async def test_two_new_keys_while_two_idle_pools_close() -> None:
    transport = _transport()
    old = _idle(transport, ["idle-a", "idle-b"], age=-1e9)  # expired long ago
    results = await asyncio.gather(transport._acquire("new-1"), transport._acquire("new-2"),
                                   return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == []
    assert all(pool.closed for pool in old.values())
    assert set(transport._pools) == {"new-1", "new-2"}
    assert all(transport._pools[k].active == 1 for k in ("new-1", "new-2"))


async def test_many_new_keys_while_many_idle_pools_close() -> None:
    transport = _transport()
    old = _idle(transport, [f"idle-{i}" for i in range(20)], age=-1e9)
    results = await asyncio.gather(*(transport._acquire(f"new-{i}") for i in range(20)), return_exceptions=True)
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert all(pool.closed for pool in old.values())
    assert set(transport._pools) == {f"new-{i}" for i in range(20)}


async def test_a_pool_being_closed_is_never_handed_out() -> None:
    """While a stale pool closes, a request for that pool's key gets a fresh pool."""
    transport = _transport()
    old = _idle(transport, ["idle-a", "idle-b"], age=-1e9)
    task = asyncio.create_task(transport._acquire("new-1"))  # prunes idle-a and idle-b
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    pool, entry = await transport._acquire("idle-b")
    await task
    assert pool is not old["idle-b"]
    assert not getattr(pool, "closing", False)
    assert entry is transport._pools["idle-b"]


async def test_first_requests_for_one_key_share_one_pool() -> None:
    transport = _transport()
    _idle(transport, ["idle-a"], age=-1e9)
    (pool_1, entry_1), (pool_2, entry_2) = await asyncio.gather(transport._acquire("k"), transport._acquire("k"))
    assert pool_1 is pool_2 and entry_1 is entry_2
    assert entry_1.active == 2


async def test_least_recently_used_idle_pools_beyond_the_limit_are_closed_once() -> None:
    transport = _transport(max_pools=3)
    now = time.monotonic()
    old = _idle(transport, ["a", "b", "c"], age=now)  # fresh, but over the limit once new keys arrive
    results = await asyncio.gather(transport._acquire("x"), transport._acquire("y"), return_exceptions=True)
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert len(transport._pools) <= 3
    assert {"x", "y"} <= set(transport._pools)
    closed = [name for name, pool in old.items() if pool.closed]
    assert len(closed) >= 1
    assert all(name not in transport._pools for name in closed)
