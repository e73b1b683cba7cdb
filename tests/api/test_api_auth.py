"""Authentication and tenant isolation on SQLite and Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.service import create_api_key, hash_api_key, revoke_api_key
from app.models.auth import ApiKey
from tests.support.api_helpers import (
    create_mechanism,
    create_monitor,
    create_webhook,
    record_period,
)

DB = Callable[[], AbstractContextManager[Session]]


def _v1_operations(client: TestClient) -> list[tuple[str, str]]:
    schema = client.get("/openapi.json").json()
    return [
        (method.upper(), path) for path, item in schema["paths"].items() if path.startswith("/v1") for method in item
    ]


def _fill(path: str, value: str) -> str:
    return (
        path.replace("{mechanism_id}", value)
        .replace("{monitor_id}", value)
        .replace("{alarm_id}", value)
        .replace("{webhook_id}", value)
        .replace("{snapshot_id}", value)
        .replace("{job_id}", value)
        .replace("{silence_id}", value)
        .replace("{message_id}", value)
    )


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer dpw_not-a-real-key", "Basic dXNlcjpwYXNz", "dpw_missing-scheme"],
)
def test_every_v1_route_needs_a_valid_key(client: TestClient, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    operations = _v1_operations(client)
    assert len(operations) == 49  # 34, the keys routes (4), the two rotate-secret routes, the two search routes,
    # PATCH /v1/monitors/{id}, the silences routes (4) and the webhook re-delivery, GET /v1/quotas
    for method, path in operations:
        # The client sends its own key by default; replace it (or send none) per request.
        request = client.build_request(method, _fill(path, str(uuid.uuid4())), json={})
        del request.headers["authorization"]
        request.headers.update(headers)
        response = client.send(request)
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["title"] == "Unauthorized"


def test_invalid_key_challenge_names_the_error(client: TestClient) -> None:
    response = client.get("/v1/mechanisms", headers={"Authorization": "Bearer dpw_nope"})
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert response.json()["detail"] == "The API key is unknown or has been revoked."
    missing = client.get("/v1/mechanisms", headers={"Authorization": ""})
    assert missing.headers["www-authenticate"] == "Bearer"


def test_revoked_key_is_refused(client: TestClient, db: DB, tenants) -> None:  # noqa: ANN001
    with db() as session:
        api_key, plaintext = create_api_key(session, tenants[0].tenant_id, "ci")
        key_id = api_key.id
    headers = {"Authorization": f"Bearer {plaintext}"}
    assert client.get("/v1/mechanisms", headers=headers).status_code == 200
    with db() as session:
        revoke_api_key(session, key_id)
    assert client.get("/v1/mechanisms", headers=headers).status_code == 401


def test_keys_are_stored_hashed_and_last_use_recorded(client: TestClient, db: DB, tenants) -> None:  # noqa: ANN001
    key = tenants[0].key
    assert key.startswith("dpw_") and len(key) == 4 + 43
    client.get("/v1/mechanisms")
    with db() as session:
        row = session.scalars(select(ApiKey).where(ApiKey.tenant_id == tenants[0].tenant_id)).one()
        assert row.key_hash == hash_api_key(key) and key not in (row.key_hash, row.prefix)
        assert row.prefix == key[:8]
        assert row.last_used_at is not None and row.last_used_at.tzinfo is not None


def test_another_tenant_sees_nothing(client: TestClient, other_headers: dict, db: DB, settings) -> None:  # noqa: ANN001
    """Every route that names a resource answers 404 to another tenant's key, and lists are empty."""
    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    webhook = create_webhook(client)
    with db() as session:
        record_period(session, monitor["id"], statistic=99.0, settings=settings)
    alarm = client.get("/v1/alarms").json()["items"][0]
    snapshot = client.post(f"/v1/monitors/{monitor['id']}/snapshots", json={}).json()
    job = client.post(f"/v1/mechanisms/{mechanism['id']}/discover", json={"pattern": "table1"}).json()
    key = client.post("/v1/keys", json={"name": "second", "scope": "admin"}).json()
    ends = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    silence = client.post("/v1/silences", json={"monitor_id": monitor["id"], "ends_at": ends, "comment": "x"}).json()
    deliveries = client.get(f"/v1/webhooks/{webhook['id']}/deliveries").json()["items"]
    assert deliveries, "the alarm queued a delivery to the tenant's webhook"
    ids = {
        "silence_id": silence["id"],
        "message_id": deliveries[0]["id"],
        "key_id": key["id"],
        "job_id": job["id"],
        "snapshot_id": snapshot["id"],
        "mechanism_id": mechanism["id"],
        "monitor_id": monitor["id"],
        "alarm_id": alarm["id"],
        "webhook_id": webhook["id"],
    }
    bodies = {
        ("PATCH", "/v1/mechanisms/{mechanism_id}"): {"max_batch": 1},
        ("PATCH", "/v1/webhooks/{webhook_id}"): {"enabled": False},
        ("PATCH", "/v1/monitors/{monitor_id}"): {"name": "stolen", "samples_per_period": 1},
        ("POST", "/v1/alarms/{alarm_id}/acknowledge"): {"note": "not yours"},
        ("POST", "/v1/mechanisms/{mechanism_id}/discover"): {"pattern": "table1"},
        ("POST", "/v1/mechanisms/{mechanism_id}/audits"): {"pattern": "table1", "epsilon": 1.0},
        ("POST", "/v1/mechanisms/{mechanism_id}/searches"): {"claim": {"epsilon": 1.0}},
        ("POST", "/v1/monitors/{monitor_id}/checks/from-search"): {"job_id": job["id"]},
    }
    checked = 0
    for method, path in _v1_operations(client):
        if "{" not in path:
            continue
        url = path.format(**{k: v for k, v in ids.items() if "{" + k + "}" in path})
        response = client.request(method, url, json=bodies.get((method, path)), headers=other_headers)
        assert response.status_code == 404, (method, path, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        checked += 1
    assert checked == 36  # 26, GET and DELETE /v1/keys/{key_id}, the two rotate-secret routes, the two search routes,
    # PATCH /v1/monitors/{monitor_id}, GET and DELETE /v1/silences/{silence_id}, the webhook re-delivery

    for path in ("/v1/mechanisms", "/v1/monitors", "/v1/alarms", "/v1/webhooks", "/v1/jobs"):
        assert client.get(path, headers=other_headers).json()["items"] == [], path
    assert key["id"] not in {k["id"] for k in client.get("/v1/keys", headers=other_headers).json()["items"]}
    assert client.get("/v1/alarms", params={"monitor_id": monitor["id"]}, headers=other_headers).json()["items"] == []

    # Nothing was changed by the other tenant's attempts.
    assert client.get(f"/v1/mechanisms/{mechanism['id']}").json()["max_batch"] == 10_000
    assert client.get(f"/v1/monitors/{monitor['id']}").json()["state"] == "alarm"
    assert client.get(f"/v1/monitors/{monitor['id']}").json()["name"] == monitor["name"]
    assert client.get(f"/v1/alarms/{alarm['id']}").json()["acknowledged_at"] is None
    assert client.get(f"/v1/webhooks/{webhook['id']}").json()["enabled"] is True
    assert client.get(f"/v1/keys/{key['id']}").json()["revoked_at"] is None
    assert client.get(f"/v1/silences/{silence['id']}").json()["state"] == "active"
