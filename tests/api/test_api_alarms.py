"""/v1/alarms and /v1/webhooks on SQLite and Postgres, and the outbox they feed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.alarms.service import alarm_fingerprint, enqueue_event, monitor_event_data
from app.models.alarms import Alarm, WebhookAttempt, WebhookMessage
from app.models.monitors import Monitor
from tests.support.api_helpers import (
    create_mechanism,
    create_monitor,
    create_webhook,
    record_period,
)

DB = Callable[[], AbstractContextManager[Session]]


@pytest.fixture
def firing(client: TestClient, db: DB, settings) -> dict:  # noqa: ANN001
    """A monitor whose second period alarmed on its single check."""
    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        record_period(session, monitor["id"], statistic=0.3)
        run = record_period(session, monitor["id"], statistic=50.0, settings=settings)
        run_id = str(run.id)
    return {"monitor": monitor, "period_run_id": run_id}


def _messages(db: DB, **filters: object) -> list[WebhookMessage]:
    with db() as session:
        stmt = select(WebhookMessage).order_by(WebhookMessage.created_at)
        for name, value in filters.items():
            stmt = stmt.where(getattr(WebhookMessage, name) == value)
        return list(session.scalars(stmt))


def test_alarm_fields(client: TestClient, firing: dict) -> None:
    monitor = firing["monitor"]
    items = client.get("/v1/alarms").json()["items"]
    assert len(items) == 1
    alarm = items[0]
    assert alarm["monitor_id"] == monitor["id"] and alarm["check_id"] == monitor["checks"][0]["id"]
    assert alarm["period_run_id"] == firing["period_run_id"]
    assert alarm["horizon_index"] == 1 and alarm["t"] == 2
    assert alarm["statistic"] == 50.0 and alarm["threshold"] == pytest.approx(monitor["threshold"])
    assert (alarm["a"], alarm["b"], alarm["n"], alarm["z"]) == (400, 300, 1000, 25.0)
    assert alarm["status"] == "firing" and alarm["acknowledged_at"] is None and alarm["resolved_at"] is None
    assert alarm["fingerprint"] == alarm_fingerprint(uuid.UUID(monitor["id"]), uuid.UUID(monitor["checks"][0]["id"]), 1)
    assert client.get(f"/v1/alarms/{alarm['id']}").json() == alarm
    assert client.get(f"/v1/alarms/{uuid.uuid4()}").status_code == 404


def test_acknowledge(client: TestClient, firing: dict) -> None:
    alarm_id = client.get("/v1/alarms").json()["items"][0]["id"]
    response = client.post(f"/v1/alarms/{alarm_id}/acknowledge", json={"note": "rolled back release 4.2"})
    assert response.status_code == 200
    body = response.json()
    assert body["acknowledged_note"] == "rolled back release 4.2" and body["acknowledged_at"]
    assert body["status"] == "firing"  # acknowledging does not resolve
    again = client.post(f"/v1/alarms/{alarm_id}/acknowledge")
    assert again.status_code == 409 and "already acknowledged" in again.json()["detail"]
    too_long = client.post(f"/v1/alarms/{alarm_id}/acknowledge", json={"note": "x" * 2001})
    assert too_long.status_code == 422


def test_acknowledge_without_body(client: TestClient, firing: dict) -> None:
    alarm_id = client.get("/v1/alarms").json()["items"][0]["id"]
    body = client.post(f"/v1/alarms/{alarm_id}/acknowledge").json()
    assert body["acknowledged_at"] and body["acknowledged_note"] is None


def test_alarm_filters(client: TestClient, firing: dict, db: DB, settings) -> None:  # noqa: ANN001
    mechanism = create_mechanism(client, name="second")
    other = create_monitor(client, mechanism["id"])
    with db() as session:
        record_period(session, other["id"], statistic=60.0, settings=settings)
    everything = client.get("/v1/alarms").json()["items"]
    assert len(everything) == 2 and everything[0]["monitor_id"] == other["id"]  # newest first
    mine = client.get("/v1/alarms", params={"monitor_id": firing["monitor"]["id"]}).json()["items"]
    assert [a["monitor_id"] for a in mine] == [firing["monitor"]["id"]]
    client.post(f"/v1/alarms/{mine[0]['id']}/acknowledge")
    acked = client.get("/v1/alarms", params={"acknowledged": "true"}).json()["items"]
    unacked = client.get("/v1/alarms", params={"acknowledged": "false"}).json()["items"]
    assert [a["id"] for a in acked] == [mine[0]["id"]]
    assert [a["monitor_id"] for a in unacked] == [other["id"]]
    client.post(f"/v1/monitors/{other['id']}/reset")
    resolved = client.get("/v1/alarms", params={"resolved": "true"}).json()["items"]
    firing_now = client.get("/v1/alarms", params={"resolved": "false"}).json()["items"]
    assert [a["monitor_id"] for a in resolved] == [other["id"]]
    assert [a["monitor_id"] for a in firing_now] == [firing["monitor"]["id"]]
    page = client.get("/v1/alarms", params={"limit": 1}).json()
    rest = client.get("/v1/alarms", params={"limit": 1, "cursor": page["next_cursor"]}).json()
    assert [page["items"][0]["id"], rest["items"][0]["id"]] == [a["id"] for a in everything]
    assert rest["next_cursor"] is None


def test_webhook_crud_and_secret_shown_once(client: TestClient) -> None:
    created = create_webhook(client)
    assert created["secret"].startswith("whsec_") and created["enabled"] is True
    assert created["event_types"] == ["alarm.firing", "alarm.resolved"] and created["disabled_reason"] is None
    fetched = client.get(f"/v1/webhooks/{created['id']}").json()
    assert "secret" not in fetched
    assert [w["id"] for w in client.get("/v1/webhooks").json()["items"]] == [created["id"]]
    patched = client.patch(
        f"/v1/webhooks/{created['id']}", json={"event_types": ["monitor.degraded"], "enabled": False}
    )
    assert patched.status_code == 200
    assert patched.json()["event_types"] == ["monitor.degraded"] and patched.json()["enabled"] is False
    assert "secret" not in patched.json()
    assert client.delete(f"/v1/webhooks/{created['id']}").status_code == 204
    assert client.get(f"/v1/webhooks/{created['id']}").status_code == 404
    assert client.delete(f"/v1/webhooks/{created['id']}").status_code == 404


@pytest.mark.parametrize(
    ("body", "pointer", "message"),
    [
        ({"url": "https://h.example.org/", "event_types": []}, "#/event_types", "at least 1 item"),
        ({"url": "https://h.example.org/", "event_types": ["alarm.fired"]}, "#/event_types/0", "'alarm.firing'"),
        (
            {"url": "https://h.example.org/", "event_types": ["alarm.firing", "alarm.firing"]},
            "#/event_types",
            "more than once",
        ),
        ({"url": "mailto:ops@example.org", "event_types": ["alarm.firing"]}, "#/url", "http:// or https://"),
        ({"url": "https://u:p@h.example.org/", "event_types": ["alarm.firing"]}, "#/url", "credentials"),
        ({"url": "http://[fd00::1]/hook", "event_types": ["alarm.firing"]}, "#/url", "private"),
        ({"event_types": ["alarm.firing"]}, "#/url", "required"),
    ],
)
def test_webhook_validation(client: TestClient, body: dict, pointer: str, message: str) -> None:
    response = client.post("/v1/webhooks", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["title"] == "Unprocessable Content"  # RFC 9110, as the body limits say it
    errors = response.json()["errors"]
    assert any(e["pointer"] == pointer and message in e["message"] for e in errors), errors


def test_every_422_has_one_title(client: TestClient) -> None:
    """The body limits used to say "Unprocessable Content", the validation errors
    "Unprocessable Entity"; RFC 9110 names 422 "Unprocessable Content"."""
    bodies = [client.post("/v1/webhooks", json={"url": 3}),  # a schema error
              client.post("/v1/webhooks", content=b"{not json", headers={"content-type": "application/json"}),
              client.post("/v1/webhooks", content=b'{"url": NaN}', headers={"content-type": "application/json"}),
              client.get("/v1/alarms", params={"limit": "many"})]
    for response in bodies:
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["title"] == "Unprocessable Content", response.json()


def test_firing_alarm_enqueues_alertmanager_shaped_messages(client: TestClient, db: DB, settings) -> None:  # noqa: ANN001
    subscribed = create_webhook(client, event_types=["alarm.firing"])
    create_webhook(client, url="https://other.example.org/", event_types=["monitor.completed"])
    disabled = create_webhook(client, url="https://off.example.org/", event_types=["alarm.firing"])
    client.patch(f"/v1/webhooks/{disabled['id']}", json={"enabled": False})
    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        record_period(session, monitor["id"], statistic=80.0, settings=settings)

    messages = _messages(db)
    assert len(messages) == 1  # only the enabled webhook subscribed to alarm.firing
    message = messages[0]
    assert str(message.webhook_id) == subscribed["id"] and message.event_type == "alarm.firing"
    assert message.id.startswith("msg_") and message.status == "pending" and message.attempts == 0
    assert message.next_attempt_at is not None
    body = message.payload
    assert body["type"] == "alarm.firing" and body["timestamp"].endswith("Z")
    alert = body["data"]
    alarm = client.get("/v1/alarms").json()["items"][0]
    assert alert["status"] == "firing" and alert["endsAt"] is None
    assert alert["labels"]["monitor_id"] == monitor["id"] and alert["labels"]["alertname"]
    assert alert["fingerprint"] == alarm["fingerprint"]
    assert alert["generatorURL"] == f"http://dpwatch.test/ui/alarms/{alarm['id']}"  # the page a person opens
    assert "epsilon=1" in alert["annotations"]["summary"]
    assert alert["alarm"]["id"] == alarm["id"]
    # one verdict, first: a privacy alarm is the detector's refutation
    assert alert["verdict"]["refutes"] is True and alarm["verdict"]["refutes"] is True
    assert alert["annotations"]["verdict"] == alarm["verdict"]["sentence"]
    assert alarm["verdict"]["sentence"].startswith("Refuted")


def test_reset_enqueues_alarm_resolved(client: TestClient, firing: dict, db: DB) -> None:
    webhook = create_webhook(client, event_types=["alarm.resolved"])
    assert _messages(db) == []  # the webhook did not exist when the alarm fired
    client.post(f"/v1/monitors/{firing['monitor']['id']}/reset")
    messages = _messages(db, event_type="alarm.resolved")
    assert len(messages) == 1 and str(messages[0].webhook_id) == webhook["id"]
    data = messages[0].payload["data"]
    assert data["status"] == "resolved" and data["endsAt"] is not None


def test_enqueue_event_for_monitor_events(client: TestClient, db: DB, settings, tenants) -> None:  # noqa: ANN001
    degraded = create_webhook(client, event_types=["monitor.degraded", "monitor.completed"])
    create_webhook(client, url="https://b.example.org/", event_types=["alarm.firing"])
    mechanism = create_mechanism(client)
    monitor_id = create_monitor(client, mechanism["id"])["id"]
    with db() as session:
        monitor = session.get(Monitor, uuid.UUID(monitor_id))
        monitor.state = "degraded"
        data = monitor_event_data(monitor, settings, failure_reason="timeout")
        out = enqueue_event(session, tenants[0].tenant_id, "monitor.degraded", data)
        assert len(out) == 1
        # Other tenants' webhooks never receive this tenant's events.
        assert enqueue_event(session, tenants[1].tenant_id, "monitor.degraded", data) == []
        with pytest.raises(ValueError, match="unknown event type"):
            enqueue_event(session, tenants[0].tenant_id, "monitor.exploded", data)
    (message,) = _messages(db)
    assert str(message.webhook_id) == degraded["id"]
    assert message.payload["data"]["state"] == "degraded" and message.payload["data"]["failure_reason"] == "timeout"


def test_test_message_and_deliveries(client: TestClient, db: DB) -> None:
    webhook = create_webhook(client, event_types=["monitor.completed"])
    response = client.post(f"/v1/webhooks/{webhook['id']}/test")
    assert response.status_code == 202
    queued = response.json()
    assert queued["event_type"] == "webhook.test" and queued["status"] == "pending" and queued["attempts"] == 0
    assert queued["payload"]["type"] == "webhook.test" and queued["attempt_log"] == []

    # What the deliverer records: two attempts, the second one successful.
    with db() as session:
        message = session.get(WebhookMessage, queued["id"])
        session.add_all(
            [
                WebhookAttempt(
                    message_id=message.id,
                    attempted_at=datetime(2030, 1, 1, 0, 0, tzinfo=UTC),
                    status_code=None,
                    error="connection refused",
                    duration_ms=3.0,
                    worker_id="w1",
                ),
                WebhookAttempt(
                    message_id=message.id,
                    attempted_at=datetime(2030, 1, 1, 0, 1, tzinfo=UTC),
                    status_code=204,
                    error=None,
                    duration_ms=12.5,
                    worker_id="w2",
                ),
            ]
        )
        message.attempts = 2
        message.status = "delivered"
        message.last_status_code = 204
        message.delivered_at = datetime(2030, 1, 1, 0, 1, tzinfo=UTC)
    second = client.post(f"/v1/webhooks/{webhook['id']}/test").json()

    page = client.get(f"/v1/webhooks/{webhook['id']}/deliveries").json()
    assert [d["id"] for d in page["items"]] == [second["id"], queued["id"]]
    delivered = page["items"][1]
    assert delivered["status"] == "delivered" and delivered["attempts"] == 2 and delivered["last_status_code"] == 204
    assert [a["status_code"] for a in delivered["attempt_log"]] == [None, 204]
    assert delivered["attempt_log"][0]["error"] == "connection refused"
    assert delivered["attempt_log"][1]["worker_id"] == "w2"
    first_page = client.get(f"/v1/webhooks/{webhook['id']}/deliveries", params={"limit": 1}).json()
    assert [d["id"] for d in first_page["items"]] == [second["id"]]
    rest = client.get(
        f"/v1/webhooks/{webhook['id']}/deliveries", params={"limit": 1, "cursor": first_page["next_cursor"]}
    ).json()
    assert [d["id"] for d in rest["items"]] == [queued["id"]] and rest["next_cursor"] is None


def test_test_message_refused_for_disabled_webhook(client: TestClient) -> None:
    webhook = create_webhook(client)
    client.patch(f"/v1/webhooks/{webhook['id']}", json={"enabled": False})
    response = client.post(f"/v1/webhooks/{webhook['id']}/test")
    assert response.status_code == 409 and "disabled" in response.json()["detail"]


def test_reenabling_clears_the_disabled_reason(client: TestClient, db: DB) -> None:
    from app.models.alarms import Webhook

    webhook = create_webhook(client)
    with db() as session:
        row = session.get(Webhook, uuid.UUID(webhook["id"]))
        row.enabled = False
        row.disabled_reason = "410 Gone from the receiver"
    assert client.get(f"/v1/webhooks/{webhook['id']}").json()["disabled_reason"] == "410 Gone from the receiver"
    body = client.patch(f"/v1/webhooks/{webhook['id']}", json={"enabled": True}).json()
    assert body["enabled"] is True and body["disabled_reason"] is None


def test_deleting_a_webhook_drops_its_messages(client: TestClient, db: DB) -> None:
    webhook = create_webhook(client)
    client.post(f"/v1/webhooks/{webhook['id']}/test")
    assert len(_messages(db)) == 1
    client.delete(f"/v1/webhooks/{webhook['id']}")
    assert _messages(db) == []


def test_deleting_a_monitor_archives_its_alarms(client: TestClient, firing: dict, db: DB) -> None:
    monitor_id = firing["monitor"]["id"]
    name = firing["monitor"]["name"]
    (alarm_before,) = client.get(f"/v1/alarms?monitor_id={monitor_id}").json()["items"]
    assert alarm_before["archived"] is False and alarm_before["monitor_name"] == name
    assert client.delete(f"/v1/monitors/{monitor_id}").status_code == 204
    assert client.get(f"/v1/monitors/{monitor_id}").status_code == 404
    assert alarm_before["id"] not in {a["id"] for a in client.get("/v1/alarms").json()["items"]}
    archived = client.get("/v1/alarms?archived=true").json()["items"]
    (alarm,) = [a for a in archived if a["id"] == alarm_before["id"]]
    assert alarm["archived"] is True and alarm["archived_at"] is not None
    assert alarm["monitor_id"] == monitor_id and alarm["monitor_name"] == name
    assert alarm["statistic"] == alarm_before["statistic"] and alarm["period_run_id"] is None
    by_monitor = client.get(f"/v1/alarms?archived=true&monitor_id={monitor_id}").json()["items"]
    assert [a["id"] for a in by_monitor] == [alarm["id"]]
    assert client.get(f"/v1/alarms/{alarm['id']}").json()["archived"] is True
    with db() as session:
        assert session.get(Alarm, uuid.UUID(alarm["id"])).archived_at is not None


def test_contract_alarm_verdict_and_page_without_null_identity_warning(client: TestClient, app, db: DB, settings,  # noqa: ANN001
                                                                       tenants) -> None:  # noqa: ANN001
    """Opening a contract alarm (no check) used to call session.get(Check, None),
    which logs SAWarning "fully NULL primary key identity"; its verdict is about the contract."""
    import warnings

    from sqlalchemy.exc import SAWarning

    from app.alarms.service import fire_contract_alarm
    from tests.web.test_web_pages import sign_in, web_client

    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        run = record_period(session, monitor["id"], statistic=0.3)
        mon = session.get(Monitor, uuid.UUID(monitor["id"]))
        alarm = fire_contract_alarm(session, mon, run, {"breach": "type", "detail": "a string where a real was "
                                                        "expected", "sample": "x"}, settings)
        alarm_id = str(alarm.id)
    read = client.get(f"/v1/alarms/{alarm_id}").json()
    assert read["kind"] == "contract" and read["verdict"]["subject"] == "contract" and read["verdict"]["refutes"]
    assert "type (a string where a real was expected)" in read["verdict"]["sentence"]
    web = web_client(app)
    sign_in(web, tenants[0].key)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SAWarning)
        page = web.get(f"/ui/alarms/{alarm_id}")
    assert page.status_code == 200


def test_the_webhooks_headline_bound_says_what_it_is_valid_for() -> None:
    """The payload's `headline_bound` annotation never lets the same-data bound read as independent evidence."""
    from types import SimpleNamespace

    from app.alarms.service import _headline_bound
    from app.stats.evidence import alarm_evidence

    check = alarm_evidence([50, 60, 70], [20, 10, 12], [200, 200, 200], [4, 5, 6], lag=2, claim=1.0)
    alarm = SimpleNamespace(evidence={"kind": "privacy", "check": check, "confirmation": None})
    text = _headline_bound(alarm)  # type: ignore[arg-type]
    assert text is not None and text.startswith(f"ε > {check['lower_bound']:.3g} at 95% confidence")
    assert "valid across runs, not given the alarm; not independent evidence" in text
    assert "the confirmation on fresh outputs, valid given the alarm, follows" in text
    alarm.evidence["confirmation"] = {"confirms": False}
    assert _headline_bound(alarm).endswith("; not confirmed on fresh outputs")  # type: ignore[arg-type, union-attr]
    # an alarm stored with only a window bound: descriptive, never "at 95% confidence"
    old = SimpleNamespace(evidence={"check": {"method": "score", "lower_bound": 1.2, "confidence": 0.95}})
    assert _headline_bound(old) == ("ε > 1.2 (descriptive: the window was chosen by the data; not a confidence "  # type: ignore[arg-type]
                                    "statement); the confirmation on fresh outputs, valid given the alarm, follows")
