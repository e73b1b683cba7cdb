"""Claiming work in the database so that several replicas can share it.

A claim is one short transaction: select due rows with ``FOR UPDATE SKIP LOCKED`` (Postgres; a
concurrent claimer skips the rows another is claiming instead of waiting for them) and stamp
them with a lease (owner, expiry). The stamp is an ``UPDATE … WHERE lease is free RETURNING``,
so even without row locks (SQLite, one process) a row is handed to one claimer only. The lease
is released by the transaction that writes the period's result; a claimer that dies simply lets
it expire, and the row is claimed again by another replica after ``lease_seconds``.

Pattern from procrastinate / graphile-worker (design.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.alarms.models import WebhookMessage
from app.monitors.models import Monitor


def _lease_free(now: datetime):  # type: ignore[no-untyped-def]
    return or_(Monitor.lease_expires_at.is_(None), Monitor.lease_expires_at < now)


def claim_monitors(
    session: Session,
    *,
    worker_id: str,
    states: Sequence[str],
    now: datetime,
    lease_seconds: float,
    limit: int,
    due_only: bool = True,
) -> list[uuid.UUID]:
    """Lease up to ``limit`` monitors in ``states`` (due ones, oldest slot first). Caller commits."""
    if limit <= 0:
        return []
    query = select(Monitor.id).where(Monitor.state.in_(states), _lease_free(now))
    if due_only:
        query = query.where(Monitor.next_run_at <= now)
    query = query.order_by(Monitor.next_run_at).limit(limit).with_for_update(skip_locked=True)
    candidates = list(session.scalars(query))
    if not candidates:
        return []
    claimed = session.scalars(
        update(Monitor)
        .where(Monitor.id.in_(candidates), _lease_free(now))
        .values(lease_owner=worker_id, lease_expires_at=now + timedelta(seconds=lease_seconds))
        .returning(Monitor.id)
        .execution_options(synchronize_session=False)
    )
    return list(claimed)


def lock_leased_monitor(session: Session, monitor_id: uuid.UUID, worker_id: str) -> Monitor | None:
    """The monitor, row-locked for the rest of the transaction, if ``worker_id`` still holds its lease.

    A lease that has expired but was not taken by anyone else is still ours: nobody can have
    written the period meanwhile, since writing needs the lease.
    """
    monitor = session.scalars(
        select(Monitor).where(Monitor.id == monitor_id).with_for_update().execution_options(populate_existing=True)
    ).one_or_none()
    if monitor is None or monitor.lease_owner != worker_id:
        return None
    return monitor


def release_lease(monitor: Monitor) -> None:
    monitor.lease_owner = None
    monitor.lease_expires_at = None


def claim_messages(session: Session, *, now: datetime, lease_seconds: float, limit: int) -> list[str]:
    """Lease up to ``limit`` pending outbox messages that are due. Caller commits.

    The lease is ``next_attempt_at`` pushed into the future: a deliverer that dies mid-attempt
    leaves the message pending, and it is tried again when that time comes.
    """
    query = (
        select(WebhookMessage.id)
        .where(WebhookMessage.status == "pending", WebhookMessage.next_attempt_at <= now)
        .order_by(WebhookMessage.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    candidates = list(session.scalars(query))
    if not candidates:
        return []
    claimed = session.scalars(
        update(WebhookMessage)
        .where(WebhookMessage.id.in_(candidates), WebhookMessage.status == "pending",
               WebhookMessage.next_attempt_at <= now)
        .values(next_attempt_at=now + timedelta(seconds=lease_seconds))
        .returning(WebhookMessage.id)
        .execution_options(synchronize_session=False)
    )
    return list(claimed)
