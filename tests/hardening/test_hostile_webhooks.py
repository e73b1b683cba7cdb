"""Hostile webhook receivers: a reply is never decompressed, and one
receiver's slowness never delays another's deliveries. Receivers are raw servers on 127.0.0.1
(tests/hostile_servers.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import tracemalloc
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.alarms.delivery import REPLY_BYTES, WebhookDeliverer
from app.db import utcnow
from app.models.alarms import WebhookMessage
from app.sampling.safe_http import SafeAsyncClient
from tests.support.api_helpers import create_webhook
from tests.support.hostile_servers import RawReply, RawServer, gzip_bomb, response

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
#: 256 MiB of zeros, gzip-compressed twice: ~1 KB on the wire.
BOMB = gzip_bomb(256 << 20, layers=2)


def _make_due(session_factory, message_id: str) -> None:  # noqa: ANN001
    with session_factory() as session:
        session.execute(update(WebhookMessage).where(WebhookMessage.id == message_id)
                        .values(next_attempt_at=utcnow()))
        session.commit()


def _deliver(session_factory, settings, **kwargs) -> int:  # noqa: ANN001
    async def run() -> int:
        async with SafeAsyncClient(settings.safe_http_config()) as http:
            return await WebhookDeliverer(session_factory, http, settings, **kwargs).deliver_due()

    return asyncio.run(run())


@SQLITE_ONLY
def test_a_gzip_bomb_reply_is_never_decompressed_not_even_on_retries(
    client: TestClient, session_factory, settings  # noqa: ANN001
) -> None:
    assert len(BOMB) < 4096
    replies = {"status": 500}

    def handler(_request):  # noqa: ANN001, ANN202
        return RawReply([response(BOMB, status=replies["status"], content_type="application/json",
                                  headers={"content-encoding": "gzip, gzip"})])

    with RawServer(handler) as server:
        hook = create_webhook(client, url=server.url("/hooks"), event_types=["alarm.firing"])
        message = client.post(f"/v1/webhooks/{hook['id']}/test").json()
        tracemalloc.start()
        try:
            for attempt in range(3):  # 500, retried (made due again), then 200
                if attempt == 2:
                    replies["status"] = 200
                _make_due(session_factory, message["id"])
                tracemalloc.reset_peak()
                assert _deliver(session_factory, settings) == 1
                _, peak = tracemalloc.get_traced_memory()
                # Decoding would allocate the 256 MiB (httpx inflates a whole chunk at once).
                assert peak < 16 << 20, f"attempt {attempt}: {peak / 2**20:.0f} MiB allocated"
        finally:
            tracemalloc.stop()
    deliveries = client.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
    statuses = [a["status_code"] for a in deliveries[0]["attempt_log"]]
    assert deliveries[0]["status"] == "delivered" and statuses == [500, 500, 200], deliveries
    assert len(server.requests) == 3


@SQLITE_ONLY
def test_a_reply_is_read_raw_and_cut_at_a_few_kib(client: TestClient, session_factory, settings) -> None:  # noqa: ANN001
    sent = {"bytes": 0}

    async def endless(_request):  # noqa: ANN001, ANN202
        # Announces 1 GiB and sends 1 MiB of it: the deliverer reads at most REPLY_BYTES.
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 1073741824\r\n\r\n"
        sent["bytes"] = 1 << 20
        return RawReply([head, b"x" * (1 << 20)], close=True)

    with RawServer(endless) as server:
        hook = create_webhook(client, url=server.url("/hooks"), event_types=["alarm.firing"])
        client.post(f"/v1/webhooks/{hook['id']}/test")
        started = time.monotonic()
        assert _deliver(session_factory, settings) == 1
        assert time.monotonic() - started < 5
    deliveries = client.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
    assert deliveries[0]["status"] == "delivered", deliveries
    assert REPLY_BYTES <= 8192


# ------------------------------------------------------------------------------------ item 5


@SQLITE_ONLY
def test_a_tenants_message_never_waits_behind_another_tenants_slow_receiver(
    client: TestClient, other_headers, session_factory, settings  # noqa: ANN001
) -> None:
    """60 messages to tenant A's receiver that takes 2 s each, queued first; then one message to
    tenant B's receiver. B's is delivered within a second; A's receiver never sees more than
    ``webhook_max_per_receiver`` at once. (Before: a batch of 50 waited for its slowest, and B's
    message went out with the next batch, after 2 s.)"""
    concurrent = {"now": 0, "max": 0}
    delivered_b: list[float] = []

    async def slow(_request):  # noqa: ANN001, ANN202
        concurrent["now"] += 1
        concurrent["max"] = max(concurrent["max"], concurrent["now"])
        await asyncio.sleep(2.0)
        concurrent["now"] -= 1
        return RawReply([response(b"", status=204)])

    def fast(_request):  # noqa: ANN001, ANN202
        delivered_b.append(time.monotonic())
        return RawReply([response(b"", status=204)])

    with RawServer(slow) as slow_server, RawServer(fast) as fast_server:
        hook_a = create_webhook(client, url=slow_server.url("/a"), event_types=["alarm.firing"])
        for _ in range(60):
            client.post(f"/v1/webhooks/{hook_a['id']}/test")
        created = client.post("/v1/webhooks", headers=other_headers,
                              json={"url": fast_server.url("/b"), "event_types": ["alarm.firing"]})
        assert created.status_code == 201, created.text
        client.post(f"/v1/webhooks/{created.json()['id']}/test", headers=other_headers)

        async def run() -> float:
            async with SafeAsyncClient(settings.safe_http_config()) as http:
                deliverer = WebhookDeliverer(session_factory, http, settings)
                started = time.monotonic()
                task = asyncio.create_task(deliverer.deliver_due())
                while not delivered_b and time.monotonic() - started < 10:
                    await asyncio.sleep(0.02)
                waited = (delivered_b[0] if delivered_b else time.monotonic()) - started
                await asyncio.sleep(0.5)  # let A's first sends overlap
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return waited

        waited = asyncio.run(run())
    assert waited < 1.0, f"tenant B's message waited {waited:.2f} s"
    assert 1 <= concurrent["max"] <= settings.webhook_max_per_receiver


@SQLITE_ONLY
def test_claims_take_turns_across_receivers_within_the_caps(client: TestClient, session_factory) -> None:  # noqa: ANN001
    from app.alarms.delivery import claim_fair

    hooks = [create_webhook(client, url=f"https://hooks.example.org/{i}", event_types=["alarm.firing"])
             for i in range(3)]
    for hook, count in zip(hooks, (5, 1, 3), strict=True):
        for _ in range(count):
            client.post(f"/v1/webhooks/{hook['id']}/test")
    ids = {hook["id"]: hook for hook in hooks}
    with session_factory() as session:
        by_id = {m.id: str(m.webhook_id) for m in session.query(WebhookMessage)}
        tenant = session.query(WebhookMessage).first().tenant_id
        first = claim_fair(session, now=utcnow(), limit=4, per_receiver=2, per_tenant=8, busy_receivers={},
                           busy_tenants={})
        # Turns: every webhook's first message, then the second ones; at most 2 per webhook.
        assert sorted(by_id[m] for m in first[:3]) == sorted(ids) and len(first) == 4
        busy = {uuid.UUID(h): 2 for h in ids}
        assert claim_fair(session, now=utcnow(), limit=10, per_receiver=2, per_tenant=8, busy_receivers=busy,
                          busy_tenants={}) == []
        assert claim_fair(session, now=utcnow(), limit=10, per_receiver=2, per_tenant=4, busy_receivers={},
                          busy_tenants={tenant: 4}) == []
        session.rollback()
