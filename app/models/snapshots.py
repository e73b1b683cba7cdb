"""Raw outputs kept for a window of periods, and MPL snapshots computed from them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, new_uuid, utcnow

SNAPSHOT_TRIGGERS = ("schedule", "on_demand", "alarm")
SNAPSHOT_STATUSES = ("pending", "running", "done", "failed")


class PeriodOutputs(Base):
    """The n outputs drawn on one database in one period, encoded compactly (app.monitors.output_codec).

    Kept for the monitor's last ``outputs_window`` periods; the period's own transaction prunes
    older rows.
    """

    __tablename__ = "period_outputs"
    __table_args__ = (
        UniqueConstraint("period_run_id", "database_key"),
        Index("ix_period_outputs_monitor_id_seq", "monitor_id", "seq"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    monitor_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    period_run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("period_runs.id", ondelete="CASCADE"))
    seq: Mapped[int]
    horizon_index: Mapped[int]
    t: Mapped[int]
    # sha256 of the database's canonical JSON: the database itself is on the check.
    database_key: Mapped[str] = mapped_column(String(64))
    encoding: Mapped[str] = mapped_column(String(16))
    shape: Mapped[list[Any]] = mapped_column(JSONType)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Snapshot(Base):
    """One MPL run over a monitor's checks: per pair ε̂, t̂, LB, the loss curve and δ̂(ε)."""

    __tablename__ = "snapshots"
    __table_args__ = (
        CheckConstraint("trigger IN ('schedule', 'on_demand', 'alarm')", name="trigger"),
        CheckConstraint("status IN ('pending', 'running', 'done', 'failed')", name="status"),
        Index("ix_snapshots_status_created_at", "status", "created_at"),
        Index("ix_snapshots_monitor_id_created_at", "monitor_id", "created_at"),
        # SnapshotRunner.claim ranks tenants by their snapshots started in the last hour
        Index("ix_snapshots_started_at", "started_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    monitor_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    alarm_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("alarms.id", ondelete="SET NULL"))
    trigger: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="pending")
    # What was asked: extra_samples, alpha, window; and what was used, filled in when done.
    params: Mapped[dict[str, Any]] = mapped_column(JSONType)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None]
