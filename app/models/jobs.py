"""Jobs: long work requested over the API or by a monitor (discovery, audits, re-discovery).

A job is one row: what was asked (``params``), where it stands (``state``, ``progress`` and a
message, updated while it runs), and what came of it (``result`` or ``error``), kept after it
ends. Workers claim queued jobs under a lease, like periods (``FOR UPDATE SKIP LOCKED``); each
progress update renews the lease, so a worker that dies lets it expire and another worker
takes the job again (up to ``max_attempts`` times).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, new_uuid, utcnow

JOB_KINDS = ("discovery", "audit", "rediscovery", "search")
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED_STATES = ("succeeded", "failed", "cancelled")
#: Why a job ended without a result: over its memory or time limit, cancelled, its process died
#: (or its worker, ``max_attempts`` times), or its handler failed (bad input, an unusable endpoint).
FAILURE_REASONS = ("memory limit", "time limit", "cancelled", "crashed", "error")


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("kind IN ('discovery', 'audit', 'rediscovery', 'search')", name="kind"),
        CheckConstraint("state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name="state"),
        CheckConstraint("progress >= 0 AND progress <= 1", name="progress_range"),
        # The claim query: WHERE state IN ('queued', 'running') ORDER BY created_at.
        Index("ix_jobs_state_created_at", "state", "created_at"),
        Index("ix_jobs_tenant_id_created_at", "tenant_id", "created_at"),
        Index("ix_jobs_monitor_id_state", "monitor_id", "state"),
        # Fair claims count each tenant's running jobs.
        Index("ix_jobs_tenant_id_state", "tenant_id", "state"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    mechanism_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("mechanisms.id", ondelete="CASCADE"),
                                                           index=True)
    # Re-discovery jobs belong to a monitor.
    monitor_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    params: Mapped[dict[str, Any]] = mapped_column(JSONType)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    # Why a job ended without a result: one of FAILURE_REASONS (app/jobs/isolation.py).
    failure_reason: Mapped[str | None] = mapped_column(String(32))
    progress: Mapped[float] = mapped_column(default=0.0)
    progress_message: Mapped[str | None] = mapped_column(String(500))
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    attempts: Mapped[int] = mapped_column(default=0)
    max_attempts: Mapped[int] = mapped_column(default=3)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None]
