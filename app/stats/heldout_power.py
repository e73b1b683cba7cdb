"""The power of the held-out test: what a run that found nothing would have caught (docs/audit.md §9).

The held-out test (app.stats.heldout.test_claim, eq. HO) refutes a claim on one event's counts
``a`` of ``n_x`` (the side where the event is likelier) and ``b`` of ``n_x′`` when the
Clopper–Pearson corner ``(p_lo(a), q_hi(b))``, each at level/2, lies outside the claim's region.
Its power at true probabilities (p, q) is exactly

    (POW)  π(p, q) = Σ_b Bin(b; n_x′, q) · P[Bin(n_x, p) ≥ a*(b)],
           a*(b) = min{a : refuted_by(p_lo(a), q_hi(b))},

since the test refutes iff a ≥ a*(b) (refuted_by is monotone in p_lo, and p_lo in a). Here the
sum runs over a grid of b across Bin(n_x′, q)'s bulk (outside the 10⁻⁹ tails, counted as
misses); on each grid cell the largest b's a* is used (a* is non-decreasing in b), so π is a
lower bound on the power.

**The smallest violation detected** (:func:`smallest_detected`): for an event of probability q
on the database where it is rarer, the smallest parameter θ′ of the claim's own family (ε at the
claimed δ, μ, ρ) such that the event on the boundary of the claim at θ′, p = h_θ′(q), gives
π ≥ ``power`` (0.9 by default, as assert_dp's statement, sdk/python/dpwatch_sdk/testing). It is a
property of the test (n, level, claim), not of the mechanism: it says what the test would have
caught **had one of the events it tested been that violation**, and nothing about events it did
not test or pairs it did not try.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from app.stats.heldout import clopper_pearson_lower, clopper_pearson_upper

__all__ = ["POWER_LEVEL", "POWER_MASSES", "DetectedViolation", "held_out_power", "smallest_detected"]

#: The power stated, and the event probabilities (on the rarer side) at which it is stated: the
#: same as assert_dp's (sdk/python/dpwatch_sdk/testing/_sequential.py).
POWER_LEVEL = 0.9
POWER_MASSES = (0.3, 0.1, 0.01, 1e-3, 1e-4)
_GRID = 128
_P_STAR_POINTS = 32
_TAIL = 1e-9


def _b_grid(n: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Cells of Bin(n, q)'s bulk: (upper b of each cell, probability of each cell)."""
    dist = stats.binom(n, q)
    lo, hi = int(dist.ppf(_TAIL)), int(dist.ppf(1 - _TAIL))
    edges = np.unique(np.linspace(lo, hi + 1, min(_GRID, hi - lo + 1) + 1).round().astype(np.int64))
    mass = np.diff(dist.cdf(edges - 1))
    return edges[1:] - 1, mass


def _thresholds(refuted_by: Callable[[float, float], bool], n_x: int, n_xp: int, level: float,
                b_top: np.ndarray) -> np.ndarray:
    """a*(b) for each b (n_x + 1 when no a refutes), by bisection: first the smallest p_lo that
    refutes at q_hi(b), then the smallest a whose Clopper–Pearson lower bound exceeds it."""
    q_hi = clopper_pearson_upper(b_top, n_xp, level / 2)
    # p* is non-decreasing in q_hi (the claim's region is {p ≤ h(q)}, h non-decreasing): it is
    # computed at most at _P_STAR_POINTS cells and each cell takes the next computed one to its
    # right, which only raises a* (the power stays a lower bound)
    idx = np.unique(np.append(np.linspace(0, q_hi.size - 1, min(q_hi.size, _P_STAR_POINTS)).round().astype(int),
                              q_hi.size - 1))
    p_at = np.empty(idx.size)
    for j, i in enumerate(idx):
        qh = float(q_hi[i])
        if not refuted_by(1.0, qh):
            p_at[j] = np.inf
            continue
        lo, hi = 0.0, 1.0  # refuted_by(hi) holds
        for _ in range(40):
            mid = (lo + hi) / 2
            if refuted_by(mid, qh):
                hi = mid
            else:
                lo = mid
        p_at[j] = hi
    p_star = p_at[np.searchsorted(idx, np.arange(q_hi.size), side="left")]
    a_lo = np.zeros(b_top.size, dtype=np.int64)  # p_lo(a_lo) < p* (p_lo(0) = 0)
    a_hi = np.full(b_top.size, n_x + 1, dtype=np.int64)  # 'refutes' (n_x + 1: never)
    while np.any(a_hi - a_lo > 1):
        a_mid = (a_lo + a_hi) // 2
        ok = clopper_pearson_lower(np.minimum(a_mid, n_x), n_x, level / 2) >= p_star
        ok &= a_mid <= n_x
        a_hi = np.where(ok & (a_hi - a_lo > 1), a_mid, a_hi)
        a_lo = np.where(~ok & (a_hi - a_lo > 1), a_mid, a_lo)
    return a_hi


def held_out_power(refuted_by: Callable[[float, float], bool], p: float, q: float, n_x: int, n_xp: int,
                   level: float) -> float:
    """π(p, q) of eq. POW (a lower bound, module docstring)."""
    b_top, mass = _b_grid(n_xp, q)
    a_star = _thresholds(refuted_by, n_x, n_xp, level, b_top)
    return float(np.sum(mass * stats.binom.sf(a_star - 1, n_x, p)))


@dataclass(frozen=True)
class DetectedViolation:
    """At event probability ``q`` (rarer side), the smallest claim parameter ``theta`` whose
    boundary event the test refutes with probability ≥ ``power``; None when even p = 1 (or
    64 × the claim) is not refuted that often."""

    q: float
    theta: float | None
    power: float

    def to_dict(self) -> dict[str, float | None]:
        return {"q": self.q, "theta": self.theta, "power": self.power}


def smallest_detected(refuted_by: Callable[[float, float], bool], boundary: Callable[[float, float], float],
                      theta0: float, q: float, n_x: int, n_xp: int, level: float, *, power: float = POWER_LEVEL,
                      theta_max: float | None = None, tol: float = 0.005) -> DetectedViolation:
    """The smallest θ′ ≥ θ0 with π(boundary(θ′, q), q) ≥ ``power`` (eq. POW), by bisection on θ′.

    ``boundary(θ, q)`` is the largest p the claim at parameter θ allows when the other side's
    probability is q (for (ε, δ): min(1, e^ε q + δ)); ``refuted_by`` is the claimed θ0's test."""
    b_top, mass = _b_grid(n_xp, q)
    a_star = _thresholds(refuted_by, n_x, n_xp, level, b_top)

    def pi(theta: float) -> float:
        p = min(1.0, max(0.0, boundary(theta, q)))
        return float(np.sum(mass * stats.binom.sf(a_star - 1, n_x, p)))

    top = theta_max if theta_max is not None else max(64 * theta0, theta0 + 1.0)
    if pi(top) < power:
        return DetectedViolation(q, None, power)
    lo, hi = theta0, top
    step = max(tol * max(theta0, 0.1), 1e-4)
    while hi - lo > step:
        mid = (lo + hi) / 2
        if pi(mid) >= power:
            hi = mid
        else:
            lo = mid
    return DetectedViolation(q, hi if math.isfinite(hi) else None, power)
