"""A period whose write fails on the database (a lock timeout, a lost connection) is not lost:
nothing of it is stored, the monitor keeps its slot and its lease, and once the lease expires the
same slot runs again (docs/hardening.md, "Workers")."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.models.monitors import PeriodRun
from tests.monitors.test_engine import (  # noqa: F401 - fixtures
    _monitor,
    arun,
    engine_settings,
    make_monitor,
    make_worker,
    mechanism_server,
    session_factory,
)


def test_a_failed_period_write_is_retried_on_the_same_slot(client, db, mechanism_server, make_worker, arun,  # noqa: ANN001, F811
                                                           monkeypatch) -> None:  # noqa: ANN001
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    worker, clock = make_worker()
    slot = _monitor(db, mon["id"]).next_run_at
    original = worker.runner._write_success  # noqa: SLF001
    calls = {"n": 0}

    def blocked(session, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls["n"] += 1
        raise OperationalError("UPDATE monitors ...", {}, Exception("canceling statement due to lock timeout"))

    monkeypatch.setattr(worker.runner, "_write_success", blocked)
    arun(worker.tick_periods())
    arun(worker.drain())
    assert calls["n"] == 1
    m = _monitor(db, mon["id"])
    assert (m.t, m.next_run_at) == (0, slot) and m.lease_owner is not None  # nothing stored, slot and lease kept
    with db() as session:
        assert session.scalars(select(PeriodRun).where(PeriodRun.monitor_id == m.id)).all() == []

    monkeypatch.setattr(worker.runner, "_write_success", original)
    arun(worker.tick_periods())  # the lease is still held: not claimed again yet
    arun(worker.drain())
    assert _monitor(db, mon["id"]).t == 0
    clock.advance(worker.settings.lease_seconds + 1)
    arun(worker.tick_periods())
    arun(worker.drain())
    m = _monitor(db, mon["id"])
    assert m.t == 1 and m.lease_owner is None
    with db() as session:
        runs = session.scalars(select(PeriodRun).where(PeriodRun.monitor_id == m.id)).all()
    assert len(runs) == 1 and runs[0].status == "ok"
    # The same slot, or the latest due slot after coalescing: never an earlier one, never two.
    assert runs[0].scheduled_for >= slot and runs[0].scheduled_for - slot <= timedelta(
        seconds=worker.settings.lease_seconds + 61)
