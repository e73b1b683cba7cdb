"""Silences. Never commits (callers own the transaction).

- :func:`create_silence` checks the matchers belong to the tenant and the window is sane;
- :func:`matching_silence` is the one question the alarm code asks: is this alarm silenced now?
- :func:`expire_silence` ends a silence now (Alertmanager's "expire"); silences are never deleted.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.api.errors import InvalidInputError, NotFoundError
from app.api.pagination import SortKey, paginate
from app.db import utcnow
from app.models.mechanisms import Mechanism
from app.models.monitors import Monitor
from app.models.silences import Silence
from app.silences.schemas import SilenceCreate, SilenceRead

#: The longest silence: a forgotten one must not mute a tenant for ever.
MAX_DURATION = timedelta(days=90)


def state_of(silence: Silence, now: datetime | None = None) -> str:
    now = now or utcnow()
    if now < silence.starts_at:
        return "pending"
    return "active" if now < silence.ends_at else "expired"


def to_read(silence: Silence, now: datetime | None = None) -> SilenceRead:
    data = {name: getattr(silence, name) for name in SilenceRead.model_fields if name != "state"}
    return SilenceRead.model_validate({**data, "state": state_of(silence, now)})


def create_silence(session: Session, tenant_id: uuid.UUID, data: SilenceCreate, created_by: str, *,
                   now: datetime | None = None) -> Silence:
    now = now or utcnow()
    starts = data.starts_at or now
    if data.ends_at <= starts:
        raise InvalidInputError("ends_at must be after starts_at.", field=["body", "ends_at"])
    if data.ends_at <= now:
        raise InvalidInputError("ends_at is in the past: the silence would never apply.", field=["body", "ends_at"])
    if data.ends_at - starts > MAX_DURATION:
        raise InvalidInputError("A silence lasts at most 90 days.", field=["body", "ends_at"])
    if data.monitor_id is not None and session.scalar(select(Monitor.id).where(
            Monitor.id == data.monitor_id, Monitor.tenant_id == tenant_id)) is None:
        raise InvalidInputError(f"Monitor {data.monitor_id} not found.", field=["body", "monitor_id"],
                                error_type="not_found")
    if data.mechanism_id is not None and session.scalar(select(Mechanism.id).where(
            Mechanism.id == data.mechanism_id, Mechanism.tenant_id == tenant_id)) is None:
        raise InvalidInputError(f"Mechanism {data.mechanism_id} not found.", field=["body", "mechanism_id"],
                                error_type="not_found")
    silence = Silence(tenant_id=tenant_id, monitor_id=data.monitor_id, mechanism_id=data.mechanism_id,
                      kind=data.kind, starts_at=starts, ends_at=data.ends_at, comment=data.comment.strip(),
                      created_by=created_by[:240], created_at=now)
    session.add(silence)
    session.flush()
    return silence


def get_silence(session: Session, tenant_id: uuid.UUID, silence_id: uuid.UUID) -> Silence:
    silence = session.scalar(select(Silence).where(Silence.id == silence_id, Silence.tenant_id == tenant_id))
    if silence is None:
        raise NotFoundError(f"Silence {silence_id} not found.")
    return silence


def list_silences(session: Session, tenant_id: uuid.UUID, *, state: str | None = None, limit: int,
                  cursor: str | None, now: datetime | None = None) -> tuple[list[Silence], str | None]:
    now = now or utcnow()
    stmt = select(Silence).where(Silence.tenant_id == tenant_id)
    if state == "active":
        stmt = stmt.where(Silence.starts_at <= now, Silence.ends_at > now)
    elif state == "pending":
        stmt = stmt.where(Silence.starts_at > now)
    elif state == "expired":
        stmt = stmt.where(Silence.ends_at <= now)
    return paginate(session, stmt, [SortKey(Silence.created_at, "datetime"), SortKey(Silence.id, "uuid")],
                    limit, cursor)


def expire_silence(session: Session, silence: Silence, *, now: datetime | None = None) -> Silence:
    """End the silence now; an expired one is left as it is (idempotent)."""
    now = now or utcnow()
    if silence.ends_at > now:
        silence.ends_at = max(now, silence.starts_at + timedelta(microseconds=1))
        session.flush()
    return silence


def matching_silence(session: Session, tenant_id: uuid.UUID, *, monitor_id: uuid.UUID | None,
                     mechanism_id: uuid.UUID | None, kind: str, at: datetime) -> Silence | None:
    """The silence (the longest-lasting) live at ``at`` whose every matcher matches, or None."""
    stmt = (select(Silence).where(
        Silence.tenant_id == tenant_id, Silence.starts_at <= at, Silence.ends_at > at,
        or_(Silence.monitor_id.is_(None), Silence.monitor_id == monitor_id),
        or_(Silence.mechanism_id.is_(None), Silence.mechanism_id == mechanism_id),
        or_(Silence.kind.is_(None), Silence.kind == kind),
    ).order_by(Silence.ends_at.desc()).limit(1))
    return session.scalar(stmt)


def alarm_silence(session: Session, alarm: Any, mechanism_id: uuid.UUID | None) -> Silence | None:
    """The silence that matched ``alarm`` when it fired (its webhook messages were not sent)."""
    return matching_silence(session, alarm.tenant_id, monitor_id=alarm.monitor_id or alarm.origin_monitor_id,
                            mechanism_id=mechanism_id, kind=alarm.kind, at=alarm.created_at)
