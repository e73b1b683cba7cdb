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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.auth.rotation import signing_secrets
from app.db import utcnow
from app.models.alarms import Webhook, WebhookAttempt, WebhookMessage
from app.sampling.protocol import sign_headers
from app.sampling.safe_http import SafeAsyncClient, SafeHttpError
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
    tenant_id: uuid.UUID


def claim_fair(session: Session, *, now: datetime, limit: int, per_receiver: int, per_tenant: int,
               busy_receivers: Mapping[uuid.UUID, int], busy_tenants: Mapping[uuid.UUID, int]) -> list[str]:
    """Lease up to ``limit`` due messages, in turns across receivers: every webhook's oldest due
    message first, then every webhook's second, and so on, never more than ``per_receiver`` of one
    webhook or ``per_tenant`` of one tenant in flight (counting ``busy_*``, the deliverer's own
    sends under way). The lease is ``next_attempt_at`` pushed ``CLAIM_SECONDS`` ahead, stamped by
    a conditional UPDATE, so two deliverers never take the same message. Caller commits."""
    full = [hook for hook, count in busy_receivers.items() if count >= per_receiver]
    rank = func.row_number().over(partition_by=WebhookMessage.webhook_id,
                                  order_by=(WebhookMessage.next_attempt_at, WebhookMessage.id)).label("rank")
    due = (WebhookMessage.status == "pending") & (WebhookMessage.next_attempt_at <= now)
    ranked = select(WebhookMessage.id, WebhookMessage.webhook_id, WebhookMessage.tenant_id,
                    WebhookMessage.next_attempt_at, rank).where(due)
    if full:
        ranked = ranked.where(WebhookMessage.webhook_id.not_in(full))
    ranked = ranked.subquery()
    rows = session.execute(select(ranked.c.id, ranked.c.webhook_id, ranked.c.tenant_id)
                           .where(ranked.c.rank <= per_receiver)
                           .order_by(ranked.c.rank, ranked.c.next_attempt_at, ranked.c.id)
                           .limit(4 * limit)).all()
    hooks, tenants = dict(busy_receivers), dict(busy_tenants)
    chosen: list[str] = []
    for message_id, hook_id, tenant_id in rows:
        if len(chosen) >= limit:
            break
        if hooks.get(hook_id, 0) >= per_receiver or tenants.get(tenant_id, 0) >= per_tenant:
            continue
        hooks[hook_id] = hooks.get(hook_id, 0) + 1
        tenants[tenant_id] = tenants.get(tenant_id, 0) + 1
        chosen.append(message_id)
    if not chosen:
        return []
    stamped = set(session.scalars(
        update(WebhookMessage)
        .where(WebhookMessage.id.in_(chosen), due)
        .values(next_attempt_at=now + timedelta(seconds=CLAIM_SECONDS))
        .returning(WebhookMessage.id)
        .execution_options(synchronize_session=False)
    ))
    return [message_id for message_id in chosen if message_id in stamped]  # in turns


class WebhookDeliverer:
    """Delivers the outbox with bounded parallelism and no barrier between messages: each message
    is its own task, a receiver has at most ``per_receiver`` messages in flight and a tenant
    ``per_tenant``, and every attempt has its own deadline (``timeout_seconds``). A slow receiver
    therefore holds only its own slots: other receivers' messages are claimed as soon as any slot
    is free, never behind it (docs/hardening.md)."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        http: SafeAsyncClient,
        settings: Settings,
        *,
        timeout_seconds: float | None = None,
        on_delivery: Callable[[str], None] | None = None,
    ) -> None:
        self.session_factory = session_factory
        self.http = http
        self.settings = settings
        self.timeout_seconds = settings.webhook_timeout_seconds if timeout_seconds is None else timeout_seconds
        self.max_parallel = settings.webhook_max_parallel
        self.per_receiver = settings.webhook_max_per_receiver
        self.per_tenant = settings.webhook_max_per_tenant
        self._on_delivery = on_delivery
        self._busy_receivers: dict[uuid.UUID, int] = {}
        self._busy_tenants: dict[uuid.UUID, int] = {}

    def _claim(self, limit: int) -> list[_Outgoing]:
        with self.session_factory() as session:
            ids = claim_fair(session, now=utcnow(), limit=limit, per_receiver=self.per_receiver,
                             per_tenant=self.per_tenant, busy_receivers=self._busy_receivers,
                             busy_tenants=self._busy_tenants)
            out = []
            for mid in ids:
                msg = session.get(WebhookMessage, mid)
                hook = session.get(Webhook, msg.webhook_id) if msg else None
                if msg is None or hook is None:
                    continue
                if not hook.enabled:
                    msg.status = "disabled"
                    continue
                out.append(_Outgoing(msg.id, hook.url, signing_secrets(hook), json.dumps(msg.payload).encode(), hook.id,
                                     msg.tenant_id))
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

    async def _send_logged(self, out: _Outgoing) -> str:
        try:
            return await self.send(out)
        except Exception:  # e.g. the database is gone: the lease expires and the message is tried again
            log.exception("webhook_send_crashed", message_id=out.id, webhook_id=str(out.webhook_id))
            return "crashed"

    #: How often :meth:`deliver_due` looks for newly due messages while sends are under way.
    POLL_SECONDS = 0.5

    async def deliver_due(self, limit: int | None = None) -> int:
        """Try due messages once each, up to ``limit`` (all by default), ``max_parallel`` at a time,
        claiming more as soon as a slot frees and every ``POLL_SECONDS`` while sends are under way;
        return when nothing is due or in flight. It never stops claiming while it waits for a send:
        a slow receiver must not hold back messages that became due meanwhile (the worker's outbox
        tick does not start another call while this one runs). Cancelled (the worker stopping),
        it cancels its sends; their leases expire and the messages are tried again. Returns how
        many were tried."""
        tried = 0
        in_flight: set[asyncio.Task[str]] = set()
        freed = asyncio.Event()

        def done(task: asyncio.Task[str], out: _Outgoing) -> None:
            in_flight.discard(task)
            for counts, key in ((self._busy_receivers, out.webhook_id), (self._busy_tenants, out.tenant_id)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]
            freed.set()

        try:
            while True:
                freed.clear()
                free = self.max_parallel - len(in_flight)
                if limit is not None:
                    free = min(free, limit - tried)
                if free > 0:
                    for out in await asyncio.to_thread(self._claim, free):
                        self._busy_receivers[out.webhook_id] = self._busy_receivers.get(out.webhook_id, 0) + 1
                        self._busy_tenants[out.tenant_id] = self._busy_tenants.get(out.tenant_id, 0) + 1
                        task = asyncio.create_task(self._send_logged(out))
                        in_flight.add(task)
                        task.add_done_callback(lambda t, o=out: done(t, o))
                        tried += 1
                if not in_flight:
                    return tried
                try:  # a send ended (a slot is free), or look for newly due messages
                    await asyncio.wait_for(freed.wait(), self.POLL_SECONDS)
                except TimeoutError:
                    pass
        finally:
            for task in in_flight:  # cancelled (worker stopping): the lease expires, the message is tried again
                task.cancel()
            if in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)
