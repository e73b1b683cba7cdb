"""Delivering the webhook outbox.

Each pending ``webhook_messages`` row is POSTed to its webhook's URL through the one safe HTTP
client, signed with the webhook's ``whsec_`` secret (Standard Webhooks: ``webhook-id`` is the
message id, so receivers can deduplicate retries). While a rotated secret's grace period lasts,
the message carries two signatures, the new secret's and the old one's (app/auth/rotation.py). Every try is logged in ``webhook_attempts``.

Retries follow the Standard Webhooks / Svix habit: from seconds to hours, each delay jittered by
±20% so that a receiver coming back up is not hit by every sender at once. A ``410 Gone``
disables the webhook (and drops its pending messages): the receiver said it is gone for good.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.alarms.models import Webhook, WebhookAttempt, WebhookMessage
from app.auth.rotation import signing_secrets
from app.db import utcnow
from app.sampling.protocol import sign_headers
from app.sampling.safe_http import SafeAsyncClient, SafeHttpError
from app.scheduler.leases import claim_messages
from app.settings import Settings

log = structlog.get_logger("dpwatch.webhooks")

#: Delay before retry k (k = 1..len): 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 12 h.
#: After the last one (about 28 hours after the first try) the message is marked failed.
RETRY_DELAYS_SECONDS = (5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 43200)
JITTER = 0.2
#: How much of a receiver's reply is read (raw; the rest is dropped with the connection).
REPLY_BYTES = 4096
#: How long a claimed message is hidden from other deliverers while one tries it.
CLAIM_SECONDS = 60.0


def retry_delay(attempts: int, rng: random.Random | None = None) -> float | None:
    """Seconds to wait after the ``attempts``-th failed try, or None when there is no retry left."""
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    if attempts > len(RETRY_DELAYS_SECONDS):
        return None
    base = RETRY_DELAYS_SECONDS[attempts - 1]
    return base * (1.0 + (rng or random).uniform(-JITTER, JITTER))


@dataclass(frozen=True)
class _Outgoing:
    id: str
    url: str
    secrets: tuple[str, ...]
    body: bytes
    webhook_id: uuid.UUID


class WebhookDeliverer:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        http: SafeAsyncClient,
        settings: Settings,
        *,
        timeout_seconds: float = 10.0,
        on_delivery: Callable[[str], None] | None = None,
    ) -> None:
        self.session_factory = session_factory
        self.http = http
        self.settings = settings
        self.timeout_seconds = timeout_seconds
        self._on_delivery = on_delivery

    def _claim(self, limit: int) -> list[_Outgoing]:
        with self.session_factory() as session:
            ids = claim_messages(session, now=utcnow(), lease_seconds=CLAIM_SECONDS, limit=limit)
            out = []
            for mid in ids:
                msg = session.get(WebhookMessage, mid)
                hook = session.get(Webhook, msg.webhook_id) if msg else None
                if msg is None or hook is None:
                    continue
                if not hook.enabled:
                    msg.status = "disabled"
                    continue
                out.append(_Outgoing(msg.id, hook.url, signing_secrets(hook), json.dumps(msg.payload).encode(), hook.id))
            session.commit()
            return out

    def _record(self, out: _Outgoing, status_code: int | None, error: str | None, duration_ms: float) -> str:
        now = utcnow()
        with self.session_factory() as session:
            msg = session.get(WebhookMessage, out.id)
            if msg is None:  # deleted with its webhook meanwhile
                return "dropped"
            session.add(WebhookAttempt(message_id=msg.id, attempted_at=now, status_code=status_code, error=error,
                                       duration_ms=duration_ms, worker_id=self.settings.worker_id))
            msg.attempts += 1
            msg.last_status_code = status_code
            msg.last_error = error
            if status_code is not None and 200 <= status_code < 300:
                msg.status, msg.delivered_at, msg.next_attempt_at = "delivered", now, None
                outcome = "delivered"
            elif status_code == 410:
                outcome = "disabled"
                self._disable(session, out.webhook_id, now)
            else:
                delay = retry_delay(msg.attempts)
                if delay is None:
                    msg.status, msg.next_attempt_at = "failed", None
                    outcome = "failed"
                else:
                    msg.next_attempt_at = now + timedelta(seconds=delay)
                    outcome = "retry"
            session.commit()
        log.info("webhook_attempt", message_id=out.id, webhook_id=str(out.webhook_id), status_code=status_code,
                 error=error, outcome=outcome, duration_ms=round(duration_ms, 1))
        return outcome

    @staticmethod
    def _disable(session: Session, webhook_id: uuid.UUID, now: datetime) -> None:
        hook = session.get(Webhook, webhook_id)
        if hook is not None:
            hook.enabled = False
            hook.disabled_reason = f"the receiver answered 410 Gone at {now.isoformat()}"
        session.execute(
            update(WebhookMessage)
            .where(WebhookMessage.webhook_id == webhook_id, WebhookMessage.status == "pending")
            .values(status="disabled", next_attempt_at=None)
            .execution_options(synchronize_session=False)
        )

    async def send(self, out: _Outgoing) -> str:
        headers = {"content-type": "application/json", **sign_headers(out.secrets, out.id, out.body)}
        t0 = time.perf_counter()
        status_code: int | None = None
        error: str | None = None
        try:
            # The reply's body is never used: at most REPLY_BYTES of it are read, raw (never
            # decompressed, whatever its Content-Encoding), on a connection of its own.
            resp = await self.http.post(out.url, content=out.body, headers=headers, timeout=self.timeout_seconds,
                                        max_bytes=REPLY_BYTES, truncate=True)
            status_code = resp.status_code
            if not 200 <= status_code < 300:
                error = f"HTTP {status_code}"
        except SafeHttpError as exc:
            error = str(exc)
        outcome = await asyncio.to_thread(self._record, out, status_code, error, 1000 * (time.perf_counter() - t0))
        if self._on_delivery is not None:
            self._on_delivery(outcome)
        return outcome

    async def deliver_due(self, limit: int = 50) -> int:
        """Try every due message (up to ``limit``) once; returns how many were tried."""
        batch = await asyncio.to_thread(self._claim, limit)
        if batch:
            await asyncio.gather(*(self.send(o) for o in batch))
        return len(batch)
