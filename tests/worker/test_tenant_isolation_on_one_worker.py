"""A slow tenant does not halve another's throughput on one worker: the worker
claims again as soon as a slot frees while there is due work it could not take, not only once per
tick."""

from __future__ import annotations

import asyncio
import time

import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from app.models.monitors import PeriodRun
from app.reference.mechanisms import Laplace
from app.reference.server import endpoint_router
from app.scheduler.worker import Worker
from tests.monitors.test_engine import engine_settings, session_factory  # noqa: F401
from tests.support.sampling_server import serve_app
from tests.worker.test_fair_scheduling import SECRET, _app, _mechanism, _monitors, two_tenants  # noqa: F401


def _hanging_app() -> FastAPI:
    laplace = Laplace(epsilon=1.0)

    def hanging(database, n, rng, period=0):  # noqa: ANN001, ANN202
        time.sleep(8.0)  # longer than the test: these periods hold their slots throughout
        return laplace.sample(database, n, rng)

    app = FastAPI()
    app.include_router(endpoint_router({"/hang": (hanging, "real"), "/healthy": (laplace.sample, "real")},
                                            secret=SECRET))
    return app


@pytest.mark.parametrize("backend", ["postgres"])  # the replicas' path
def test_a_healthy_tenant_keeps_its_periods_beside_hanging_ones(engine_settings, session_factory, two_tenants):  # noqa: F811
    """Tenant A: 8 monitors whose endpoint hangs, capped at 3 in flight; tenant B: 4 healthy monitors
    due every second. A worker of 4 slots ticking every second has 1 slot for B: claiming once per
    tick (or again only when half the slots are free), B got 1 of its 4 periods a second; claiming
    again as slots free, it keeps them all."""
    settings = engine_settings.model_copy(update={
        "tick_seconds": 1.0, "max_in_flight": 4, "max_inflight_per_tenant": 3, "max_inflight_per_mechanism": 3,
        "lease_seconds": 30})
    seconds = 7.0
    with serve_app(_hanging_app()) as base:
        with _app(settings, session_factory, two_tenants[0]) as a, _app(settings, session_factory, two_tenants[1]) as b:
            _monitors(a, _mechanism(a, f"{base}/hang", timeout=10.0), 8)
            healthy = _monitors(b, _mechanism(b, f"{base}/healthy"), 4)

        async def run() -> float:
            worker = Worker(settings, session_factory)
            await worker.start()
            t0 = time.monotonic()
            try:
                await asyncio.sleep(seconds)
            finally:
                worker._stopping = True  # noqa: SLF001 - do not wait for the hanging periods
                for task in list(worker._in_flight):  # noqa: SLF001
                    task.cancel()
                await worker.stop()
            return time.monotonic() - t0

        asyncio.run(run())
    with session_factory() as session:
        counts = dict(session.execute(select(PeriodRun.monitor_id, func.count())
                                      .where(PeriodRun.monitor_id.in_(healthy), PeriodRun.status == "ok")
                                      .group_by(PeriodRun.monitor_id)).all())
    kept = sum(counts.values())
    # 4 monitors × 7 one-second slots; allow one slot each for start-up and the end.
    assert kept >= 4 * (seconds - 2), counts
