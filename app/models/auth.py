"""Tenants own every resource; API keys authenticate as one tenant."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, new_uuid, utcnow

#: ``read``: every GET; ``admin``: everything (docs/keys.md).
SCOPES = ("read", "admin")


class Tenant(Base):
    __tablename__ = "tenants"
    # A unique index rather than a constraint: on SQLite, adding a constraint recreates the table,
    # and dropping the old one would cascade to every row that references a tenant.
    __table_args__ = (Index("uq_tenants_name", "name", unique=True),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiKey(Base):
    """An API key. Only the SHA-256 of the key is stored; ``prefix`` is shown to tell keys apart."""

    __tablename__ = "api_keys"
    __table_args__ = (CheckConstraint("scope IN ('read', 'admin')", name="scope"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scope: Mapped[str] = mapped_column(String(16), default="admin", server_default="admin")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class WebSession(Base):
    """A dashboard sign-in. The session cookie names it (signed); every request checks that it is
    neither expired nor ended, so signing out ends the cookie's use everywhere (docs/dashboard.md)."""

    __tablename__ = "web_sessions"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    api_key_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
