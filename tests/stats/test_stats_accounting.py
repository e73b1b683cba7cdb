"""Conversions from dp-accounting (method.md §10.5)."""

import math

import pytest
from scipy import stats

from app.stats import accounting


def test_gdp_delta_is_dong_roth_su_corollary():
    mu, eps = 1.3, 0.7
    expected = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert accounting.gdp_delta(mu, eps) == pytest.approx(expected, rel=1e-10)
    assert accounting.gdp_delta(mu, accounting.gdp_epsilon(mu, 1e-5)) == pytest.approx(1e-5, rel=1e-6)


def test_analytic_sigma_is_exactly_tight_and_below_classic():
    eps, delta = 0.5, 1e-5
    sigma = accounting.analytic_gaussian_sigma(eps, delta, sensitivity=2.0)
    # at σ/Δ the Gaussian mechanism's exact δ(ε) equals the target (Balle & Wang 2018, Thm. 8)
    assert accounting.gdp_delta(2.0 / sigma, eps) == pytest.approx(delta, rel=1e-6)
    classic = accounting.classic_gaussian_sigma(eps, delta, sensitivity=2.0)
    assert classic == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25 / delta)) / eps)
    assert sigma < classic


def test_zcdp_conversion_is_sound_against_the_gaussian_mechanism():
    # the Gaussian mechanism with σ = 1/√(2ρ) is ρ-zCDP, and its exact δ(ε) is below the zCDP one
    rho = 0.3
    for eps in (0.1, 1.0, 3.0):
        assert accounting.zcdp_delta(rho, eps) >= accounting.gdp_delta(math.sqrt(2 * rho), eps) - 1e-12
    # the classic bound δ = exp(−(ε − ρ)²/(4ρ)) (Bun & Steinke Prop. 1.3) is never beaten the wrong way
    eps = 2.0
    assert accounting.zcdp_delta(rho, eps) <= math.exp(-((eps - rho) ** 2) / (4 * rho))
    assert accounting.zcdp_epsilon(rho, accounting.zcdp_delta(rho, eps)) == pytest.approx(eps, rel=1e-2)


@pytest.mark.parametrize("call", [
    lambda: accounting.zcdp_delta(0, 1.0),
    lambda: accounting.gdp_delta(1.0, -1),
    lambda: accounting.analytic_gaussian_sigma(1.0, 1.0),
    lambda: accounting.classic_gaussian_sigma(0.0, 1e-5),
])
def test_rejects_bad_parameters(call):
    with pytest.raises(ValueError):
        call()
