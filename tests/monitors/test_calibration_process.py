# ruff: noqa: F811  (fixtures imported from tests/monitors/test_engine.py are parameters of the tests)
"""A monitor's calibration runs in a child process with the jobs' limits (app/monitors/calibration.py):

- the happy path activates the monitor with the same discovered event and threshold as a
  calibration on the worker's loop (``calibration_isolation = "inline"``, the old behaviour);
- a calibration over its memory limit ends with that reason on the monitor (paused, not tried
  again), and the worker goes on running another monitor's periods;
- a calibration whose process dies is tried again after a back-off, up to
  ``calibration_max_attempts``, then the monitor is paused with the reason; ``resume`` tries again;
- another monitor's periods keep running while a calibration holds a CPU for seconds, and the
  worker's loop does not stall (the control, the same work run on the loop, stalls it for seconds).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import numpy as np
import pytest
from fastapi import FastAPI

from app.models.monitors import Check, Monitor
from app.monitors.calibration import compute
from app.reference.server import endpoint_router
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    FakeClock,
    arun,
    engine_settings,
    make_monitor,
    make_worker,
    mechanism_server,
    session_factory,
)
from tests.support import calibration as misbehaving
from tests.support.sampling_server import serve_app

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#: A horizon off the shipped table's grid: the monitor calibrates (a Monte-Carlo threshold).
OFF_TABLE_HORIZON = 37


class PerDatabaseLaplace:
    """k = Σx + a two-sided geometric draw (exactly ε-DP), from one seeded generator per database:
    the draws on x depend only on the requests for x, whatever order the requests for x and x'
    arrive in, so that two servers give two calibrations the same draws."""

    def __init__(self, epsilon: float) -> None:
        self.a = float(np.exp(-epsilon))
        self.rngs: dict[int, np.random.Generator] = {}
        self.lock = threading.Lock()

    def __call__(self, database, n, rng, period=0):  # noqa: ANN001, ANN204
        center = int(round(sum(database)))
        with self.lock:
            gen = self.rngs.setdefault(center, np.random.default_rng(1000 + center))
            return center + gen.geometric(1 - self.a, n) - gen.geometric(1 - self.a, n)


def _auto_monitor(client, base: str) -> dict:
    mech = client.post("/v1/mechanisms", json={"name": f"dlap-{uuid.uuid4().hex[:6]}", "sampling_url": f"{base}/dlap",
                                               "output_kind": "discrete", "secret": SECRET, "timeout_seconds": 5})
    assert mech.status_code == 201, mech.text
    created = client.post("/v1/monitors", json={
        "name": "auto", "mechanism_id": mech.json()["id"], "epsilon": 0.5, "horizon": OFF_TABLE_HORIZON,
        "samples_per_period": 500, "period_seconds": 60, "discovery_samples": 8000, "alarm_snapshot_samples": 0,
        "outputs_window": 0, "checks": [{"x": [0], "x_prime": [1], "event": {"kind": "auto"}}]})
    assert created.status_code == 201, created.text
    assert created.json()["state"] == "calibrating"
    return created.json()


def _monitor(db, monitor_id: str) -> tuple[Monitor, list[Check]]:
    with db() as session:
        monitor = session.get(Monitor, uuid.UUID(monitor_id))
        checks = list(session.query(Check).filter(Check.monitor_id == monitor.id).order_by(Check.position))
        session.expunge_all()
        return monitor, checks


def _calibrated(db, client, make_worker, arun, isolation: str) -> tuple[Monitor, list[Check]]:
    app = FastAPI()
    app.include_router(endpoint_router({"/dlap": (PerDatabaseLaplace(0.5), "discrete")}, secret=SECRET, seed=7))
    with serve_app(app) as base:
        mon = _auto_monitor(client, base)
        worker, _ = make_worker(calibration_isolation=isolation)
        assert arun(worker.tick_calibration()) == 1
    return _monitor(db, mon["id"])


# SQLite only: the child reads nothing from the database (the parent plans and writes), so the
# backend does not matter here; the failure paths below run on both.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_calibration_in_a_child_gives_the_same_event_and_threshold_as_one_on_the_loop(client, db, make_worker,
                                                                                       arun):
    child, child_checks = _calibrated(db, client, make_worker, arun, "process")
    loop, loop_checks = _calibrated(db, client, make_worker, arun, "inline")
    for monitor in (child, loop):
        assert (monitor.state, monitor.lease_owner, monitor.calibration_attempts, monitor.calibration_error) == (
            "active", None, 0, None)
        assert monitor.threshold_source == "monte_carlo"
    assert child.threshold == loop.threshold and child.threshold_std_error == loop.threshold_std_error
    [a], [b] = child_checks, loop_checks
    assert a.discovery["adopted"] is True and a.event["kind"] != "auto"
    assert (a.x, a.x_prime, a.event) == (b.x, b.x_prime, b.event)

    def same(info: dict) -> dict:
        return {k: v for k, v in info.items() if k not in ("discovered_at", "seconds")}

    assert same(a.discovery) == same(b.discovery)
    assert a.detector_state is not None and a.detector_state == b.detector_state


def test_a_calibration_over_its_memory_limit_pauses_the_monitor_with_the_reason_and_the_worker_goes_on(
        client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    victim = make_monitor(client, base, "/laplace", secret)
    heavy = make_monitor(client, base, "/laplace-b", secret, horizon=OFF_TABLE_HORIZON)
    worker, clock = make_worker(job_memory_mb=320)
    worker.calibrator.compute_ref = "tests.support.calibration:hog_memory"
    started = time.monotonic()
    assert arun(worker.tick_calibration()) == 1
    assert time.monotonic() - started < 60
    monitor, _ = _monitor(db, heavy["id"])
    assert (monitor.state, monitor.paused_from_state, monitor.calibration_attempts) == ("paused", "calibrating", 1)
    assert monitor.calibration_error.startswith("memory limit: ") and "not tried again" in monitor.calibration_error
    assert monitor.lease_owner is None and monitor.threshold is None
    status = client.get(f"/v1/monitors/{heavy['id']}/status").json()
    assert status["state"] == "paused" and status["calibration_error"].startswith("memory limit")
    assert client.get(f"/v1/monitors/{heavy['id']}").json()["calibration_attempts"] == 1
    # Not claimed again; the worker (this process) is alive and runs the other monitor's periods.
    clock.advance(3600)
    assert arun(worker.tick_calibration()) == 0

    async def periods() -> None:
        await worker.tick_periods()
        await worker.drain()

    arun(periods())
    assert _monitor(db, victim["id"])[0].t == 1


def test_a_calibration_whose_process_dies_is_tried_again_then_paused_and_resume_starts_over(
        client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret, horizon=OFF_TABLE_HORIZON)
    worker, clock = make_worker(calibration_max_attempts=2, calibration_retry_seconds=30)
    worker.calibrator.compute_ref = "tests.support.calibration:die"
    assert arun(worker.tick_calibration()) == 1
    monitor, _ = _monitor(db, mon["id"])
    assert (monitor.state, monitor.calibration_attempts, monitor.lease_owner) == ("calibrating", 1, None)
    assert monitor.calibration_error.startswith("crashed: ") and "tried again" in monitor.calibration_error
    assert arun(worker.tick_calibration()) == 0  # within the back-off
    clock.advance(31)
    assert arun(worker.tick_calibration()) == 1
    monitor, _ = _monitor(db, mon["id"])
    assert (monitor.state, monitor.paused_from_state, monitor.calibration_attempts) == ("paused", "calibrating", 2)
    assert monitor.calibration_error.startswith("crashed: ") and "attempt 2 of 2" in monitor.calibration_error
    # Resume: calibrating again from the first attempt; this time the computation is sound.
    assert client.post(f"/v1/monitors/{mon['id']}/resume").status_code == 200
    worker.calibrator.compute_ref = "app.monitors.calibration:compute_here"
    assert arun(worker.tick_calibration()) == 1
    monitor, _ = _monitor(db, mon["id"])
    assert (monitor.state, monitor.calibration_attempts, monitor.calibration_error) == ("active", 0, None)
    assert monitor.threshold_source == "monte_carlo"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("where", ["child", "loop"])
def test_periods_of_another_monitor_run_while_a_calibration_holds_a_cpu(client, db, mechanism_server, make_worker,
                                                                        arun, monkeypatch, where):
    """``loop`` is the control: the same work run on the worker's loop stalls it for seconds and
    the other monitor's periods stop meanwhile; that is what this test would see if calibration ran
    there again."""
    base, secret = mechanism_server
    victim = make_monitor(client, base, "/laplace", secret)
    heavy = make_monitor(client, base, "/laplace-b", secret, horizon=OFF_TABLE_HORIZON)
    worker, clock = make_worker()
    worker.calibrator.compute_ref = "tests.support.calibration:spin_then_compute"
    if where == "loop":
        import app.jobs.isolation

        async def on_the_loop(ref, args, limits, **kwargs):  # noqa: ANN001, ANN202, ARG001
            ends = time.perf_counter() + misbehaving.SPIN_SECONDS
            while time.perf_counter() < ends:
                pass
            return await compute(args[0], None)

        monkeypatch.setattr(app.jobs.isolation, "call_in_child", on_the_loop)

    async def scenario() -> tuple[float, int, float]:
        """The loop's longest gap between two rounds of periods, and the other monitor's periods
        done within the first SPIN_SECONDS of the calibration (while it spins)."""
        stall, periods = 0.0, 0
        calibration = asyncio.create_task(worker.tick_calibration())
        started = last = time.perf_counter()
        while not calibration.done():
            await worker.tick_periods()
            await worker.drain()
            if time.perf_counter() - started < misbehaving.SPIN_SECONDS:
                periods = _monitor(db, victim["id"])[0].t
            clock.advance(60)
            await asyncio.sleep(0.02)
            now = time.perf_counter()
            stall = max(stall, now - last)
            last = now
        assert await calibration == 1
        return stall, periods, time.perf_counter() - started

    stall, periods, seconds = arun(scenario())
    assert seconds >= misbehaving.SPIN_SECONDS
    assert _monitor(db, heavy["id"])[0].state == "active"
    if where == "child":
        # A period here is a claim, two sampling requests and a write: well under a second each.
        assert stall < 1.5, stall
        assert periods >= 3, periods
    else:
        assert stall >= misbehaving.SPIN_SECONDS - 0.5, stall
        assert periods <= 1, periods
