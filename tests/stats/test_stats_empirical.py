"""Empirical δ and total risk (method.md §7; seed 001 Theorem 1, Definition 3, §4)."""

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from app.reference import get_mechanism
from app.stats.empirical import empirical_delta, privacy_profile, total_risk


def _laplace_delta(eps_grid, eps0):
    """Exact δ(ε) of Laplace(0, 1/ε0) vs Laplace(1, 1/ε0): 1 − e^{(ε − ε0)/2} for ε < ε0, else 0."""
    return np.maximum(0.0, 1.0 - np.exp((np.asarray(eps_grid) - eps0) / 2.0))


def _gaussian_delta(eps_grid, sigma):
    """Exact δ(ε) of N(0, σ²) vs N(1, σ²) (Balle and Wang 2018, Theorem 8)."""
    e = np.asarray(eps_grid)
    return norm.cdf(-e * sigma + 1 / (2 * sigma)) - np.exp(e) * norm.cdf(-e * sigma - 1 / (2 * sigma))


def test_discrete_profile_by_hand():
    x = np.array([0, 1])  # (0.5, 0.5)
    y = np.array([0, 1, 1, 1])  # (0.25, 0.75)
    eps = [0.0, math.log(1.2), math.log(2.0)]
    p = privacy_profile(x, y, eps, "discrete")
    # ε = 0: total variation 0.25; ε = ln 1.2: x→x' (0.5 − 0.3) = 0.2, x'→x (0.75 − 0.6) = 0.15
    np.testing.assert_allclose(p.delta_x_xp, [0.25, 0.2, 0.0])
    np.testing.assert_allclose(p.delta_xp_x, [0.25, 0.15, 0.0])
    np.testing.assert_allclose(p.delta, [0.25, 0.2, 0.0])
    assert p.outcomes_seen == 2 and (p.n_x, p.n_xp) == (2, 4)
    assert empirical_delta(x, y, math.log(1.2), "discrete") == pytest.approx(0.2)
    assert p.epsilon_for_delta(0.2) == pytest.approx(math.log(1.2))
    assert p.epsilon_for_delta(0.0) == pytest.approx(math.log(2.0))
    json.dumps(p.to_dict())


def test_discrete_profile_on_vector_outcomes():
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 0]])
    y = np.array([[1, 0], [0, 1], [0, 1], [1, 1]])
    p = privacy_profile(x, y, [0.0], "discrete")
    assert p.outcomes_seen == 4
    assert p.delta[0] == pytest.approx(0.5)  # total variation: |.5-.25| + |.25-.5| + |.25-0| + |0-.25| = 1, halved


def test_laplace_profile_is_zero_at_the_true_epsilon():
    eps0 = 1.0
    rng = np.random.default_rng(21)
    m = get_mechanism("laplace", epsilon=eps0)
    grid = np.array([0.1, 0.5, 0.8, eps0, 1.5 * eps0])
    p = privacy_profile(m.sample([0.0], 20_000, rng), m.sample([1.0], 20_000, rng), grid, "continuous")
    np.testing.assert_allclose(p.delta[:3], _laplace_delta(grid[:3], eps0), atol=0.012)
    assert p.delta[3] < 0.03  # zero up to the KDE's noise on the plateau (about 0.015)
    assert p.delta[4] < 0.002


def test_gaussian_variant_has_positive_delta():
    eps0 = 1.0
    rng = np.random.default_rng(22)
    m = get_mechanism("laplace-gaussian", epsilon=eps0)
    grid = np.array([0.1, 0.5, eps0, 1.5 * eps0])
    p = privacy_profile(m.sample([0.0], 20_000, rng), m.sample([1.0], 20_000, rng), grid, "continuous")
    exact = _gaussian_delta(grid, math.sqrt(2) / eps0)
    np.testing.assert_allclose(p.delta, exact, atol=0.01)
    assert p.delta[0] > 0.2  # small ε: far from private
    assert p.delta[3] > 0.004  # still positive at 1.5ε, where the Laplace profile is ≈ 0


def test_identical_samples_have_zero_delta():
    rng = np.random.default_rng(23)
    x = rng.normal(size=(3000, 2))
    p = privacy_profile(x, x.copy(), [0.0, 0.5], "continuous")
    np.testing.assert_allclose(p.delta, 0.0, atol=1e-12)
    assert p.range_x == p.range_xp and len(p.grid_spacing) == 2


def test_truncation_to_the_sample_range():
    # disjoint ranges: after truncation each density is 0 on the other's range, so δ = 1 for
    # every ε (without truncation the KDE tails would overlap and give δ < 1)
    rng = np.random.default_rng(24)
    x = rng.uniform(0, 1, size=5000)
    y = rng.uniform(1.2, 2.2, size=5000)
    p = privacy_profile(x, y, [0.0, 2.0, 10.0], "continuous")
    np.testing.assert_allclose(p.delta, 1.0, atol=1e-9)
    assert p.range_x[0] == (x.min(), x.max())


def test_total_risk():
    assert total_risk([0.1, 0.2]) == pytest.approx(1 - 0.9 * 0.8)
    assert total_risk([0.0, 0.0]) == 0.0
    assert total_risk([1.0, 0.3]) == 1.0
    assert total_risk(np.full(1000, 1e-12)) == pytest.approx(1e-9, rel=1e-6)
    for bad in ([], [1.5], [-0.1], [np.nan]):
        with pytest.raises(ValueError):
            total_risk(bad)


def test_validation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=100)
    with pytest.raises(ValueError, match="kind"):
        privacy_profile(x, x, [1.0], "real")
    with pytest.raises(ValueError, match="non-negative"):
        privacy_profile(x, x, [-1.0], "continuous")
    with pytest.raises(ValueError, match="non-empty"):
        privacy_profile(x, x, [], "continuous")
    with pytest.raises(ValueError, match="different dimensions"):
        privacy_profile(rng.normal(size=(100, 2)), x, [1.0], "continuous")
    with pytest.raises(ValueError, match="bandwidth"):
        privacy_profile(x, x, [1.0], "continuous", bandwidth=0.0)
    with pytest.raises(ValueError, match="delta"):
        privacy_profile(x, x, [1.0], "continuous").epsilon_for_delta(2.0)
