"""The claims of :mod:`app.stats.claims` in the audit engine's held-out test (docs/audit.md §4).

:func:`app.stats.heldout.test_claim` asks a claim two things about the confidence corner
``(p_lo, q_hi)`` of one event's held-out counts (the engine fixes the orientation):

- ``refuted_by``: whether the corner lies outside the claim's region, ``p_lo > h(q_hi)``
  (method.md §10.1; for (ε, δ) both ``p ≤ e^ε q + δ`` and ``1 − q ≤ e^ε (1 − p) + δ``);
- ``bound``: the claim's parameter implied at the corner, a 1 − α lower confidence bound on it:
  ε_lb at the claimed δ, μ_lb = Φ⁻¹(p_lo) − Φ⁻¹(q_hi) (method.md §10.4), and for ρ-zCDP
  ρ_lb = sup_α D_α(Bern(p_lo) ‖ Bern(q_hi))/α — ρ-zCDP bounds the Rényi divergence of every
  post-processing, so of the event's indicator (Bun & Steinke 2016, Def. 1.1 and Lemma 1.8).
  For ρ-zCDP a claim is refuted when either its (ε, δ(ε)) region (dp-accounting) or this Rényi
  bound excludes the corner; both are implied by the claim, so the test keeps its level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from app.stats.claims import ZCDP, ApproxDP, Claim, GaussianDP, PureDP, parse_claim

#: Rényi orders over which ρ_lb takes its supremum.
RENYI_ORDERS = np.concatenate([np.linspace(1.01, 10.0, 400), np.geomspace(10.0, 2000.0, 200)])


def bernoulli_renyi(p: float, q: float, orders: np.ndarray = RENYI_ORDERS) -> np.ndarray:
    """D_α(Bern(p) ‖ Bern(q)) for each order α > 1 (Rényi 1961; log-sum-exp for stability)."""
    p = min(max(p, 0.0), 1.0)
    q = min(max(q, 1e-300), 1.0 - 1e-16)
    a = orders
    terms = []
    if p > 0:
        terms.append(a * math.log(p) + (1 - a) * math.log(q))
    if p < 1:
        terms.append(a * math.log1p(-p) + (1 - a) * math.log1p(-q))
    return special.logsumexp(np.vstack(terms), axis=0) / (a - 1)


def rho_lower_bound(p_lo: float, q_hi: float) -> float:
    """sup_α D_α(Bern(p_lo) ‖ Bern(q_hi))/α, 0 when p_lo ≤ q_hi."""
    if p_lo <= q_hi:
        return 0.0
    return float(max(np.max(bernoulli_renyi(p_lo, q_hi) / RENYI_ORDERS), 0.0))


@dataclass(frozen=True)
class HeldOutClaim:
    """Adapter from a :class:`app.stats.claims.Claim` to the engine's ``Claim`` protocol."""

    claim: Claim
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.claim.kind)

    @classmethod
    def of(cls, data: Any) -> HeldOutClaim:
        return cls(parse_claim(data))

    # The engine reads ``epsilon``/``delta`` when present (candidate ranking, the report).
    @property
    def epsilon(self) -> float | None:
        return getattr(self.claim, "epsilon", None)

    @property
    def delta(self) -> float:
        return float(getattr(self.claim, "delta", 0.0))

    @property
    def value(self) -> float:
        """The claimed value of the parameter that :meth:`bound` bounds (μ, ε or ρ)."""
        c = self.claim
        return float(c.mu if isinstance(c, GaussianDP) else c.rho if isinstance(c, ZCDP) else c.epsilon)  # type: ignore[union-attr]

    @property
    def parameter(self) -> str:
        return {"gdp": "μ", "zcdp": "ρ"}.get(self.claim.kind, "ε")

    def bound(self, p_lo: float, q_hi: float) -> float:
        c = self.claim
        if isinstance(c, GaussianDP):
            if p_lo <= 0 or q_hi >= 1:
                return 0.0
            return float(max(special.ndtri(p_lo) - special.ndtri(q_hi), 0.0))
        if isinstance(c, ZCDP):
            return rho_lower_bound(p_lo, q_hi)
        delta = c.delta if isinstance(c, ApproxDP) else 0.0
        assert isinstance(c, (ApproxDP, PureDP))
        e1 = math.log((p_lo - delta) / q_hi) if p_lo > delta and q_hi > 0 else -math.inf
        e2 = math.log((1 - delta - q_hi) / (1 - p_lo)) if 1 - delta - q_hi > 0 and p_lo < 1 else -math.inf
        return max(e1, e2)

    def refuted_by(self, p_lo: float, q_hi: float) -> bool:
        outside = bool(p_lo > float(self.claim.upper(q_hi)) + 1e-12)
        if isinstance(self.claim, ZCDP):
            return outside or rho_lower_bound(p_lo, q_hi) > self.claim.rho
        return outside

    def describe(self) -> str:
        return self.claim.describe()

    def to_dict(self) -> dict[str, float]:
        """The claim's API form (``{"gdp_mu": m}``, …)."""
        return self.claim.to_dict()
