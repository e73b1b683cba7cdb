"""The held-out test of a privacy claim on one event's counts (docs/audit.md §4; method.md §9).

An event ``E`` chosen on other data is tested on fresh samples: ``a`` of ``n_x`` outputs of
``A(x)`` and ``b`` of ``n_x'`` outputs of ``A(x')`` fall in ``E``. With exact Clopper–Pearson
bounds (Clopper & Pearson, Biometrika 1934) ``p ≥ p_lo`` and ``q ≤ q_hi``, each at level α/2,
jointly at level α, any claim that bounds ``p`` by a function of ``q`` can be refuted:

- pure and approximate DP, ``p ≤ e^ε·q + δ`` and ``1 − q ≤ e^ε (1 − p) + δ`` (Dwork & Roth,
  Def. 2.4, applied to the event E and its complement): the bound
  ``ε ≥ max(ln((p_lo − δ)/q_hi), ln((1 − δ − q_hi)/(1 − p_lo)))`` holds with probability ≥ 1 − α,
  as in DP-Sniper (Bichsel et al., S&P 2021, §IV, eq. 3) and StatDP (Ding et al., CCS 2018, §4);
- μ-GDP and ρ-zCDP: :meth:`app.stats.claims.Claim.bound` and :meth:`~app.stats.claims.Claim.refuted_by`
  of the one claim type (`/work/shared/docs/sequential.md` §1).

:func:`test_claim` is the one function that turns (claim, counts, α) into a bound and a verdict;
the audit engine calls it for every event it tests, with α already split across events and rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import betaincinv

from app.stats.claims import Claim

__all__ = ["Counts", "HeldOutResult", "clopper_pearson_lower", "clopper_pearson_upper",
           "epsilon_lower_bound", "test_claim"]


def clopper_pearson_lower(k: Any, n: Any, level: float) -> np.ndarray:
    """One-sided exact lower bound on a binomial proportion: P(p < bound) ≤ ``level``
    (Clopper & Pearson 1934): the ``level`` quantile of Beta(k, n − k + 1); 0 when k = 0.
    Vectorised; ``k`` may be fractional (a predicted count)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = betaincinv(np.maximum(k, 1e-300), np.maximum(n - k + 1, 1e-300), level)
    return np.where(k <= 0, 0.0, out)


def clopper_pearson_upper(k: Any, n: Any, level: float) -> np.ndarray:
    """One-sided exact upper bound: the ``1 − level`` quantile of Beta(k + 1, n − k); 1 when k = n."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = betaincinv(k + 1, np.maximum(n - k, 1e-300), 1.0 - level)
    return np.where(k >= n, 1.0, out)


def epsilon_lower_bound(p_lo: Any, q_hi: Any, delta: float = 0.0) -> np.ndarray:
    """``ln((p_lo − δ)/q_hi)``: the smallest ε with ``p ≤ e^ε q + δ`` at the bounds (−inf when
    ``p_lo ≤ δ``; +inf when ``q_hi = 0``, which CP never gives for n ≥ 1)."""
    p_lo = np.asarray(p_lo, dtype=np.float64) - delta
    q_hi = np.asarray(q_hi, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_lo > 0, np.log(np.maximum(p_lo, 1e-300)) - np.log(q_hi), -np.inf)


@dataclass(frozen=True)
class Counts:
    """Held-out counts of one event: ``a`` of ``n_x`` outputs on x, ``b`` of ``n_xp`` on x'."""

    a: int
    n_x: int
    b: int
    n_xp: int

    def __post_init__(self) -> None:
        if not (0 <= self.a <= self.n_x and 0 <= self.b <= self.n_xp and self.n_x >= 1 and self.n_xp >= 1):
            raise ValueError(f"invalid counts {self}")

    def swapped(self) -> Counts:
        return Counts(self.b, self.n_xp, self.a, self.n_x)


@dataclass(frozen=True)
class HeldOutResult:
    """The outcome of :func:`test_claim`."""

    counts: Counts
    alpha: float
    p_hat: float
    q_hat: float
    p_lo: float
    q_hi: float
    lower_bound: float
    refutes: bool
    claim: str

    def to_dict(self) -> dict[str, Any]:
        lb = self.lower_bound
        return {"a": self.counts.a, "n_x": self.counts.n_x, "b": self.counts.b, "n_xp": self.counts.n_xp,
                "alpha": self.alpha, "p_hat": self.p_hat, "q_hat": self.q_hat, "p_lo": self.p_lo, "q_hi": self.q_hi,
                "lower_bound": lb if math.isfinite(lb) else None, "refutes": self.refutes, "claim": self.claim}


def test_claim(claim: Claim, counts: Counts, alpha: float) -> HeldOutResult:
    """Test ``claim`` on the held-out ``counts`` of one event at level ``alpha``.

    ``p_lo`` and ``q_hi`` are one-sided Clopper–Pearson bounds at α/2 each, so that
    ``P(p ≥ p_lo and q ≤ q_hi) ≥ 1 − α`` (union bound), and ``lower_bound = claim.bound(p_lo, q_hi)``
    is a ``1 − α`` lower confidence bound on the claim's parameter (for ε-DP: on ε). The claim is
    refuted when the bounds are incompatible with it. The event must not have been chosen on these
    samples."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must lie in (0, 1)")
    p_lo = float(clopper_pearson_lower(counts.a, counts.n_x, alpha / 2))
    q_hi = float(clopper_pearson_upper(counts.b, counts.n_xp, alpha / 2))
    return HeldOutResult(counts=counts, alpha=alpha, p_hat=counts.a / counts.n_x, q_hat=counts.b / counts.n_xp,
                         p_lo=p_lo, q_hi=q_hi, lower_bound=claim.bound(p_lo, q_hi),
                         refutes=claim.refuted_by(p_lo, q_hi), claim=claim.describe())


test_claim.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
