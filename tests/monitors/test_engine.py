"""The engine: claiming, running and recording periods; failures; horizons; leases; webhooks.

The worker is driven tick by tick with a fake clock (no APScheduler, no waiting), against real
sampling endpoints served on loopback, on both database backends.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import func, select
from standardwebhooks import Webhook

from app.models.alarms import WebhookMessage
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.monitors.leases import claim_monitors
from app.reference.mechanisms import Laplace, LaplaceSmallerScale, RNMReportValue
from app.reference.server import endpoint_router
from app.scheduler.worker import Worker
from app.stats.aggregator import weighted_statistic_path
from tests.support.sampling_server import serve_app

BOUNDARY_EVENT = {"kind": "interval", "low": None, "high": 0.0}  # p = e^eps q exactly for Laplace(1/eps)
X, X_PRIME = [0.0], [1.0]


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _laplace_switch(change_period: int):
    before, after = Laplace(epsilon=1.0), LaplaceSmallerScale(epsilon=1.0, scale_factor=0.5)

    def sample(database, n, rng, period=0):
        return (before if period < change_period else after).sample(database, n, rng)

    return sample


def _bad_app() -> FastAPI:
    """Endpoints that misbehave in every way the engine must survive."""
    app = FastAPI()

    async def body_n(request: Request) -> int:
        return json.loads(await request.body())["n"]

    @app.post("/garbage")
    async def garbage() -> Response:
        return Response(b"{not json", media_type="application/json")

    @app.post("/wrong-count")
    async def wrong_count(request: Request) -> Response:
        n = await body_n(request)
        return Response(json.dumps({"samples": [0.0] * (n - 1)}), media_type="application/json")

    @app.post("/nan")
    async def nan(request: Request) -> Response:
        n = await body_n(request)
        return Response('{"samples": [NaN' + ", 0.0" * (n - 1) + "]}", media_type="application/json")

    @app.post("/strings")
    async def strings(request: Request) -> Response:
        n = await body_n(request)
        return Response(json.dumps({"samples": ["x"] * n}), media_type="application/json")

    @app.post("/error")
    async def error() -> Response:
        return Response(b"boom", status_code=500)

    @app.post("/slow")
    async def slow() -> Response:
        await asyncio.sleep(3)
        return Response(b'{"samples": []}', media_type="application/json")

    @app.post("/huge")
    async def huge() -> Response:
        return Response(b'{"samples": [' + b"0.0," * 400_000 + b"0.0]}", media_type="application/json")

    return app


@pytest.fixture
def session_factory(backend, db_url, request):
    """Real commits on both backends: the worker runs periods concurrently on several connections,
    which the outer-transaction pattern of the API tests cannot host. Postgres tables are emptied
    after each test."""
    from sqlalchemy import text

    from app.db import make_engine, make_session_factory
    from app.models import load_models

    if backend == "sqlite":
        engine = make_engine(db_url)
        yield make_session_factory(engine)
        engine.dispose()
        return
    engine = request.getfixturevalue("postgres_engine")
    yield make_session_factory(engine)
    tables = ", ".join(t.name for t in load_models().metadata.sorted_tables)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {tables} CASCADE"))


@pytest.fixture
def engine_settings(settings):
    return settings.model_copy(update={"sampling_max_attempts": 2, "sampling_backoff_seconds": 0.05,
                                       "sampling_max_bytes": 1_000_000, "degraded_after_failures": 3})


@pytest.fixture
def mechanism_server():
    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # fixed, valid base64 of 24 bytes
    app = FastAPI()
    app.include_router(endpoint_router({
        "/laplace": (Laplace(epsilon=1.0).sample, "real"),
        # the same mechanism on a route of its own: each route draws from its own seeded stream, so a
        # test with two monitors gives each one its own draws, whatever order their requests arrive in
        "/laplace-b": (Laplace(epsilon=1.0).sample, "real"),
        "/laplace-switch": (_laplace_switch(6), "real"),
        "/rnm-value": (RNMReportValue(epsilon=1.0).sample, "real"),
    }, secret=secret, seed=2))
    with serve_app(app) as base:
        yield base, secret


@pytest.fixture
def bad_server():
    with serve_app(_bad_app()) as base:
        yield base


def make_monitor(client, base: str, path: str, secret: str | None = None, **overrides) -> dict:
    mech_body = {"name": f"m-{uuid.uuid4().hex[:6]}", "sampling_url": f"{base}{path}", "output_kind": "real",
                 "timeout_seconds": 0.5}
    if secret:
        mech_body["secret"] = secret
    mech = client.post("/v1/mechanisms", json=mech_body)
    assert mech.status_code == 201, mech.text
    body = {"name": "laplace", "mechanism_id": mech.json()["id"], "epsilon": 1.0, "horizon": 50,
            "samples_per_period": 200, "period_seconds": 60,
            "checks": [{"x": X, "x_prime": X_PRIME, "event": BOUNDARY_EVENT}], **overrides}
    mon = client.post("/v1/monitors", json=body)
    assert mon.status_code == 201, mon.text
    return mon.json()


async def run_ticks(worker: Worker, clock: FakeClock, ticks: int, period: float = 60) -> None:
    for _ in range(ticks):
        await worker.tick_periods()
        await worker.drain()
        clock.advance(period)


@pytest.fixture
def arun():
    """Run coroutines on one event loop for the whole test (the HTTP pool belongs to it)."""
    with asyncio.Runner() as runner:
        yield runner.run


@pytest.fixture
def make_worker(engine_settings, session_factory, arun):
    workers = []

    def build(start: datetime | None = None, **overrides) -> tuple[Worker, FakeClock]:
        clock = FakeClock(start or datetime.now(UTC) + timedelta(milliseconds=5))
        worker = Worker(engine_settings.model_copy(update=overrides), session_factory, clock=clock)
        arun(worker.open())
        workers.append(worker)
        return worker, clock

    yield build
    for w in workers:
        if w.http is not None:
            arun(w.http.aclose())


def _monitor(db, monitor_id: str) -> Monitor:
    with db() as session:
        return session.get(Monitor, uuid.UUID(monitor_id))


def test_periods_advance_and_the_stored_detector_matches_the_batch_formula(client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 5))
    m = _monitor(db, mon["id"])
    assert (m.state, m.t, m.consecutive_failures) == ("active", 5, 0)
    with db() as session:
        runs = session.scalars(select(PeriodRun).where(PeriodRun.monitor_id == m.id).order_by(PeriodRun.seq)).all()
        assert [r.t for r in runs] == [1, 2, 3, 4, 5] and all(r.status == "ok" for r in runs)
        # Slots follow the schedule, not the time the period ran.
        steps = {(b.scheduled_for - a.scheduled_for).total_seconds() for a, b in zip(runs, runs[1:])}
        assert steps == {60.0}
        rows = session.scalars(select(PeriodCheck).join(PeriodRun).where(PeriodRun.monitor_id == m.id)
                               .order_by(PeriodRun.seq)).all()
        z = np.array([r.z for r in rows])
        np.testing.assert_allclose([r.statistic for r in rows], weighted_statistic_path(z, 50, 0.25))
        check = session.scalars(select(Check).where(Check.monitor_id == m.id)).one()
        # O(1) state on the check; the prefix sums are in the period rows.
        assert check.detector_state["t"] == 5 and "prefix_sums" not in check.detector_state
        np.testing.assert_allclose(check.detector_state["s"], np.sum(z))
        np.testing.assert_allclose([r.prefix_sum for r in rows], np.cumsum(z))
        assert all(0 < r.a < 200 and 0 < r.b < 200 for r in rows)
    periods = client.get(f"/v1/monitors/{mon['id']}/periods").json()["items"]
    assert len(periods) == 5


def test_a_smaller_noise_scale_raises_an_alarm_and_a_signed_webhook(client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    received: list[dict] = []
    receiver = FastAPI()
    hook_secret: dict[str, str] = {}

    @receiver.post("/hook")
    async def hook(request: Request) -> Response:
        received.append(Webhook(hook_secret["s"]).verify(await request.body(), dict(request.headers)))
        return Response(status_code=204)

    with serve_app(receiver) as hook_base:
        created = client.post("/v1/webhooks", json={"url": f"{hook_base}/hook", "event_types": ["alarm.firing"]})
        hook_secret["s"] = created.json()["secret"]
        mon = make_monitor(client, base, "/laplace-switch", secret, samples_per_period=1000)
        worker, clock = make_worker()
        arun(run_ticks(worker, clock, 20))
        m = _monitor(db, mon["id"])
        assert m.state == "alarm"
        assert 6 <= m.t < 20  # not before the change at period 6, and soon after it
        assert arun(worker.tick_outbox()) == 0  # the alarm's webhook waits for its snapshot
        assert arun(worker.tick_snapshots()) == 1
        arun(worker.tick_outbox())
    assert len(received) == 1 and received[0]["type"] == "alarm.firing"
    data = received[0]["data"]
    assert data["status"] == "firing" and data["labels"]["monitor_id"] == mon["id"]
    # Scale 0.5 doubles the true epsilon. What raised the alarm comes first: the detector's window,
    # its pooled counts, and an exact bound on epsilon above the claimed 1.
    evidence = data["evidence"]
    assert evidence["kind"] == "privacy" and data["labels"]["kind"] == "privacy"
    # the fresh outputs the snapshot drew after the alarm confirm it: the label a receiver routes on
    assert evidence["confirmation"]["confirms"] is True
    assert data["labels"]["confirmed"] == "true" and data["verdict"]["confirmed"] is True
    check = evidence["check"]
    assert check["exceeds_claim"] is True and check["epsilon_lower_bound"] > 1.0, check
    assert check["window"]["to_t"] == m.t and check["window"]["from_t"] == m.t - check["window"]["lag"] + 1
    assert check["counts"]["n"] == 1000 * check["window"]["lag"]
    # The headline is the anytime-valid bound (valid at the alarm, a stopping time); the window's
    # score bound is descriptive, and the exact bound on the same window sits at or below it.
    assert check["method"] == "confidence_sequence" and check["anytime"]["method"] == "confidence_sequence"
    assert check["window_bound"]["method"] == "score"
    assert check["exact"]["epsilon_lower_bound"] <= check["window_bound"]["lower_bound"]
    assert check["exact"]["p_lower"] <= check["p_hat"] and check["exact"]["q_upper"] >= check["q_hat"]
    # Then the snapshot, a separate estimator: here its bound exceeds the claim too.
    snapshot = evidence["snapshot"]
    assert snapshot["role"] == "separate_estimator" and snapshot["lower_bound"] > 1.0, snapshot
    assert snapshot["verdict"] == "exceeds_claim" and "at best" not in evidence["statement"]
    assert evidence["statement"].startswith(check["statement"])
    alarms = client.get("/v1/alarms").json()["items"]
    assert len(alarms) == 1 and alarms[0]["t"] == m.t and alarms[0]["kind"] == "privacy"
    assert alarms[0]["evidence"]["check"]["epsilon_lower_bound"] == check["epsilon_lower_bound"]
    with db() as session:
        assert session.scalar(select(func.count()).select_from(WebhookMessage)
                              .where(WebhookMessage.status == "delivered")) == 1


FAILURES = [
    ("/garbage", "invalid_json"),
    ("/wrong-count", "wrong_count"),
    ("/nan", "non_finite"),
    ("/strings", "wrong_type"),
    ("/error", "http_status"),
    ("/slow", "timeout"),
    ("/huge", "oversized"),
    ("closed-port", "connection_error"),
]


# Every failure on SQLite; on Postgres two of them (parsing does not depend on the backend).
@pytest.mark.parametrize(
    "backend,path,reason",
    [("sqlite", p, r) for p, r in FAILURES] + [("postgres", p, r) for p, r in FAILURES if p in ("/garbage", "/slow")],
    indirect=["backend"],
)
def test_a_misbehaving_endpoint_never_changes_the_detector(client, db, bad_server, make_worker, path, reason, arun):
    from tests.support.sampling_server import free_port

    base = f"http://127.0.0.1:{free_port()}" if path == "closed-port" else bad_server
    mon = make_monitor(client, base, "/x" if path == "closed-port" else path)
    with db() as session:
        before = session.scalars(select(Check).where(Check.monitor_id == uuid.UUID(mon["id"]))).one().detector_state
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 1))
    m = _monitor(db, mon["id"])
    assert (m.t, m.consecutive_failures, m.state) == (0, 1, "active")
    with db() as session:
        check = session.scalars(select(Check).where(Check.monitor_id == m.id)).one()
        assert check.detector_state == before
        assert session.scalar(select(func.count()).select_from(PeriodCheck)) == 0
    period = client.get(f"/v1/monitors/{mon['id']}/periods").json()["items"][0]
    assert period["status"] == "failed" and period["failure_reason"] == reason, period
    assert period["t"] is None and period["failure_detail"]


def test_repeated_failures_degrade_then_a_good_period_restores(client, db, bad_server, mechanism_server, make_worker, arun):
    client.post("/v1/webhooks", json={"url": "https://hooks.example.org/x", "event_types": ["monitor.degraded"]})
    mon = make_monitor(client, bad_server, "/garbage")
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 3))
    m = _monitor(db, mon["id"])
    assert (m.state, m.t, m.consecutive_failures) == ("degraded", 0, 3)
    with db() as session:
        msgs = session.scalars(select(WebhookMessage).where(WebhookMessage.event_type == "monitor.degraded")).all()
        assert len(msgs) == 1 and msgs[0].payload["data"]["failure_reason"] == "invalid_json"
    base, secret = mechanism_server
    assert client.patch(f"/v1/mechanisms/{mon['mechanism_id']}", json={"sampling_url": f"{base}/laplace"}).status_code == 200
    with db() as session:  # the endpoint now verifies signatures: give the mechanism the server's secret
        from app.models.mechanisms import Mechanism
        session.get(Mechanism, uuid.UUID(mon["mechanism_id"])).secret = secret
    arun(run_ticks(worker, clock, 1))
    m = _monitor(db, mon["id"])
    assert (m.state, m.t, m.consecutive_failures) == ("active", 1, 0)


def test_horizon_end_completes_or_renews_with_a_smaller_level(client, db, mechanism_server, make_worker, arun):
    client.post("/v1/webhooks", json={"url": "https://hooks.example.org/x", "event_types": ["monitor.completed"]})
    base, secret = mechanism_server
    plain = make_monitor(client, base, "/laplace", secret, horizon=10)
    renewing = make_monitor(client, base, "/laplace-b", secret, horizon=10, renew=True)
    worker, clock = make_worker()
    # alpha_1 = 6 alpha / pi^2 is off the shipped grid: the renewing monitor calibrates first.
    assert _monitor(db, renewing["id"]).state == "calibrating"
    assert arun(worker.tick_calibration()) == 1
    first = _monitor(db, renewing["id"])
    assert first.state == "active" and first.threshold_source == "monte_carlo" and first.lease_owner is None
    arun(run_ticks(worker, clock, 11))
    done = _monitor(db, plain["id"])
    assert (done.state, done.t) == ("completed", 10)
    with db() as session:
        assert session.scalar(select(func.count()).select_from(WebhookMessage)
                              .where(WebhookMessage.event_type == "monitor.completed")) == 1
    again = _monitor(db, renewing["id"])
    assert again.horizon_index == 2 and again.t == 0
    assert again.horizon_alpha == pytest.approx(6 * 0.05 / (np.pi**2 * 4))
    assert again.state == "calibrating"
    arun(worker.tick_calibration())
    again = _monitor(db, renewing["id"])
    assert again.state == "active" and again.threshold > first.threshold
    arun(run_ticks(worker, clock, 1))
    assert _monitor(db, renewing["id"]).t == 1


def test_missed_slots_are_coalesced_into_one_period(client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    m = _monitor(db, mon["id"])
    worker, clock = make_worker(start=m.next_run_at + timedelta(seconds=60 * 10 + 5))  # 10 slots late
    arun(run_ticks(worker, clock, 1, period=0))
    m2 = _monitor(db, mon["id"])
    assert m2.t == 1
    assert m2.last_period_at == m.next_run_at + timedelta(seconds=600)
    assert m2.next_run_at == m.next_run_at + timedelta(seconds=660)


def test_a_period_is_written_only_under_the_lease(client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    worker, clock = make_worker()
    with worker.session_factory() as session:
        ids = claim_monitors(session, worker_id=worker.settings.worker_id, states=("active",), now=clock(),
                             lease_seconds=worker.settings.lease_seconds, limit=10)
        session.commit()
    assert [str(i) for i in ids] == [mon["id"]]
    plan = worker.runner.plan(ids[0], clock())
    outputs = arun(worker.runner.sample(plan))
    with db() as session:  # another replica took over (our lease expired and was re-claimed)
        session.get(Monitor, ids[0]).lease_owner = "other-worker"
    outcome = worker.runner.write_success(plan, outputs, clock(), 0.1)
    assert outcome.outcome == "lost_lease"
    with db() as session:
        assert session.scalar(select(func.count()).select_from(PeriodRun)) == 0
        assert session.get(Monitor, ids[0]).t == 0


def test_paused_monitors_are_not_claimed_and_resume_on_the_next_slot(client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    assert client.post(f"/v1/monitors/{mon['id']}/pause").status_code == 200
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 2))
    assert _monitor(db, mon["id"]).t == 0
    assert client.post(f"/v1/monitors/{mon['id']}/resume").status_code == 200
    clock.now = datetime.now(UTC) + timedelta(seconds=61)
    arun(run_ticks(worker, clock, 1))
    assert _monitor(db, mon["id"]).t == 1


def test_webhook_retries_back_off_and_410_disables(client, db, make_worker, arun):
    from app.alarms.delivery import RETRY_DELAYS_SECONDS, retry_delay

    statuses = iter([503, 410])
    app = FastAPI()

    @app.post("/hook")
    async def hook() -> Response:
        return Response(status_code=next(statuses))

    with serve_app(app) as base:
        created = client.post("/v1/webhooks", json={"url": f"{base}/hook", "event_types": ["alarm.firing"]}).json()
        assert client.post(f"/v1/webhooks/{created['id']}/test").status_code in (200, 201, 202)
        worker, _ = make_worker()
        t0 = datetime.now(UTC)
        arun(worker.tick_outbox())
        with db() as session:
            msg = session.scalars(select(WebhookMessage)).one()
            assert (msg.status, msg.attempts, msg.last_status_code) == ("pending", 1, 503)
            delay = (msg.next_attempt_at - t0).total_seconds()
            assert RETRY_DELAYS_SECONDS[0] * 0.8 - 1 <= delay <= RETRY_DELAYS_SECONDS[0] * 1.2 + 1
            msg.next_attempt_at = datetime.now(UTC) - timedelta(seconds=1)
        arun(worker.tick_outbox())
    deliveries = client.get(f"/v1/webhooks/{created['id']}/deliveries").json()["items"]
    assert deliveries[0]["status"] == "disabled" and deliveries[0]["attempts"] == 2
    hook_now = client.get(f"/v1/webhooks/{created['id']}").json()
    assert hook_now["enabled"] is False and "410" in hook_now["disabled_reason"]
    assert retry_delay(len(RETRY_DELAYS_SECONDS) + 1) is None
    assert 0.8 * 43200 <= retry_delay(len(RETRY_DELAYS_SECONDS)) <= 1.2 * 43200


def test_raw_outputs_are_kept_for_the_window_and_pruned(client, db, mechanism_server, make_worker, arun):
    from app.models.snapshots import PeriodOutputs

    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret, outputs_window=3)
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 5))
    with db() as session:
        rows = session.scalars(select(PeriodOutputs).where(PeriodOutputs.monitor_id == uuid.UUID(mon["id"]))).all()
        assert sorted({r.seq for r in rows}) == [3, 4, 5]
        assert len(rows) == 6  # x and x' each period
        assert all(r.encoding == "f4" and len(r.data) == 4 * 200 for r in rows)


def test_a_monitor_queues_one_scheduled_snapshot_at_a_time(client, db, mechanism_server, make_worker, arun):
    """snapshot_every 1 with no snapshot computed meanwhile: one pending, not one per period
    (before: five); a new one is queued once it has been claimed."""
    from app.models.snapshots import Snapshot

    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret, outputs_window=3, snapshot_every=1)
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 5))

    def pending() -> int:
        with db() as session:
            return len(session.scalars(select(Snapshot).where(Snapshot.monitor_id == uuid.UUID(mon["id"]),
                                                              Snapshot.status == "pending")).all())

    assert pending() == 1
    assert len(worker.snapshots.claim(5)) == 1
    arun(run_ticks(worker, clock, 2))
    assert pending() == 1


def test_on_demand_snapshot_is_a_job_with_curves(client, db, mechanism_server, make_worker, arun, tenants):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret, samples_per_period=1000, outputs_window=10)
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 10))
    created = client.post(f"/v1/monitors/{mon['id']}/snapshots", json={})
    assert created.status_code == 202, created.text
    job = created.json()
    assert job["status"] == "pending" and created.headers["location"] == f"/v1/snapshots/{job['id']}"
    assert job["state"] == "queued" and job["verdict"] is None  # the jobs' vocabulary; `status` its alias
    assert arun(worker.tick_snapshots()) == 1
    snap = client.get(f"/v1/snapshots/{job['id']}").json()
    assert snap["status"] == "done", snap["error"]
    assert snap["state"] == "succeeded"
    # A correct Laplace(1) mechanism: the loss estimate is near 1 and the bound does not exceed it.
    assert 0.5 < snap["epsilon_hat"] < 2.0
    assert snap["lower_bound"] < 1.0
    verdict = snap["verdict"]  # one verdict: its sentence and every estimator agree
    assert verdict["refutes"] == any(e["refutes"] for e in verdict["estimators"])
    if not verdict["refutes"]:
        assert verdict["sentence"].startswith("Not refuted") and "does not show" in verdict["sentence"]
    pair = snap["result"]["pairs"][0]
    assert {"grid", "loss", "f_x", "f_xp"} <= set(pair["loss_curve"]) and len(pair["loss_curve"]["loss"]) <= 400
    assert len(pair["privacy_profile"]["delta"]) == len(pair["privacy_profile"]["epsilons"])
    assert pair["samples"]["choose"] == [5000, 5000] and pair["samples"]["bound"] == 5000
    listed = client.get(f"/v1/monitors/{mon['id']}/snapshots").json()["items"]
    assert [s["id"] for s in listed] == [job["id"]] and "result" not in listed[0]
    from fastapi.testclient import TestClient
    other = TestClient(client.app, headers=tenants[1].headers)
    assert other.get(f"/v1/snapshots/{job['id']}").status_code == 404
    assert other.post(f"/v1/monitors/{mon['id']}/snapshots", json={}).status_code == 404


def test_a_snapshot_without_data_fails_clearly(client, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    job = client.post(f"/v1/monitors/{mon['id']}/snapshots", json={}).json()
    worker, _ = make_worker()
    arun(worker.tick_snapshots())
    snap = client.get(f"/v1/snapshots/{job['id']}").json()
    assert snap["status"] == "failed" and "no outputs are kept" in snap["error"]


def test_a_patched_n_applies_from_the_next_period_and_the_detector_carries_on(client, db, mechanism_server,
                                                                             make_worker, arun):
    """PATCH /v1/monitors/{id} with a new n mid-horizon: the same horizon goes on (t continues, the
    statistic is eq. 13 over every period's z), and each period draws its own n."""
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 3))
    patched = client.patch(f"/v1/monitors/{mon['id']}", json={"samples_per_period": 500})
    assert patched.status_code == 200 and patched.json()["t"] == 3
    arun(run_ticks(worker, clock, 3))
    m = _monitor(db, mon["id"])
    assert (m.state, m.t, m.horizon_index, m.samples_per_period) == ("active", 6, 1, 500)
    with db() as session:
        rows = session.execute(select(PeriodRun.t, PeriodRun.horizon_index, PeriodCheck)
                               .join(PeriodCheck, PeriodCheck.period_run_id == PeriodRun.id)
                               .where(PeriodRun.monitor_id == m.id).order_by(PeriodRun.seq)).all()
        assert [(t, h) for t, h, _ in rows] == [(t, 1) for t in range(1, 7)]
        checks = [row[2] for row in rows]
        assert [c.n for c in checks] == [200] * 3 + [500] * 3
        assert all(0 < c.a < c.n and 0 < c.b < c.n for c in checks)
        z = np.array([c.z for c in checks])
        np.testing.assert_allclose([c.statistic for c in checks], weighted_statistic_path(z, 50, 0.25))
        np.testing.assert_allclose([c.threshold for c in checks], mon["threshold"])
