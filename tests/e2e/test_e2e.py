"""End to end: the real service (uvicorn, API, worker) on SQLite, a reference Laplace mechanism
served on loopback that switches to a smaller noise scale at period 20, and a local webhook
receiver that verifies the alarm's signature with ``standardwebhooks``.

Runs in real time with one-second periods (about 25 s).
"""

from __future__ import annotations

import threading
import time

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import Response
from standardwebhooks import Webhook

from app.main import create_app
from app.reference.scenarios import SCENARIOS
from app.reference.server import reference_router
from app.sampling.protocol import generate_secret
from app.scheduler import attach_worker
from app.settings import Settings
from tests.support.sampling_server import serve_app

CHANGE_PERIOD = 20


def build_service(tmp_path, change_period: int, **overrides):  # noqa: ANN001, ANN201
    """The real app with a worker, the reference endpoints mounted, and a tenant's key."""
    from app.auth.service import create_tenant_with_key
    from app.db import make_engine, make_session_factory, run_migrations

    mechanism_secret = generate_secret()
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/e2e.sqlite3",  # type: ignore[call-arg]
                        allow_networks=["127.0.0.0/8"], tick_seconds=0.2, lease_seconds=10,
                        log_level="WARNING", worker_id="e2e", **overrides)
    service = create_app(settings)
    attach_worker(service, settings)
    service.include_router(reference_router(mechanism_secret, change_period=change_period), prefix="/reference")
    run_migrations(settings.database_url)
    engine = make_engine(settings.database_url)
    with make_session_factory(engine)() as session:
        _, key = create_tenant_with_key(session, "acme", "e2e")
        session.commit()
    engine.dispose()
    return service, mechanism_secret, key


def wait_for_state(api: httpx.Client, monitor_id: str, leave: set[str], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        status = api.get(f"/v1/monitors/{monitor_id}/status").json()
        if status["state"] not in leave:
            break
        time.sleep(0.5)
    return status


def wait_for_alarm_snapshot(api: httpx.Client, monitor_id: str, timeout: float) -> dict:
    """The monitor's alarm snapshot once it is ``done`` or ``failed`` (or as it is at ``timeout``)."""
    deadline = time.monotonic() + timeout
    snapshot: dict = {}
    while time.monotonic() < deadline:
        listed = api.get(f"/v1/monitors/{monitor_id}/snapshots").json()["items"]
        ours = [s for s in listed if s["trigger"] == "alarm"]
        if ours:
            snapshot = api.get(f"/v1/snapshots/{ours[0]['id']}").json()
            if snapshot["status"] in ("done", "failed"):
                return snapshot
        time.sleep(0.5)
    return snapshot


def test_laplace_change_raises_an_alarm_and_a_verified_webhook(tmp_path):
    service, mechanism_secret, key = build_service(tmp_path, CHANGE_PERIOD)

    received: list[dict] = []
    got_alarm = threading.Event()
    receiver = FastAPI()
    hook_secret: dict[str, str] = {}

    @receiver.post("/hooks")
    async def hook(request: Request) -> Response:
        payload = Webhook(hook_secret["secret"]).verify(await request.body(), dict(request.headers))
        received.append(payload)
        if payload["type"] == "alarm.firing":
            got_alarm.set()
        return Response(status_code=204)

    scenario = SCENARIOS["a"]  # Laplace -> smaller noise scale (true epsilon 1/0.9)
    with serve_app(receiver) as hook_base, serve_app(service, lifespan="on") as base:
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=10)
        hook_created = api.post("/v1/webhooks", json={"url": f"{hook_base}/hooks", "event_types": ["alarm.firing"]})
        assert hook_created.status_code == 201, hook_created.text
        hook_secret["secret"] = hook_created.json()["secret"]
        mech = api.post("/v1/mechanisms", params={"validate": "true"}, json={
            "name": "laplace", "sampling_url": f"{base}/reference/scenarios/a", "output_kind": "real",
            "secret": mechanism_secret, "probe_database": scenario.x})
        assert mech.status_code == 201, mech.text
        monitor = api.post("/v1/monitors", json={
            "name": "laplace sum", "mechanism_id": mech.json()["id"], "epsilon": scenario.epsilon,
            "checks": [{"x": scenario.x, "x_prime": scenario.x_prime, "event": scenario.event.model_dump(mode="json")}],
            "horizon": 100, "samples_per_period": 5000, "period_seconds": 1})
        assert monitor.status_code == 201, monitor.text
        monitor_id = monitor.json()["id"]

        status = wait_for_state(api, monitor_id, {"active"}, 90)
        assert status["state"] == "alarm", status
        assert status["t"] >= CHANGE_PERIOD, "no alarm before the change"
        assert got_alarm.wait(15), "the webhook did not arrive"
        alarms = api.get("/v1/alarms", params={"monitor_id": monitor_id}).json()["items"]
        periods = api.get(f"/v1/monitors/{monitor_id}/periods", params={"limit": 100}).json()["items"]
    alarm = received[0]["data"]
    assert alarm["status"] == "firing" and alarm["labels"]["monitor_id"] == monitor_id
    assert alarm["fingerprint"] and alarm["startsAt"] and alarm["generatorURL"]
    assert len(alarms) == 1 and alarms[0]["t"] == status["t"]
    assert alarms[0]["statistic"] > alarms[0]["threshold"]
    assert all(p["status"] == "ok" for p in periods) and len(periods) == status["t"]


def test_auto_event_on_svt2_to_svt4_alarms_with_a_snapshot_above_the_claim(tmp_path):
    """MPL snapshots after an auto event. The check's event is discovered while calibrating (on SVT 2),
    the deployment then changes to SVT 4, the monitor (re-discovering every 5 periods, since the event
    chosen on SVT 2 may not be the one SVT 4 breaks) alarms, and the alarm's evidence bounds ε above
    the claim, followed by its snapshot."""
    service, mechanism_secret, key = build_service(tmp_path, change_period=5, discovery_samples=20_000,
                                                   discovery_fresh_samples=50_000)
    scenario = SCENARIOS["d"]
    with serve_app(service, lifespan="on") as base:
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        mech = api.post("/v1/mechanisms", json={
            "name": "svt", "sampling_url": f"{base}/reference/scenarios/d", "output_kind": "vector",
            "dim": len(scenario.x), "secret": mechanism_secret})
        assert mech.status_code == 201, mech.text
        monitor = api.post("/v1/monitors", json={
            "name": "svt auto", "mechanism_id": mech.json()["id"], "epsilon": scenario.epsilon,
            "checks": [{"x": scenario.x, "x_prime": scenario.x_prime, "event": {"kind": "auto"}}],
            "horizon": 100, "samples_per_period": 2000, "period_seconds": 1, "alarm_snapshot_samples": 50_000,
            "rediscover_every": 5})
        assert monitor.status_code == 201, monitor.text
        monitor_id = monitor.json()["id"]
        assert monitor.json()["state"] == "calibrating"

        status = wait_for_state(api, monitor_id, {"calibrating"}, 60)
        assert status["state"] == "active", status
        discovery = status["checks"][0]["discovery"]
        assert discovery["adopted"] is True and discovery["informative"] is True and discovery["lower_bound"] > 0
        assert status["checks"][0]["event"]["kind"] != "auto" and 0 < discovery["samples"] <= 2 * 20_000

        status = wait_for_state(api, monitor_id, {"active"}, 90)
        check = status["checks"][0]
        assert status["state"] == "alarm", (status["t"], check["event"], check["discovery"].get("lower_bound"),
                                            check["last_statistic"], check["max_statistic"], status.get("threshold"))
        assert status["t"] >= 5
        # The alarm's snapshot draws 50 000 fresh outputs per database: wait for its final state,
        # whatever it is, then assert (its deadline follows its size; a busy machine is slow).
        snapshot = wait_for_alarm_snapshot(api, monitor_id, timeout=300)
        alarms = api.get("/v1/alarms", params={"monitor_id": monitor_id}).json()["items"]
        evidence = alarms[0]["evidence"]
    assert snapshot["status"] == "done", snapshot.get("error")
    assert snapshot["state"] == "succeeded"
    assert alarms[0]["verdict"]["refutes"] is True  # the alarm is the detector's refutation, whatever MPL says
    assert alarms[0]["verdict"]["sentence"].startswith("Refuted")
    assert snapshot["trigger"] == "alarm" and evidence["snapshot"]["snapshot_id"] == snapshot["id"], evidence
    # What raised the alarm: the anytime-valid bound (valid at the alarm; at an aggregator's alarm it
    # may not exclude the claim yet) and the confirmation on the 50 000 fresh outputs per database
    # drawn after the alarm, which contradicts the claim. The snapshot, a separate
    # estimator, may or may not (its LB at SVT 4's t-hat varies around 1-1.5): below the claim it
    # must say that it is the weaker estimator, never that the mechanism is cleared.
    check_ev = evidence["check"]
    assert check_ev["method"] == "confidence_sequence" and 1 <= check_ev["anytime"]["periods"] <= status["t"]
    assert check_ev["exceeds_claim"] == (check_ev["epsilon_lower_bound"] is not None
                                         and check_ev["epsilon_lower_bound"] >= scenario.epsilon)
    assert check_ev["window_bound"]["descriptive"] is True and check_ev["detection"]["kind"] == "level"
    assert evidence["confirmation"]["confirms"] is True and evidence["confirmation"]["counts"]["n"] == 50_000
    assert evidence["confirmation"]["lower_bound"] > scenario.epsilon
    expected = "exceeds_claim" if snapshot["lower_bound"] > scenario.epsilon else "weaker_estimator"
    assert evidence["snapshot"]["verdict"] == expected and evidence["snapshot"]["role"] == "separate_estimator"
    assert "at best" not in evidence["statement"] and evidence["statement"].startswith(evidence["check"]["statement"])
