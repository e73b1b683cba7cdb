"""Creating tenants and keys, and resolving a bearer key to its tenant. Never commits."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, event, func, or_, select, update
from sqlalchemy.orm import Session

from app.auth.key_cache import KEY_CACHE, KeyCache
from app.db import utcnow
from app.models.auth import SCOPES, ApiKey, Tenant, WebSession

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
    #: ``admin`` may do anything; ``read`` may only read (GET) (app/api/deps.py enforces it).
    #: Defaults to the least privilege, so that a principal built without it cannot write.
    scope: str = "read"
    #: The key's recorded last use is older than ``LAST_USED_RESOLUTION_SECONDS`` (or absent):
    #: the caller records this use with :func:`record_key_use`, in a short transaction of its own
    #: (``app.auth.key_use``), never in the request's (whose row lock would last as long as it).
    use_due: bool = field(default=False, compare=False)

    @property
    def may_write(self) -> bool:
        return self.scope == "admin"


class TenantExistsError(ValueError):
    """A tenant with this name exists already (tenant names are unique)."""


class LastAdminKeyError(ValueError):
    """Revoking this key would leave its tenant without an active admin key."""


def get_tenant_by_name(session: Session, name: str) -> Tenant | None:
    return session.scalar(select(Tenant).where(Tenant.name == name))


def create_tenant(session: Session, name: str) -> Tenant:
    """A new tenant; :class:`TenantExistsError` when the name is taken (names are unique)."""
    if get_tenant_by_name(session, name) is not None:
        raise TenantExistsError(f"a tenant named {name!r} exists already")
    tenant = Tenant(name=name)
    session.add(tenant)
    session.flush()
    return tenant


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")


def create_api_key(session: Session, tenant_id: uuid.UUID, name: str, scope: str = "admin") -> tuple[ApiKey, str]:
    """A new key for the tenant; the plaintext is returned once and never stored."""
    _check_scope(scope)
    plaintext = generate_api_key()
    api_key = ApiKey(
        tenant_id=tenant_id,
        name=name,
        prefix=plaintext[:SHOWN_PREFIX_LENGTH],
        key_hash=hash_api_key(plaintext),
        scope=scope,
    )
    session.add(api_key)
    session.flush()
    return api_key, plaintext


def create_tenant_with_key(session: Session, tenant_name: str, key_name: str) -> tuple[Tenant, str]:
    """A new tenant and its first (admin) API key. Returns the plaintext key once;
    :class:`TenantExistsError` when the name is taken."""
    tenant = create_tenant(session, tenant_name)
    _, plaintext = create_api_key(session, tenant.id, key_name, "admin")
    return tenant, plaintext


def add_key_to_tenant(
    session: Session, tenant_name: str, key_name: str, scope: str = "admin", *, create: bool = True
) -> tuple[Tenant, ApiKey, str, bool]:
    """``dpwatch keys create``: a key for the tenant named ``tenant_name``, made first when it does
    not exist and ``create`` is true (its first key must then be ``admin``). Returns the tenant,
    the key row, the plaintext (once) and whether the tenant was created."""
    _check_scope(scope)
    tenant = get_tenant_by_name(session, tenant_name)
    created = False
    if tenant is None:
        if not create:
            raise LookupError(f"no tenant named {tenant_name!r}")
        if scope != "admin":
            raise ValueError("a new tenant's first key must have the admin scope")
        tenant = create_tenant(session, tenant_name)
        created = True
    api_key, plaintext = create_api_key(session, tenant.id, key_name, scope)
    return tenant, api_key, plaintext, created


def list_api_keys(session: Session, tenant_id: uuid.UUID, *, include_revoked: bool = True) -> list[ApiKey]:
    """The tenant's keys, oldest first."""
    stmt = select(ApiKey).where(ApiKey.tenant_id == tenant_id)
    if not include_revoked:
        stmt = stmt.where(ApiKey.revoked_at.is_(None))
    return list(session.scalars(stmt.order_by(ApiKey.created_at, ApiKey.id)))


def active_admin_keys(session: Session, tenant_id: uuid.UUID) -> int:
    return session.scalar(
        select(func.count()).select_from(ApiKey).where(
            ApiKey.tenant_id == tenant_id, ApiKey.scope == "admin", ApiKey.revoked_at.is_(None)
        )
    ) or 0


def revoke_api_key(session: Session, api_key_id: uuid.UUID, *, allow_last_admin: bool = False) -> ApiKey | None:
    """Revoke the key (idempotent); None when there is no such key.

    Refuses (:class:`LastAdminKeyError`) to revoke the tenant's last active admin key unless
    ``allow_last_admin``: through the API that would leave the tenant with no key able to make
    keys again (the CLI may, with ``--force``)."""
    api_key = session.get(ApiKey, api_key_id)
    if api_key is None or api_key.revoked_at is not None:
        return api_key
    if api_key.scope == "admin" and not allow_last_admin:
        # Lock the tenant's admin keys so that two concurrent revocations cannot both pass.
        session.execute(
            select(ApiKey.id).where(ApiKey.tenant_id == api_key.tenant_id, ApiKey.scope == "admin").with_for_update()
        )
        if active_admin_keys(session, api_key.tenant_id) <= 1:
            raise LastAdminKeyError(
                f"key {api_key.id} is the tenant's last active admin key; create another admin key first"
            )
    api_key.revoked_at = utcnow()
    session.flush()
    # This process stops accepting the key at once (other processes within their cache's TTL,
    # app.auth.key_cache): now, and again once the revocation is committed.
    key_hash = api_key.key_hash
    KEY_CACHE.drop(key_hash)
    event.listen(session, "after_commit", lambda _session: KEY_CACHE.drop(key_hash), once=True)
    return api_key


def _use_due(last_used_at: datetime | None) -> bool:
    return last_used_at is None or (utcnow() - last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS


def authenticate(session: Session, plaintext: str, *, cache: KeyCache | None = None) -> Principal | None:
    """The principal for a bearer key, or None if the key is unknown or revoked. With ``cache``,
    an active key's resolution is kept there (app.auth.key_cache; :func:`cached_principal` reads it)."""
    if not plaintext.startswith(KEY_PREFIX) or len(plaintext) > 200:
        return None
    key_hash = hash_api_key(plaintext)
    generation = cache.generation if cache is not None else 0
    row = session.execute(
        select(ApiKey.id, ApiKey.tenant_id, ApiKey.scope, ApiKey.revoked_at, ApiKey.last_used_at)
        .where(ApiKey.key_hash == key_hash)
    ).first()
    if row is None or row.revoked_at is not None:
        return None
    if cache is not None:
        cache.put(key_hash, row.tenant_id, row.id, row.scope, row.last_used_at, generation)
    # Nothing is written here: a write would hold the key's row lock until the request's
    # transaction ends (a hanging probe made every other request of the key wait on it, then 503).
    return Principal(tenant_id=row.tenant_id, api_key_id=row.id, scope=row.scope, use_due=_use_due(row.last_used_at))


def cached_principal(plaintext: str, cache: KeyCache = KEY_CACHE) -> Principal | None:
    """The principal for a bearer key found in ``cache`` (no I/O), or None: not cached (look it up
    with :func:`authenticate`), expired, or not a key at all."""
    if not plaintext.startswith(KEY_PREFIX) or len(plaintext) > 200:
        return None
    entry = cache.get(hash_api_key(plaintext))
    if entry is None:
        return None
    return Principal(tenant_id=entry.tenant_id, api_key_id=entry.api_key_id, scope=entry.scope,
                     use_due=_use_due(entry.last_used_at))


def record_key_use(session: Session, api_key_id: uuid.UUID) -> bool:
    """Set the key's ``last_used_at`` to now unless it was set within ``LAST_USED_RESOLUTION_SECONDS``;
    whether a row was written. Never waits for a lock on Postgres (``FOR UPDATE SKIP LOCKED``: a
    key whose row another transaction holds is left as it is, its use is recorded next time).
    Meant for a transaction of its own that commits at once (``app.auth.key_use``)."""
    now = utcnow()
    cutoff = now - timedelta(seconds=LAST_USED_RESOLUTION_SECONDS)
    stale = and_(ApiKey.id == api_key_id, or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < cutoff))
    if session.get_bind().dialect.name == "postgresql":
        target = select(ApiKey.id).where(stale).with_for_update(skip_locked=True).scalar_subquery()
        stmt = update(ApiKey).where(ApiKey.id == target)
    else:
        stmt = update(ApiKey).where(stale)
    result = session.execute(stmt.values(last_used_at=now).execution_options(synchronize_session=False))
    return result.rowcount == 1


# ------------------------------------------------------------------------------ dashboard sessions


def open_web_session(session: Session, api_key_id: uuid.UUID, max_age_seconds: int) -> uuid.UUID:
    """A new dashboard session of ``api_key_id`` lasting ``max_age_seconds``; the key's sessions
    that have expired are deleted on the way (a key keeps only its live ones)."""
    now = utcnow()
    session.execute(delete(WebSession).where(WebSession.api_key_id == api_key_id, WebSession.expires_at <= now))
    row = WebSession(api_key_id=api_key_id, created_at=now, expires_at=now + timedelta(seconds=max_age_seconds))
    session.add(row)
    session.flush()
    return row.id


def end_web_session(session: Session, session_id: uuid.UUID) -> None:
    """Sign out: the session's cookie is refused from now on, wherever it is kept."""
    session.execute(update(WebSession).where(WebSession.id == session_id, WebSession.ended_at.is_(None))
                    .values(ended_at=utcnow()))


def web_session_live(session: Session, session_id: uuid.UUID, api_key_id: uuid.UUID) -> bool:
    """True while the session exists for this key, has not ended and has not expired."""
    row = session.get(WebSession, session_id)
    return (row is not None and row.api_key_id == api_key_id and row.ended_at is None
            and row.expires_at > utcnow())
