"""Privacy-accounting conversions, taken from Google's ``dp-accounting`` library (method.md §10).

Nothing here re-derives a conversion by hand: every number comes from ``dp_accounting``.

- ρ-zCDP → (ε, δ(ε)): a Gaussian event whose RDP curve is ``α ↦ ρα`` (noise multiplier
  ``1/√(2ρ)``; Bun & Steinke 2016, Prop. 1.6 and Mironov 2017, Prop. 7) in dp-accounting's
  ``RdpAccountant``. Its ``get_delta`` converts RDP to (ε, δ) with the bound of Canonne, Kamath &
  Steinke (2020), Prop. 12 (and the KL bound for orders near 1), minimised over the orders.
  Every order gives a valid δ, so a finite set of orders can only make δ larger: the resulting
  curve is a sound (never optimistic) description of what ρ-zCDP promises.
- μ-GDP → (ε, δ(ε)): the privacy loss of the Gaussian mechanism with σ = Δ/μ
  (``GaussianPrivacyLoss.get_delta_for_epsilon``), which is the exact curve of Dong, Roth & Su
  (2022), Corollary 2.13: ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``.
- The Gaussian σ for a target claim:

  ``analytic``  Balle & Wang (2018), *Improving the Gaussian mechanism*, Theorem 8 / Algorithm 1:
                the smallest σ whose exact δ(ε) is at most the target
                (``dp_accounting.gaussian_mechanism.get_sigma_gaussian``);
  ``classic``   Dwork & Roth (2014), Theorem A.1: ``σ = Δ·√(2 ln(1.25/δ))/ε``. This is the
                definition of the classic mechanism (valid as (ε, δ)-DP for ε < 1), not a
                conversion, so it is written out.

  For μ-GDP σ = Δ/μ (Dong, Roth & Su, Theorem 2.7) and for ρ-zCDP σ = Δ/√(2ρ) (Bun & Steinke,
  Prop. 1.6): these *are* the claims' definitions for the Gaussian mechanism.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from dp_accounting.rdp import RdpAccountant

__all__ = [
    "ZCDP_RDP_ORDERS",
    "classic_gaussian_sigma",
    "analytic_gaussian_sigma",
    "gdp_delta",
    "gdp_epsilon",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_delta_curve",
]

#: RDP orders used for ρ-zCDP: dp-accounting's defaults plus a denser grid below 20, where the
#: optimal order of a zCDP curve lies for the ε that matter (α* ≈ (ε + ρ)/(2ρ)).
ZCDP_RDP_ORDERS: tuple[float, ...] = tuple(
    sorted(set(np.round(np.concatenate([np.linspace(1.02, 20.0, 250), np.geomspace(20.0, 4096.0, 60)]), 6).tolist()))
)


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return value


def _check_delta(delta: float) -> float:
    delta = float(delta)
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1); got {delta!r}")
    return delta


def _zcdp_accountant(rho: float) -> RdpAccountant:
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    accountant = RdpAccountant(orders=list(ZCDP_RDP_ORDERS))
    # RDP of the Gaussian mechanism with noise multiplier σ is α/(2σ²); σ = 1/√(2ρ) gives ρα.
    accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / math.sqrt(2.0 * rho)))
    return accountant


def zcdp_delta(rho: float, epsilon: float) -> float:
    """δ(ε) implied by ρ-zCDP (dp-accounting RDP accountant; CKS 2020 Prop. 12)."""
    rho = _check_positive("rho", rho)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0; got {epsilon!r}")
    return float(_zcdp_accountant(rho).get_delta(float(epsilon)))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε(δ) implied by ρ-zCDP (dp-accounting RDP accountant)."""
    rho = _check_positive("rho", rho)
    return float(_zcdp_accountant(rho).get_epsilon(_check_delta(delta)))


@functools.lru_cache(maxsize=64)
def zcdp_delta_curve(rho: float, points: int = 160) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(ε_i, δ(ε_i)) of ρ-zCDP on a grid from 0 to where δ < 10⁻¹⁵ (cached per ρ).

    The grid is denser at small ε, where the curve bends most.
    """
    rho = _check_positive("rho", rho)
    accountant = _zcdp_accountant(rho)
    eps_max = max(1.0, rho + 2.0 * math.sqrt(rho * 15.0 * math.log(10.0)))
    while accountant.get_delta(eps_max) > 1e-15 and eps_max < 60.0:
        eps_max *= 1.5
    eps_max = min(eps_max, 60.0)
    grid = eps_max * np.linspace(0.0, 1.0, points) ** 1.5
    deltas = np.array([accountant.get_delta(float(e)) for e in grid])
    grid.setflags(write=False)
    deltas.setflags(write=False)
    return grid, deltas


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP: Dong, Roth & Su (2022), Cor. 2.13, via dp-accounting's Gaussian privacy loss."""
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    mu = _check_positive("mu", mu)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0; got {epsilon!r}")
    return float(GaussianPrivacyLoss(standard_deviation=1.0 / mu, sensitivity=1.0).get_delta_for_epsilon(float(epsilon)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-GDP (dp-accounting's exact Gaussian conversion, Balle & Wang 2018 eq. 6)."""
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    mu = _check_positive("mu", mu)
    return float(get_epsilon_gaussian(1.0 / mu, _check_delta(delta)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The analytic Gaussian σ of Balle & Wang (2018), Algorithm 1 (dp-accounting)."""
    from dp_accounting.gaussian_mechanism import get_sigma_gaussian

    epsilon = _check_positive("epsilon", epsilon)
    sensitivity = _check_positive("sensitivity", sensitivity)
    return float(get_sigma_gaussian(epsilon, _check_delta(delta))) * sensitivity


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The classic Gaussian σ = Δ·√(2 ln(1.25/δ))/ε of Dwork & Roth (2014), Theorem A.1 (ε < 1)."""
    epsilon = _check_positive("epsilon", epsilon)
    sensitivity = _check_positive("sensitivity", sensitivity)
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / _check_delta(delta))) / epsilon
