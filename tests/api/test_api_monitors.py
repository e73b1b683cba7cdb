"""/v1/monitors on SQLite and Postgres: creation rules, lifecycle, status and periods."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models.monitors import Check, Monitor
from app.stats.multiple import renewal_alpha
from app.stats.sequential import SERVICE_DESIGN, design_of_state, service_design
from app.stats.thresholds import threshold_from_table
from tests.support.api_helpers import MONITOR, create_mechanism, create_monitor, record_period

DB = Callable[[], AbstractContextManager[Session]]


@pytest.fixture
def mechanism(client: TestClient) -> dict:
    return create_mechanism(client)


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_create_on_the_table_grid_starts_active(client: TestClient, mechanism: dict, db: DB) -> None:
    before = datetime.now(UTC)
    monitor = create_monitor(client, mechanism["id"])
    expected = threshold_from_table(100, 0.25, 0.05)
    assert expected is not None  # (100, 0.25, 0.05) is on the shipped grid
    assert monitor["state"] == "active"
    assert monitor["threshold"] == pytest.approx(expected.value)
    assert monitor["threshold_std_error"] == pytest.approx(expected.std_error)
    assert monitor["threshold_source"] == "table"
    assert monitor["horizon_index"] == 1 and monitor["t"] == 0
    assert monitor["horizon_alpha"] == 0.05 and monitor["alpha"] == 0.05 and monitor["gamma"] == 0.25
    assert monitor["variance"] == "score" and monitor["kappa"] == 1e-6
    assert before <= _iso(monitor["next_run_at"]) <= datetime.now(UTC)
    assert [c["reversed"] for c in monitor["checks"]] == [False]
    with db() as session:
        check = session.scalars(select(Check).where(Check.monitor_id == uuid.UUID(monitor["id"]))).one()
        state = check.detector_state
        assert state["kind"] == "aggregator" and state["t"] == 0 and state["horizon"] == 100
        assert state["threshold"] == pytest.approx(expected.value)


def test_symmetric_adds_reversed_checks_and_splits_alpha(client: TestClient, mechanism: dict) -> None:
    checks = [
        {"x": [0], "x_prime": [1], "event": {"kind": "interval", "low": 0.5}},
        {"x": [5], "x_prime": [6], "event": {"kind": "union", "intervals": [{"high": 0}, {"low": 10}]}},
    ]
    monitor = create_monitor(client, mechanism["id"], checks=checks, symmetric=True, alpha=0.1)
    assert [(c["position"], c["x"], c["x_prime"], c["reversed"]) for c in monitor["checks"]] == [
        (0, [0], [1], False),
        (1, [1], [0], True),
        (2, [5], [6], False),
        (3, [6], [5], True),
    ]
    assert monitor["checks"][1]["event"] == monitor["checks"][0]["event"]
    status = client.get(f"/v1/monitors/{monitor['id']}/status").json()
    assert status["checks_count"] == 4
    assert status["check_alpha"] == pytest.approx(0.1 / 4)
    expected = threshold_from_table(100, 0.25, 0.025)
    assert expected is not None and monitor["state"] == "active"
    assert monitor["threshold"] == pytest.approx(expected.value)


def test_off_grid_threshold_starts_calibrating(client: TestClient, mechanism: dict, db: DB) -> None:
    monitor = create_monitor(client, mechanism["id"], horizon=37)
    assert threshold_from_table(37, 0.25, 0.05) is None
    assert monitor["state"] == "calibrating"
    assert monitor["threshold"] is None and monitor["threshold_source"] is None
    with db() as session:
        check = session.scalars(select(Check).where(Check.monitor_id == uuid.UUID(monitor["id"]))).one()
        assert check.detector_state is None


def test_auto_event_starts_calibrating_with_the_table_threshold(client: TestClient, mechanism: dict) -> None:
    checks = [{"x": [0], "x_prime": [1], "event": {"kind": "auto"}}]
    monitor = create_monitor(client, mechanism["id"], checks=checks)
    assert monitor["state"] == "calibrating"
    assert monitor["checks"][0]["event"] == {"kind": "auto"}
    # With auto events, re-discovery (every ceil(T/10) periods by default) may add checks later:
    # the initial checks get alpha/2 and the rest is kept for them (method.md section 11).
    assert monitor["rediscover_every"] == 10 and monitor["rediscoveries"] == 0
    assert monitor["threshold"] == pytest.approx(threshold_from_table(100, 0.25, 0.025).value)
    assert monitor["checks"][0]["origin"] == "auto" and monitor["checks"][0]["level"] == pytest.approx(0.025)
    off = create_monitor(client, mechanism["id"], checks=checks, rediscover_every=0, name="no rediscovery")
    assert off["rediscover_every"] == 0
    assert off["threshold"] == pytest.approx(threshold_from_table(100, 0.25, 0.05).value)
    fixed = create_monitor(client, mechanism["id"], rediscover_every=7, name="fixed events")
    assert fixed["rediscover_every"] == 0 and fixed["checks"][0]["origin"] == "given"  # no auto event


def test_renew_uses_the_renewal_level(client: TestClient, mechanism: dict) -> None:
    monitor = create_monitor(client, mechanism["id"], renew=True)
    assert monitor["horizon_alpha"] == pytest.approx(renewal_alpha(0.05, 1))
    expected_state = "active" if threshold_from_table(100, 0.25, renewal_alpha(0.05, 1)) else "calibrating"
    assert monitor["state"] == expected_state


def test_cron_schedule_and_start_at(client: TestClient, mechanism: dict) -> None:
    start = datetime(2030, 1, 1, 0, 1, tzinfo=UTC)
    monitor = create_monitor(
        client, mechanism["id"], period_seconds=None, cron="*/15  * * * *", start_at=start.isoformat()
    )
    assert monitor["cron"] == "*/15 * * * *"
    assert _iso(monitor["next_run_at"]) == datetime(2030, 1, 1, 0, 15, tzinfo=UTC)
    fixed = create_monitor(client, mechanism["id"], start_at="2030-06-01T12:00:00+02:00")
    assert _iso(fixed["next_run_at"]) == datetime(2030, 6, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("overrides", "pointer", "message"),
    [
        ({"epsilon": 0}, "#/epsilon", "greater than 0"),
        ({"alpha": 1.0}, "#/alpha", "less than 1"),
        ({"gamma": 0.5}, "#/gamma", "less than 0.5"),
        ({"horizon": 1}, "#/horizon", "greater than or equal to 2"),
        ({"horizon": 100_001}, "#/horizon", "less than or equal to 100000"),
        ({"samples_per_period": 0}, "#/samples_per_period", "greater than or equal to 1"),
        ({"period_seconds": 0}, "#/period_seconds", "greater than or equal to 1"),
        ({"checks": []}, "#/checks", "at least 1 item"),
        ({"variance": "exact"}, "#/variance", "'score' or 'wald'"),
        ({"cron": "* * * *", "period_seconds": None}, "#/cron", "5 fields"),
        ({"cron": "61 * * * *", "period_seconds": None}, "#/cron", "is not valid"),
        ({"cron": "0 0 31 2 *", "period_seconds": None}, "#/cron", "never fires"),
        ({"cron": "0 * * * *"}, "#/", "exactly one of period_seconds and cron"),
        ({"period_seconds": None}, "#/", "exactly one of period_seconds and cron"),
        ({"start_at": "2030-01-01T00:00:00"}, "#/start_at", "timezone"),
        ({"checks": [{"x": [1], "x_prime": [1], "event": {"kind": "auto"}}]}, "#/checks/0", "same database"),
        (
            {"checks": [{"x": [1], "x_prime": [0], "event": {"kind": "interval", "low": 2, "high": 1}}]},
            "#/checks/0/event/interval",
            "low (2) must be <= high (1)",
        ),
        ({"checks": [{"x": [1], "x_prime": [0], "event": {"kind": "ring"}}]}, "#/checks/0/event", "kind"),
    ],
)
def test_create_validation(client: TestClient, mechanism: dict, overrides: dict, pointer: str, message: str) -> None:
    response = client.post("/v1/monitors", json={**MONITOR, "mechanism_id": mechanism["id"], **overrides})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    errors = response.json()["errors"]
    assert any(e["pointer"] == pointer and message in e["message"] for e in errors), errors


@pytest.mark.parametrize(
    ("mechanism_body", "event", "message"),
    [
        ({"output_kind": "real"}, {"kind": "box", "low": [0], "high": [1]}, "applies to vector outputs"),
        ({"output_kind": "real"}, {"kind": "set", "values": [[1, 0]]}, "applies to vector outputs"),
        ({"output_kind": "real"}, {"kind": "set", "values": ["yes"]}, "strings cannot contain real outputs"),
        ({"output_kind": "vector", "dim": 3}, {"kind": "interval", "low": 0}, "outputs are vectors"),
        ({"output_kind": "vector", "dim": 3}, {"kind": "box", "low": [0, 0], "high": [1, 1]}, "dimension 2"),
        ({"output_kind": "vector", "dim": 3}, {"kind": "set", "values": [[1, 0]]}, "length 2"),
    ],
)
def test_event_must_fit_the_outputs(client: TestClient, mechanism_body: dict, event: dict, message: str) -> None:
    mechanism = create_mechanism(client, name="m", **mechanism_body)
    checks = [{"x": [0], "x_prime": [1], "event": event}]
    response = client.post("/v1/monitors", json={**MONITOR, "mechanism_id": mechanism["id"], "checks": checks})
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["pointer"] == "#/checks/0/event" and error["type"] == "event_mismatch"
    assert message in error["message"]


def test_events_that_fit(client: TestClient) -> None:
    vector = create_mechanism(client, name="svt", output_kind="vector", dim=2)
    discrete = create_mechanism(client, name="rnm", output_kind="discrete")
    create_monitor(
        client,
        vector["id"],
        checks=[
            {"x": [0], "x_prime": [1], "event": {"kind": "box", "low": [0, None], "high": [1, 2]}},
            {"x": [0], "x_prime": [1], "event": {"kind": "set", "values": [[1, 0], [0, 1]]}},
        ],
    )
    create_monitor(
        client,
        discrete["id"],
        checks=[
            {"x": [0], "x_prime": [1], "event": {"kind": "set", "values": ["a", "b"]}},
            {"x": [0], "x_prime": [1], "event": {"kind": "interval", "low": 2}},
        ],
    )


def test_unknown_or_foreign_mechanism(client: TestClient, other_headers: dict) -> None:
    theirs = client.post(
        "/v1/mechanisms",
        json={"name": "x", "sampling_url": "https://e.org/", "output_kind": "real"},
        headers=other_headers,
    ).json()
    for mechanism_id in (str(uuid.uuid4()), theirs["id"]):
        response = client.post("/v1/monitors", json={**MONITOR, "mechanism_id": mechanism_id})
        assert response.status_code == 404
        assert mechanism_id in response.json()["detail"]


def test_get_list_filters_and_delete(client: TestClient, mechanism: dict) -> None:
    other_mechanism = create_mechanism(client, name="second")
    active = create_monitor(client, mechanism["id"])
    calibrating = create_monitor(client, mechanism["id"], horizon=37)
    elsewhere = create_monitor(client, other_mechanism["id"])

    assert active.pop("validation") is None  # only the creation answers with ?validate=true's probes
    assert active.pop("warnings") == []  # and its sparse-event warnings (none without an estimate)
    assert client.get(f"/v1/monitors/{active['id']}").json() == active
    every = client.get("/v1/monitors").json()
    assert [m["id"] for m in every["items"]] == [elsewhere["id"], calibrating["id"], active["id"]]
    assert every["next_cursor"] is None
    by_state = client.get("/v1/monitors", params={"state": "calibrating"}).json()["items"]
    assert [m["id"] for m in by_state] == [calibrating["id"]]
    by_mechanism = client.get("/v1/monitors", params={"mechanism_id": other_mechanism["id"]}).json()["items"]
    assert [m["id"] for m in by_mechanism] == [elsewhere["id"]]
    assert client.get("/v1/monitors", params={"state": "sleeping"}).status_code == 422
    page = client.get("/v1/monitors", params={"limit": 2}).json()
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = client.get("/v1/monitors", params={"limit": 2, "cursor": page["next_cursor"]}).json()
    assert [m["id"] for m in rest["items"]] == [active["id"]] and rest["next_cursor"] is None

    assert client.delete(f"/v1/monitors/{active['id']}").status_code == 204
    assert client.get(f"/v1/monitors/{active['id']}").status_code == 404
    assert client.delete(f"/v1/monitors/{active['id']}").status_code == 404


def test_pause_and_resume(client: TestClient, mechanism: dict, db: DB) -> None:
    monitor = create_monitor(client, mechanism["id"], period_seconds=600, start_at="2020-01-01T00:00:00Z")
    paused = client.post(f"/v1/monitors/{monitor['id']}/pause")
    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    status = client.get(f"/v1/monitors/{monitor['id']}/status").json()
    assert status["paused_from_state"] == "active"
    again = client.post(f"/v1/monitors/{monitor['id']}/pause")
    assert again.status_code == 409 and "already paused" in again.json()["detail"]

    before = datetime.now(UTC)
    resumed = client.post(f"/v1/monitors/{monitor['id']}/resume")
    assert resumed.status_code == 200
    assert resumed.json()["state"] == "active"
    next_run = _iso(resumed.json()["next_run_at"])
    # The next 10-minute slot of the schedule anchored at 2020-01-01T00:00Z, from now.
    assert before <= next_run <= before + timedelta(seconds=600)
    assert (next_run - datetime(2020, 1, 1, tzinfo=UTC)).total_seconds() % 600 == 0
    assert client.get(f"/v1/monitors/{monitor['id']}/status").json()["paused_from_state"] is None
    assert client.post(f"/v1/monitors/{monitor['id']}/resume").status_code == 409


def test_resume_restores_the_state_before_the_pause(client: TestClient, mechanism: dict, db: DB) -> None:
    monitor = create_monitor(client, mechanism["id"], cron="0 * * * *", period_seconds=None)
    with db() as session:
        session.get(Monitor, uuid.UUID(monitor["id"])).state = "degraded"
    client.post(f"/v1/monitors/{monitor['id']}/pause")
    resumed = client.post(f"/v1/monitors/{monitor['id']}/resume").json()
    assert resumed["state"] == "degraded"
    next_run = _iso(resumed["next_run_at"])
    assert next_run.minute == 0 and next_run.second == 0 and next_run > datetime.now(UTC) - timedelta(seconds=1)


def test_completed_monitor_cannot_be_paused(client: TestClient, mechanism: dict, db: DB) -> None:
    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        session.get(Monitor, uuid.UUID(monitor["id"])).state = "completed"
    response = client.post(f"/v1/monitors/{monitor['id']}/pause")
    assert response.status_code == 409 and "completed" in response.json()["detail"]


def test_reset_starts_a_new_horizon(client: TestClient, mechanism: dict, db: DB, settings) -> None:  # noqa: ANN001
    monitor = create_monitor(client, mechanism["id"], symmetric=True)
    with db() as session:
        record_period(session, monitor["id"], statistic=1.0)
        record_period(session, monitor["id"], statistic=99.0, settings=settings)
    status = client.get(f"/v1/monitors/{monitor['id']}/status").json()
    assert status["state"] == "alarm" and status["t"] == 2 and status["open_alarms"] == 2
    assert all(c["alarm"] and c["max_statistic"] == 99.0 for c in status["checks"])

    reset = client.post(f"/v1/monitors/{monitor['id']}/reset")
    assert reset.status_code == 200
    body = reset.json()
    assert body["state"] == "active" and body["horizon_index"] == 2 and body["t"] == 0
    assert body["horizon_alpha"] == 0.05  # no renew: every horizon runs at α
    status = client.get(f"/v1/monitors/{monitor['id']}/status").json()
    assert status["open_alarms"] == 0
    assert all(c["last_z"] is None and c["max_statistic"] is None and not c["alarm"] for c in status["checks"])
    with db() as session:
        for check in session.scalars(select(Check).where(Check.monitor_id == uuid.UUID(monitor["id"]))):
            assert check.detector_state["t"] == 0 and check.detector_state["s"] == 0.0
    # Old periods and alarms are kept; the alarms are resolved.
    periods = client.get(f"/v1/monitors/{monitor['id']}/periods").json()["items"]
    assert [p["horizon_index"] for p in periods] == [1, 1]
    alarms = client.get("/v1/alarms", params={"monitor_id": monitor["id"]}).json()["items"]
    assert len(alarms) == 2 and all(a["status"] == "resolved" and a["resolved_at"] for a in alarms)


def test_reset_of_a_renewing_monitor_moves_to_the_next_level(client: TestClient, mechanism: dict) -> None:
    monitor = create_monitor(client, mechanism["id"], renew=True)
    body = client.post(f"/v1/monitors/{monitor['id']}/reset").json()
    assert body["horizon_index"] == 2
    assert body["horizon_alpha"] == pytest.approx(renewal_alpha(0.05, 2))
    table = threshold_from_table(100, 0.25, renewal_alpha(0.05, 2))
    assert body["state"] == ("active" if table else "calibrating")
    assert body["threshold"] == (pytest.approx(table.value) if table else None)


def test_reset_of_a_paused_monitor(client: TestClient, mechanism: dict) -> None:
    monitor = create_monitor(client, mechanism["id"])
    client.post(f"/v1/monitors/{monitor['id']}/pause")
    body = client.post(f"/v1/monitors/{monitor['id']}/reset").json()
    assert body["state"] == "active"
    assert client.get(f"/v1/monitors/{monitor['id']}/status").json()["paused_from_state"] is None


def test_periods_newest_first_with_check_numbers(client: TestClient, mechanism: dict, db: DB) -> None:
    monitor = create_monitor(client, mechanism["id"], symmetric=True)
    with db() as session:
        record_period(session, monitor["id"], statistic=0.5)
        record_period(session, monitor["id"], failed=True)
        record_period(session, monitor["id"], statistic=1.5)
    page = client.get(f"/v1/monitors/{monitor['id']}/periods", params={"limit": 2}).json()
    assert [p["seq"] for p in page["items"]] == [3, 2]
    newest, failed = page["items"]
    assert newest["status"] == "ok" and newest["t"] == 2 and newest["horizon_index"] == 1
    assert [c["check_id"] for c in newest["checks"]] == [c["id"] for c in monitor["checks"]]
    first = newest["checks"][0]
    assert first["a"] == 400 and first["b"] == 300 and first["n"] == 1000
    assert first["p_hat"] == 0.4 and first["q_hat"] == 0.3 and first["statistic"] == 1.5
    assert first["alarm"] is False and first["threshold"] == pytest.approx(monitor["threshold"])
    assert {"d_hat", "sigma_hat", "z"} <= set(first)
    assert failed["status"] == "failed" and failed["t"] is None and failed["checks"] == []
    assert failed["failure_reason"] == "timeout" and "did not answer" in failed["failure_detail"]
    rest = client.get(
        f"/v1/monitors/{monitor['id']}/periods", params={"limit": 2, "cursor": page["next_cursor"]}
    ).json()
    assert [p["seq"] for p in rest["items"]] == [1] and rest["next_cursor"] is None

    status = client.get(f"/v1/monitors/{monitor['id']}/status").json()
    assert status["t"] == 2 and status["periods_remaining"] == 98 and status["consecutive_failures"] == 1
    assert status["last_period_at"] is not None
    assert status["checks"][0]["last_statistic"] == 1.5 and status["checks"][0]["last_z"] == 0.75


def test_discovery_event_kinds_paste_into_checks(client: TestClient) -> None:
    """Discovery's candidates (lattice points, rows, projections) are events a check can hold."""
    vector = create_mechanism(client, name="svt", output_kind="vector", dim=3)
    rows = {"kind": "rows", "values": [[0, 0, 1], [0, None, 1]]}
    projection = {"kind": "projection", "projection": {"kind": "max"},
                  "event": {"kind": "interval", "low": 0.5}}
    checks = [{"x": [0, 0, 2], "x_prime": [1, 1, 1], "event": rows},
              {"x": [0, 0, 2], "x_prime": [1, 1, 1], "event": projection}]
    created = create_monitor(client, vector["id"], checks=checks, name="vector events")
    assert [c["event"]["kind"] for c in created["checks"]] == ["rows", "projection"]
    scalar = create_mechanism(client, name="rounded", output_kind="real")
    lattice = {"kind": "lattice", "step": 0.5, "points": [0, 1, 2]}
    assert create_monitor(client, scalar["id"], name="lattice",
                          checks=[{"x": [0], "x_prime": [1], "event": lattice}])["checks"][0]["event"]["kind"] == "lattice"
    refused = client.post("/v1/monitors", json={**MONITOR, "mechanism_id": scalar["id"], "name": "bad",
                                                "checks": [{"x": [0], "x_prime": [1], "event": projection}]})
    assert refused.status_code == 422 and "vector or list" in refused.text


# --------------------------------------------------------------------------- PATCH /v1/monitors/{id}


def test_patch_changes_safe_fields_in_place_and_keeps_the_running_test(
    client: TestClient, mechanism: dict, db: DB
) -> None:
    monitor = create_monitor(client, mechanism["id"], symmetric=True)
    with db() as session:
        record_period(session, monitor["id"], statistic=0.5)
        record_period(session, monitor["id"], statistic=1.5)
        states = {c.id: c.detector_state for c in session.scalars(
            select(Check).where(Check.monitor_id == uuid.UUID(monitor["id"])))}
    before = client.get(f"/v1/monitors/{monitor['id']}").json()
    response = client.patch(f"/v1/monitors/{monitor['id']}", json={
        "name": "renamed", "samples_per_period": 4000, "outputs_window": 5, "snapshot_every": 10,
        "alarm_snapshot_samples": 1000, "discovery_samples": 5000, "discovery_fresh_samples": 500})
    assert response.status_code == 200, response.text
    after = response.json()
    assert after["id"] == monitor["id"] and after["name"] == "renamed" and after["samples_per_period"] == 4000
    assert (after["outputs_window"], after["snapshot_every"], after["alarm_snapshot_samples"]) == (5, 10, 1000)
    assert (after["discovery_samples"], after["discovery_fresh_samples"]) == (5000, 500)
    # The running test is untouched: same horizon, t, threshold, levels, checks and detector states.
    for key in ("state", "t", "horizon_index", "horizon_alpha", "threshold", "checks", "next_run_at", "created_at"):
        assert after[key] == before[key], key
    assert _iso(after["updated_at"]) > _iso(before["updated_at"])
    with db() as session:
        assert {c.id: c.detector_state for c in session.scalars(
            select(Check).where(Check.monitor_id == uuid.UUID(monitor["id"])))} == states
    assert [p["seq"] for p in client.get(f"/v1/monitors/{monitor['id']}/periods").json()["items"]] == [2, 1]
    assert client.get(f"/v1/monitors/{monitor['id']}").json() == after
    # null clears a nullable field; an empty patch changes nothing.
    cleared = client.patch(f"/v1/monitors/{monitor['id']}", json={"snapshot_every": None}).json()
    assert cleared["snapshot_every"] is None
    same = client.patch(f"/v1/monitors/{monitor['id']}", json={})
    assert same.status_code == 200 and same.json() == cleared


def test_patch_schedule_takes_effect_from_the_last_slot(client: TestClient, mechanism: dict, db: DB) -> None:
    anchor = datetime(2020, 1, 1, tzinfo=UTC)
    monitor = create_monitor(client, mechanism["id"], period_seconds=600, start_at=anchor.isoformat())
    with db() as session:
        record_period(session, monitor["id"])  # scheduled for the anchor
        record_period(session, monitor["id"])  # anchor + 600 s
    before = datetime.now(UTC)
    hourly = client.patch(f"/v1/monitors/{monitor['id']}", json={"cron": "0 * * * *"})
    assert hourly.status_code == 200, hourly.text
    body = hourly.json()
    assert body["cron"] == "0 * * * *" and body["period_seconds"] is None  # one schedule replaces the other
    next_run = _iso(body["next_run_at"])
    assert before <= next_run <= before + timedelta(hours=1) and next_run.minute == 0 and next_run.second == 0
    assert body["t"] == 2

    every_two = client.patch(f"/v1/monitors/{monitor['id']}", json={"period_seconds": 120}).json()
    assert every_two["period_seconds"] == 120 and every_two["cron"] is None
    next_run = _iso(every_two["next_run_at"])
    assert before <= next_run <= datetime.now(UTC) + timedelta(seconds=120)
    # Counted from the last period's slot (anchor + 600 s), in steps of 120 s.
    assert (next_run - (anchor + timedelta(seconds=600))).total_seconds() % 120 == 0
    with db() as session:
        assert session.get(Monitor, uuid.UUID(monitor["id"])).schedule_anchor == anchor + timedelta(seconds=600)


TEST_FIELD_CHANGES = [
    {"alpha": 0.01}, {"gamma": 0.1}, {"horizon": 200}, {"detector": "e-process"}, {"variance": "wald"},
    {"kappa": 1e-3}, {"symmetric": True}, {"renew": True}, {"epsilon": 2.0}, {"claim": {"gdp_mu": 1.0}},
    {"checks": [{"x": [0], "x_prime": [1], "event": {"kind": "interval", "low": 0.5}}]},
    {"rediscover_every": 5},
]


@pytest.mark.parametrize("change", TEST_FIELD_CHANGES, ids=lambda c: next(iter(c)))
def test_patch_refuses_a_field_that_defines_the_test(client: TestClient, mechanism: dict, change: dict) -> None:
    monitor = create_monitor(client, mechanism["id"])
    before = client.get(f"/v1/monitors/{monitor['id']}").json()
    response = client.patch(f"/v1/monitors/{monitor['id']}", json={"name": "renamed", **change})
    assert response.status_code == 409, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    (field,) = change
    assert problem["type"].endswith("monitor-test-change")
    assert [e["pointer"] for e in problem["errors"]] == [f"#/{field}"]
    assert "create a new monitor" in problem["detail"].lower()
    assert client.get(f"/v1/monitors/{monitor['id']}").json() == before  # nothing changed, not even the name


def test_patch_accepts_test_fields_at_their_current_value(client: TestClient, mechanism: dict) -> None:
    monitor = create_monitor(client, mechanism["id"])
    monitor.pop("validation"), monitor.pop("warnings")
    current = {k: monitor[k] for k in ("mechanism_id", "epsilon", "alpha", "gamma", "detector", "horizon",
                                       "variance", "kappa", "symmetric", "renew")}
    response = client.patch(f"/v1/monitors/{monitor['id']}", json={**current, "claim": {"epsilon": 1.0}})
    assert response.status_code == 200, response.text
    assert response.json() == monitor  # nothing written: not even updated_at


def test_patch_rediscovery_may_change_between_positive_values(client: TestClient, mechanism: dict) -> None:
    checks = [{"x": [0], "x_prime": [1], "event": {"kind": "auto"}}]
    monitor = create_monitor(client, mechanism["id"], checks=checks)
    assert monitor["rediscover_every"] == 10
    changed = client.patch(f"/v1/monitors/{monitor['id']}", json={"rediscover_every": 4})
    assert changed.status_code == 200 and changed.json()["rediscover_every"] == 4
    assert changed.json()["checks"][0]["level"] == monitor["checks"][0]["level"]  # the α split is kept
    off = client.patch(f"/v1/monitors/{monitor['id']}", json={"rediscover_every": 0})
    assert off.status_code == 409 and "α" in off.json()["detail"]


@pytest.mark.parametrize(
    ("body", "pointer", "message"),
    [
        ({"name": None}, "#/name", "null is not allowed"),
        ({"name": ""}, "#/name", "at least 1 character"),
        ({"samples_per_period": 0}, "#/samples_per_period", "greater than or equal to 1"),
        ({"samples_per_period": None}, "#/samples_per_period", "null is not allowed"),
        ({"alpha": None}, "#/alpha", "null is not allowed"),
        ({"period_seconds": 60, "cron": "* * * * *"}, "#/", "exactly one of period_seconds and cron"),
        ({"cron": None}, "#/", "needs a schedule"),
        ({"period_seconds": None}, "#/", "needs a schedule"),
        ({"cron": "61 * * * *"}, "#/cron", "is not valid"),
        ({"start_at": "2030-01-01T00:00:00Z"}, "#/start_at", "unknown field"),
        ({"state": "active"}, "#/state", "unknown field"),
    ],
)
def test_patch_validation(client: TestClient, mechanism: dict, body: dict, pointer: str, message: str) -> None:
    monitor = create_monitor(client, mechanism["id"])
    response = client.patch(f"/v1/monitors/{monitor['id']}", json=body)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert any(e["pointer"] == pointer and message in e["message"] for e in errors), errors


def test_patch_is_tenant_isolated_and_needs_a_write_key(client: TestClient, mechanism: dict,
                                                        other_headers: dict) -> None:
    monitor = create_monitor(client, mechanism["id"])
    url = f"/v1/monitors/{monitor['id']}"
    theirs = client.patch(url, json={"name": "stolen"}, headers=other_headers)
    assert theirs.status_code == 404 and monitor["id"] in theirs.json()["detail"]
    assert client.patch(f"/v1/monitors/{uuid.uuid4()}", json={"name": "x"}).status_code == 404
    read_key = client.post("/v1/keys", json={"name": "dashboard", "scope": "read"}).json()["key"]
    refused = client.patch(url, json={"name": "x"}, headers={"Authorization": f"Bearer {read_key}"})
    assert refused.status_code == 403
    assert client.get(url).json()["name"] == monitor["name"]
    operation = client.get("/openapi.json").json()["paths"]["/v1/monitors/{monitor_id}"]["patch"]
    assert {"200", "401", "403", "404", "409", "422"} <= set(operation["responses"])
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/MonitorUpdate")


def test_the_hot_reads_answer_404_to_another_tenant_and_401_to_a_revoked_key(
    client: TestClient, mechanism: dict, db: DB, other_headers: dict, tenants  # noqa: ANN001
) -> None:
    """The read path of GET /v1/monitors/{id}, …/status, …/periods and /v1/monitors (the hot reads,
    without ORM objects) keeps the tenant's scope, and a key revoked a moment ago is refused at once."""
    from app.auth.service import revoke_api_key
    from app.models.auth import ApiKey

    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        record_period(session, monitor["id"], statistic=0.5)
    paths = [f"/v1/monitors/{monitor['id']}", f"/v1/monitors/{monitor['id']}/status",
             f"/v1/monitors/{monitor['id']}/periods"]
    for path in paths:
        assert client.get(path).status_code == 200
        response = client.get(path, headers=other_headers)
        assert response.status_code == 404, path
        assert response.headers["content-type"] == "application/problem+json"
    assert client.get("/v1/monitors", headers=other_headers).json()["items"] == []
    assert client.get(f"/v1/monitors/{monitor['id']}/periods").json()["items"][0]["seq"] == 1
    with db() as session:
        key_id = session.scalars(select(ApiKey.id).where(ApiKey.tenant_id == tenants[1].tenant_id)).one()
        revoke_api_key(session, key_id, allow_last_admin=True)
    for path in [*paths, "/v1/monitors"]:
        assert client.get(path, headers=other_headers).status_code == 401, path


def test_patch_horizon_follows_the_detector(client: TestClient, mechanism: dict, db: DB) -> None:
    """The horizon of an e-process monitor created without one is unused, so it changes in place; one
    created with a horizon runs a design tuned to it, refused with that reason; an e-detector's is
    its window (c = T/α), refused with that reason, not the aggregator's."""
    eproc = create_monitor(client, mechanism["id"], detector="e-process", horizon=None)
    assert eproc["design_horizon"] is None
    changed = client.patch(f"/v1/monitors/{eproc['id']}", json={"horizon": eproc["horizon"] + 7})
    assert changed.status_code == 200, changed.text
    assert changed.json()["horizon"] == eproc["horizon"] + 7
    assert changed.json()["checks"][0]["level"] == eproc["checks"][0]["level"]
    tuned = create_monitor(client, mechanism["id"], detector="e-process", horizon=200)
    assert tuned["design_horizon"] == 200
    refused = client.patch(f"/v1/monitors/{tuned['id']}", json={"horizon": 300})
    assert refused.status_code == 409 and "tuned to the horizon it was created with (200" in refused.json()["detail"]
    assert client.patch(f"/v1/monitors/{tuned['id']}", json={"horizon": 200}).status_code == 200
    with db() as session:  # the checks run the design of their monitor (method.md §13.3d)
        designs = {m["id"]: design_of_state(session.scalars(select(Check.detector_state).where(
            Check.monitor_id == uuid.UUID(m["id"]))).one()) for m in (eproc, tuned)}
    assert designs[eproc["id"]] == SERVICE_DESIGN
    assert designs[tuned["id"]] == service_design(200) and designs[tuned["id"]].horizon == 200
    edet = create_monitor(client, mechanism["id"], detector="e-detector")
    refused = client.patch(f"/v1/monitors/{edet['id']}", json={"horizon": edet["horizon"] + 7})
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert "e-detector's window" in detail and "q(T, γ, α)" not in detail
    agg = create_monitor(client, mechanism["id"])
    refused = client.patch(f"/v1/monitors/{agg['id']}", json={"horizon": agg["horizon"] + 7})
    assert refused.status_code == 409 and "q(T, γ, α)" in refused.json()["detail"]
