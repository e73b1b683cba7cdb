"""The e-process's horizon-tuned bet (method.md §13.3d): exact values, the class against the batch form,
the supermartingale property by enumeration, and a seeded false-alarm simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom

from app.stats.sequential import (
    HORIZON_DESIGN,
    SERVICE_DESIGN,
    TUNED_WINDOW,
    EProcess,
    EProcessDesign,
    SupportingLine,
    component_log_prior,
    design_of_state,
    horizon_start_weight,
    service_design,
    tuned_fraction,
    tuned_rate,
)


def test_horizon_start_weights_exact():
    # 0.9/H inside the horizon; the j-th horizon after it shares 0.1·6/(π² j²)
    assert horizon_start_weight(1, 4) == pytest.approx(0.225, rel=1e-15)
    assert horizon_start_weight(4, 4) == pytest.approx(0.225, rel=1e-15)
    assert horizon_start_weight(5, 4) == pytest.approx(0.1 * 6 / math.pi**2 / 4, rel=1e-15)
    assert horizon_start_weight(9, 4) == pytest.approx(0.1 * 6 / (math.pi**2 * 4) / 4, rel=1e-15)
    total = sum(horizon_start_weight(k, 3) for k in range(1, 3 * 1000 + 1))
    expected = 0.9 + 0.1 * 6 / math.pi**2 * sum(1 / j**2 for j in range(1, 1000))
    assert total == pytest.approx(expected, rel=1e-12)
    assert total < 1.0
    with pytest.raises(ValueError):
        horizon_start_weight(0, 4)
    with pytest.raises(ValueError):
        horizon_start_weight(1, 0)


def test_tuned_rate_and_fraction_exact():
    kappa = tuned_rate(0.05, 200, 0.7)
    assert kappa == pytest.approx((math.log(20) + math.log(200) + math.log(1 / 0.7)) / (TUNED_WINDOW * 200), rel=1e-15)
    assert kappa == pytest.approx(0.144179, abs=1e-6)
    s = math.e
    # no past: p̃ = q̃ = ½, σ̂² = ¼(1 + s²); c = s·√(2κ/(n σ̂²))
    var = 0.25 * (1 + s * s)
    c = float(tuned_fraction(0.0, 0.0, 0.0, 200, s, 0.0, kappa))
    assert c == pytest.approx(s * math.sqrt(2 * kappa / (200 * var)), rel=1e-12)
    assert c == pytest.approx(0.07127, abs=1e-5)
    # past counts: p̃ = 100.5/201, q̃ = 40.5/201; an intercept enters through s + d
    p, q = 100.5 / 201, 40.5 / 201
    var = p * (1 - p) + 2.0**2 * q * (1 - q)
    c = float(tuned_fraction(100.0, 40.0, 200.0, 50, 2.0, 0.01, kappa))
    assert c == pytest.approx(2.01 * math.sqrt(2 * kappa / (50 * var)), rel=1e-12)
    # capped like the grid's largest bet
    assert float(tuned_fraction(0.0, 0.0, 1e6, 1, 1.0, 0.0, 5.0)) == 0.8
    with pytest.raises(ValueError):
        tuned_rate(0.05, 200, 0.0)


def test_design_labels_priors_and_validation():
    d = EProcessDesign.parse("auto,agrapa=0.2,grid=16,tuned=0.7")
    assert d == HORIZON_DESIGN and d.label == "auto,agrapa=0.2,grid=16,tuned=0.7"
    h = d.with_horizon(200)
    assert h.label == "auto,agrapa=0.2,grid=16,tuned=0.7,horizon=200" and EProcessDesign.parse(h.label) == h
    assert EProcessDesign.parse("auto,agrapa=0.2,grid=16,tuned=0.7,window=0.5").window == 0.5
    assert service_design(None) == SERVICE_DESIGN and service_design(50) == HORIZON_DESIGN.with_horizon(50)
    w = np.exp(component_log_prior(16, "auto", True, 0.2, 0.7))
    assert w.size == 18 and w[:16] == pytest.approx(np.full(16, 0.1 / 16)) and w[16:] == pytest.approx([0.2, 0.7])
    assert w.sum() == pytest.approx(1.0, abs=1e-15)
    wb = np.exp(component_log_prior(4, "both", True, 0.2, 0.5))
    assert wb.size == 12 and wb.sum() == pytest.approx(1.0) and wb[5] == pytest.approx(0.25)
    assert list(h.tuned_mask()) == [False] * 17 + [True]
    for bad in ("auto,agrapa,grid=16,tuned=0.5", "auto,agrapa=0.3,grid=16,tuned=0.7", "auto,grid=16,tuned=0.5"):
        with pytest.raises(ValueError):
            EProcessDesign.parse(bad)
    with pytest.raises(ValueError):
        HORIZON_DESIGN.tuned_rate(0.05)  # no horizon
    with pytest.raises(ValueError):
        EProcess.from_design(0.05, SupportingLine.pure(1.0), HORIZON_DESIGN)


@pytest.mark.parametrize("horizon", [30, 200])
def test_class_matches_batch_and_state_round_trip(horizon):
    """The class, restored from its JSON state midway, gives the batch form's log W_t, past the horizon too."""
    rng = np.random.default_rng(11)
    line, n, periods = SupportingLine.pure(1.0), 200, 90
    a = np.r_[rng.binomial(n, 0.5, 40), rng.binomial(n, 0.55, periods - 40)]
    b = rng.binomial(n, 0.1839, periods)
    design = HORIZON_DESIGN.with_horizon(horizon)
    det = EProcess.from_design(0.05, line, design)
    stats = []
    for t in range(periods):
        stats.append(det.update(int(a[t]), int(b[t]), n).statistic)
        if t == 45:
            state = det.to_state()
            assert state["version"] == 3 and state["horizon"] == horizon and state["tuned_weight"] == 0.7
            det = EProcess.from_state(state)
    batch = design.paths(a[None], b[None], n, line)[0]
    np.testing.assert_allclose(stats, batch, rtol=0, atol=1e-9)
    assert design_of_state(det.to_state()) == design
    # the design without a horizon is the one before: version 2, same numbers as SERVICE_DESIGN
    old = EProcess.from_design(0.05, line, SERVICE_DESIGN)
    old_stats = [old.update(int(a[t]), int(b[t]), n).statistic for t in range(periods)]
    assert old.to_state()["version"] == 2
    np.testing.assert_allclose(old_stats, SERVICE_DESIGN.paths(a[None], b[None], n, line)[0], atol=1e-9)


def _expected_wealth(p: float, q: float, line: SupportingLine, n: int, periods: int, horizon: int) -> float:
    """E[W_T] by summing over every path of counts (a_t, b_t), each with its binomial probability."""
    outcomes = [(a, b, binom.pmf(a, n, p) * binom.pmf(b, n, q)) for a in range(n + 1) for b in range(n + 1)]
    total = 0.0
    for path in itertools.product(outcomes, repeat=periods):
        det = EProcess.from_design(0.05, line, HORIZON_DESIGN.with_horizon(horizon))
        weight = 1.0
        for a, b, pr in path:
            det.update(a, b, n)
            weight *= pr
        total += weight * math.exp(det.log_wealth)
    return total


def test_supermartingale_by_enumeration():
    """E[W_T] = 1 at the vertex, where both faces bind and every period e-value has conditional mean 1
    (W is a martingale, the start weights past the horizon included); < 1 inside the claim."""
    line = SupportingLine.pure(1.0)
    pv = math.e / (1 + math.e)
    assert _expected_wealth(pv, 1 - pv, line, n=2, periods=3, horizon=2) == pytest.approx(1.0, abs=1e-12)
    inside = _expected_wealth(0.4, 0.3, line, n=2, periods=3, horizon=2)
    assert inside < 1.0 - 1e-6


def test_false_alarms_seeded():
    """At the vertex of ε = 1 (the worst null point), n = 200, T = H = 200: FAR ≤ α (Ville) within
    three standard errors, with R = 2,000 seeded runs (docs/sequential.md measures 4,000 per cell)."""
    rng = np.random.default_rng(2026)
    runs, periods, n = 2000, 200, 200
    pv = math.e / (1 + math.e)
    a = rng.binomial(n, pv, (runs, periods))
    b = rng.binomial(n, 1 - pv, (runs, periods))
    log_w = HORIZON_DESIGN.with_horizon(periods).paths(a, b, n, SupportingLine.pure(1.0))
    far = float(np.mean(log_w.max(axis=1) >= math.log(20)))
    assert far <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
    assert far > 0.0  # the bets are live at the boundary: some paths cross (0.0275 on these draws)


def test_detector_params_pass_the_horizon():
    from app.monitors.detectors import initial_state

    kw = {"horizon": 1000, "gamma": 0.25, "threshold": math.log(20), "level": 0.05, "claim": {"epsilon": 1.0}}
    assert initial_state("e-process", **kw)["version"] == 2
    state = initial_state("e-process", **kw, design_horizon=200)
    assert state["version"] == 3 and state["horizon"] == 200
    assert design_of_state(state) == HORIZON_DESIGN.with_horizon(200)
    assert initial_state("e-detector", **kw, design_horizon=200)["kind"] == "e-detector"
    # a check's stored state steps period by period like the class (reloaded from JSON each time)
    from app.monitors.detectors import sequential_line, sequential_step

    rng = np.random.default_rng(3)
    line = SupportingLine.pure(1.0)
    det = EProcess.from_design(0.05, line, HORIZON_DESIGN.with_horizon(200))
    for _ in range(30):
        a, b = int(rng.binomial(200, 0.6)), int(rng.binomial(200, 0.15))
        step = sequential_step(state, a, b, 200, sequential_line(state, {"epsilon": 1.0}))
        state = step.state
        assert step.statistic == pytest.approx(det.update(a, b, 200).statistic, abs=1e-12)
    assert state["version"] == 3 and len(state["log_r"]) == 18


def test_confidence_sequence_inverts_the_horizon_design():
    """The anytime bound of a check that runs the horizon design inverts that design (its own components)."""
    from app.stats.claims import PureDP
    from app.stats.confidence import confidence_sequence

    rng = np.random.default_rng(5)
    n, periods = 200, 40
    design = HORIZON_DESIGN.with_horizon(100)
    far = confidence_sequence(rng.binomial(n, 0.8, periods), rng.binomial(n, 0.05, periods), n, PureDP(1.0),
                              design=design)
    assert far.claim_rejected[0, -1] and far.lower[0, -1] > 1.0  # log(0.8/0.05) = 2.77: far outside ε = 1
    null = confidence_sequence(rng.binomial(n, 0.5, periods), rng.binomial(n, 0.5, periods), n, PureDP(1.0),
                               design=design)
    assert not null.claim_rejected.any()
