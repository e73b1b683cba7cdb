"""One tenant's snapshots must not hold back another's: claims take tenants in turns, alarms first.

Before, a worker claimed the oldest ready snapshot: a tenant whose monitors take a scheduled
snapshot every period (``snapshot_every: 1``) queued them faster than a worker computes them (one
per tick, each in a child process), and another tenant's alarm snapshot, which its alarm's webhooks
wait for, waited behind the whole queue (docs/hardening.md, "Snapshots in turns").
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.db import utcnow
from app.models.snapshots import Snapshot
from app.snapshots.runner import SnapshotRunner
from tests.monitors.test_engine import engine_settings, session_factory  # noqa: F401


def _tenant_monitor(session, name: str):  # noqa: ANN001, ANN202
    from app.auth.service import create_tenant
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor

    tenant = create_tenant(session, name)
    session.flush()
    mechanism = build_mechanism(tenant.id, MechanismCreate(
        name=name, sampling_url="http://127.0.0.1:9/x", output_kind="real", secret="whsec_" + "A" * 32))
    session.add(mechanism)
    session.flush()
    monitor = create_monitor(session, tenant.id, MonitorCreate(
        name=name, mechanism_id=mechanism.id, epsilon=1.0, horizon=100, samples_per_period=100, period_seconds=60,
        checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}]))
    return tenant, monitor


def _snapshot(tenant, monitor, trigger: str, at):  # noqa: ANN001, ANN202
    return Snapshot(tenant_id=tenant.id, monitor_id=monitor.id, trigger=trigger, status="pending",
                    params={"extra_samples": 0, "alpha": 0.05, "window": 20}, created_at=at)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_another_tenants_alarm_snapshot_is_claimed_before_a_flood(engine_settings, session_factory):  # noqa: F811
    start = utcnow() - timedelta(minutes=10)
    with session_factory() as session:
        a, monitor_a = _tenant_monitor(session, "flooding")
        b, monitor_b = _tenant_monitor(session, "alarmed")
        flood = [_snapshot(a, monitor_a, "schedule", start + timedelta(seconds=i)) for i in range(40)]
        session.add_all(flood)
        session.add(_snapshot(a, monitor_a, "alarm", start + timedelta(seconds=50)))
        b_alarm = _snapshot(b, monitor_b, "alarm", start + timedelta(seconds=60))
        b_schedule = _snapshot(b, monitor_b, "schedule", start + timedelta(seconds=55))
        session.add_all([b_alarm, b_schedule])
        session.commit()
        ids = {"b_alarm": b_alarm.id, "b_schedule": b_schedule.id}
        names = {x.id: f"{x.trigger}@{(x.created_at - start).total_seconds():.0f}:{'A' if x.tenant_id == a.id else 'B'}"
                 for x in session.query(Snapshot)}
    runner = SnapshotRunner(session_factory, client=None, settings=engine_settings)  # type: ignore[arg-type]
    claimed = [runner.claim(1) for _ in range(6)]
    assert all(len(c) == 1 for c in claimed), claimed
    order = [c[0] for c in claimed]
    # Turns: the tenants' first snapshots, alarms first, oldest first (A's alarm, then B's), then
    # their second ones, the tenant served least recently first (A's oldest scheduled one, then
    # B's scheduled one). Before, oldest first overall: B's alarm was the 42nd claimed, behind A's
    # 40 scheduled snapshots and its alarm.
    assert ids["b_alarm"] in order[:2], [names[i] for i in order]
    assert order[3] == ids["b_schedule"], [names[i] for i in order]
    with session_factory() as session:
        statuses = {s.id: s.status for s in session.query(Snapshot)}
    assert sum(1 for s in statuses.values() if s == "running") == 6
    # a batch claim takes turns too, and never claims a snapshot twice
    more = runner.claim(10)
    assert len(more) == 10 and not set(more) & set(order)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_worker_that_finishes_each_snapshot_alternates_tenants(engine_settings, session_factory):  # noqa: F811
    """The worker computes one snapshot at a time: none is running at the next claim, so turns
    come from the tenant served least recently."""
    start = utcnow() - timedelta(minutes=10)
    with session_factory() as session:
        a, monitor_a = _tenant_monitor(session, "flooding")
        b, monitor_b = _tenant_monitor(session, "other")
        session.add_all([_snapshot(a, monitor_a, "schedule", start + timedelta(seconds=i)) for i in range(20)])
        session.add_all([_snapshot(b, monitor_b, "schedule", start + timedelta(seconds=30 + i)) for i in range(3)])
        session.commit()
        tenant_of = {x.id: "A" if x.tenant_id == a.id else "B" for x in session.query(Snapshot)}
    runner = SnapshotRunner(session_factory, client=None, settings=engine_settings)  # type: ignore[arg-type]
    served = []
    for _ in range(8):
        (snapshot_id,) = runner.claim(1)
        served.append(tenant_of[snapshot_id])
        with session_factory() as session:  # done, as the worker's run() leaves it
            snap = session.get(Snapshot, snapshot_id)
            snap.status, snap.lease_owner, snap.lease_expires_at = "done", None, None
            session.commit()
    # Before: A eight times (its 20 are older than B's 3).
    assert served == ["A", "B", "A", "B", "A", "B", "A", "A"], served
