"""The one-pair audit (app/stats/onepair.py, method.md §13.10): exact values, predictability,
level on a mechanism exactly on the claim's boundary, power on a violation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.stats.onepair import (
    ONS_CONSTANT,
    LocationScaleFit,
    OnePairAuditor,
    audit_pairs,
    features,
    fit_location_scale,
    fit_log_ratio,
    kelly_witness,
    ons_step,
    ramp_cap,
    shifted_kelly_witness,
    soft_payoff,
    standardiser,
)
from app.stats.sequential import SupportingLine, gdp_supporting_line


def test_soft_payoff_hand_values() -> None:
    s = math.exp(0.1)
    assert soft_payoff(0.5, 0.25, s, 0.0) == pytest.approx(0.5 - 0.25 * 1.1051709180756477)
    assert soft_payoff(1.0, 0.0, 2.0, 0.01) == pytest.approx(0.99)
    assert soft_payoff(0.0, 1.0, 2.0, 0.01) == pytest.approx(-2.01)
    with pytest.raises(ValueError):
        soft_payoff(1.2, 0.0, 1.0, 0.0)


def test_soft_payoff_mean_obeys_the_claim_for_any_witness() -> None:
    # Exact means on a finite space: P ≤ s·Q pointwise (ε-DP), any h ∈ [0, 1] (eq. OP1).
    rng = np.random.default_rng(0)
    s = math.exp(0.5)
    for _ in range(200):
        q = rng.dirichlet(np.ones(6))
        p = q * rng.uniform(math.exp(-0.5), s, 6)
        p /= p.sum()
        if np.any(p > s * q + 1e-12) or np.any(q > s * p + 1e-12):
            continue
        h = rng.uniform(0, 1, 6)
        assert p @ h - s * (q @ h) <= 1e-12


def test_kelly_witness_hand_values() -> None:
    # h = min(1, s (r − s)₊/(r + s²)) (eq. OP3)
    assert kelly_witness(math.log(3.0), 1.0) == pytest.approx(0.5)       # (3 − 1)/(3 + 1)
    assert kelly_witness(math.log(4.0), 1.5) == pytest.approx(0.6)       # 1.5·2.5/6.25
    assert kelly_witness(math.log(10.0), 2.0) == pytest.approx(1.0)      # 2·8/14 > 1: capped
    assert kelly_witness(0.0, 1.2) == 0.0                                 # r ≤ s: no bet
    assert kelly_witness(800.0, 1.2) == pytest.approx(1.0)               # no overflow
    assert kelly_witness(-800.0, 1.2) == 0.0


def test_features_and_standardiser() -> None:
    np.testing.assert_allclose(features(2.0), [1.0, 2.0, 2.0, 1.0, 3.0, 4.0])
    np.testing.assert_allclose(features(-50.0), [1.0, -10.0, 10.0, 11.0, 9.0, 100.0])  # clipped at ±10
    assert standardiser(np.array([0.0, 1.0, 2.0, 10.0])) == pytest.approx((1.5, 1.0))
    assert standardiser(np.array([3.0, 3.0, 3.0])) == (3.0, 1.0)


def test_ons_step_hand_values() -> None:
    # g = −0.5, A = 1.25, λ = 0 + (2/(2 − log 3))·0.5/1.25 (eq. OP4)
    lam, a = ons_step(0.0, 0.5, 1.0, 0.9)
    assert a == pytest.approx(1.25)
    assert lam == pytest.approx(ONS_CONSTANT * 0.4) and lam == pytest.approx(0.88752, abs=1e-5)
    assert ons_step(0.0, 2.0, 1.0, 0.5)[0] == 0.5  # capped
    assert ons_step(0.1, -1.0, 1.0, 0.5)[0] == 0.0  # a loss pushes the bet to 0


def test_fit_log_ratio_reaches_the_penalised_optimum() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.laplace(0, 2, 300), rng.laplace(0, 1, 300)
    pooled = np.concatenate([x, y])
    m, sc = standardiser(pooled)
    design = features((pooled - m) / sc)
    label = np.concatenate([np.ones(300), np.zeros(300)])
    beta = fit_log_ratio(design, label, np.zeros(design.shape[1]), 1.0, iterations=30)
    prob = 1 / (1 + np.exp(-(design @ beta)))
    pen = np.array([1e-3] + [1.0] * (design.shape[1] - 1))
    assert np.max(np.abs(design.T @ (label - prob) - pen * beta)) < 1e-6
    lr = features(np.array([0.0, 5.0, -5.0])) @ beta
    assert lr[1] > lr[0] and lr[2] > lr[0]  # the wider side (x) wins the tails


@pytest.mark.parametrize("bet_rule", ["constant", "ons"])
def test_pair_t_is_bet_with_what_pairs_before_t_chose(bet_rule: str) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.laplace(0, 20, 60), rng.laplace(0.5, 10, 60)
    aud = OnePairAuditor(0.05, SupportingLine.pure(0.1), bet_rule=bet_rule)  # type: ignore[arg-type]
    bets = 0
    for t in range(60):
        face, line, bet, log_w = aud._face, aud._line, aud.bet, aud.log_w
        if t >= 2 and face:
            s, d = line.slope, line.intercept
            hx, hy = float(aud.witness(x[t], face, s)), float(aud.witness(y[t], face, s))
            expected = (hx - s * hy - d) if face == 1 else (hy - s * hx - d)
            # OP4: the constant bet c/(s + d), c = 0.9; OP4': the ONS bet chosen after pair t − 1
            expected_bet = 0.9 / (s + d) if bet_rule == "constant" else min(bet, 0.9 / (s + d))
            got_bet, got = aud.update(x[t], y[t])
            assert got == pytest.approx(expected) and got_bet == pytest.approx(expected_bet)
            assert aud.log_w == pytest.approx(log_w + math.log1p(expected_bet * expected))
            bets += 1
        else:
            assert aud.update(x[t], y[t]) == (0.0, 0.0)
    assert bets >= 40
    # Changing later pairs does not change the earlier path.
    x2, y2 = x.copy(), y.copy()
    x2[40:], y2[40:] = -x2[40:], 3 * y2[40:]
    a = audit_pairs(x, y, SupportingLine.pure(0.1), 0.05, stop=False)
    b = audit_pairs(x2, y2, SupportingLine.pure(0.1), 0.05, stop=False)
    np.testing.assert_array_equal(a.log_wealth[:40], b.log_wealth[:40])
    assert not np.array_equal(a.log_wealth[40:], b.log_wealth[40:])


def test_level_on_the_boundary_tight_laplace() -> None:
    # mean(x) + Lap(0.5/ε) on x = (0), x' = (0, 1): exactly ε-DP for this pair, and every event in
    # the tail beyond both centres has p = e^ε q. P(ever reject) ≤ α by Ville; 400 runs of 60 pairs.
    eps, alpha, runs = 0.1, 0.05, 400
    rng = np.random.default_rng(20)
    rejected = 0
    for _ in range(runs):
        x = rng.laplace(0.0, 0.5 / eps, 60)
        y = rng.laplace(0.5, 0.5 / eps, 60)
        rejected += audit_pairs(x, y, SupportingLine.pure(eps), alpha).rejected_at is not None
    # 0.05 + 2.5 binomial sd (0.011) at 400 runs.
    assert rejected / runs <= 0.078


def test_power_nondp_laplace() -> None:
    # NonDPLaplace1 at ε = 0.1: Lap(0, 20) against 0.5 + Lap(0, 10), claim ε-DP.
    rng = np.random.default_rng(21)
    times = []
    for _ in range(20):
        x, y = rng.laplace(0.0, 20.0, 400), rng.laplace(0.5, 10.0, 400)
        res = audit_pairs(x, y, SupportingLine.pure(0.1), 0.05)
        times.append(res.rejected_at or 10**9)
        if res.rejected_at is not None:
            assert res.log_wealth[-1] >= math.log(20) > res.log_wealth[-2]
            assert len(res.log_wealth) == res.rejected_at
    assert sum(t <= 400 for t in times) >= 19
    assert np.median(times) < 150


def test_tangent_claim_gdp_rejects_a_violation() -> None:
    # A supporting-line claim given as q₀ ↦ tangent of the μ-GDP curve (eq. OP1 with (s_t, d_t)).
    rng = np.random.default_rng(22)
    hits = 0
    for _ in range(10):
        x, y = rng.normal(0.0, 20.0, 400), rng.normal(0.5, 10.0, 400)
        hits += audit_pairs(x, y, lambda q0: gdp_supporting_line(0.1, q0), 0.05).rejected_at is not None
    assert hits >= 9


def test_options_are_checked() -> None:
    with pytest.raises(ValueError):
        OnePairAuditor(0.0, SupportingLine.pure(0.1))
    with pytest.raises(ValueError):
        OnePairAuditor(0.05, SupportingLine.pure(0.1), cap=1.0)
    with pytest.raises(ValueError):
        OnePairAuditor(0.05, SupportingLine.pure(0.1), warmup=1)
    with pytest.raises(ValueError):
        audit_pairs(np.zeros(3), np.zeros(4), SupportingLine.pure(0.1), 0.05)
    with pytest.raises(ValueError):
        OnePairAuditor(0.05, SupportingLine.pure(0.1)).update(float("nan"), 0.0)
    with pytest.raises(ValueError):
        OnePairAuditor(0.05, SupportingLine.pure(0.1), model="kde")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        OnePairAuditor(0.05, SupportingLine.pure(0.1), kappa=0.0)


def test_extreme_outputs_keep_the_witness_in_range() -> None:
    # The DPLaplace mechanism can divide by a count of 10⁻¹²: outputs of 10¹² must not break the fit.
    rng = np.random.default_rng(23)
    x, y = rng.laplace(0, 1, 200), rng.laplace(0, 1, 200)
    x[::17] = 1e12
    y[5::23] = -1e12
    res = audit_pairs(x, y, SupportingLine.pure(0.5), 0.05, stop=False)
    assert np.all(np.isfinite(res.log_wealth))
    assert np.all((res.bets >= 0) & (res.bets <= 0.9 / math.exp(0.5) + 1e-12))
    assert np.all((res.bets == 0) | np.isclose(res.bets, 0.9 / math.exp(0.5)))  # OP4: the constant bet
    assert np.all(res.payoffs >= -math.exp(0.5) - 1e-12) and np.all(res.payoffs <= 1.0)


def test_atoms_hand_values() -> None:
    """eq. OP2b: counts of each value on each side, κ = 1; a value never seen has log r̂ = 0."""
    from app.stats.onepair import atom_log_ratio, atom_lookup

    vals, lr = atom_log_ratio([1.0, 1.0, 2.0], [2.0, 3.0, 3.0])
    np.testing.assert_array_equal(vals, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(lr, [math.log(3 / 1), math.log(2 / 2), math.log(1 / 3)])
    np.testing.assert_allclose(atom_lookup(vals, lr, [3.0, 1.0, 2.5, 9.0, -1.0]),
                               [math.log(1 / 3), math.log(3), 0.0, 0.0, 0.0])


def _lattice(rng: np.random.Generator, shift: float, size: int) -> np.ndarray:
    """Laplace noise rounded to a grid that starts at ``shift``: the supports of 0 and 0.5 are disjoint."""
    return np.round(rng.laplace(0.0, 10.0, size)) + shift


def test_atoms_find_a_support_the_smooth_model_cannot_see() -> None:
    """Outputs on two disjoint lattices (true ε = ∞, each side's histogram looks the same): the atoms
    mode rejects ε = 1 in every seeded run; the level holds on the two-sided geometric mechanism, which
    is exactly ε-DP (every tail event lies on the claim's line)."""
    found = []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        res = audit_pairs(_lattice(rng, 0.0, 2000), _lattice(rng, 0.5, 2000), SupportingLine.pure(1.0), 0.05)
        found.append(res.rejected_at)
    assert all(t is not None for t in found), found
    assert float(np.median(found)) < 500
    eps, rejected = 0.5, 0
    rng = np.random.default_rng(1000)
    for _ in range(200):
        def geometric(centre: int) -> np.ndarray:  # P(k) ∝ e^{−ε|k − centre|}
            g = 1.0 - math.exp(-eps)
            return centre + rng.geometric(g, 150) - rng.geometric(g, 150).astype(np.float64)
        rejected += audit_pairs(geometric(0), geometric(1), SupportingLine.pure(eps), 0.05).rejected_at is not None
    assert rejected <= 0.05 * 200 + 3 * math.sqrt(0.05 * 0.95 * 200), rejected  # level α, 3 se of slack


def test_seeded_rejection_times_of_the_shipped_defaults() -> None:
    """NonDPLaplace1 at ε = 0.1 (Lap(0, 20) against 0.5 + Lap(0, 10)), five seeded streams: the shipped
    auditor (ours-v5: OP2c, OP3', constant bet), the earlier ours-v4 (spline OP2 with ρ = 3, OP3,
    constant bet) and ours-v3 (ρ = 1, ONS bet) reject at these pairs; a change of the defaults or of
    a fit shows here."""
    shipped, v4, v3 = [], [], []
    spline: dict[str, object] = {"model": "spline", "shape": "op3", "ramp": 0}
    for seed in range(5):
        rng = np.random.default_rng(100 + seed)
        x, y = rng.laplace(0.0, 20.0, 600), rng.laplace(0.5, 10.0, 600)
        shipped.append(audit_pairs(x, y, SupportingLine.pure(0.1), 0.05).rejected_at)
        v4.append(audit_pairs(x, y, SupportingLine.pure(0.1), 0.05, **spline).rejected_at)  # type: ignore[arg-type]
        v3.append(audit_pairs(x, y, SupportingLine.pure(0.1), 0.05, ridge=1.0, bet_rule="ons",
                              **spline).rejected_at)  # type: ignore[arg-type]
    assert shipped == [48, 44, 38, 51, 163]
    assert v4 == [25, 52, 93, 54, 127] and v3 == [90, 57, 35, 55, 163]


def test_shifted_kelly_witness_and_ramp_hand_values() -> None:
    # h = (1 − a·s/r)₊ in [0, 1] (eq. OP3'), a = 0.8 by default
    assert shifted_kelly_witness(math.log(2.0), 1.0) == pytest.approx(0.6)          # 1 − 0.8/2
    assert shifted_kelly_witness(math.log(4.0), 1.5, 0.5) == pytest.approx(0.8125)  # 1 − 0.5·1.5/4
    assert shifted_kelly_witness(math.log(0.5), 1.0) == 0.0                         # r ≤ a·s: no bet
    assert shifted_kelly_witness(800.0, 1.2) == pytest.approx(1.0)
    assert shifted_kelly_witness(-800.0, 1.2) == 0.0
    # the cap min(1, (t − 1)/T₀) at pair t (eq. OP3'), T₀ = 10
    assert [ramp_cap(k) for k in (0, 2, 5, 10, 50)] == [0.0, 0.2, 0.5, 1.0, 1.0]
    assert ramp_cap(3, 0) == 1.0


def test_location_scale_fit_hand_values() -> None:
    """eq. OP2c on x = (−1, 0, 1), y = (−2, 0, 2): the Gaussian family has the larger likelihood
    (−9.377 against −9.806 for Laplace), the pooled fit is (0, 10/6), and κ = 1 shrinks the
    variances to (3·2/3 + 10/6)/4 and (3·8/3 + 10/6)/4."""
    ll_lap = -3 * math.log(4 / 3) - 3 * math.log(8 / 3) - 6.0
    ll_gau = -3 * math.log(2 * math.pi) - 1.5 * math.log(2 / 3) - 1.5 * math.log(8 / 3) - 3.0
    assert ll_gau > ll_lap
    fit = fit_location_scale([-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0])
    bx, by = math.sqrt((2 + 10 / 6) / 4), math.sqrt((8 + 10 / 6) / 4)
    assert fit.family == "gaussian"
    assert (fit.mx, fit.my) == (0.0, 0.0) and fit.bx == pytest.approx(bx) and fit.by == pytest.approx(by)
    v = np.array([0.0, 1.5, -3.0])
    np.testing.assert_allclose(fit.log_ratio(v), math.log(by / bx) - v**2 / (2 * bx**2) + v**2 / (2 * by**2))
    # Laplace laws (1, 2) and (0, 1): log r = log(1/2) − |v − 1|/2 + |v|
    lap = LocationScaleFit("laplace", 1.0, 2.0, 0.0, 1.0)
    np.testing.assert_allclose(lap.log_ratio(np.array([1.0, 5.0])),
                               [math.log(1 / 2) - 0.0 + 1.0, math.log(1 / 2) - 2.0 + 5.0])


def test_location_scale_fit_recovers_the_laws() -> None:
    """Seeded: 4,000 pairs of Lap(0, 2) against Lap(1, 1) give the Laplace family and the laws
    within a few percent; the same with N(0, 2²) against N(1, 1) the Gaussian family."""
    rng = np.random.default_rng(31)
    fit = fit_location_scale(rng.laplace(0, 2, 4000), rng.laplace(1, 1, 4000))
    assert fit.family == "laplace"
    assert fit.mx == pytest.approx(0.0, abs=0.1) and fit.my == pytest.approx(1.0, abs=0.05)
    assert fit.bx == pytest.approx(2.0, rel=0.05) and fit.by == pytest.approx(1.0, rel=0.05)
    fit = fit_location_scale(rng.normal(0, 2, 4000), rng.normal(1, 1, 4000))
    assert fit.family == "gaussian"
    assert fit.bx == pytest.approx(2.0, rel=0.05) and fit.by == pytest.approx(1.0, rel=0.05)
    # one distinct value on each side: the pooled scale keeps both scales positive
    tiny = fit_location_scale([3.0, 3.0], [5.0, 5.0])
    assert tiny.bx > 0 and tiny.by > 0 and np.all(np.isfinite(tiny.log_ratio(np.array([0.0, 4.0]))))


def test_shipped_witness_is_capped_by_the_ramp() -> None:
    """At pair t the shipped witness is at most (t − 1)/10 (eq. OP3'): a bet on pair 3 risks at most
    0.9·0.2·s/(s + d) of the wealth."""
    rng = np.random.default_rng(32)
    x, y = rng.laplace(0, 20, 30), rng.laplace(0.5, 10, 30)
    aud = OnePairAuditor(0.05, SupportingLine.pure(0.1))
    for t in range(30):
        if aud._face:
            grid = np.linspace(-200, 200, 401)
            assert float(aud.witness(grid, aud._face, math.exp(0.1)).max()) <= min(1.0, aud.t / 10) + 1e-12
        aud.update(x[t], y[t])
    assert aud.t == 30
