"""Jobs: discovery and audits run by workers under a lease, with progress, cancellation, retries
after a dead worker, and tenant isolation, on both database backends."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.testclient import TestClient

from app.jobs.runner import JobRunner
from app.models.jobs import Job
from app.sampling.client import SamplingClient
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    FakeClock,
    arun,
    bad_server,
    engine_settings,
    make_worker,
    mechanism_server,
    session_factory,
)
from tests.support.sampling_server import serve_app


def _mechanism(client, url: str, secret: str | None = None, **extra) -> dict:
    body = {"name": f"m-{uuid.uuid4().hex[:6]}", "sampling_url": url, "output_kind": "real", **extra}
    if secret:
        body["secret"] = secret
    response = client.post("/v1/mechanisms", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def _run_jobs(worker, arun) -> int:
    async def go() -> int:
        started = await worker.tick_jobs()
        await worker.drain_jobs()
        return started

    return arun(go())


def test_discovery_is_a_job_with_progress_and_a_result(client, mechanism_server, make_worker, arun, tenants):
    base, secret = mechanism_server
    mech = _mechanism(client, f"{base}/rnm-value", secret)
    answer = client.post(f"/v1/mechanisms/{mech['id']}/discover", json={
        "pattern": "table1", "queries": 5, "budget": 64000, "epsilon": 1.0, "top": 3})
    assert answer.status_code == 202, answer.text
    job = answer.json()
    assert answer.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["state"] == "queued" and job["kind"] == "discovery" and job["mechanism_id"] == mech["id"]
    assert job["params"]["budget"] == 64000 and job["params"]["alpha"] == 0.05 and job["progress"]["fraction"] == 0.0
    worker, _ = make_worker()
    assert _run_jobs(worker, arun) == 1
    done = client.get(f"/v1/jobs/{job['id']}").json()
    assert done["state"] == "succeeded", done
    assert done["progress"] == {"fraction": 1.0, "message": "done"} and done["attempts"] == 1
    assert done["started_at"] and done["finished_at"]
    body = done["result"]
    cands = body["candidates"]
    assert [c["rank"] for c in cands] == [1, 2, 3][: len(cands)] and body["seconds"] > 0
    assert body["samples_used"] <= 64000 * 16  # the budget is per database
    # Report Noisy Max reporting the value has true epsilon 2.5 (k=5): the best candidate shows it.
    assert cands[0]["informative"] is True and cands[0]["lower_bound"] > 1.0 and cands[0]["exceeds_claim"] is True
    assert len(cands[0]["x"]) == 5 and cands[0]["event"]["kind"]
    listed = client.get("/v1/jobs", params={"kind": "discovery", "mechanism_id": mech["id"]}).json()["items"]
    assert [j["id"] for j in listed] == [job["id"]]
    assert client.get("/v1/jobs", params={"state": "queued"}).json()["items"] == []
    other = TestClient(client.app, headers=tenants[1].headers)
    assert other.get(f"/v1/jobs/{job['id']}").status_code == 404
    assert other.post(f"/v1/jobs/{job['id']}/cancel").status_code == 404
    assert other.get("/v1/jobs").json()["items"] == []
    assert other.post(f"/v1/mechanisms/{mech['id']}/discover", json={"pattern": "table1"}).status_code == 404
    assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 409  # finished


def test_bad_requests_and_failing_endpoints(client, bad_server, make_worker, arun):
    mech = _mechanism(client, f"{bad_server}/garbage")
    bad = client.post(f"/v1/mechanisms/{mech['id']}/discover", json={"pattern": "table1", "pairs": [{"x": 1, "x_prime": 2}]})
    assert bad.status_code == 422 and "either" in bad.text
    assert client.post(f"/v1/mechanisms/{mech['id']}/audits", json={"pattern": "table1"}).status_code == 422  # no ε
    assert client.post(f"/v1/mechanisms/{uuid.uuid4()}/audits",
                       json={"pattern": "table1", "epsilon": 1}).status_code == 404
    job = client.post(f"/v1/mechanisms/{mech['id']}/discover", json={"pairs": [{"x": [0], "x_prime": [1]}],
                                                                      "budget": 400, "first_round": 100}).json()
    worker, _ = make_worker()
    _run_jobs(worker, arun)
    failed = client.get(f"/v1/jobs/{job['id']}").json()
    assert failed["state"] == "failed" and "invalid_json" in failed["error"] and failed["result"] is None


def test_an_audit_job_refutes_a_broken_claim(client, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mech = _mechanism(client, f"{base}/rnm-value", secret)
    job = client.post(f"/v1/mechanisms/{mech['id']}/audits", json={
        "pattern": "table1", "queries": 5, "epsilon": 1.0, "budget": 256000}).json()
    assert job["kind"] == "audit"
    worker, _ = make_worker()
    _run_jobs(worker, arun)
    done = client.get(f"/v1/jobs/{job['id']}").json()
    assert done["state"] == "succeeded", done
    result = done["result"]
    assert result["refutes_claim"] is True and result["verdict"] == "refuted" and result["lower_bound"] > 1.0
    assert result["samples_used"] > 0 and result["seconds"] > 0


def test_cancelling_queued_and_running_jobs(client, engine_settings, make_worker, arun):
    gate = asyncio.Event()
    app = FastAPI()

    @app.post("/slow")
    async def slow(request: Request) -> Response:  # answers only after the test lets it
        n = json.loads(await request.body())["n"]
        for _ in range(200):
            if gate.is_set():
                break
            await asyncio.sleep(0.05)
        return Response(json.dumps({"samples": [0.0] * n}), media_type="application/json")

    with serve_app(app) as base:
        mech = _mechanism(client, f"{base}/slow", timeout_seconds=30)
        queued = client.post(f"/v1/mechanisms/{mech['id']}/discover",
                             json={"pairs": [{"x": [0], "x_prime": [1]}], "budget": 400, "first_round": 100}).json()
        cancelled = client.post(f"/v1/jobs/{queued['id']}/cancel")
        assert cancelled.status_code == 202 and cancelled.json()["state"] == "cancelled"
        running = client.post(f"/v1/mechanisms/{mech['id']}/discover",
                              json={"pairs": [{"x": [0], "x_prime": [1]}], "budget": 400, "first_round": 100}).json()
        worker, _ = make_worker(job_lease_seconds=3)  # the heartbeat looks every second

        async def go() -> None:
            assert await worker.tick_jobs() == 1
            await asyncio.sleep(0.3)
            asked = await asyncio.to_thread(client.post, f"/v1/jobs/{running['id']}/cancel")
            assert asked.status_code == 202 and asked.json()["cancel_requested"] is True
            assert asked.json()["state"] == "running"
            await asyncio.wait_for(worker.drain_jobs(), 10)  # stops while still waiting on the endpoint
            gate.set()

        arun(go())
    job = client.get(f"/v1/jobs/{running['id']}").json()
    assert job["state"] == "cancelled" and job["result"] is None and job["finished_at"]


def test_a_dead_workers_job_is_taken_again_then_given_up(client, db, mechanism_server, engine_settings,
                                                         session_factory, arun):
    base, secret = mechanism_server
    mech = _mechanism(client, f"{base}/rnm-value", secret)
    job = client.post(f"/v1/mechanisms/{mech['id']}/discover", json={"pattern": "table1"}).json()
    clock = FakeClock(datetime.now(UTC))
    client_ = SamplingClient()
    first = JobRunner(session_factory, client_, engine_settings.model_copy(update={"worker_id": "a"}),
                      handlers={}, clock=clock)
    second = JobRunner(session_factory, client_, engine_settings.model_copy(update={"worker_id": "b"}),
                       handlers={}, clock=clock)
    assert first.claim(5) == [uuid.UUID(job["id"])]
    assert second.claim(5) == []  # leased by a
    clock.advance(engine_settings.job_lease_seconds + 1)  # a died: its lease expires
    assert second.claim(5) == [uuid.UUID(job["id"])]
    assert first.write_progress(uuid.UUID(job["id"]), 0.5, "late") == "lost"  # a cannot write any more
    for _ in range(2):
        clock.advance(engine_settings.job_lease_seconds + 1)
        claimed = first.claim(5)
    assert claimed == []  # the fourth start exceeds max_attempts
    with db() as session:
        row = session.get(Job, uuid.UUID(job["id"]))
        assert row.state == "failed" and row.attempts == 4 and "lease expired" in row.error
    arun(client_.aclose())
