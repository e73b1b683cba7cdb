"""A registered mechanism: an HTTP endpoint that returns outputs of a DP mechanism on request."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, new_uuid, utcnow

OUTPUT_KINDS = ("real", "discrete", "vector", "keyed")


class Mechanism(Base):
    __tablename__ = "mechanisms"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        CheckConstraint("output_kind IN ('real', 'discrete', 'vector', 'keyed')", name="output_kind"),
        CheckConstraint("(output_kind = 'vector') = (dim IS NOT NULL)", name="dim_iff_vector"),
        CheckConstraint("max_batch >= 1", name="max_batch_positive"),
        CheckConstraint("timeout_seconds > 0", name="timeout_positive"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    sampling_url: Mapped[str] = mapped_column(String(2048))
    output_kind: Mapped[str] = mapped_column(String(16))
    dim: Mapped[int | None]
    max_batch: Mapped[int] = mapped_column(default=10_000)
    timeout_seconds: Mapped[float] = mapped_column(default=10.0)
    prefer_binary: Mapped[bool] = mapped_column(default=False)
    # Stored in clear: the service signs every sampling request with it (Standard Webhooks
    # scheme), so it must be able to read it. It is shown to the client once, at creation.
    secret: Mapped[str] = mapped_column(String(100))
    # The secret replaced by the last rotation, still used (beside ``secret``) until
    # ``previous_secret_expires_at``: both signatures are sent during the grace period.
    previous_secret: Mapped[str | None] = mapped_column(String(100))
    previous_secret_expires_at: Mapped[datetime | None]
    # The output contract: an ``app.stats.shapes.OutputShape`` as JSON, declared at registration
    # or detected from the first outputs; a period whose outputs break it raises a contract alarm.
    output_shape: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    output_shape_source: Mapped[str | None] = mapped_column(String(16))  # declared | detected
    # The input that validation probes use when no monitor gives one (never an empty guess).
    probe_database: Mapped[Any | None] = mapped_column(JSONType)
    # The databases its claim covers (app.search.domain.InputDomain as JSON): what a search
    # (POST /v1/mechanisms/{id}/searches, a monitor's search_every) explores. None: not declared.
    input_domain: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
