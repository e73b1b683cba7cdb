"""The process's cache of resolved API keys (app.auth.key_cache): a cached key is authenticated
without a query; a revocation in this process takes effect at once; one made elsewhere (another
API process, the database) within ``DPWATCH_KEY_CACHE_SECONDS``; unknown keys are never cached."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import app.auth.key_cache as key_cache_module
from app.auth.key_cache import KEY_CACHE, KeyCache
from app.auth.service import generate_api_key, hash_api_key, revoke_api_key
from app.db import utcnow
from app.models.auth import ApiKey

DB = Callable[[], AbstractContextManager[Session]]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(key_cache_module, "time", fake)
    return fake


@pytest.fixture
def key_lookups() -> Iterator[list[str]]:
    """The statements that look a key up by its hash, on any engine of this process."""
    seen: list[str] = []

    def note(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        if statement.lstrip().upper().startswith("SELECT") and "api_keys" in statement and "key_hash" in statement:
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", note)


@pytest.fixture
def cached_app(settings, session_factory, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN001, ANN201
    from app.main import create_app

    monkeypatch.setattr(KEY_CACHE, "ttl", KEY_CACHE.ttl)  # restored after the test
    KEY_CACHE.clear()
    return create_app(settings.model_copy(update={"key_cache_seconds": 5.0}), session_factory=session_factory)


def test_the_cache_on_its_own(clock: FakeClock) -> None:
    tenant, key_id = uuid.uuid4(), uuid.uuid4()
    cache = KeyCache(ttl=5.0, max_entries=2)
    cache.put("a", tenant, key_id, "read", None, cache.generation)
    entry = cache.get("a")
    assert entry is not None and (entry.tenant_id, entry.api_key_id, entry.scope) == (tenant, key_id, "read")
    clock.now += 4.99
    assert cache.get("a") is not None
    clock.now += 0.01
    assert cache.get("a") is None  # expired
    # A lookup that started before a drop is not stored: it may have read a key being revoked.
    before = cache.generation
    cache.drop("b")
    cache.put("b", tenant, key_id, "read", None, before)
    assert cache.get("b") is None
    cache.put("b", tenant, key_id, "read", None, cache.generation)
    assert cache.get("b") is not None
    cache.drop("b")
    assert cache.get("b") is None
    # Bounded: the oldest entry goes first.
    for name in ("x", "y", "z"):
        cache.put(name, tenant, key_id, "read", None, cache.generation)
    assert [cache.get(n) is not None for n in ("x", "y", "z")] == [False, True, True]
    # Off.
    off = KeyCache(ttl=0)
    off.put("a", tenant, key_id, "read", None, off.generation)
    assert off.get("a") is None


def test_a_cached_key_is_not_looked_up_and_a_revocation_elsewhere_lasts_the_ttl(
    cached_app, tenants, db: DB, clock: FakeClock, key_lookups: list[str]  # noqa: ANN001
) -> None:
    with TestClient(cached_app, headers=tenants[0].headers) as client:
        assert client.get("/v1/mechanisms").status_code == 200
        assert len(key_lookups) == 1
        for _ in range(3):
            assert client.get("/v1/mechanisms").status_code == 200
        assert len(key_lookups) == 1  # answered from the cache
        # Revoked by another process: this one does not know until its entry expires.
        with db() as session:
            session.execute(update(ApiKey).where(ApiKey.tenant_id == tenants[0].tenant_id)
                            .values(revoked_at=utcnow()))
        clock.now += 4.9
        assert client.get("/v1/mechanisms").status_code == 200
        clock.now += 0.1
        refused = client.get("/v1/mechanisms")
        assert refused.status_code == 401 and len(key_lookups) == 2
        assert client.get("/v1/mechanisms").status_code == 401  # a revoked key is not cached
        assert len(key_lookups) == 3


def test_a_revocation_in_this_process_is_at_once(cached_app, tenants, db: DB, clock: FakeClock) -> None:  # noqa: ANN001
    with TestClient(cached_app, headers=tenants[0].headers) as client:
        assert client.get("/v1/mechanisms").status_code == 200
        with db() as session:
            key_id = session.scalar(select(ApiKey.id).where(ApiKey.tenant_id == tenants[0].tenant_id))
            revoke_api_key(session, key_id, allow_last_admin=True)
        assert client.get("/v1/mechanisms").status_code == 401


def test_an_unknown_key_is_not_cached(cached_app, tenants, db: DB, clock: FakeClock, key_lookups: list[str]) -> None:  # noqa: ANN001
    plaintext = generate_api_key()
    headers = {"Authorization": f"Bearer {plaintext}"}
    with TestClient(cached_app) as client:
        assert client.get("/v1/mechanisms", headers=headers).status_code == 401
        with db() as session:
            session.add(ApiKey(tenant_id=tenants[0].tenant_id, name="new", prefix=plaintext[:8],
                               key_hash=hash_api_key(plaintext), scope="read"))
        assert client.get("/v1/mechanisms", headers=headers).status_code == 200  # at once
        assert len(key_lookups) == 2


def test_concurrent_misses_of_one_key_share_one_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """When a key's entry expires, the requests in flight miss together: one lookup serves them
    (app.api.deps.KeyLookups); a lookup that started before a drop (a revocation in this process)
    is not joined; a request that is cancelled does not cancel the lookup for the others."""
    import asyncio
    import threading

    import app.api.deps as deps
    from app.auth.service import Principal

    calls: list[str] = []
    release = threading.Event()
    principal = Principal(tenant_id=uuid.uuid4(), api_key_id=uuid.uuid4(), scope="read")

    def slow_lookup(factory: object, plaintext: str) -> Principal:
        calls.append(plaintext)
        release.wait(5)
        return principal

    monkeypatch.setattr(deps, "lookup_key", slow_lookup)
    key = generate_api_key()

    async def scenario() -> None:
        lookups = deps.KeyLookups()
        first = [asyncio.ensure_future(lookups.resolve(None, key)) for _ in range(20)]  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert len(calls) == 1
        first[0].cancel()  # its client went away
        KEY_CACHE.drop("another key")  # a revocation in this process: later requests look up afresh
        later = asyncio.ensure_future(lookups.resolve(None, key))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert len(calls) == 2
        release.set()
        results = await asyncio.gather(*first[1:], later)
        assert all(r is principal for r in results)
        assert first[0].cancelled()
        assert not lookups._flights  # nothing left behind

    asyncio.run(scenario())
