"""Gaussian reference mechanisms with their exact claims, claim scenarios, claim terms and events."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from app.claims.events import claim_candidate
from app.claims.simulation import run_claim_scenario
from app.reference.gaussian import (
    CLAIM_SCENARIOS,
    GAUSSIAN_MECHANISMS,
    DiscreteGaussian,
    GaussianAnalytic,
    GaussianClassic,
    GaussianGDP,
    GaussianMissingConstant,
    get_gaussian_mechanism,
)
from app.reference.server import gaussian_routes
from app.simulation import SimulationConfig
from app.snapshots.compute import PairSamples, compute_snapshot
from app.stats import accounting
from app.stats.claims import ApproxDP, parse_claim
from app.stats.empirical import claim_terms, nested_events
from app.stats.events import Interval, event_contains


def _worst_excess(mech, claim) -> float:
    """max over half-line events of the claim's excess, from the exact normal cdf."""
    sd = mech.sigma
    t = np.linspace(-12 * sd, 12 * sd, 40001)
    p = special.ndtr((t - (-mech.sensitivity / 2)) / sd)  # x at −Δ/2, x' at +Δ/2: events {y ≤ t}
    q = special.ndtr((t - (mech.sensitivity / 2)) / sd)
    return float(np.max(claim.excess(p, q)))


@pytest.mark.parametrize("mech,holds", [
    (GaussianAnalytic(1.0, 1e-5), True),
    (GaussianClassic(0.5, 1e-3), True),
    (GaussianGDP(1.0), True),
    (GaussianMissingConstant(1.0, 1e-3), False),
    (GaussianGDP(1.0, sigma_factor=0.5), False),
])
def test_exact_claims(mech, holds):
    claim = mech.claim_object()
    worst = _worst_excess(mech, claim)
    assert mech.holds is holds
    assert (worst <= 1e-9) is holds
    if isinstance(mech, GaussianAnalytic) and type(mech) is GaussianAnalytic:
        # the analytic σ is tight: δ(ε) of the mechanism equals the claimed δ
        assert accounting.gdp_delta(mech.sensitivity / mech.sigma, mech.epsilon) == pytest.approx(mech.delta, rel=1e-6)


def test_samples_match_the_exact_event_probabilities():
    rng = np.random.default_rng(0)
    event = Interval(high=0.0)
    for slug in ("gaussian-gdp", "gaussian-missing-constant", "clipped-mean-no-clip"):
        mech = get_gaussian_mechanism(slug)
        db = [0.0, 0.0, 0.0, -1.0] if "clipped" in slug else [-1.0]
        out = mech.sample(db, 200_000, rng)
        assert np.mean(event_contains(event, out)) == pytest.approx(mech.event_probability(db, event), abs=4e-3)


def test_discrete_gaussian_from_opendp():
    mech = DiscreteGaussian(rho=0.5)
    assert mech.claim == {"zcdp_rho": pytest.approx(0.5)}  # OpenDP's privacy map: Δ²/(2σ²)
    out = mech.sample([1, 1, 0], 4000, np.random.default_rng(0))
    assert out.dtype == np.int64 and np.all(out == np.round(out))
    assert np.mean(out) == pytest.approx(2.0, abs=0.1)
    assert np.var(out) == pytest.approx(mech.sigma**2, rel=0.1)
    assert mech.event_probability([1, 1, 0], Interval(high=2.0)) == pytest.approx(
        float(mech.pmf(np.arange(-60, 1)).sum()), rel=1e-9)


def test_every_reference_route_serves_its_kind():
    routes = gaussian_routes(change_period=3)
    assert {f"/gaussian/{s}" for s in GAUSSIAN_MECHANISMS} | {f"/scenarios/{k}" for k in CLAIM_SCENARIOS} == set(routes)
    f, kind = routes["/scenarios/j"]
    rng = np.random.default_rng(1)
    before, after = f([-1.0], 50_000, rng, period=1), f([-1.0], 50_000, rng, period=3)
    assert kind == "real" and np.std(before) == pytest.approx(2.0, rel=0.03) and np.std(after) == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("key", list(CLAIM_SCENARIOS))
def test_claim_scenarios_hold_before_and_break_after(key):
    sc = CLAIM_SCENARIOS[key]
    claim = parse_claim(sc.claim)
    before, after = sc.before_mechanism(), sc.after_mechanism()
    p0, q0 = before.event_probability(sc.x, sc.event), before.event_probability(sc.x_prime, sc.event)
    p1, q1 = after.event_probability(sc.x, sc.event), after.event_probability(sc.x_prime, sc.event)
    assert claim.excess(p0, q0) <= 1e-9
    assert claim.excess(p1, q1) > 0.03


def test_simulated_claim_scenario_detects_and_stays_quiet_before():
    cfg = SimulationConfig(replications=40, horizon=50, samples_per_period=400, change_at=20, seed=3)
    res = run_claim_scenario(CLAIM_SCENARIOS["j"], cfg)
    agg = res.detectors[0]
    assert agg.detector == "aggregator" and agg.detected_after_change >= 0.9
    assert agg.false_alarms_before_change <= 0.1


def test_claim_terms_on_a_correct_and_a_broken_gaussian():
    rng = np.random.default_rng(4)
    for sd, refuted in ((2.0, False), (1.0, True)):
        x, y = rng.normal(-1, sd, 40_000), rng.normal(1, sd, 40_000)
        events = nested_events(x[:20000], y[:20000], x[20000:], y[20000:], "continuous")
        terms = claim_terms(events, {"gdp_mu": 1.0})
        assert terms["refutes"] is refuted
        assert (terms["mu_lower_bound"] > 1.0) is refuted
        assert terms["mu_hat"] == pytest.approx(2.0 / sd, abs=0.15)
        assert len(terms["tradeoff"]["alpha"]) == len(terms["tradeoff"]["f"]) > 10
        assert ("contradict" in terms["statement"]) is refuted
    # δ at the claimed ε of a 1-GDP mechanism, whose δ(1) = 0.127 > 1e-3
    terms = claim_terms(events, {"epsilon": 1.0, "delta": 1e-3})
    true_delta = accounting.gdp_delta(2.0, 1.0)
    assert terms["delta_lower_bound"] <= true_delta + 1e-9 and terms["delta_lower_bound"] > 0.05
    assert terms["refutes"]


def test_snapshot_reports_the_claims_terms():
    rng = np.random.default_rng(5)
    x, y = rng.normal(-1, 1.0, 8000), rng.normal(1, 1.0, 8000)
    pair = PairSamples({"x": [-1], "x_prime": [1], "claim": {"gdp_mu": 1.0}}, x[:4000], y[:4000], x[4000:], y[4000:])
    result = compute_snapshot([pair], "real", alpha=0.05, epsilon=None)
    assert result["claim"] == {"gdp_mu": 1.0} and result["claim_terms"]["refutes"]
    assert "tradeoff" in result["pairs"][0]["claim_terms"] and result["exceeds_claim"] is None


def test_claim_candidate_finds_a_tail_event():
    rng = np.random.default_rng(6)
    x, y = rng.normal(-1, 1.0, 20_000), rng.normal(1, 1.0, 20_000)
    cand = claim_candidate(PairSamples({"x": [-1], "x_prime": [1]}, x[:10000], y[:10000], x[10000:], y[10000:]),
                           "real", {"gdp_mu": 1.0})
    assert cand["event"]["kind"] == "interval" and "high" in cand["event"]
    assert cand["refutes"] and cand["z"] > 5
    # the event's own probabilities on fresh draws agree with the reported ones
    ev = Interval(**{k: v for k, v in cand["event"].items() if k != "kind"})
    assert np.mean(event_contains(ev, rng.normal(-1, 1.0, 50_000))) == pytest.approx(cand["p_hat"], abs=0.02)
    # an (ε, δ) claim that a 2-GDP mechanism satisfies is not refuted
    eps = 8.0
    safe = ApproxDP(eps, max(accounting.gdp_delta(2.0, eps), 1e-12) * 1.5)
    cand = claim_candidate(PairSamples({"x": [-1], "x_prime": [1]}, x[:10000], y[:10000], x[10000:], y[10000:]),
                           "real", safe.to_dict())
    assert not cand["refutes"]
    assert math.isfinite(cand["z"])

