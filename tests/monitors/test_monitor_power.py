"""A monitor check's detection power (app/stats/monitor_power.py): the formula, and the claim it makes
("a violation of ε ≥ X is caught within K periods with probability ≥ 0.9") checked on the service's own
detectors by seeded simulation."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import binom

from app.monitors.detectors import aggregator_step, initial_state, sequential_line, sequential_step
from app.monitors.power import check_detection_power
from app.stats.claims import ApproxDP, PureDP
from app.stats.monitor_power import detection_probability, log_evalue_moments, smallest_caught_violation
from app.stats.period import period_statistic
from app.stats.sequential import bet_grid, log_evalues_sd
from app.stats.thresholds import threshold_from_table

EPS = 1.0
ALPHA = 0.05
HORIZON = 200
GAMMA = 0.25
AGG_THRESHOLD = threshold_from_table(HORIZON, GAMMA, ALPHA).value


def _design(detector: str) -> dict:
    if detector == "aggregator":
        return {"threshold": AGG_THRESHOLD, "horizon": HORIZON, "gamma": GAMMA}
    return {"log_threshold": math.log(1 / ALPHA) if detector == "e-process" else math.log(HORIZON / ALPHA)}


def _detected_within(detector: str, n: int, p: float, q: float, periods: int, runs: int, seed: int) -> float:
    """The fraction of runs whose service detector (app.monitors.detectors) alarms within ``periods``."""
    rng = np.random.default_rng(seed)
    claim = {"epsilon": EPS}
    a_all, b_all = rng.binomial(n, p, size=(runs, periods)), rng.binomial(n, q, size=(runs, periods))
    hits = 0
    for r in range(runs):
        if detector == "aggregator":
            state = initial_state("aggregator", horizon=HORIZON, gamma=GAMMA, threshold=AGG_THRESHOLD, level=ALPHA,
                                  claim=claim)
        else:
            state = initial_state(detector, horizon=HORIZON, gamma=GAMMA, threshold=_design(detector)["log_threshold"],
                                  level=ALPHA, claim=claim)
        past: list[float] = []
        for t in range(periods):
            a, b = int(a_all[r, t]), int(b_all[r, t])
            if detector == "aggregator":
                step = aggregator_step(state, float(period_statistic(a, b, n, EPS).z), past, (a, b, n))
                past.append(float(step.prefix_sum))
            else:
                step = sequential_step(state, a, b, n, sequential_line(state, claim))
            state = step.state
            if step.alarm:
                hits += 1
                break
    return hits / runs


def test_the_period_log_evalue_moments_are_exact():
    """(P2): E L and Var L of the bilinear per-sample log e-value (the Jensen bound), against the sum over every
    (a, b); the detectors' exact e-value is at least it for every (a, b)."""
    n, p, q, s = 12, 0.55, 0.2, math.e
    grid = bet_grid()
    a, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    w = binom.pmf(a, n, p) * binom.pmf(b, n, q)
    vals = log_evalues_sd(a, b, n, s, 0.0, grid, "per-sample-jensen")  # (n+1, n+1, K): the bilinear bound
    mean = np.einsum("ij,ijk->k", w, vals)
    var = np.einsum("ij,ijk->k", w, vals ** 2) - mean ** 2
    m, v = log_evalue_moments(n, p, q, s, 0.0, grid)
    np.testing.assert_allclose(m, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(v, var, rtol=1e-7, atol=1e-12)
    assert np.all(log_evalues_sd(a, b, n, s, 0.0, grid) >= vals - 1e-12)


def test_the_bound_grows_with_the_violation_and_the_periods():
    kw = _design("e-process")
    low = detection_probability("e-process", n=200, p=0.3, q=0.1, epsilon=EPS, periods=10, **kw)
    high = detection_probability("e-process", n=200, p=0.5, q=0.1, epsilon=EPS, periods=10, **kw)
    longer = detection_probability("e-process", n=200, p=0.3, q=0.1, epsilon=EPS, periods=50, **kw)
    assert 0 <= low < high <= 1 and longer > low
    # no violation (p on the claim's line) is never "caught with probability 0.9"
    assert detection_probability("e-process", n=200, p=math.e * 0.1, q=0.1, epsilon=EPS, periods=100, **kw) < 0.1
    # a later start costs the e-process its start weight, so needs a larger violation
    later = smallest_caught_violation("e-process", n=200, q=0.1, epsilon=EPS, periods=10, start=500, **kw)
    assert later.epsilon > smallest_caught_violation("e-process", n=200, q=0.1, epsilon=EPS, periods=10, **kw).epsilon
    # too few outputs for any violation of this event: no figure; and one period of the aggregator cannot reach its threshold here
    assert smallest_caught_violation("e-process", n=1, q=0.3, epsilon=EPS, periods=1, **kw).epsilon is None
    assert smallest_caught_violation("aggregator", n=200, q=0.1, epsilon=EPS, periods=1, **_design("aggregator")
                                     ).epsilon is None
    with pytest.raises(ValueError, match="horizon"):
        detection_probability("aggregator", n=200, p=0.5, q=0.1, epsilon=EPS, periods=201, **_design("aggregator"))


@pytest.mark.parametrize(("detector", "n", "q", "periods"), [
    ("e-process", 200, 0.1, 10), ("e-detector", 200, 0.1, 10), ("aggregator", 200, 0.1, 10),
    ("e-process", 1000, 0.01, 10), ("aggregator", 200, 0.01, 50),
])
def test_a_violation_of_the_stated_size_is_caught_in_time(detector: str, n: int, q: float, periods: int):
    """At X, the service's own detector alarms within K periods in ≥ 90% of 400 seeded runs; at a violation
    halfway between the claim and X, in far fewer (the figure is not vacuous)."""
    res = smallest_caught_violation(detector, n=n, q=q, epsilon=EPS, periods=periods, **_design(detector))
    assert res.epsilon is not None and res.epsilon > EPS and res.probability == 0.9
    at_x = _detected_within(detector, n, res.violation_p, q, periods, runs=400, seed=11)
    half = EPS + (res.epsilon - EPS) / 2
    at_half = _detected_within(detector, n, math.exp(half) * q, q, periods, runs=400, seed=12)
    assert at_x >= 0.9, (detector, res.epsilon, at_x)
    assert at_half < 0.6, (detector, half, at_half)


def test_the_checks_status_states_its_power():
    check = SimpleNamespace(detector_state={"sums": [30.0, 10.0, 100.0], "log_threshold": math.log(20)}, discovery=None)
    out = check_detection_power(check, PureDP(EPS), n=200, detector="e-process", level=ALPHA, threshold=None,
                                horizon=HORIZON, gamma=GAMMA, t=3)
    assert [w["periods"] for w in out["within"]] == [1, 10, 100] and out["source"] == "periods"
    x10 = next(w["epsilon"] for w in out["within"] if w["periods"] == 10)
    assert out["statement"].startswith(f"A violation of ε ≥ {x10:.2f} on this check (claimed 1) is caught within 10 "
                                       "periods with probability ≥ 0.9")
    agg = check_detection_power(check, PureDP(EPS), n=200, detector="aggregator", level=ALPHA,
                                threshold=AGG_THRESHOLD, horizon=HORIZON, gamma=GAMMA, t=195)
    assert [w["periods"] for w in agg["within"]] == [1]  # only the periods left in the horizon
    other = check_detection_power(check, ApproxDP(1.0, 1e-5), n=200, detector="e-process", level=ALPHA,
                                  threshold=None, horizon=HORIZON, gamma=GAMMA, t=3)
    assert other["within"] == [] and "pure-ε claims only" in other["statement"]
    assert "does not mean that a violation would be missed" in other["statement"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # a schema field: one backend shows it
def test_the_status_api_shows_the_power(client):  # noqa: ANN001
    from tests.support.api_helpers import create_mechanism, create_monitor

    monitor = create_monitor(client, create_mechanism(client)["id"])
    status = client.get(f"/v1/monitors/{monitor['id']}/status").json()
    power = status["checks"][0]["detection_power"]
    assert power["probability"] == 0.9 and power["n"] == monitor["samples_per_period"]
    assert power["statement"]  # no estimate of q before the first period: it says so
