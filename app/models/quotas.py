"""A tenant's own quotas; a NULL column takes the deployment's default (``DPWATCH_QUOTA_*``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class TenantQuota(Base):
    __tablename__ = "tenant_quotas"

    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    max_monitors: Mapped[int | None]
    max_concurrent_jobs: Mapped[int | None]
    max_queued_jobs: Mapped[int | None]
    max_outputs_per_day: Mapped[int | None] = mapped_column(BigInteger)
    max_stored_output_bytes: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
