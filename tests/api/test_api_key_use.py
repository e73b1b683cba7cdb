"""An API key's ``last_used_at`` is bookkeeping: recording it never holds the key's row lock across
a request, so concurrent requests of one key never wait on each other for it (no 503).

A real server (uvicorn in a thread) on its own engine, so that requests run on separate
connections and transactions, on SQLite and on Postgres."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

import anyio
import httpx
import pytest
from sqlalchemy import delete, select, text, update

from app.auth.key_use import KeyUseRecorder
from app.auth.service import (
    LAST_USED_RESOLUTION_SECONDS,
    create_tenant_with_key,
    record_key_use,
)
from app.db import make_engine, make_session_factory, utcnow
from app.mechanisms.router import get_prober
from app.mechanisms.service import ProbeResult
from app.models.auth import ApiKey, Tenant
from app.settings import Settings
from tests.support.sampling_server import serve_app

#: How long the validation probe hangs: longer than SQLite's busy timeout (5 s) and Postgres'
#: lock timeout (1 s here), so that a GET waiting on the key's row lock would fail or be slow.
HANG_SECONDS = 6.0


class HangingProber:
    """A validation probe that hangs (an endpoint that does not answer), then reports a failure."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    async def probe(self, mechanism, settings, *, database=None, n=10) -> ProbeResult:  # noqa: ANN001
        self.entered.set()
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline and not self.released.is_set():
            await anyio.sleep(0.05)
        return ProbeResult(ok=False, problems=["the endpoint did not answer"], reason="timeout")


@dataclass
class Live:
    base_url: str
    key: str
    key_id: uuid.UUID
    prober: HangingProber
    factory: object
    backend: str


@pytest.fixture
def live(backend: str, db_url: str) -> Iterator[Live]:
    from app.main import create_app

    engine = make_engine(db_url)
    factory = make_session_factory(engine)
    tenant_name = f"key-use-{uuid.uuid4().hex[:8]}"
    with factory() as session:
        tenant, key = create_tenant_with_key(session, tenant_name, "k")
        session.commit()
        tenant_id = tenant.id
        key_id = session.scalar(select(ApiKey.id).where(ApiKey.tenant_id == tenant_id))
    settings = Settings(_env_file=None, database_url=db_url, migrate_on_start=False,  # type: ignore[call-arg]
                        allow_networks=["127.0.0.0/8"], log_level="WARNING", db_lock_timeout_ms=1000)
    app = create_app(settings, session_factory=factory)
    prober = HangingProber()
    app.dependency_overrides[get_prober] = lambda: prober.probe
    try:
        with serve_app(app) as base_url:
            yield Live(base_url, key, key_id, prober, factory, backend)
    finally:
        with factory() as session:
            session.execute(delete(Tenant).where(Tenant.id == tenant_id))
            session.commit()
        engine.dispose()


def _last_used(live: Live):  # noqa: ANN202
    with live.factory() as session:  # type: ignore[operator]
        return session.scalar(select(ApiKey.last_used_at).where(ApiKey.id == live.key_id))


def test_three_gets_beside_a_hanging_validate_all_answer_at_once(live: Live) -> None:
    """The key has never been used (its use is due); a POST ?validate=true hangs on its probe while
    three GETs with the same key run: each answers 200, well before the probe ends."""
    headers = {"Authorization": f"Bearer {live.key}"}
    body = {"name": "hanging", "sampling_url": "http://127.0.0.1:9/sample", "output_kind": "real",
            "probe_database": [0.0]}

    def post() -> httpx.Response:
        return httpx.post(f"{live.base_url}/v1/mechanisms?validate=true", json=body, headers=headers, timeout=30)

    def get() -> tuple[int, float]:
        started = time.monotonic()
        response = httpx.get(f"{live.base_url}/v1/mechanisms", headers=headers, timeout=30)
        return response.status_code, time.monotonic() - started

    with ThreadPoolExecutor(4) as pool:
        posted = pool.submit(post)
        assert live.prober.entered.wait(10), "the validation probe never started"
        gets = [pool.submit(get) for _ in range(3)]
        answers = [g.result() for g in gets]
        still_hanging = not posted.done()
        live.prober.released.set()
        post_status = posted.result().status_code
    assert [status for status, _ in answers] == [200, 200, 200], answers
    assert still_hanging, "the GETs only answered once the hanging request had ended"
    assert max(elapsed for _, elapsed in answers) < 2.0, answers
    assert post_status == 422  # the probe's failure: nothing saved
    # The key's use was recorded all the same (by one of the requests, in its own transaction).
    deadline = time.monotonic() + 5
    while _last_used(live) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _last_used(live) is not None


def test_a_get_answers_while_another_transaction_holds_the_keys_row(live: Live) -> None:
    """Another transaction holds the key's row (Postgres: a row lock; SQLite: the write lock): a GET
    still answers 200 at once; its bookkeeping is skipped, not waited for."""
    headers = {"Authorization": f"Bearer {live.key}"}
    holder = live.factory()  # type: ignore[operator]
    try:
        if live.backend == "postgres":
            holder.execute(select(ApiKey.id).where(ApiKey.id == live.key_id).with_for_update())
        else:
            holder.execute(update(ApiKey).where(ApiKey.id == live.key_id).values(name="held"))
        started = time.monotonic()
        response = httpx.get(f"{live.base_url}/v1/mechanisms", headers=headers, timeout=30)
        elapsed = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert response.status_code == 200, response.text
    assert elapsed < 2.0, elapsed


def test_use_is_recorded_once_per_resolution(live: Live) -> None:
    """The write is throttled: once in the process per resolution, and never over a recent value."""
    recorder = KeyUseRecorder()
    assert recorder.record(live.factory, live.key_id) is True  # type: ignore[arg-type]
    first = _last_used(live)
    assert first is not None
    assert recorder.record(live.factory, live.key_id) is False  # type: ignore[arg-type]  # throttled here
    # Another process (a fresh recorder) does not overwrite a recent value either.
    assert KeyUseRecorder().record(live.factory, live.key_id) is False  # type: ignore[arg-type]
    assert _last_used(live) == first
    # A value older than the resolution is replaced.
    with live.factory() as session:  # type: ignore[operator]
        old = utcnow() - timedelta(seconds=LAST_USED_RESOLUTION_SECONDS + 5)
        session.execute(update(ApiKey).where(ApiKey.id == live.key_id).values(last_used_at=old))
        session.commit()
    with live.factory() as session:  # type: ignore[operator]
        assert record_key_use(session, live.key_id) is True
        session.commit()
    assert _last_used(live) > old


def test_a_failed_request_with_a_valid_key_still_counts_as_a_use(live: Live) -> None:
    headers = {"Authorization": f"Bearer {live.key}"}
    response = httpx.get(f"{live.base_url}/v1/mechanisms/{uuid.uuid4()}", headers=headers, timeout=30)
    assert response.status_code == 404
    deadline = time.monotonic() + 5
    while _last_used(live) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _last_used(live) is not None


def test_the_recorder_never_raises_on_a_database_error() -> None:
    engine = make_engine("sqlite:///:memory:")  # no tables: every statement fails
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        assert KeyUseRecorder().record(make_session_factory(engine), uuid.uuid4()) is False
    finally:
        engine.dispose()
