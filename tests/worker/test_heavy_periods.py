"""Heavy periods run one at a time per tenant in a worker: past ``sampling_heavy_period_bytes``
a period reads on, and writes, only while no other period of its tenant does. One tenant with
many monitors of large answers used to parse and hold all of them at once (a worker peaked at
1159 MB under keyed answers every limit accepted; docs/hardening.md, "Heavy periods"); another
tenant's periods never wait for that tenant's."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI

from app.monitors.leases import claim_monitors
from app.reference.mechanisms import Laplace
from app.reference.server import endpoint_router
from app.sampling.safe_http import ByteBudget
from app.scheduler.worker import Worker
from tests.monitors.test_engine import BOUNDARY_EVENT, X_PRIME, X, arun, engine_settings, session_factory  # noqa: F401
from tests.support.sampling_server import serve_app
from tests.worker.test_fair_scheduling import SECRET, _app, _mechanism, two_tenants  # noqa: F401

HEAVY_N = 4000  # ~80 KB of JSON per database: past the mark below
LIGHT_N = 100  # ~2 KB
MARK = 50_000


def _laplace_app() -> FastAPI:
    app = FastAPI()
    app.include_router(endpoint_router({"/laplace": (Laplace(epsilon=1.0).sample, "real")}, secret=SECRET))
    return app


def _monitor(client, mechanism_id: str, n: int) -> uuid.UUID:  # noqa: ANN001
    r = client.post("/v1/monitors", json={
        "name": f"m-{uuid.uuid4().hex[:6]}", "mechanism_id": mechanism_id, "epsilon": 1.0, "horizon": 200,
        "samples_per_period": n, "period_seconds": 60, "checks": [{"x": X, "x_prime": X_PRIME, "event": BOUNDARY_EVENT}]})
    assert r.status_code == 201, r.text
    return uuid.UUID(r.json()["id"])


def _writes(settings, session_factory, arun, mark: int, heavy: list[uuid.UUID],  # noqa: ANN001, F811
            light: list[uuid.UUID], minutes: int) -> dict[uuid.UUID, tuple[float, float]]:
    """Run one period of every monitor at once on one worker whose clock is ``minutes`` ahead (a
    period is due every minute); each write takes 0.3 s. Returns each monitor's write interval."""
    worker = Worker(settings.model_copy(update={"sampling_heavy_period_bytes": mark}), session_factory,
                    clock=lambda: datetime.now(UTC) + timedelta(minutes=minutes, seconds=1))
    arun(worker.open())
    intervals: dict[uuid.UUID, tuple[float, float]] = {}
    lock = threading.Lock()
    write_success = worker.runner.write_success

    def slow_write(plan, outputs, started, seconds):  # noqa: ANN001, ANN202
        t0 = time.monotonic()
        time.sleep(0.3)
        out = write_success(plan, outputs, started, seconds)
        with lock:
            intervals[plan.monitor_id] = (t0, time.monotonic())
        return out

    worker.runner.write_success = slow_write  # type: ignore[method-assign]
    try:
        with session_factory() as session:
            ids = claim_monitors(session, worker_id=worker.settings.worker_id, states=("active",),
                                 now=worker.clock(), lease_seconds=60, limit=100)
            session.commit()
        assert set(ids) == set(heavy) | set(light)

        async def run_all() -> list[object]:
            return await asyncio.gather(*(worker.runner.run(i) for i in ids))

        outcomes = arun(run_all())
        assert all(o.outcome == "ok" for o in outcomes), outcomes  # type: ignore[attr-defined]
    finally:
        arun(worker.http.aclose())  # type: ignore[union-attr]
    return intervals


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("backend", ["postgres"])  # concurrent writes: the replicas' database
def test_one_tenants_heavy_periods_run_one_at_a_time_and_the_others_do_not_wait(
        engine_settings, session_factory, two_tenants, arun):  # noqa: F811
    with serve_app(_laplace_app()) as base:
        with _app(engine_settings, session_factory, two_tenants[0]) as a, \
                _app(engine_settings, session_factory, two_tenants[1]) as b:
            mech_a, mech_b = _mechanism(a, f"{base}/laplace"), _mechanism(b, f"{base}/laplace")
            heavy = [_monitor(a, mech_a, HEAVY_N) for _ in range(3)]
            light = [_monitor(b, mech_b, LIGHT_N)]
            # Without the mark, the three heavy periods of A are parsed and written at once.
            off = _writes(engine_settings, session_factory, arun, 0, heavy, light, 0)
            assert any(_overlap(off[x], off[y]) for i, x in enumerate(heavy) for y in heavy[i + 1:]), off
            # With it, A's heavy periods take turns, write included; B's light period does not wait for them.
            on = _writes(engine_settings, session_factory, arun, MARK, heavy, light, 1)
    assert not any(_overlap(on[x], on[y]) for i, x in enumerate(heavy) for y in heavy[i + 1:]), on
    last_turn = max(on[x][0] for x in heavy)
    assert on[light[0]][1] < last_turn, on  # B's period is done before A's last turn begins: it did not queue


def test_a_budget_admits_once_past_its_mark() -> None:
    calls: list[int] = []

    async def admit() -> None:
        calls.append(1)

    async def run() -> None:
        budget = ByteBudget(1000, heavy_at=100, admit=admit)
        budget.take(100)
        await budget.heavy()
        assert calls == []  # at the mark, not past it
        budget.take(1)
        await budget.heavy()
        await budget.heavy()
        assert len(calls) == 2  # awaited on every chunk past the mark (admit is idempotent)
        plain = ByteBudget(1000)
        plain.take(999)
        await plain.heavy()

    asyncio.run(run())
    with pytest.raises(ValueError, match="go together"):
        ByteBudget(1000, heavy_at=100)
