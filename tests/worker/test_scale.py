"""Scale in the service: detector choice, O(1) per-check state, round trips per period, the
monitors list in a constant number of queries, sparse events flagged.

The engine fixtures (real commits on both backends, a worker driven tick by tick, reference
mechanisms on loopback) are test_engine's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event, select

from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    BOUNDARY_EVENT,
    X_PRIME,
    X,
    arun,
    engine_settings,
    make_monitor,
    make_worker,
    mechanism_server,
    run_ticks,
    session_factory,
)

DETECTORS = ("aggregator", "e-process", "e-detector")


@contextmanager
def count_statements(bind) -> Iterator[list[str]]:  # noqa: ANN001
    """Every statement sent to the database while the block runs (one cursor execution = one round trip;
    COMMIT and ROLLBACK are not cursor executions and are not counted)."""
    seen: list[str] = []

    def listener(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001, ARG001
        seen.append(statement.split(None, 1)[0].upper() + " " + " ".join(statement.split())[:90])

    event.listen(bind, "before_cursor_execute", listener)
    try:
        yield seen
    finally:
        event.remove(bind, "before_cursor_execute", listener)


def _detector_body(detector: str, **extra) -> dict:
    body = {"detector": detector, **extra}
    if detector != "aggregator":
        body.setdefault("horizon", 200)
    return body


# ------------------------------------------------------------------------------ detector choice


def test_each_detector_alarms_on_a_violation_and_stays_quiet_on_a_correct_mechanism(client, db, mechanism_server,
                                                                                    make_worker, arun):
    """/laplace-switch turns into a Laplace with half the scale (ε = 2 > 1) at period 6;
    /laplace stays exactly on the ε = 1 boundary of the event."""
    base, secret = mechanism_server
    bad = {d: make_monitor(client, base, "/laplace-switch", secret, samples_per_period=2000, alpha=0.01,
                           **_detector_body(d, horizon=200)) for d in DETECTORS}
    good = {d: make_monitor(client, base, "/laplace", secret, samples_per_period=2000, alpha=0.01,
                            **_detector_body(d, horizon=200)) for d in DETECTORS}
    for d in DETECTORS:
        assert bad[d]["detector"] == d and good[d]["detector"] == d
    worker, clock = make_worker(max_in_flight=8)
    arun(run_ticks(worker, clock, 40))
    with db() as session:
        for d in DETECTORS:
            m = session.get(Monitor, uuid.UUID(bad[d]["id"]))
            assert m.state == "alarm", (d, m.state, m.t)
            assert 6 <= m.t <= 40, (d, m.t)
            g = session.get(Monitor, uuid.UUID(good[d]["id"]))
            assert g.state == "active" and g.t == 40, (d, g.state, g.t)
    for d in DETECTORS:
        status = client.get(f"/v1/monitors/{bad[d]['id']}/status").json()
        assert status["detector"] == d and status["state"] == "alarm"
        assert status["checks"][0]["alarm"] is True
        assert status["checks"][0]["last_statistic"] >= status["checks"][0]["threshold"] or d == "aggregator"
        good_status = client.get(f"/v1/monitors/{good[d]['id']}/status").json()
        assert good_status["periods_remaining"] == (160 if d == "aggregator" else None)
    alarms = client.get("/v1/alarms").json()["items"]
    assert {a["monitor_id"] for a in alarms} == {bad[d]["id"] for d in DETECTORS}


def test_horizon_free_monitors_need_no_horizon_and_do_not_renew(client, mechanism_server):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret, detector="e-process", horizon=None)
    assert mon["detector"] == "e-process" and mon["state"] == "active"
    assert mon["threshold_source"] == "e-process"
    assert mon["threshold"] == pytest.approx(-__import__("math").log(0.05))  # log(1/α), one check
    det = make_monitor(client, base, "/laplace", secret, detector="e-detector", horizon=None)
    assert det["horizon"] == 1000 and det["threshold"] == pytest.approx(__import__("math").log(1000 / 0.05))
    mech = client.get("/v1/mechanisms").json()["items"][0]["id"]
    base_body = {"name": "x", "mechanism_id": mech, "epsilon": 1.0, "samples_per_period": 10, "period_seconds": 60,
                 "checks": [{"x": X, "x_prime": X_PRIME, "event": BOUNDARY_EVENT}]}
    for extra, needle in (({"detector": "e-process", "renew": True}, "renew applies to the aggregator only"),
                          ({"detector": "aggregator"}, "the aggregator needs a horizon"),
                          ({"detector": "e-detector", "horizon": 100, "rediscover_every": 5}, "rediscover_every")):
        resp = client.post("/v1/monitors", json={**base_body, **extra})
        assert resp.status_code == 422 and needle in resp.text, resp.text


def test_an_e_detector_keeps_running_past_its_window(client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret, detector="e-detector", horizon=3)
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 6))
    with db() as session:
        m = session.get(Monitor, uuid.UUID(mon["id"]))
        assert (m.state, m.t, m.horizon_index) == ("active", 6, 1)


# ------------------------------------------------------------------------------ O(1) state, round trips


@pytest.mark.parametrize("detector", DETECTORS)
def test_per_check_state_does_not_grow_with_t(detector, client, db, mechanism_server, make_worker, arun):
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret, samples_per_period=50, **_detector_body(detector))
    worker, clock = make_worker()
    sizes = []
    for _ in range(2):
        arun(run_ticks(worker, clock, 15))
        with db() as session:
            check = session.scalars(select(Check).where(Check.monitor_id == uuid.UUID(mon["id"]))).one()
            sizes.append(len(json.dumps(check.detector_state)) + len(json.dumps(check.claim_state or {})))
    assert sizes[1] <= sizes[0] * 1.1, sizes  # t = 15 vs t = 30: a few numbers, whatever t is
    with db() as session:
        rows = session.scalars(select(PeriodCheck).join(PeriodRun)
                               .where(PeriodRun.monitor_id == uuid.UUID(mon["id"])).order_by(PeriodRun.t)).all()
        assert len(rows) == 30
        if detector == "aggregator":
            import numpy as np

            from app.stats.aggregator import weighted_statistic_path

            z = np.array([r.z for r in rows])
            np.testing.assert_allclose([r.prefix_sum for r in rows], np.cumsum(z))
            np.testing.assert_allclose([r.statistic for r in rows], weighted_statistic_path(z, 50, 0.25))
        else:
            assert all(r.prefix_sum is None for r in rows)


@pytest.mark.parametrize("backend", ["postgres"])  # the budget is the Postgres path's (one-statement write)
@pytest.mark.parametrize("detector", ["aggregator", "e-process"])
@pytest.mark.parametrize("n_checks,budget", [(1, 6), (4, 8)])
def test_round_trips_per_period(detector, n_checks, budget, backend, client, session_factory, mechanism_server,
                                make_worker, arun):
    """Claim, plan and write of one routine period: ≤ 6 statements with one check, ≤ 8 with four."""
    base, secret = mechanism_server
    checks = [{"x": X, "x_prime": X_PRIME, "event": {"kind": "interval", "low": None, "high": float(k) / 4}}
              for k in range(n_checks)]
    make_monitor(client, base, "/laplace", secret, checks=checks, **_detector_body(detector))
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 3))  # the first period detects the output contract (another path)
    with count_statements(session_factory.kw["bind"]) as seen:
        arun(run_ticks(worker, clock, 1))
    assert len(seen) <= budget, "\n".join(seen)
    assert not any("max(" in s.lower() for s in seen), seen  # the seq comes from the monitor row
    with session_factory() as session:
        assert session.scalars(select(Monitor)).one().t == 4


# ------------------------------------------------------------------------------ GET /v1/monitors


def test_listing_monitors_takes_a_constant_number_of_queries(client, session_factory, mechanism_server):
    base, secret = mechanism_server
    first = make_monitor(client, base, "/laplace", secret)
    body = {"name": "m", "mechanism_id": first["mechanism_id"], "epsilon": 1.0, "horizon": 50,
            "samples_per_period": 10, "period_seconds": 60,
            "checks": [{"x": X, "x_prime": X_PRIME, "event": BOUNDARY_EVENT}] * 2}

    def listing_queries() -> tuple[int, int]:
        with count_statements(session_factory.kw["bind"]) as seen:
            page = client.get("/v1/monitors?limit=50")
        assert page.status_code == 200
        return len(page.json()["items"]), len(seen)

    few, q_few = listing_queries()
    for _ in range(49):
        assert client.post("/v1/monitors", json=body).status_code == 201
    many, q_many = listing_queries()
    assert (few, many) == (1, 50)
    assert q_many == q_few, (q_few, q_many)


# ------------------------------------------------------------------------------ sparse events


def test_a_sparse_event_is_flagged_in_the_status_with_the_n_that_gives_power(client, mechanism_server, make_worker,
                                                                            arun):
    base, secret = mechanism_server
    rare = {"kind": "interval", "low": 8.0, "high": None}  # P(Laplace(1) > 8) ≈ 1.7·10⁻⁴
    checks = [{"x": X, "x_prime": X_PRIME, "event": BOUNDARY_EVENT}, {"x": X, "x_prime": X_PRIME, "event": rare}]
    created = make_monitor(client, base, "/laplace", secret, checks=checks, detector="e-process")
    assert created["warnings"] == []  # no estimate of q before the first period (documented)
    before = client.get(f"/v1/monitors/{created['id']}/status").json()
    assert all(c["power"] is None for c in before["checks"]) and before["warnings"] == []
    worker, clock = make_worker()
    arun(run_ticks(worker, clock, 3))
    status = client.get(f"/v1/monitors/{created['id']}/status").json()
    frequent, sparse = status["checks"]
    assert frequent["power"]["sparse"] is False and frequent["power"]["source"] == "periods"
    assert sparse["power"]["sparse"] is True
    assert sparse["power"]["expected_hits"] < 5
    suggested = sparse["power"]["suggested_n"]
    # No hit seen yet: q is known only to be below ~1/(periods·n), so the suggestion is a lower bound.
    assert suggested is not None and suggested > 200
    assert len(status["warnings"]) == 1 and "check 1" in status["warnings"][0]
    assert f"samples_per_period = {suggested}" in status["warnings"][0]
