"""Hostile webhook receivers (issue 17, items 2 and 5): a reply is never decompressed, and one
receiver's slowness never delays another's deliveries. Receivers are raw servers on 127.0.0.1
(tests/hostile_servers.py)."""

from __future__ import annotations

import asyncio
import time
import tracemalloc

import pytest
from fastapi.testclient import TestClient

from sqlalchemy import update

from app.alarms.delivery import REPLY_BYTES, WebhookDeliverer
from app.alarms.models import WebhookMessage
from app.db import utcnow
from app.sampling.safe_http import SafeAsyncClient
from tests.api_helpers import create_webhook
from tests.hostile_servers import RawReply, RawServer, gzip_bomb, response

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
