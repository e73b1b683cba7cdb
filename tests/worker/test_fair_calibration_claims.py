# ruff: noqa: F811  (fixtures imported from tests/monitors/test_engine.py are parameters of the tests)
"""Calibration claims take turns across tenants (app/monitors/leases.py ``claim_calibrations``):
the tenant with the fewest calibrations in flight, then the one served least recently, then the
oldest waiting monitor. Both database backends; the calibrations themselves are replaced by a
recorder that activates the monitor (their work is tests/monitors/test_calibration_process.py's)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from app.models.monitors import Monitor
from app.monitors.leases import claim_calibrations
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    arun,
    engine_settings,
    make_worker,
    session_factory,
)
from tests.worker.test_fair_scheduling import SECRET


def _tenants(session_factory, *counts: int) -> list[list[uuid.UUID]]:
    """One tenant per count with that many monitors in ``calibrating`` (an ``auto`` check), created
    one second apart in the order given: each tenant's after the previous tenant's."""
    from app.auth.service import create_tenant
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor

    created = datetime.now(UTC) - timedelta(hours=1)
    out = []
    with session_factory() as session:
        for count in counts:
            tenant = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
            mechanism = build_mechanism(tenant.id, MechanismCreate(
                name="m", sampling_url="http://127.0.0.1:9/m", output_kind="real", secret=SECRET))
            session.add(mechanism)
            session.flush()
            ids = []
            for i in range(count):
                created += timedelta(seconds=1)
                monitor = create_monitor(session, tenant.id, MonitorCreate(
                    name=f"c{i}", mechanism_id=mechanism.id, epsilon=1.0, horizon=200, samples_per_period=100,
                    period_seconds=60, checks=[{"x": [0], "x_prime": [1], "event": {"kind": "auto"}}]), now=created)
                assert monitor.state == "calibrating"
                ids.append(monitor.id)
            out.append(ids)
        session.commit()
    return out


def _record_calibrations(worker, session_factory) -> list[uuid.UUID]:
    """Replace the worker's calibrations by one that records the monitor and activates it."""
    order: list[uuid.UUID] = []

    async def calibrate(monitor_id: uuid.UUID) -> bool:
        order.append(monitor_id)
        with session_factory() as session:
            monitor = session.get(Monitor, monitor_id)
            assert monitor is not None and monitor.lease_owner == worker.settings.worker_id
            monitor.state, monitor.lease_owner, monitor.lease_expires_at = "active", None, None
            session.commit()
        return True

    worker.calibrator.calibrate = calibrate
    return order


def test_another_tenants_new_monitor_is_calibrated_second_not_last(session_factory, make_worker, arun):
    a, (b,) = _tenants(session_factory, 6, 1)
    worker, clock = make_worker()
    order = _record_calibrations(worker, session_factory)
    for _ in range(7):
        assert arun(worker.tick_calibration()) == 1  # one calibration at a time (the default)
        clock.advance(1)
    assert arun(worker.tick_calibration()) == 0
    # B's one monitor comes second although A's six are older; A's then go oldest first.
    assert order[:2] == [a[0], b] and order[2:] == a[1:]
    with session_factory() as session:
        stamped = dict(session.execute(select(Monitor.id, Monitor.calibration_claimed_at)
                                       .where(Monitor.id.in_([*a, b]))).all())
    assert stamped[b] == stamped[a[0]] + timedelta(seconds=1)


def test_turns_alternate_and_a_lone_tenant_takes_every_free_slot(session_factory, make_worker, arun):
    a, b = _tenants(session_factory, 4, 2)
    worker, clock = make_worker(max_calibrations_in_flight=2)
    order = _record_calibrations(worker, session_factory)
    # Two slots, two tenants waiting: one of each, whatever the age of A's others.
    assert arun(worker.tick_calibration()) == 2
    assert set(order) == {a[0], b[0]}
    clock.advance(1)
    assert arun(worker.tick_calibration()) == 2
    assert set(order[2:]) == {a[1], b[1]}
    clock.advance(1)
    # Only A waits now: it takes both slots.
    assert arun(worker.tick_calibration()) == 2
    assert set(order[4:]) == {a[2], a[3]}


def test_calibrations_in_flight_on_another_worker_count(session_factory):
    a, (b,) = _tenants(session_factory, 3, 1)
    now = datetime.now(UTC)

    def claim(worker_id: str, limit: int, at=now) -> list[uuid.UUID]:  # noqa: ANN001
        with session_factory() as session:
            ids = claim_calibrations(session, worker_id=worker_id, now=at, lease_seconds=60, limit=limit)
            session.commit()
        return ids

    assert claim("w1", 1) == [a[0]]  # nobody served yet: the oldest waiting monitor
    # A holds one calibration (on w1): another worker's claim takes B's, then A's next.
    assert claim("w2", 2) == [b, a[1]]
    assert claim("w3", 5) == [a[2]]
    assert claim("w3", 5) == []
    # A lease that expired counts no more, and its monitor waits again.
    later = now + timedelta(seconds=61)
    assert sorted(claim("w4", 5, later)) == sorted([*a, b])
