"""Creating tenants and keys, and resolving a bearer key to its tenant. Never commits."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import ApiKey, Tenant
from app.db import utcnow

KEY_PREFIX = "dpw_"
SHOWN_PREFIX_LENGTH = 8
LAST_USED_RESOLUTION_SECONDS = 60


def generate_api_key() -> str:
    """``dpw_`` followed by 32 random bytes, URL-safe base64 (43 characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def generate_signing_secret() -> str:
    """A Standard Webhooks secret (``whsec_`` + base64 of 32 random bytes), used to sign requests
    to mechanisms and deliveries to webhooks."""
    from app.sampling.protocol import generate_secret

    return generate_secret()


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant every query is scoped to, and the key used."""

    tenant_id: uuid.UUID
    api_key_id: uuid.UUID


def create_tenant(session: Session, name: str) -> Tenant:
    tenant = Tenant(name=name)
    session.add(tenant)
    session.flush()
    return tenant


def create_api_key(session: Session, tenant_id: uuid.UUID, name: str) -> tuple[ApiKey, str]:
    """A new key for the tenant; the plaintext is returned once and never stored."""
    plaintext = generate_api_key()
    api_key = ApiKey(
        tenant_id=tenant_id,
        name=name,
        prefix=plaintext[:SHOWN_PREFIX_LENGTH],
        key_hash=hash_api_key(plaintext),
    )
    session.add(api_key)
    session.flush()
    return api_key, plaintext


def create_tenant_with_key(session: Session, tenant_name: str, key_name: str) -> tuple[Tenant, str]:
    """A tenant and its first API key (``dpwatch keys create``). Returns the plaintext key once."""
    tenant = create_tenant(session, tenant_name)
    _, plaintext = create_api_key(session, tenant.id, key_name)
    return tenant, plaintext


def revoke_api_key(session: Session, api_key_id: uuid.UUID) -> ApiKey | None:
    api_key = session.get(ApiKey, api_key_id)
    if api_key is not None and api_key.revoked_at is None:
        api_key.revoked_at = utcnow()
        session.flush()
    return api_key


def authenticate(session: Session, plaintext: str) -> Principal | None:
    """The principal for a bearer key, or None if the key is unknown or revoked."""
    if not plaintext.startswith(KEY_PREFIX) or len(plaintext) > 200:
        return None
    api_key = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_api_key(plaintext)))
    if api_key is None or api_key.revoked_at is not None:
        return None
    now = utcnow()
    # Throttled so that a busy client does not turn every read into a row write.
    if api_key.last_used_at is None or (now - api_key.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
        api_key.last_used_at = now
    return Principal(tenant_id=api_key.tenant_id, api_key_id=api_key.id)
