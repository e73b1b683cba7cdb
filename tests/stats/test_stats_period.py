"""Period statistic (method.md §1; seed 002 eqs. 7, 8, 12, 16)."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from app.stats.period import period_statistic, restricted_mle_q


def _neg_restricted_loglik(q, a, b, n, c):
    p = c * q
    eps = 1e-300
    return -(a * np.log(max(p, eps)) + (n - a) * np.log(max(1 - p, eps))
             + b * np.log(max(q, eps)) + (n - b) * np.log(max(1 - q, eps)))


def test_known_values_wald():
    # a=60, b=20, n=100, eps=1: p=0.6, q=0.2, D=0.6-e*0.2
    s = period_statistic(60, 20, 100, 1.0, variance="wald")
    c = np.e
    d = 0.6 - c * 0.2
    var = 0.6 * 0.4 + c * c * 0.2 * 0.8
    assert s.d_hat == pytest.approx(d)
    assert s.sigma_hat == pytest.approx(np.sqrt(var))
    assert s.z == pytest.approx(10 * d / np.sqrt(var))


@pytest.mark.parametrize("seed", range(5))
def test_score_variance_equals_numerical_restricted_mle(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(5, 5000))
        eps = float(rng.uniform(0.05, 3.0))
        c = np.exp(eps)
        a, b = rng.integers(0, n + 1, size=2)
        q_closed = float(restricted_mle_q(a, b, n, eps))
        res = minimize_scalar(_neg_restricted_loglik, bounds=(0.0, 1.0 / c), args=(a, b, n, c),
                              method="bounded", options={"xatol": 1e-13})
        assert q_closed == pytest.approx(res.x, abs=1e-6)
        # ... and the closed form is at least as good a maximiser as the optimiser's point.
        assert _neg_restricted_loglik(q_closed, a, b, n, c) <= res.fun + 1e-7
        s = period_statistic(a, b, n, eps, variance="score")
        p_t = c * res.x
        var = p_t * (1 - p_t) + c * c * res.x * (1 - res.x)
        assert s.sigma_hat == pytest.approx(np.sqrt(max(var, 1e-6)), rel=1e-4, abs=1e-6)


def test_vectorised_matches_scalar():
    a = np.array([0, 5, 50, 100])
    b = np.array([0, 1, 30, 100])
    vec = period_statistic(a, b, 100, 0.5)
    for i in range(4):
        one = period_statistic(int(a[i]), int(b[i]), 100, 0.5)
        assert vec.z[i] == pytest.approx(float(one.z))


@pytest.mark.parametrize("variance", ["score", "wald"])
@pytest.mark.parametrize("a,b", [(0, 0), (100, 100), (100, 0), (0, 100), (0, 3), (100, 99)])
def test_degenerate_counts_are_finite(variance, a, b):
    s = period_statistic(a, b, 100, 1.0, variance=variance)
    for v in (s.d_hat, s.sigma_hat, s.z):
        assert np.isfinite(v)
    if s.d_hat == 0:
        assert s.z == 0


def test_zero_when_d_hat_is_zero():
    # a = c*b exactly with c = 1 (eps = 0)
    s = period_statistic(30, 30, 100, 0.0)
    assert s.z == 0.0


@pytest.mark.parametrize("kwargs,msg", [
    (dict(a=5, b=5, n=0, epsilon=1.0), "n must be"),
    (dict(a=101, b=5, n=100, epsilon=1.0), "counts"),
    (dict(a=5, b=-1, n=100, epsilon=1.0), "counts"),
    (dict(a=5, b=5, n=100, epsilon=-1.0), "epsilon"),
    (dict(a=5, b=5, n=100, epsilon=1.0, variance="bogus"), "variance"),
    (dict(a=5, b=5, n=100, epsilon=1.0, kappa=0.0), "kappa"),
])
def test_bad_input_is_refused(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        period_statistic(**kwargs)


def test_score_z_is_standardised_on_the_boundary_where_wald_is_not():
    # At the null boundary p = c*q the aggregator needs z ~ N(0, 1). With rare events
    # (p = 0.01, n = 300: about 3 and 1 hits) score keeps mean 0 and sd 1; wald's tail is heavy.
    rng = np.random.default_rng(7)
    n, eps, p = 300, 1.0, 0.01
    q = p / np.exp(eps)
    a = rng.binomial(n, p, size=200_000)
    b = rng.binomial(n, q, size=200_000)
    score = period_statistic(a, b, n, eps).z
    wald = period_statistic(a, b, n, eps, variance="wald").z
    assert abs(score.mean()) < 0.02
    assert abs(score.std() - 1.0) < 0.03
    assert np.mean(wald > 1.645) > 0.15
