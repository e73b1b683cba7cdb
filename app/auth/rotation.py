"""Rotating a signing secret with a grace period (webhooks and mechanisms alike).

A rotated object keeps two secrets: ``secret`` (the new one) and ``previous_secret`` until
``previous_secret_expires_at``. While both are live, dpwatch signs with both, and Standard
Webhooks' ``webhook-signature`` carries both signatures space-separated (``v1,<new> v1,<old>``);
a verifier accepts the message when any one of them matches, so a receiver or an endpoint that
still holds the old secret keeps working until it is switched to the new one.

Rotating again during a grace period replaces the previous secret by the one just superseded:
only the last two secrets are ever live (docs/keys.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from app.db import utcnow

#: Default grace period: 24 hours.
DEFAULT_GRACE_SECONDS = 86_400
#: Longest grace period accepted: 30 days.
MAX_GRACE_SECONDS = 30 * 86_400


class HasSecrets(Protocol):
    secret: str
    previous_secret: str | None
    previous_secret_expires_at: datetime | None


def signing_secrets(obj: HasSecrets, now: datetime | None = None) -> tuple[str, ...]:
    """The secrets to sign with now: the current one first, then the previous one while its
    grace period lasts."""
    now = now or utcnow()
    if obj.previous_secret and obj.previous_secret_expires_at is not None and obj.previous_secret_expires_at > now:
        return (obj.secret, obj.previous_secret)
    return (obj.secret,)


def rotate_secret(obj: HasSecrets, new_secret: str, grace_seconds: int, now: datetime | None = None) -> datetime | None:
    """Make ``new_secret`` current; the old one stays valid for ``grace_seconds`` (0: not at all).
    Returns when the old secret stops being used (None when ``grace_seconds`` is 0)."""
    if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
        raise ValueError(f"grace_seconds must be between 0 and {MAX_GRACE_SECONDS}")
    if new_secret == obj.secret:
        raise ValueError("the new secret must differ from the current one")
    now = now or utcnow()
    expires = now + timedelta(seconds=grace_seconds) if grace_seconds > 0 else None
    obj.previous_secret = obj.secret if expires is not None else None
    obj.previous_secret_expires_at = expires
    obj.secret = new_secret
    return expires
