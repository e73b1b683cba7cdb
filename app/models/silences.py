"""A silence: matchers (monitor, mechanism, alarm kind), a start, an end, a comment and who made it.

Alarms that a live silence matches are still recorded; only their webhook messages are not sent
(:func:`app.silences.service.matching_silence`, asked by :func:`app.alarms.service.notify_alarm`).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, new_uuid, utcnow


class Silence(Base):
    __tablename__ = "silences"
    __table_args__ = (
        CheckConstraint("kind IS NULL OR kind IN ('privacy', 'contract')", name="kind"),
        CheckConstraint("monitor_id IS NOT NULL OR mechanism_id IS NOT NULL OR kind IS NOT NULL",
                        name="has_matcher"),
        CheckConstraint("ends_at > starts_at", name="ends_after_start"),
        Index("ix_silences_tenant_id_ends_at", "tenant_id", "ends_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    # Matchers: every one that is set must match (none set is refused).
    monitor_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    mechanism_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("mechanisms.id", ondelete="CASCADE"))
    kind: Mapped[str | None] = mapped_column(String(16))
    starts_at: Mapped[datetime]
    ends_at: Mapped[datetime]
    comment: Mapped[str] = mapped_column(Text)
    # Who made it: the name of the API key (and its prefix) the request or the dashboard session used.
    created_by: Mapped[str] = mapped_column(String(240))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
