"""Claims as regions of (p, q), their restricted MLEs, lines and lower bounds (method.md §10)."""

import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from app.stats import accounting
from app.stats.claim_period import anchor_line, claim_period_statistic, claim_z_path, line_statistic
from app.stats.claims import (
    ZCDP,
    ApproxDP,
    GaussianDP,
    Line,
    PureDP,
    boundary_mle,
    clopper_pearson,
    delta_lower_bound,
    epsilon_lower_bound,
    line_mle,
    mu_lower_bound,
    parse_claim,
    refutes,
    supporting_line,
)
from app.stats.period import period_statistic, restricted_mle_q

# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "data,expected",
    [
        ({"epsilon": 1}, PureDP(1.0)),
        ({"epsilon": 1, "delta": 1e-5}, ApproxDP(1.0, 1e-5)),
        ({"epsilon": 1, "delta": 0}, PureDP(1.0)),
        ({"gdp_mu": 0.5}, GaussianDP(0.5)),
        ({"zcdp_rho": 0.2}, ZCDP(0.2)),
    ],
)
def test_parse_claim_forms(data, expected):
    claim = parse_claim(data)
    assert claim == expected
    assert parse_claim(claim.to_dict()) == claim


@pytest.mark.parametrize(
    "data,message",
    [
        ({"delta": 1e-5}, "needs an epsilon"),
        ({"epsilon": 1, "gdp_mu": 1}, "exactly one"),
        ({"gdp_mu": 0}, "gdp_mu must lie"),
        ({"zcdp_rho": -1}, "rho must lie"),
        ({"epsilon": 1, "delta": 1}, "delta must lie"),
        ({"epsilon": 1, "delta": -0.1}, "delta must lie"),
        ({"mu": 1}, "unknown claim field"),
        ({"epsilon": "1"}, "must be a number"),
        ({"epsilon": True}, "must be a number"),
        ([1.0], "must be an object"),
        ({}, "exactly one"),
    ],
)
def test_parse_claim_rejects(data, message):
    with pytest.raises(ValueError, match=message):
        parse_claim(data)


def test_describe():
    assert ApproxDP(1, 1e-5).describe() == "(1, 1e-05)-DP"
    assert PureDP(0.5).describe() == "0.5-DP"
    assert GaussianDP(1.5).describe() == "1.5-GDP"
    assert ZCDP(0.25).describe() == "0.25-zCDP"


# ----------------------------------------------------------------------------- regions

Q = np.array([0.0, 1e-6, 1e-3, 0.05, 0.2, 0.5, 0.8, 0.999, 1.0])


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-6), (1.0, 1e-5), (2.0, 0.1)])
def test_approx_dp_boundary_is_kairouz_region(eps, delta):
    c = math.exp(eps)
    expected = np.minimum.reduce([c * Q + delta, 1 - (1 - delta - Q) / c, np.ones_like(Q)])
    np.testing.assert_allclose(ApproxDP(eps, delta).upper(Q), expected, rtol=1e-12, atol=1e-15)
    # f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^−ε (1 − δ − α)} (Dong, Roth & Su eq. 2.3)
    f = np.maximum.reduce([np.zeros_like(Q), 1 - delta - c * Q, (1 - delta - Q) / c])
    np.testing.assert_allclose(ApproxDP(eps, delta).tradeoff(Q), f, atol=1e-12)


def test_pure_dp_is_delta_zero():
    np.testing.assert_allclose(PureDP(0.7).upper(Q), ApproxDP(0.7, 1e-300).upper(Q), atol=1e-15)


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0])
def test_gdp_boundary_and_its_epsilon_delta_envelope(mu):
    claim = GaussianDP(mu)
    np.testing.assert_allclose(claim.upper(Q), stats.norm.cdf(stats.norm.ppf(Q) + mu), atol=1e-15)
    # μ-GDP ⟺ (ε, δ_μ(ε))-DP for all ε (Dong, Roth & Su Cor. 2.13): the envelope of the
    # (ε, δ(ε)) regions from dp-accounting reproduces the smooth curve.
    grid = (mu * 8 + 5) * np.linspace(0, 1, 120) ** 1.5
    bound = np.ones_like(Q)
    for e in grid:
        d = accounting.gdp_delta(mu, e)
        bound = np.minimum.reduce([bound, math.exp(e) * Q + d, 1 - (1 - d - Q) / math.exp(e)])
    assert np.all(bound >= claim.upper(Q) - 1e-9)
    np.testing.assert_allclose(bound, claim.upper(Q), atol=2e-3)


@pytest.mark.parametrize("rho", [0.05, 0.5, 2.0])
def test_zcdp_region_contains_the_gaussian_mechanism(rho):
    # The Gaussian mechanism with σ = 1/√(2ρ) is ρ-zCDP and √(2ρ)-GDP; its trade-off curve
    # must lie inside the zCDP region, and not far inside it (the conversion is nearly tight).
    claim = ZCDP(rho)
    gauss = GaussianDP(math.sqrt(2 * rho)).upper(Q)
    assert np.all(claim.upper(Q) >= gauss - 1e-12)
    assert np.all(claim.upper(Q) <= 1.0)
    assert claim.delta_at(1.0) == pytest.approx(accounting.zcdp_delta(rho, 1.0))
    assert float(claim.upper(0.0)) < 1e-12  # δ(ε) → 0 as ε grows


def test_delta_at():
    e = math.e
    assert ApproxDP(1.0, 1e-5).delta_at(1.0) == 1e-5
    # randomized response: δ(ε') = (e^ε − e^ε')/(1 + e^ε)
    assert PureDP(1.0).delta_at(0.5) == pytest.approx((e - math.exp(0.5)) / (1 + e), rel=1e-12)
    assert PureDP(1.0).delta_at(1.0) == 0.0
    mu = 0.8
    expected = stats.norm.cdf(-0.3 / mu + mu / 2) - math.exp(0.3) * stats.norm.cdf(-0.3 / mu - mu / 2)
    assert GaussianDP(mu).delta_at(0.3) == pytest.approx(expected, rel=1e-9)


def test_allows_and_excess():
    claim = ApproxDP(1.0, 0.01)
    assert claim.allows(0.01, 0.0)
    assert not claim.allows(0.02, 0.0)
    assert not claim.allows(0.0, 0.02)  # the other direction
    assert claim.excess(0.02, 0.0) == pytest.approx(0.01)


# ----------------------------------------------------------------------------- restricted MLEs


def test_line_mle_without_intercept_is_farrington_manning():
    rng = np.random.default_rng(3)
    n = 500
    a, b = rng.integers(0, n + 1, size=(2, 200))
    eps = 0.8
    p, q = line_mle(a, b, n, Line.upper(math.exp(eps), 0.0))
    np.testing.assert_allclose(q, restricted_mle_q(a, b, n, eps), atol=1e-9)
    np.testing.assert_allclose(p, math.exp(eps) * q, atol=1e-9)


def _nll(p, q, a, b, n):
    p, q = min(max(p, 1e-300), 1 - 1e-16), min(max(q, 1e-300), 1 - 1e-16)
    return -(a * math.log(p) + (n - a) * math.log(1 - p) + b * math.log(q) + (n - b) * math.log(1 - q))


@pytest.mark.parametrize("seed", range(3))
def test_line_mle_with_intercept_matches_an_optimiser(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n = int(rng.integers(10, 3000))
        a, b = (int(v) for v in rng.integers(0, n + 1, size=2))
        s, d = float(rng.uniform(0.2, 5)), float(rng.uniform(0, 0.3))
        p, q = line_mle(a, b, n, Line.upper(s, d))
        res = optimize.minimize_scalar(lambda t: _nll(d + s * t, t, a, b, n), bounds=(0, min(1, (1 - d) / s)),
                                       method="bounded", options={"xatol": 1e-12})
        assert _nll(float(p), float(q), a, b, n) <= res.fun + 1e-6
        assert float(p) == pytest.approx(d + s * float(q), abs=1e-12)


@pytest.mark.parametrize("claim", [GaussianDP(1.0), ApproxDP(1.0, 0.02), ZCDP(0.3)])
def test_boundary_mle_is_the_best_boundary_point(claim):
    rng = np.random.default_rng(7)
    n = 400
    a, b = rng.integers(0, n + 1, size=(2, 30))
    fit = boundary_mle(claim, a, b, n)
    # a dense parametrisation of both branches of the boundary
    qs = np.concatenate([np.linspace(0, 1, 20001), np.geomspace(1e-9, 1e-2, 4000)])
    ps = np.clip(claim.upper(qs), 1e-300, 1 - 1e-16)
    qs = np.clip(qs, 1e-300, 1 - 1e-16)

    def ll(k1, k2, x1, x2):
        return k1 * np.log(x1) + (n - k1) * np.log1p(-x1) + k2 * np.log(x2) + (n - k2) * np.log1p(-x2)

    for i in range(len(a)):
        best = max(ll(a[i], b[i], ps, qs).max(), ll(a[i], b[i], qs, ps).max())
        assert float(fit.loglik[i]) >= best - 1e-6 * max(1.0, abs(best))
        # the fitted point is on the boundary
        p, q = float(fit.p[i]), float(fit.q[i])
        assert min(abs(p - float(claim.upper(q))), abs(q - float(claim.upper(p)))) < 1e-9


@pytest.mark.parametrize("claim", [GaussianDP(0.5), ApproxDP(1.0, 1e-3), PureDP(1.0), ZCDP(0.5)])
def test_supporting_lines_contain_the_region(claim):
    rng = np.random.default_rng(11)
    # random points inside the region
    pts = rng.uniform(0, 1, size=(20000, 2))
    inside = pts[claim.allows(pts[:, 0], pts[:, 1])]
    for p0, q0 in [(0.9, 0.1), (0.3, 0.05), (0.05, 0.3), (0.5, 0.5), (0.01, 0.0001)]:
        line = supporting_line(claim, p0, q0)
        assert np.all(line.payoff(inside[:, 0], inside[:, 1]) <= 1e-9)
        # ... and it touches the boundary
        t = np.linspace(0, 1, 100001)
        touch = max(np.max(-line.payoff(claim.upper(t), t)), 0)
        assert min(np.min(-line.payoff(claim.upper(t), t)), np.min(-line.payoff(t, claim.upper(t)))) < 1e-6, touch
    # boundary_mle's lines too
    a, b = rng.integers(0, 201, size=(2, 50))
    fit = boundary_mle(claim, a, b, 200)
    for i in range(50):
        assert np.all(fit.line[i].payoff(inside[:, 0], inside[:, 1]) <= 1e-9)


def test_line_dict_round_trip():
    for line in (Line.upper(2.0, 0.01), Line.lower(3.0, 0.2)):
        back = Line.from_dict(line.to_dict())
        assert back.payoff(0.3, 0.1) == pytest.approx(float(line.payoff(0.3, 0.1)))
    assert Line.lower(3.0, 0.2).to_dict() == {"orientation": "lower", "slope": 3.0, "intercept": 0.2}


# ----------------------------------------------------------------------------- period statistic


def test_pure_epsilon_claim_keeps_seed_002_statistic():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 301, size=(2, 100))
    got = claim_period_statistic(a, b, 300, PureDP(0.9))
    want = period_statistic(a, b, 300, 0.9)
    np.testing.assert_allclose(got.z, want.z, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got.sigma_hat, want.sigma_hat, rtol=1e-7)


def test_line_statistic_known_value():
    # p ≤ 2q + 0.1 with a = 60, b = 10, n = 100: D̂ = 0.6 − 0.2 − 0.1 = 0.3
    s = line_statistic(60, 10, 100, Line.upper(2.0, 0.1))
    p_t, q_t = float(s.p_tilde), float(s.q_tilde)
    assert p_t == pytest.approx(0.1 + 2 * q_t)
    assert float(s.d_hat) == pytest.approx(0.3)
    assert float(s.z) == pytest.approx(10 * 0.3 / math.sqrt(p_t * (1 - p_t) + 4 * q_t * (1 - q_t)))


def test_lower_branch_tests_the_other_direction():
    claim = GaussianDP(0.5)
    # the event is much likelier under x' than under x: the past counts point to the lower branch
    s = claim_period_statistic(5, 60, 100, claim, anchor=(5, 60, 100))
    assert str(s.line.orientation) == "lower"
    assert float(s.z) > 3
    s2 = claim_period_statistic(60, 5, 100, claim, anchor=(60, 5, 100))
    assert str(s2.line.orientation) == "upper"
    assert float(s2.z) == pytest.approx(float(s.z), rel=1e-9)


def test_a_period_with_no_past_tests_the_line_fixed_a_priori():
    """The first period's line: never the period's own counts. (ε, δ): the face p ≤ e^ε q + δ through the vertex."""
    from app.stats.claim_period import a_priori_line

    s = claim_period_statistic(5, 60, 100, GaussianDP(0.5))
    prior = a_priori_line(GaussianDP(0.5))
    assert float(s.line.cp) == pytest.approx(float(prior.cp)) and float(s.line.c0) == pytest.approx(float(prior.c0))
    line = a_priori_line(ApproxDP(1.0, 0.01))
    assert str(line.orientation) == "upper" and float(line.slope) == pytest.approx(math.e)
    assert float(line.intercept) == pytest.approx(0.01)
    vertex_p, vertex_q = (math.e + 0.01) / (1 + math.e), 0.99 / (1 + math.e)
    assert float(line.payoff(vertex_p, vertex_q)) == pytest.approx(0.0, abs=1e-12)
    z = claim_z_path(np.array([[60, 5, 5]]), np.array([[5, 60, 60]]), 100, GaussianDP(0.5))
    assert z[0, 0] == pytest.approx(float(s2z := claim_period_statistic(60, 5, 100, GaussianDP(0.5)).z))
    assert np.isfinite(s2z)


@pytest.mark.parametrize("claim,p,q", [
    # the vertex of the (ε, δ) region where both constraints bind
    (ApproxDP(1.0, 1e-3), (math.e + 1e-3) / (1 + math.e), (1 - 1e-3) / (1 + math.e)),
    (GaussianDP(1.0), float(special.ndtr(0.5)), float(special.ndtr(-0.5))),
])
def test_anchored_z_is_standard_normal_at_the_boundary(claim, p, q):
    rng = np.random.default_rng(5)
    n = 2000
    a = rng.binomial(n, p, size=(400, 12))
    b = rng.binomial(n, q, size=(400, 12))
    z = claim_z_path(a, b, n, claim)[:, 1:]  # periods with a past
    assert abs(z.mean()) < 0.05
    assert z.std() == pytest.approx(1.0, abs=0.05)
    # the naive "distance to the region" (line from the same counts) is biased at the vertex
    if isinstance(claim, ApproxDP):
        own = claim_period_statistic(a[:, 5], b[:, 5], n, claim, line=anchor_line(claim, a[:, 5], b[:, 5], n)).z
        assert own.mean() > 0.2


def test_anchor_line_with_no_events_is_not_degenerate():
    line = anchor_line(GaussianDP(1.0), 0, 0, 400)
    assert float(line.slope) < 100
    assert np.isfinite(float(claim_period_statistic(0, 1, 100, GaussianDP(1.0), line=line).z))


def test_period_statistic_validates():
    with pytest.raises(ValueError):
        claim_period_statistic(5, 101, 100, GaussianDP(1.0))
    with pytest.raises(ValueError):
        claim_period_statistic(5, 1, 0, GaussianDP(1.0))


# ----------------------------------------------------------------------------- lower bounds


def test_clopper_pearson_matches_scipy_exact_interval():
    for k, n in [(0, 50), (3, 50), (25, 50), (50, 50), (17, 1000)]:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
        assert float(clopper_pearson(k, n, 0.05, "lower")) == pytest.approx(ci.low, abs=1e-12)
        assert float(clopper_pearson(k, n, 0.05, "upper")) == pytest.approx(ci.high, abs=1e-12)


def test_lower_bounds_exact_values():
    a, b, n, alpha = 900, 100, 1000, 0.05
    p_lo = stats.beta.ppf(alpha / 2, a, n - a + 1)
    q_hi = stats.beta.ppf(1 - alpha / 2, b + 1, n - b)
    delta = 1e-5
    eps_lb = max(math.log((p_lo - delta) / q_hi), math.log((1 - delta - q_hi) / (1 - p_lo)))
    assert float(epsilon_lower_bound(a, b, n, delta, alpha)) == pytest.approx(eps_lb, rel=1e-12)
    assert float(mu_lower_bound(a, b, n, alpha)) == pytest.approx(stats.norm.ppf(p_lo) - stats.norm.ppf(q_hi), rel=1e-12)
    c = math.exp(1.0)
    d_lb = max(p_lo - c * q_hi, (1 - q_hi) - c * (1 - p_lo))
    assert float(delta_lower_bound(a, b, n, 1.0, alpha)) == pytest.approx(d_lb, rel=1e-12)
    assert float(delta_lower_bound(a, b, n, 3.0, alpha)) == 0.0
    # no evidence: bounds at 0
    assert float(epsilon_lower_bound(10, 10, 100)) == 0.0
    assert float(mu_lower_bound(10, 10, 100)) == 0.0


def test_refutes():
    # 900 vs 100 of 1000: μ_lb ≈ 2.3, so 1-GDP is refuted and 3-GDP is not
    assert bool(refutes(GaussianDP(1.0), 900, 100, 1000))
    assert not bool(refutes(GaussianDP(3.0), 900, 100, 1000))
    assert bool(refutes(ApproxDP(1.0, 1e-5), 900, 100, 1000))
    assert not bool(refutes(ApproxDP(3.0, 1e-5), 900, 100, 1000))


def test_lower_bounds_cover_at_the_boundary():
    # at a tight GDP boundary point, μ_lb exceeds the true μ in at most α of the runs
    mu = 1.0
    q = 0.05
    p = float(GaussianDP(mu).upper(q))
    rng = np.random.default_rng(2)
    a = rng.binomial(5000, p, 4000)
    b = rng.binomial(5000, q, 4000)
    assert np.mean(mu_lower_bound(a, b, 5000, 0.05) > mu) <= 0.05
    assert np.mean(refutes(GaussianDP(mu), a, b, 5000, 0.05)) <= 0.05
