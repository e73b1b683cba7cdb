"""Retention: periods past ``retention_days`` go (with their checks' rows and kept outputs), except an
aggregator's current horizon and an alarm's period; detector state and alarms stay. Both backends."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from app.models.alarms import Alarm
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.models.snapshots import PeriodOutputs
from app.quotas.retention import sweep

BODY = {"name": "r", "epsilon": 1.0, "horizon": 50, "samples_per_period": 200, "period_seconds": 60,
        "checks": [{"x": [0.0], "x_prime": [1.0], "event": {"kind": "interval", "low": None, "high": 0.0}}]}
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _monitor(client, detector: str) -> uuid.UUID:
    mech = client.post("/v1/mechanisms", json={"name": f"m-{uuid.uuid4().hex[:6]}", "output_kind": "real",
                                               "sampling_url": "http://127.0.0.1:9/x"}).json()["id"]
    answer = client.post("/v1/monitors", json={**BODY, "mechanism_id": mech, "detector": detector})
    assert answer.status_code == 201, answer.text
    return uuid.UUID(answer.json()["id"])


def _periods(db, monitor_id: uuid.UUID, rows: list[tuple[int, int, float]]) -> list[uuid.UUID]:
    """Insert periods (horizon, t, age in days), each with its check's row and one kept output."""
    ids = []
    with db() as session:
        monitor = session.get(Monitor, monitor_id)
        check = session.scalar(select(Check).where(Check.monitor_id == monitor_id))
        for seq, (horizon, t, age) in enumerate(rows, start=1):
            at = NOW - timedelta(days=age, minutes=seq)
            run = PeriodRun(monitor_id=monitor_id, seq=seq, scheduled_for=at, horizon_index=horizon, t=t, status="ok",
                            started_at=at, finished_at=at)
            session.add(run)
            session.flush()
            session.add(PeriodCheck(period_run_id=run.id, check_id=check.id, a=1, b=1, n=10, p_hat=0.1, q_hat=0.1,
                                    d_hat=0.0, sigma_hat=0.1, z=0.0, statistic=0.0, threshold=3.0))
            session.add(PeriodOutputs(monitor_id=monitor_id, period_run_id=run.id, seq=seq, horizon_index=horizon, t=t,
                                      database_key="k", encoding="f4", shape=[1], data=b"\0\0\0\0"))
            ids.append(run.id)
        monitor.horizon_index = max(h for h, _, _ in rows)
        check.detector_state = {"kept": True}
    return ids


def _left(db, model, monitor_id) -> int:
    with db() as session:
        column = model.monitor_id if hasattr(model, "monitor_id") else None
        if column is None:
            return session.scalar(select(func.count()).select_from(PeriodCheck).join(PeriodRun).where(
                PeriodRun.monitor_id == monitor_id))
        return session.scalar(select(func.count()).select_from(model).where(column == monitor_id))


def test_old_periods_go_and_what_the_detectors_and_alarms_need_stays(client, db, settings, session_factory, tenants):
    agg = _monitor(client, "aggregator")
    epro = _monitor(client, "e-process")
    # aggregator: horizon 1 old (3 periods, one with an alarm), horizon 2 current and old, one young in horizon 2
    a_ids = _periods(db, agg, [(1, 1, 40), (1, 2, 40), (1, 3, 39), (2, 1, 35), (2, 2, 1)])
    e_ids = _periods(db, epro, [(1, 1, 40), (1, 2, 39), (1, 3, 1)])
    with db() as session:
        check = session.scalar(select(Check).where(Check.monitor_id == agg))
        session.add(Alarm(tenant_id=tenants[0].tenant_id, monitor_id=agg, check_id=check.id, period_run_id=a_ids[1],
                          horizon_index=1, t=2, fingerprint="f" * 64, evidence={"kept": True}))
    swept = sweep(session_factory, settings.model_copy(update={"retention_days": 30, "retention_batch": 2}), NOW)
    assert swept.periods == 2 + 2 and swept.batches >= 2  # in batches of 2
    with db() as session:
        left_agg = set(session.scalars(select(PeriodRun.id).where(PeriodRun.monitor_id == agg)))
        left_e = set(session.scalars(select(PeriodRun.id).where(PeriodRun.monitor_id == epro)))
        assert left_agg == {a_ids[1], a_ids[3], a_ids[4]}  # the alarm's period, the current horizon
        assert left_e == {e_ids[2]}  # the e-process keeps its state on the check: only the young period stays
        assert session.scalar(select(Alarm.evidence).where(Alarm.monitor_id == agg)) == {"kept": True}
        assert all(c.detector_state == {"kept": True} for c in session.scalars(select(Check)))
    assert _left(db, PeriodCheck, agg) == 3 and _left(db, PeriodOutputs, agg) == 3  # cascaded
    assert _left(db, PeriodCheck, epro) == 1 and _left(db, PeriodOutputs, epro) == 1
    # a second sweep finds nothing; retention_days = 0 keeps everything
    assert sweep(session_factory, settings.model_copy(update={"retention_days": 30}), NOW).periods == 0
    assert sweep(session_factory, settings.model_copy(update={"retention_days": 0}), NOW + timedelta(days=999)).periods == 0


def test_the_period_tables_are_vacuumed_on_postgres_only(backend, settings, session_factory, request):
    from app.db import make_session_factory
    from app.quotas.retention import vacuum

    if backend == "postgres":  # an engine, not the test's connection inside a transaction
        engine_factory = make_session_factory(request.getfixturevalue("postgres_engine"))
        assert vacuum(engine_factory, settings) is True
        assert vacuum(engine_factory, settings.model_copy(update={"retention_vacuum": False})) is False
    assert vacuum(session_factory, settings) is False  # SQLite; or a session inside a transaction


@pytest.mark.parametrize("backend", ["postgres"])  # SQLite has one process: no other sweeper
def test_one_worker_sweeps_at_a_time_on_postgres(backend, settings, request):
    from sqlalchemy import func, select

    from app.db import make_session_factory
    from app.quotas.retention import RETENTION_LOCK_KEY, sweep

    engine = request.getfixturevalue("postgres_engine")
    factory = make_session_factory(engine)
    with engine.connect() as other:  # another worker's sweep holds the lock
        assert other.execute(select(func.pg_try_advisory_lock(RETENTION_LOCK_KEY))).scalar() is True
        assert sweep(factory, settings, NOW).vacuumed is False  # skipped
        other.execute(select(func.pg_advisory_unlock(RETENTION_LOCK_KEY)))
        other.commit()
    assert sweep(factory, settings, NOW).vacuumed is True
