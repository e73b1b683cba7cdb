"""Events that follow the deployment, and contract alarms, through the real worker (periods, jobs,
leases) against endpoints served on loopback, with a fake clock.

- A monitor with an ``auto`` event on a discrete Laplace mechanism (exactly ε-DP) whose deployment
  later breaks in another part of the output space: no alarm before the change; after it,
  re-discovery adds a check on the broken outputs, the alarm fires, and its evidence bounds ε
  above the claim.
- An output that changes type (an index becomes a value) raises a ``contract`` alarm with an
  offending output, once, while the privacy checks keep running.
"""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from app.models.jobs import Job
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor
from app.reference.server import endpoint_router
from app.stats.events import event_contains, parse_event
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    FakeClock,
    arun,
    engine_settings,
    make_worker,
    session_factory,
)
from tests.support.sampling_server import serve_app

EPSILON = 0.5
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class DiscreteLaplace:
    """k = Σx + a two-sided geometric draw, P(k) ∝ e^{−ε|k − Σx|}: exactly ε-DP for neighbours
    differing by one in Σx. From period ``change`` on, outputs of the database with Σx = c that
    fall in ``broken[c]`` are moved 1000 further out on their side: those values become impossible
    under that database, and the far value appears only under it (unbounded losses at both). The
    probability of every tail beyond the broken values is unchanged, so a check on a tail does not
    see the change; only events on the broken values (or the far one) do."""

    def __init__(self, epsilon: float) -> None:
        self.a = math.exp(-epsilon)
        self.change: int | None = None
        self.broken: dict[int, set[int]] = {}

    def __call__(self, database, n, rng, period=0):  # noqa: ANN001, ANN204
        center = int(round(sum(database)))
        # The difference of two geometric variables is two-sided geometric (discrete Laplace).
        k = center + rng.geometric(1 - self.a, n) - rng.geometric(1 - self.a, n)
        broken = self.broken.get(center)
        if self.change is not None and period >= self.change and broken:
            k = np.where(np.isin(k, list(broken)), k + 1000 * np.sign(k - center), k)
        return k


def _unseen(checks: list[Check]) -> dict[int, set[int]]:
    """Two values, as likely as possible, whose break no check can see (every check's event holds
    both or neither of v and v ± 1000), and the database to break them on: values ≥ 2 are likelier
    under [1], so breaking [0] there makes the loss unbounded; values ≤ −1 the other way round."""
    events = [parse_event(c.event) for c in checks if c.event.get("kind") != "auto"]

    def unseen(v: int) -> bool:
        far = v + 1000 * (1 if v > 0 else -1)
        return all(bool(event_contains(e, np.array([v]))[0]) == bool(event_contains(e, np.array([far]))[0])
                   for e in events)

    for candidates in ([2, 3, 4, 5, 6, 7, 8, 9], [-1, -2, -3, -4, -5, -6, -7, -8]):
        free = [v for v in candidates if unseen(v)]
        if len(free) >= 2:
            return {0: set(free[:2])} if free[0] > 0 else {1: set(free[:2])}
    raise AssertionError(f"every value is watched: {[c.event for c in checks]}")


def _tick(worker, clock, arun, *, jobs: bool = True) -> None:
    async def go() -> None:
        await worker.tick_calibration()
        await worker.tick_periods()
        await worker.drain()
        if jobs:
            await worker.tick_jobs()
            await worker.drain_jobs()
        await worker.tick_snapshots()

    arun(go())
    clock.advance(60)


def _monitor_state(db, monitor_id: str) -> tuple[Monitor, list[Check]]:
    with db() as session:
        monitor = session.get(Monitor, uuid.UUID(monitor_id))
        checks = list(session.scalars(select(Check).where(Check.monitor_id == monitor.id).order_by(Check.position)))
        return monitor, checks


# SQLite only (about 10 s): the jobs' claims and leases run on both backends in tests/test_jobs.py.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_auto_events_follow_a_change_in_another_part_of_the_output_space(client, db, make_worker, arun):
    mechanism = DiscreteLaplace(EPSILON)
    app = FastAPI()
    app.include_router(endpoint_router({"/dlap": (mechanism, "discrete")}, secret=SECRET, seed=7))
    with serve_app(app) as base:
        mech = client.post("/v1/mechanisms", json={"name": "dlap", "sampling_url": f"{base}/dlap",
                                                   "output_kind": "discrete", "secret": SECRET,
                                                   "timeout_seconds": 5}).json()
        created = client.post("/v1/monitors", json={
            "name": "auto", "mechanism_id": mech["id"], "epsilon": EPSILON, "horizon": 60,
            "samples_per_period": 1000, "period_seconds": 60, "rediscover_every": 5,
            "discovery_samples": 32000, "discovery_fresh_samples": 10000, "alarm_snapshot_samples": 0,
            "outputs_window": 0, "checks": [{"x": [0], "x_prime": [1], "event": {"kind": "auto"}}]})
        assert created.status_code == 201, created.text
        mon = created.json()
        assert mon["state"] == "calibrating" and mon["rediscover_every"] == 5
        worker, clock = make_worker()
        _tick(worker, clock, arun)  # calibrates (initial discovery), then runs period 1
        monitor, checks = _monitor_state(db, mon["id"])
        assert monitor.state == "active" and monitor.t == 1 and checks[0].discovery is not None
        mechanism.change = 16
        for _ in range(14):
            _tick(worker, clock, arun)
        monitor, checks = _monitor_state(db, mon["id"])
        assert monitor.t == 15 and monitor.state == "active"  # no false alarm before the change
        assert client.get("/v1/alarms").json()["items"] == []
        jobs = client.get("/v1/jobs", params={"monitor_id": mon["id"]}).json()["items"]
        assert len(jobs) == 3 and all(j["kind"] == "rediscovery" and j["state"] == "succeeded" for j in jobs)
        # The deployment breaks from period 16 on, on two values whose break none of the checks can see.
        mechanism.broken = _unseen(checks)
        broken_values = sorted(next(iter(mechanism.broken.values())))
        for _ in range(25):
            _tick(worker, clock, arun)
            if _monitor_state(db, mon["id"])[0].state == "alarm":
                break
        monitor, checks = _monitor_state(db, mon["id"])
    assert monitor.state == "alarm", [c.event for c in checks]
    alarms = client.get("/v1/alarms").json()["items"]
    assert len(alarms) >= 1 and all(a["kind"] == "privacy" for a in alarms)
    fired = {c.id: c for c in checks}[uuid.UUID(alarms[0]["check_id"])]
    # The alarm comes from a check re-discovery put on the broken values, with draws of the changed
    # deployment (a re-discovery after period t samples the deployment of period t + 1).
    assert fired.joined_t >= mechanism.change - 1 and fired.discovery["adopted"] is True
    assert bool(event_contains(parse_event(fired.event), np.array(broken_values)).any())
    evidence = alarms[0]["evidence"]["check"]
    assert evidence["exceeds_claim"] is True and evidence["epsilon_lower_bound"] > EPSILON
    if fired.origin == "rediscovery":  # a new check spends α_j·2^−(r+1); a dormant one its own share
        assert fired.level == 0.05 * 2.0 ** -(fired.discovery["r"] + 1)
        assert fired.discovery["detector_horizon"] == 60 - fired.discovery["found_after_t"]
    status = client.get(f"/v1/monitors/{mon['id']}/status").json()
    assert any(c["origin"] == "rediscovery" or (c["origin"] == "auto" and c["joined_t"] > 0)
               for c in status["checks"])
    assert status["check_alpha"] == 0.025  # the initial check keeps α/2


def test_an_output_that_changes_type_raises_a_contract_alarm(client, db, make_worker, arun):
    """Scenario (c)'s change: report noisy max returns the index, then the noisy value."""

    def rnm(database, n, rng, period=0):  # noqa: ANN001, ANN202
        noisy = np.asarray(database, dtype=float)[None, :] + rng.laplace(0, 2.0, size=(n, len(database)))
        return noisy.argmax(axis=1).astype(float) if period < 4 else noisy.max(axis=1)

    app = FastAPI()
    app.include_router(endpoint_router({"/rnm": (rnm, "real")}, secret=SECRET, seed=3))
    with serve_app(app) as base:
        mech = client.post("/v1/mechanisms", json={"name": "rnm", "sampling_url": f"{base}/rnm",
                                                   "output_kind": "real", "secret": SECRET}).json()
        hook = client.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/h", "event_types": ["alarm.firing"]})
        assert hook.status_code == 201
        mon = client.post("/v1/monitors", json={
            "name": "rnm", "mechanism_id": mech["id"], "epsilon": 1.0, "horizon": 50, "samples_per_period": 500,
            "period_seconds": 60, "outputs_window": 0, "alarm_snapshot_samples": 0,
            "checks": [{"x": [0, 0, 0], "x_prime": [1, 0, 0], "event": {"kind": "set", "values": [0]}}]}).json()
        worker, clock = make_worker()
        for _ in range(3):
            _tick(worker, clock, arun, jobs=False)
        with db() as session:
            stored = session.get(Mechanism, uuid.UUID(mech["id"]))
            assert stored.output_shape == {"values": "integer"} and stored.output_shape_source == "detected"
        assert client.get("/v1/alarms").json()["items"] == []
        for _ in range(4):
            _tick(worker, clock, arun, jobs=False)
    alarms = client.get("/v1/alarms").json()["items"]
    assert [a["kind"] for a in alarms] == ["contract"]  # once, although every later period breaks it
    assert client.get("/v1/alarms", params={"kind": "privacy"}).json()["items"] == []
    alarm = alarms[0]
    assert alarm["check_id"] is None and alarm["statistic"] is None and alarm["t"] == 4
    contract = alarm["evidence"]["contract"]
    assert contract["breach"] == "type" and contract["expected_shape"] == {"values": "integer"}
    assert isinstance(contract["sample"], float) and contract["sample"] != round(contract["sample"])
    assert contract["database"] in ([0, 0, 0], [1, 0, 0]) and contract["observed_shape"].get("values", "real") == "real"
    monitor, _ = _monitor_state(db, mon["id"])
    assert monitor.state == "active" and monitor.t == 7  # the privacy checks keep running
    with db() as session:
        from app.models.alarms import WebhookMessage

        payload = session.scalars(select(WebhookMessage)).one().payload["data"]
    assert payload["labels"]["alertname"] == "OutputContractBreach" and payload["labels"]["kind"] == "contract"
    assert "contract" in payload["annotations"]["summary"] and payload["evidence"]["contract"]["breach"] == "type"
    # A monitor without auto events asks for no re-discovery.
    with db() as session:
        assert session.scalars(select(Job)).all() == []


def test_after_a_breach_discovery_samples_in_the_observed_shape():
    from app.models.mechanisms import Mechanism as M
    from app.monitors.rediscovery import current_shape

    mech = M(output_kind="real", dim=None, output_shape={"values": "integer"})
    assert current_shape(mech, None).values == "integer"  # the contract
    assert current_shape(mech, {"observed_shape": {}}).values == "real"  # {} is a real scalar
    assert current_shape(M(output_kind="vector", dim=3, output_shape=None), None).length == 3
