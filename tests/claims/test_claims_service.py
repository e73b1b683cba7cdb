"""Claims on monitors and checks: validation, what the API shows, and periods run under a claim."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from fastapi import FastAPI
from pydantic import ValidationError
from sqlalchemy import select

from app.claims.service import claim_period_step
from app.models.alarms import WebhookMessage
from app.models.monitors import Check, PeriodCheck, PeriodRun
from app.monitors.schemas import MonitorCreate
from app.reference.gaussian import GaussianGDP
from app.reference.server import endpoint_router
from app.stats.claim_period import line_statistic
from app.stats.claims import GaussianDP, Line
from tests.monitors.test_engine import (  # noqa: F401
    arun,
    engine_settings,
    make_worker,
    run_ticks,
    session_factory,
)
from tests.support.api_helpers import MONITOR, create_mechanism, create_monitor
from tests.support.sampling_server import serve_app


@pytest.fixture
def mechanism(client) -> dict:
    return create_mechanism(client)


def _post(client, mechanism_id: str, **overrides):
    return client.post("/v1/monitors", json={**MONITOR, "mechanism_id": mechanism_id, **overrides})


def test_epsilon_still_means_a_pure_claim(client, mechanism):
    monitor = create_monitor(client, mechanism["id"])
    assert monitor["epsilon"] == 1.0 and monitor["claim"] == {"epsilon": 1.0}
    assert monitor["checks"][0]["claim"] == {"epsilon": 1.0}
    assert monitor["checks"][0]["claim_description"] == "1-DP"


def test_monitor_claim_and_check_claims(client, mechanism):
    checks = [
        {**MONITOR["checks"][0]},
        {**MONITOR["checks"][0], "claim": {"gdp_mu": 0.5}},
    ]
    body = {k: v for k, v in MONITOR.items() if k != "epsilon"}
    response = client.post("/v1/monitors", json={**body, "mechanism_id": mechanism["id"], "checks": checks,
                                                 "claim": {"epsilon": 1.0, "delta": 1e-5}, "symmetric": True})
    assert response.status_code == 201, response.text
    monitor = response.json()
    assert monitor["claim"] == {"epsilon": 1.0, "delta": 1e-5} and monitor["epsilon"] == 1.0
    assert [c["claim"] for c in monitor["checks"]] == [{"epsilon": 1.0, "delta": 1e-5}] * 2 + [{"gdp_mu": 0.5}] * 2
    assert [c["claim_description"] for c in monitor["checks"]][::2] == ["(1, 1e-05)-DP", "0.5-GDP"]
    status = client.get(f"/v1/monitors/{monitor['id']}/status").json()
    assert [c["claim"] for c in status["checks"]][2] == {"gdp_mu": 0.5}
    assert status["checks"][0]["line"] is None  # no period yet


def test_only_check_claims_leave_the_monitor_without_epsilon(client, mechanism):
    body = {k: v for k, v in MONITOR.items() if k != "epsilon"}
    checks = [{**MONITOR["checks"][0], "claim": {"zcdp_rho": 0.2}}]
    response = client.post("/v1/monitors", json={**body, "mechanism_id": mechanism["id"], "checks": checks})
    assert response.status_code == 201, response.text
    assert response.json()["epsilon"] is None and response.json()["claim"] is None
    assert response.json()["checks"][0]["claim_description"] == "0.2-zCDP"


@pytest.mark.parametrize("overrides,where", [
    ({"claim": {"epsilon": 1.0}}, "not both"),  # with the default epsilon
    ({"epsilon": None}, "every check needs a claim"),
    ({"epsilon": None, "claim": {"delta": 1e-5}}, "needs an epsilon"),
    ({"epsilon": None, "claim": {"epsilon": 1.0, "delta": 1.0}}, "less than 1"),
    ({"epsilon": None, "claim": {"epsilon": 1.0, "delta": 0}}, "greater than 0"),
    ({"epsilon": None, "claim": {"gdp_mu": 0}}, "greater than 0"),
    ({"epsilon": None, "claim": {"zcdp_rho": -1}}, "greater than 0"),
    ({"epsilon": None, "claim": {"gdp_mu": 1, "zcdp_rho": 1}}, "exactly one"),
    ({"epsilon": None, "claim": {"gdp_mu": 1, "sigma": 2}}, "Extra inputs"),
    ({"epsilon": None, "claim": {"gdp_mu": 1}, "variance": "wald"}, "pure-epsilon"),
    ({"epsilon": None, "checks": [{**MONITOR["checks"][0], "claim": {"gdp_mu": 1}}], "variance": "wald"},
     "pure-epsilon"),
])
def test_claim_validation(overrides, where):
    body = {**MONITOR, "mechanism_id": str(uuid.uuid4()), **overrides}
    body = {k: v for k, v in body.items() if v is not None}
    with pytest.raises(ValidationError, match=where):
        MonitorCreate.model_validate(body)


def test_claim_errors_are_422_problems(client, mechanism):
    response = _post(client, mechanism["id"], epsilon=None, claim={"epsilon": 1.0, "delta": 1.0})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["errors"][0]["location"] == ["body", "claim", "delta"]


def test_openapi_documents_the_claim(settings):
    from app.main import create_app

    schema = create_app(settings).openapi()["components"]["schemas"]
    claim = schema["ClaimSpec"]
    assert set(claim["properties"]) == {"epsilon", "delta", "gdp_mu", "zcdp_rho"}
    assert claim["properties"]["delta"]["anyOf"][0]["exclusiveMaximum"] == 1
    assert claim["properties"]["gdp_mu"]["anyOf"][0]["exclusiveMinimum"] == 0
    assert "exactly one" in claim["description"]
    assert "claim" in schema["CheckCreate"]["properties"] and "claim" in schema["MonitorCreate"]["properties"]
    assert "claim" in schema["AlarmRead"]["properties"]


def test_claim_period_step_keeps_its_anchor():
    claim = GaussianDP(1.0)
    state = None
    lines = []
    for a, b in [(70, 30), (65, 35), (72, 28)]:
        step = claim_period_step(claim, a, b, 100, state)
        lines.append(step.line)
        state = step.state
    assert [r for r in state["recent"]] == [[70, 30, 100], [65, 35, 100], [72, 28, 100]]
    # period 2 tests the line anchored on period 1, and so on
    expected = line_statistic(65, 35, 100, Line.from_dict(lines[1])).z
    assert claim_period_step(claim, 65, 35, 100, {"recent": [[70, 30, 100]]}).z == pytest.approx(float(expected))
    with pytest.raises(ValueError, match="pure"):
        claim_period_step(claim, 5, 5, 100, None, variance="wald")


def _gdp_switch(database, n, rng, period=0):
    """1-GDP with the right σ before period 4, half of it from then on."""
    return GaussianGDP(mu=1.0, sigma_factor=1.0 if period < 4 else 0.5).sample(database, n, rng)


@pytest.fixture
def gaussian_server():
    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    app = FastAPI()
    app.include_router(endpoint_router({
        "/gdp": (GaussianGDP(mu=1.0).sample, "real"),
        "/gdp-half": (GaussianGDP(mu=1.0, sigma_factor=0.5).sample, "real"),
        "/gdp-switch": (_gdp_switch, "real"),
    }, secret=secret, seed=3))
    with serve_app(app) as base:
        yield base, secret


def _gdp_monitor(client, base, secret, path, event=None):
    mech = client.post("/v1/mechanisms", json={"name": f"g-{uuid.uuid4().hex[:6]}", "sampling_url": f"{base}{path}",
                                               "output_kind": "real", "timeout_seconds": 2, "secret": secret})
    assert mech.status_code == 201, mech.text
    body = {"name": "gdp", "mechanism_id": mech.json()["id"], "claim": {"gdp_mu": 1.0}, "horizon": 50,
            "samples_per_period": 500, "period_seconds": 60, "outputs_window": 0, "alarm_snapshot_samples": 0,
            "checks": [{"x": [-1.0], "x_prime": [1.0], "event": event or {"kind": "interval", "high": 0.0}}]}
    mon = client.post("/v1/monitors", json=body)
    assert mon.status_code == 201, mon.text
    return mon.json()


def test_periods_under_a_gdp_claim(client, db, gaussian_server, make_worker, arun):  # noqa: F811
    base, secret = gaussian_server
    mon = _gdp_monitor(client, base, secret, "/gdp")
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 4))
    with db() as session:
        rows = session.scalars(select(PeriodCheck).join(PeriodRun).where(PeriodRun.monitor_id == uuid.UUID(mon["id"]))
                               .order_by(PeriodRun.seq)).all()
        assert len(rows) == 4
        # recompute every period's z from the counts with the anchored line
        state = None
        for row in rows:
            step = claim_period_step({"gdp_mu": 1.0}, row.a, row.b, row.n, state)
            state = step.state
            assert row.z == pytest.approx(step.z) and row.line == step.line and row.claim == {"gdp_mu": 1.0}
        check = session.scalars(select(Check).where(Check.monitor_id == uuid.UUID(mon["id"]))).one()
        assert check.claim_state["recent"] == [[r.a, r.b, r.n] for r in rows]
    periods = client.get(f"/v1/monitors/{mon['id']}/periods").json()["items"]
    assert periods[0]["checks"][0]["claim"] == {"gdp_mu": 1.0}
    assert set(periods[0]["checks"][0]["line"]) == {"orientation", "slope", "intercept"}
    status = client.get(f"/v1/monitors/{mon['id']}/status").json()
    assert status["checks"][0]["line"] == periods[0]["checks"][0]["line"]
    assert client.get(f"/v1/monitors/{mon['id']}").json()["state"] == "active"


def test_a_halved_sigma_alarms_with_the_claim_in_the_webhook(client, db, gaussian_server, make_worker, arun):  # noqa: F811
    base, secret = gaussian_server
    client.post("/v1/webhooks", json={"url": "https://hooks.example.org/x", "event_types": ["alarm.firing"]})
    mon = _gdp_monitor(client, base, secret, "/gdp-half")
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 6))
    alarms = client.get("/v1/alarms").json()["items"]
    assert len(alarms) == 1 and alarms[0]["claim"] == {"gdp_mu": 1.0} and alarms[0]["monitor_id"] == mon["id"]
    with db() as session:
        message = session.scalars(select(WebhookMessage).where(WebhookMessage.event_type == "alarm.firing")).one()
        data = message.payload["data"]
        assert data["claim"] == {"gdp_mu": 1.0} and data["labels"]["claim"] == "1-GDP"
        assert "1-GDP" in data["annotations"]["summary"]
    assert np.isfinite(alarms[0]["z"])


@pytest.mark.slow
def test_auto_event_under_a_gdp_claim_alarms_with_the_claims_terms(tmp_path):
    """Discovery picks a claim-aware tail event while calibrating (σ correct), σ is halved at
    period 4, the monitor alarms, and the alarm's snapshot states the breach in μ."""
    import time

    import httpx

    from app.reference.gaussian import CLAIM_SCENARIOS
    from tests.e2e.test_e2e import build_service, wait_for_state

    service, mechanism_secret, key = build_service(tmp_path, change_period=4, discovery_samples=4_000,
                                                   discovery_fresh_samples=4_000)
    sc = CLAIM_SCENARIOS["j"]
    with serve_app(service, lifespan="on") as base:
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        mech = api.post("/v1/mechanisms", json={"name": "gdp", "sampling_url": f"{base}/reference/scenarios/j",
                                                "output_kind": "real", "secret": mechanism_secret})
        assert mech.status_code == 201, mech.text
        monitor = api.post("/v1/monitors", json={
            "name": "gdp auto", "mechanism_id": mech.json()["id"], "claim": sc.claim,
            "checks": [{"x": sc.x, "x_prime": sc.x_prime, "event": {"kind": "auto"}}],
            "horizon": 50, "samples_per_period": 1000, "period_seconds": 1, "alarm_snapshot_samples": 10_000})
        assert monitor.status_code == 201, monitor.text
        monitor_id = monitor.json()["id"]
        status = wait_for_state(api, monitor_id, {"calibrating"}, 60)
        assert status["state"] == "active", status
        check = status["checks"][0]
        assert check["event"]["kind"] == "interval" and check["discovery"]["claim"] == {"gdp_mu": 1.0}
        status = wait_for_state(api, monitor_id, {"active"}, 60)
        assert status["state"] == "alarm" and status["t"] >= 4, status
        deadline = time.monotonic() + 60
        alarms = []
        while time.monotonic() < deadline:
            alarms = api.get("/v1/alarms", params={"monitor_id": monitor_id}).json()["items"]
            if alarms and alarms[0]["evidence"]:
                break
            time.sleep(0.5)
    evidence = alarms[0]["evidence"]
    assert alarms[0]["claim"] == {"gdp_mu": 1.0}
    assert evidence["claim"] == {"gdp_mu": 1.0} and evidence["claim_terms"]["refutes"] is True
    assert evidence["claim_terms"]["mu_lower_bound"] > 1.0 and "contradict 1-GDP" in evidence["claim_terms"]["statement"]


def test_auto_event_under_a_gdp_claim_is_discovered_and_alarms(client, db, gaussian_server, make_worker, arun):  # noqa: F811
    base, secret = gaussian_server
    mon = _gdp_monitor(client, base, secret, "/gdp-switch", event={"kind": "auto"})
    assert mon["state"] == "calibrating"
    # discovery_samples is discovery's budget per database: half chooses the event, half scores it
    worker, clock = make_worker(discovery_samples=8_000)
    assert arun(worker.tick_calibration()) == 1
    status = client.get(f"/v1/monitors/{mon['id']}/status").json()
    assert status["state"] == "active"
    check = status["checks"][0]
    assert check["event"]["kind"] == "interval" and check["discovery"]["claim"] == {"gdp_mu": 1.0}
    assert check["discovery"]["samples"] == {"choose": 4_000, "bound": 4_000}
    arun(run_ticks(worker, clock, 10))
    status = client.get(f"/v1/monitors/{mon['id']}/status").json()
    periods = client.get(f"/v1/monitors/{mon['id']}/periods").json()["items"]
    assert status["state"] == "alarm" and status["t"] >= 4, (check["event"], [(p["t"], p["checks"][0]["a"], p["checks"][0]["b"], p["checks"][0]["z"]) for p in periods])
