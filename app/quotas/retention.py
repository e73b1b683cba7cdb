"""Retention: old periods are deleted, so that the period tables stay bounded however long the
service runs (docs/hardening.md "Quotas and retention").

What is kept: each monitor's detector state (on ``checks``: O(1) per check, never deleted here),
its alarms with their evidence (stored on the alarm), for an ``aggregator`` monitor the periods of
its **current horizon** (its threshold test reads the horizon's prefix sums from ``period_checks``;
the e-process and e-detector carry everything in O(1) state), the periods an
alarm points at, and every period younger than ``retention_days``. What goes: older
``period_runs`` rows, with their ``period_checks`` and any ``period_outputs`` (foreign keys ON
DELETE CASCADE). Raw outputs are already bounded per monitor by ``outputs_window`` (the period's
write prunes them) and per tenant by the stored-bytes quota.

The sweep deletes at most ``retention_batch`` periods per statement, each statement its own short
transaction, so that it never holds locks a period's write waits on for long; it stops after
:data:`MAX_BATCHES` batches and goes on at the next sweep. On Postgres it then runs a plain
``VACUUM`` of the period tables (``retention_vacuum``): rows deleted by retention, and the kept
outputs each period's write deletes as it adds new ones, leave dead tuples whose space is only
reused once vacuumed. Autovacuum does that where it runs (migration 0008 makes it start after a
fixed number of dead rows on these tables); a server with autovacuum off (as the one the benches
ran on) would otherwise grow by the bytes of every deleted row (measured: 43 MB for 4,000 live
rows of kept outputs after 6 minutes). A plain VACUUM takes no lock a period's write waits on.

**Partitioning** (Postgres range partitions of the period tables by time) is not used: a partition
can only be dropped whole, and the rows retention must keep (a long horizon's periods, an alarm's
period) would pin every partition they fall in. Batched deletes by the ``(monitor_id,
scheduled_for)`` index keep the tables flat at the measured rates (docs/hardening.md); partitions
become worth their cost when retention is a pure age cut-off, e.g. a deployment whose horizons
are shorter than ``retention_days`` and that keeps no alarm's period.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from sqlalchemy import Engine, and_, delete, exists, func, or_, select, text
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings

log = structlog.get_logger("dpwatch.retention")

#: Batches one sweep deletes at most (the rest waits for the next sweep).
MAX_BATCHES = 20
#: Key of the session-level advisory lock one sweep holds (Postgres): with several workers, one
#: sweeps and vacuums at a time, and the others skip that round instead of waiting.
RETENTION_LOCK_KEY = 0x6470_7265_7465  # "dprete"
#: The tables that churn at a constant size (kept outputs) or lose rows to retention.
VACUUMED = ("period_outputs", "period_runs", "period_checks")


@dataclass(frozen=True)
class Swept:
    periods: int
    batches: int
    vacuumed: bool = False


def _expired_batch(session: Session, cutoff: datetime, limit: int) -> list[uuid.UUID]:
    from app.models.alarms import Alarm
    from app.models.monitors import Monitor, PeriodRun

    return list(session.scalars(
        select(PeriodRun.id)
        .join(Monitor, Monitor.id == PeriodRun.monitor_id)
        .where(PeriodRun.scheduled_for < cutoff,
               or_(Monitor.detector != "aggregator", PeriodRun.horizon_index < Monitor.horizon_index),
               ~exists().where(and_(Alarm.period_run_id == PeriodRun.id)))
        .limit(limit)))


@contextmanager
def _one_sweeper(session_factory: sessionmaker[Session]) -> Iterator[bool]:
    """True when this process may sweep: always on SQLite, on Postgres when it holds the lock."""
    bind = session_factory.kw.get("bind")
    if not isinstance(bind, Engine) or bind.dialect.name != "postgresql":
        yield True
        return
    with bind.connect() as connection:
        got = bool(connection.execute(select(func.pg_try_advisory_lock(RETENTION_LOCK_KEY))).scalar())
        connection.commit()
        try:
            yield got
        finally:
            if got:
                connection.execute(select(func.pg_advisory_unlock(RETENTION_LOCK_KEY)))
                connection.commit()


def sweep(session_factory: sessionmaker[Session], settings: Settings, now: datetime) -> Swept:
    """Delete the periods past retention, in batches, then vacuum; returns how many went. Skipped
    (nothing done) while another worker sweeps."""
    with _one_sweeper(session_factory) as mine:
        if not mine:
            return Swept(0, 0)
        return _sweep(session_factory, settings, now)


def _sweep(session_factory: sessionmaker[Session], settings: Settings, now: datetime) -> Swept:
    from app.models.monitors import PeriodRun

    if settings.retention_days <= 0:
        return Swept(0, 0, vacuum(session_factory, settings))
    cutoff = now - timedelta(days=settings.retention_days)
    total = batches = 0
    for _ in range(MAX_BATCHES):
        with session_factory() as session:
            ids = _expired_batch(session, cutoff, settings.retention_batch)
            if not ids:
                session.commit()
                break
            session.execute(delete(PeriodRun).where(PeriodRun.id.in_(ids)).execution_options(synchronize_session=False))
            session.commit()
        total += len(ids)
        batches += 1
        if len(ids) < settings.retention_batch:
            break
    vacuumed = vacuum(session_factory, settings)
    if total:
        log.info("retention_swept", periods=total, batches=batches, cutoff=cutoff.isoformat(), vacuumed=vacuumed)
    return Swept(total, batches, vacuumed)


def vacuum(session_factory: sessionmaker[Session], settings: Settings) -> bool:
    """``VACUUM`` the period tables on Postgres (outside any transaction); False where it does not
    apply (SQLite, a session bound to a connection in a transaction, or ``retention_vacuum`` off)."""
    bind = session_factory.kw.get("bind")
    if not settings.retention_vacuum or not isinstance(bind, Engine) or bind.dialect.name != "postgresql":
        return False
    with bind.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text(f"VACUUM {', '.join(VACUUMED)}"))
    return True
