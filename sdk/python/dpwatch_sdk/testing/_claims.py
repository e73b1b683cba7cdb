"""A privacy claim as constraints on one event's pair of probabilities.

For neighbours x, x′ and an event E, write p = P(A(x) ∈ E) and q = P(A(x′) ∈ E). Every claim
dpwatch tests bounds p by a concave function of q, in both orientations (x and x′ swapped):

- ε-DP and (ε, δ)-DP: p ≤ e^ε·q + δ (Dwork & Roth, *The Algorithmic Foundations of Differential
  Privacy*, 2014, Def. 2.4, read on the event E);
- μ-GDP: p ≤ Φ(Φ⁻¹(q) + μ) (Dong, Roth & Su, *Gaussian Differential Privacy*, JRSS-B 2022,
  Def. 2.6, the trade-off G_μ read as a bound on one test's power), equivalently
  p ≤ e^ε·q + δ_μ(ε) for every ε ≥ 0 with δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (their
  Cor. 2.13);
- ρ-zCDP: p ≤ e^ε·q + δ_ρ(ε) for every ε ≥ 0, with
  δ_ρ(ε) = inf_{a>1} exp((a−1)(aρ−ε))/(a−1)·(1 − 1/a)^a (Canonne, Kamath & Steinke, *The Discrete
  Gaussian for Differential Privacy*, NeurIPS 2020, Prop. 12). The infimum is taken over a finite
  grid of orders a, which can only make δ larger: a weaker constraint, never a false failure.

So every claim is a family of **lines** p ≤ s·q + c (s = e^ε, c = δ(ε)); the sequential test bets
against one line at a time, chosen before the outputs it is tested on are drawn. A line implied
by the claim contains the claim's region, so a test of the line is a valid test of the claim.

This module is the SDK's own (it imports nothing from the dpwatch service); the service's
``app/stats/claims.py`` holds the same regions for its monitors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import special

from ..mechanism import Claim

__all__ = ["ClaimModel", "gdp_delta", "zcdp_delta"]

ClaimKind = Literal["pure", "approx", "gdp", "zcdp"]

#: Orders a of the zCDP → (ε, δ) conversion (geometric, dense near 1 where small ρ needs them).
_ORDERS = 1.0 + np.geomspace(1e-4, 1e4, 600)
#: Absolute slack added to every δ(ε) of a line: float round-off must never make a line tighter
#: than the claim.
_SLACK = 1e-15


def gdp_delta(mu: float, epsilon: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """δ_μ(ε) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13), in log space where e^ε·Φ(·) would overflow."""
    eps = np.asarray(epsilon, dtype=np.float64)
    first = special.ndtr(-eps / mu + mu / 2)
    second = np.exp(eps + special.log_ndtr(-eps / mu - mu / 2))
    return np.maximum(first - second, 0.0)


def zcdp_delta(rho: float, epsilon: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """δ_ρ(ε) of ρ-zCDP (Canonne, Kamath & Steinke 2020, Prop. 12), minimised over a grid of orders."""
    eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
    a = _ORDERS[None, :]
    log_delta = ((a - 1) * (a * rho - eps[:, None]) - np.log(a - 1) + a * np.log1p(-1 / a))
    out = np.exp(np.minimum(log_delta.min(axis=1), 0.0))
    return out.reshape(np.shape(epsilon))


@dataclass(frozen=True)
class ClaimModel:
    """A claim as the SDK's tester reads it: its kind, its parameter θ (ε, μ or ρ) and δ."""

    kind: ClaimKind
    theta: float
    delta: float = 0.0

    @classmethod
    def of(cls, claim: Claim) -> ClaimModel:
        if claim.gdp_mu is not None:
            return cls("gdp", float(claim.gdp_mu))
        if claim.zcdp_rho is not None:
            return cls("zcdp", float(claim.zcdp_rho))
        if claim.delta:
            return cls("approx", float(claim.epsilon), float(claim.delta))  # type: ignore[arg-type]
        return cls("pure", float(claim.epsilon))  # type: ignore[arg-type]

    # ------------------------------------------------------------------ naming

    @property
    def symbol(self) -> str:
        return {"pure": "ε", "approx": "ε", "gdp": "μ", "zcdp": "ρ"}[self.kind]

    def describe(self) -> str:
        if self.kind == "pure":
            return f"{self.theta:g}-DP"
        if self.kind == "approx":
            return f"({self.theta:g}, {self.delta:g})-DP"
        if self.kind == "gdp":
            return f"{self.theta:g}-GDP"
        return f"{self.theta:g}-zCDP"

    def with_theta(self, theta: float) -> ClaimModel:
        """The same kind of claim with another parameter (a violation "ε′ = 1.5" of a 1-DP claim)."""
        return replace(self, theta=float(theta))

    # ------------------------------------------------------------------ the lines p ≤ s·q + c

    def lines(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Slopes s and intercepts c of lines the claim implies (s ≥ 1: the events are oriented so
        that p ≥ q is where a violation shows)."""
        if self.kind == "pure":
            return np.array([math.exp(self.theta)]), np.array([0.0])
        if self.kind == "approx":
            return np.array([math.exp(self.theta)]), np.array([self.delta])
        eps = self._epsilon_grid()
        delta = gdp_delta(self.theta, eps) if self.kind == "gdp" else zcdp_delta(self.theta, eps)
        return np.exp(eps), delta + _SLACK

    def _epsilon_grid(self, points: int = 160) -> NDArray[np.float64]:
        """ε from 0 to where δ(ε) is below 10⁻¹⁵, denser at small ε."""
        if self.kind == "gdp":
            top = self.theta * self.theta / 2 + 8.5 * self.theta
        else:
            top = self.theta + 2 * math.sqrt(self.theta * 35.0) + 1.0
        return top * np.linspace(0.0, 1.0, points) ** 1.5

    def line_at(self, q: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """For each q, the implied line that is lowest at q (the tangent, on the grid): the
        tightest linear test of the claim near an event of probability q."""
        slopes, intercepts = self.lines()
        q_arr = np.asarray(q, dtype=np.float64)
        if slopes.size == 1:
            return np.full(q_arr.shape, slopes[0]), np.full(q_arr.shape, intercepts[0])
        values = slopes * q_arr[..., None] + intercepts
        best = np.argmin(values, axis=-1)
        return slopes[best], intercepts[best]

    def upper(self, q: NDArray[np.float64] | float) -> NDArray[np.float64]:
        """h(q): the largest p the claim allows for an event of probability q: the lines and their
        complementary faces 1 − q ≥ e^−ε·(1 − δ − p)... read as p ≤ 1 − e^−ε·(1 − δ − q)."""
        q_arr = np.asarray(q, dtype=np.float64)
        if self.kind == "gdp":
            return np.minimum(special.ndtr(special.ndtri(np.clip(q_arr, 0.0, 1.0)) + self.theta), 1.0)
        slopes, intercepts = self.lines()
        direct = (slopes * q_arr[..., None] + intercepts).min(axis=-1)
        complement = (1.0 - (1.0 - intercepts - q_arr[..., None]) / slopes).min(axis=-1)
        return np.clip(np.minimum(direct, complement), 0.0, 1.0)
