"""Alarms, webhook subscriptions, and the transactional outbox of webhook messages.

An event (an alarm firing, a monitor degrading…) inserts one ``webhook_messages`` row per
subscribed webhook in the same transaction that records the event. The deliverer claims pending
rows (``status, next_attempt_at``), POSTs them with Standard Webhooks headers
(``webhook-id`` = ``webhook_messages.id``), and logs every try in ``webhook_attempts``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, new_uuid, utcnow

ALARM_KINDS = ("privacy", "contract")
EVENT_TYPES = ("alarm.firing", "alarm.resolved", "monitor.degraded", "monitor.completed")
#: Sent only by ``POST /v1/webhooks/{id}/test``, to that one webhook; not subscribable.
TEST_EVENT_TYPE = "webhook.test"
MESSAGE_STATUSES = ("pending", "delivered", "failed", "disabled")


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


class Alarm(Base):
    """A check's statistic M_t crossed the threshold in period t of horizon j (``kind`` privacy), or
    a period's outputs broke the mechanism's output contract (``kind`` contract, no check)."""

    __tablename__ = "alarms"
    __table_args__ = (
        CheckConstraint("kind IN ('privacy', 'contract')", name="kind"),
        CheckConstraint("(kind = 'contract') OR (check_id IS NOT NULL) OR (archived_at IS NOT NULL)",
                        name="privacy_has_check"),
        Index("ix_alarms_tenant_id_created_at", "tenant_id", "created_at"),
        Index("ix_alarms_monitor_id_resolved_at", "monitor_id", "resolved_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    # Deleting a monitor archives its alarms (app.monitors.service.delete_monitor): the foreign keys
    # to the monitor, its check and its period become null, ``archived_at`` is set, and the
    # monitor's id and name stay in ``origin_monitor_id`` / ``monitor_name``.
    monitor_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("monitors.id", ondelete="SET NULL"))
    origin_monitor_id: Mapped[uuid.UUID | None] = mapped_column(index=True)
    monitor_name: Mapped[str | None] = mapped_column(String(200))
    archived_at: Mapped[datetime | None]
    kind: Mapped[str] = mapped_column(String(16), default="privacy", server_default="privacy")
    check_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("checks.id", ondelete="SET NULL"), index=True)
    period_run_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("period_runs.id", ondelete="SET NULL"), index=True
    )
    horizon_index: Mapped[int]
    t: Mapped[int]
    # The detector's numbers (null for a contract alarm).
    statistic: Mapped[float | None]
    threshold: Mapped[float | None]
    a: Mapped[int | None]
    b: Mapped[int | None]
    n: Mapped[int | None]
    z: Mapped[float | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    acknowledged_at: Mapped[datetime | None]
    acknowledged_note: Mapped[str | None] = mapped_column(Text)
    resolved_at: Mapped[datetime | None]
    # Alertmanager-style: the same (monitor, check, horizon) always has the same fingerprint.
    fingerprint: Mapped[str] = mapped_column(String(64))
    # What raised the alarm (app.stats.evidence: the check's window, pooled counts and a
    # Clopper–Pearson bound on ε; or the contract breach with an offending sample), then the
    # MPL snapshot as a separate estimator.
    evidence: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # The claim the alarm refutes ({"epsilon": e}, {"gdp_mu": m}, …); None on older alarms.
    claim: Mapped[dict[str, Any] | None] = mapped_column(JSONType)


class Webhook(Base):
    __tablename__ = "webhooks"
    __table_args__ = (Index("ix_webhooks_tenant_id_created_at", "tenant_id", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    event_types: Mapped[list[str]] = mapped_column(JSONType)
    # Stored in clear: the deliverer signs each message with it. Shown once, at creation.
    secret: Mapped[str] = mapped_column(String(100))
    # The secret replaced by the last rotation, still used (beside ``secret``) until
    # ``previous_secret_expires_at``: both signatures are sent during the grace period.
    previous_secret: Mapped[str | None] = mapped_column(String(100))
    previous_secret_expires_at: Mapped[datetime | None]
    enabled: Mapped[bool] = mapped_column(default=True)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebhookMessage(Base):
    """One message for one webhook (the outbox row). ``payload`` is the exact JSON body sent."""

    __tablename__ = "webhook_messages"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'delivered', 'failed', 'disabled')", name="status"),
        # The deliverer's claim query: WHERE status = 'pending' AND next_attempt_at <= now.
        Index("ix_webhook_messages_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_webhook_messages_webhook_id_created_at", "webhook_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=new_message_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    webhook_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_type: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None]
    last_status_code: Mapped[int | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None]


class WebhookAttempt(Base):
    """One HTTP try of one message, successful or not."""

    __tablename__ = "webhook_attempts"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    message_id: Mapped[str] = mapped_column(ForeignKey("webhook_messages.id", ondelete="CASCADE"), index=True)
    attempted_at: Mapped[datetime] = mapped_column(default=utcnow)
    status_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[float | None]
    worker_id: Mapped[str | None] = mapped_column(String(200))
