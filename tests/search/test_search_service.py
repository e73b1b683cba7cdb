"""The search in the service: ``input_domain`` on mechanisms, search jobs with progress and a result,
a monitor that searches every K periods and adds what it finds as a check with its own share of α,
and a finding turned into a check with one call (docs/search.md §2, §5)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from app.models.monitors import Check, Monitor
from app.reference.search_corpus import search_corpus
from app.reference.server import endpoint_router
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    FakeClock,
    arun,
    engine_settings,
    make_worker,
    session_factory,
)
from tests.support.sampling_server import serve_app

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CORPUS = search_corpus()


@pytest.fixture
def corpus_server():
    api = FastAPI()
    routes = {f"/{s}": (CORPUS[s].sample, CORPUS[s].shape) for s in ("empty-returns-zero", "laplace-sum")}
    api.include_router(endpoint_router(routes, secret=SECRET, seed=5))
    with serve_app(api) as base:
        yield base


def _mechanism(client, url: str, **extra) -> dict:
    body = {"name": f"m-{uuid.uuid4().hex[:6]}", "sampling_url": url, "output_kind": "real", "secret": SECRET,
            "timeout_seconds": 10, **extra}
    answer = client.post("/v1/mechanisms", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def _jobs(worker, arun) -> None:
    async def go() -> None:
        await worker.tick_jobs()
        await worker.drain_jobs()

    arun(go())


def _tick(worker, clock, arun) -> None:
    async def go() -> None:
        await worker.tick_calibration()
        await worker.tick_periods()
        await worker.drain()

    arun(go())
    clock.advance(60)


def test_input_domain_on_mechanisms(client):
    domain = CORPUS["laplace-sum"].domain
    mech = _mechanism(client, "http://127.0.0.1:9/x", input_domain=domain)
    assert mech["input_domain"] == domain
    assert client.get(f"/v1/mechanisms/{mech['id']}").json()["input_domain"] == domain
    bad = client.post("/v1/mechanisms", json={"name": "bad", "sampling_url": "http://127.0.0.1:9/x",
                                               "output_kind": "real", "input_domain": {
                                                   "records": {"type": "real", "low": 2, "high": 1},
                                                   "size": {"min": 0, "max": 3}, "neighbours": ["add_remove"]}})
    assert bad.status_code == 422 and "low must be below high" in bad.text
    patched = client.patch(f"/v1/mechanisms/{mech['id']}", json={"input_domain": None})
    assert patched.status_code == 200 and patched.json()["input_domain"] is None
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert "InputDomain" in schema and "neighbours" in schema["InputDomain"]["properties"]
    assert "SearchRequest" in schema


def test_a_search_job_finds_the_empty_database_bug(client, corpus_server, make_worker, arun, tenants):
    entry = CORPUS["empty-returns-zero"]
    mech = _mechanism(client, f"{corpus_server}/empty-returns-zero")
    no_domain = client.post(f"/v1/mechanisms/{mech['id']}/searches", json={"claim": {"epsilon": 1}})
    assert no_domain.status_code == 422 and "input_domain" in no_domain.text
    assert client.post(f"/v1/mechanisms/{mech['id']}/searches",
                       json={"claim": {"epsilon": 1}, "budget": 10}).status_code == 422
    answer = client.post(f"/v1/mechanisms/{mech['id']}/searches", json={
        "claim": {"epsilon": 1}, "domain": entry.domain, "budget": 200_000, "candidates": 40})
    assert answer.status_code == 202, answer.text
    job = answer.json()
    assert job["kind"] == "search" and answer.headers["location"] == f"/v1/jobs/{job['id']}"
    worker, _ = make_worker()
    _jobs(worker, arun)
    done = client.get(f"/v1/jobs/{job['id']}").json()
    assert done["state"] == "succeeded", done
    result = done["result"]
    assert result["certified"] is True and result["verdict"] == "violation certified"
    f = result["finding"]
    assert [] in (f["x"], f["x_prime"]) and f["lower_bound"] > 1 and f["check"]["event"] == f["event"]
    assert result["samples"]["total"] <= 200_000 and done["progress"]["fraction"] == 1.0
    assert client.get("/v1/jobs", params={"kind": "search"}).json()["items"][0]["id"] == job["id"]
    from fastapi.testclient import TestClient

    assert TestClient(client.app, headers=tenants[1].headers).get(f"/v1/jobs/{job['id']}").status_code == 404



def _answers_only_the_empty_table(database, n, rng):  # noqa: ANN001, ANN202
    """A release whose schema the domain does not match: every non-empty table fails (a missing
    column), the empty one has no row to fail on."""
    if database:
        raise KeyError("city")
    return rng.laplace(0.0, 1.0, n)


def test_a_search_job_that_could_sample_no_pair_fails(client, make_worker, arun):
    """Only the empty table answered, so no pair was sampled and nothing tested: the job fails with
    the endpoint's error (it used to succeed with `certified: false`, which reads as "none found")."""
    api = FastAPI()
    api.include_router(endpoint_router({"/empty-only": (_answers_only_the_empty_table, "real")}, secret=SECRET))
    table = {"table": {"columns": {"user": {"type": "id"}}, "privacy_unit": "user"},
             "size": {"min": 0, "max": 20}, "neighbours": ["add_remove_unit"]}
    with serve_app(api) as base:
        mech = _mechanism(client, f"{base}/empty-only")
        answer = client.post(f"/v1/mechanisms/{mech['id']}/searches", json={
            "claim": {"epsilon": 1}, "domain": table, "budget": 20_000, "candidates": 10})
        assert answer.status_code == 202, answer.text
        worker, _ = make_worker()
        _jobs(worker, arun)
    done = client.get(f"/v1/jobs/{answer.json()['id']}").json()
    assert done["state"] == "failed", done
    assert "no pair of the domain could be sampled" in done["error"] and "city" in done["error"], done


def test_a_search_job_with_full_report_goes_on_after_the_first_certification(client, corpus_server, make_worker,
                                                                             arun):
    entry = CORPUS["empty-returns-zero"]
    mech = _mechanism(client, f"{corpus_server}/empty-returns-zero")
    body = {"claim": {"epsilon": 1}, "domain": entry.domain, "budget": 200_000, "candidates": 40}
    first = client.post(f"/v1/mechanisms/{mech['id']}/searches", json=body).json()
    full = client.post(f"/v1/mechanisms/{mech['id']}/searches", json={**body, "full_report": True}).json()
    assert full["params"]["full_report"] is True
    worker, _ = make_worker()
    _jobs(worker, arun)
    a, b = (client.get(f"/v1/jobs/{j['id']}").json() for j in (first, full))
    assert a["state"] == b["state"] == "succeeded", (a, b)
    assert a["result"]["certified"] and b["result"]["certified"]
    # the full report spends the rest of the budget on screening, refining and certifying more findings
    assert b["result"]["samples"]["total"] > a["result"]["samples"]["total"], (a["result"]["samples"],
                                                                              b["result"]["samples"])
    assert b["result"]["samples"]["total"] <= 200_000
    assert len(b["result"]["findings"]) >= len(a["result"]["findings"])


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_monitor_searches_every_k_periods_and_a_finding_becomes_a_check(client, db, corpus_server, make_worker,
                                                                          arun):
    entry = CORPUS["empty-returns-zero"]
    mech = _mechanism(client, f"{corpus_server}/empty-returns-zero", input_domain=entry.domain)
    base = {"mechanism_id": mech["id"], "epsilon": 1, "horizon": 20, "samples_per_period": 500,
            "period_seconds": 60, "outputs_window": 0, "alarm_snapshot_samples": 0,
            "checks": [{"x": [0.5], "x_prime": [0.5, 0.5], "event": {"kind": "interval", "high": 0.0}}]}
    plain = client.post("/v1/monitors", json={**base, "name": "plain"}).json()
    searching = client.post("/v1/monitors", json={**base, "name": "searching", "search_every": 2,
                                                  "search_budget": 150_000})
    assert searching.status_code == 201, searching.text
    mon = searching.json()
    assert mon["search_every"] == 2 and mon["search_budget"] == 150_000
    no_domain = _mechanism(client, f"{corpus_server}/laplace-sum")
    refused = client.post("/v1/monitors", json={**base, "mechanism_id": no_domain["id"], "name": "x", "search_every": 2})
    assert refused.status_code == 422 and "input_domain" in refused.text
    worker, clock = make_worker()
    for _ in range(2):
        _tick(worker, clock, arun)
    jobs = client.get("/v1/jobs", params={"monitor_id": mon["id"]}).json()["items"]
    assert [j["kind"] for j in jobs] == ["search"] and jobs[0]["params"]["mode"] == "monitor"
    _jobs(worker, arun)
    done = client.get(f"/v1/jobs/{jobs[0]['id']}").json()
    assert done["state"] == "succeeded", done
    assert done["result"]["adopted"] is True, done["result"]
    with db() as session:
        monitor = session.get(Monitor, uuid.UUID(mon["id"]))
        checks = list(session.scalars(select(Check).where(Check.monitor_id == monitor.id).order_by(Check.position)))
    added = checks[-1]
    assert added.origin == "search" and added.level == 0.05 / 4 and monitor.rediscoveries == 1
    assert [] in (added.x, added.x_prime) and added.discovery["detector_horizon"] == 20 - added.discovery["found_after_t"]
    status = client.get(f"/v1/monitors/{mon['id']}/status").json()
    assert status["check_alpha"] == 0.025  # the initial check keeps α/2; the added one its own share
    # one call: a finished search's finding onto a monitor. The plain monitor reserved no α: 409.
    conflict = client.post(f"/v1/monitors/{plain['id']}/checks/from-search", json={"job_id": done["id"]})
    assert conflict.status_code == 409 and "reserved no share" in conflict.text
    # rediscover_every without an `auto` check reserves nothing either (it is ignored): the answer said
    # "create it with `search_every` (or `rediscover_every`) > 0", and a user who did got the same 409
    ignored = client.post("/v1/monitors", json={**base, "name": "rediscovering nothing", "rediscover_every": 5}).json()
    conflict = client.post(f"/v1/monitors/{ignored['id']}/checks/from-search", json={"job_id": done["id"]})
    assert conflict.status_code == 409 and "with an `auto` check" in conflict.text, conflict.text
    missing = client.post(f"/v1/monitors/{mon['id']}/checks/from-search", json={"job_id": done["id"], "finding": 50})
    assert missing.status_code == 422
    adopt = client.post(f"/v1/monitors/{mon['id']}/checks/from-search", json={"job_id": done["id"], "finding": 2})
    assert adopt.status_code == 202, adopt.text
    _jobs(worker, arun)
    adopted = client.get(f"/v1/jobs/{adopt.json()['id']}").json()
    assert adopted["state"] == "succeeded", adopted
    if adopted["result"]["adopted"]:  # a second finding on the same pair with another event
        with db() as session:
            last = session.scalars(select(Check).where(Check.monitor_id == uuid.UUID(mon["id"]))
                                   .order_by(Check.position.desc())).first()
        assert last.origin == "search" and last.level == 0.05 / 8
    else:
        assert "already watches" in adopted["result"]["reason"]


def test_a_cancelled_search_stops_between_draws():
    from app.search.domain import InputDomain
    from app.search.draws import function_sampler
    from app.search.run import SearchCancelled, run_search
    from app.stats.claims import PureDP

    entry = CORPUS["laplace-sum"]
    calls = {"n": 0}

    def counted(db, n, rng):
        calls["n"] += 1
        return entry.sample(db, n, rng)

    with pytest.raises(SearchCancelled):
        asyncio.run(run_search(function_sampler(counted, entry.shape, 1), InputDomain.model_validate(entry.domain),
                               PureDP(1.0), entry.shape, cancel=lambda: calls["n"] >= 10))
    assert calls["n"] < 20
