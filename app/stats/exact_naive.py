"""A fair naive baseline: each period's test at an exact level, Bonferroni over the horizon.

The paper's naive auditor (seed 002, eq. 11; method.md §5) alarms when z_t > Φ⁻¹(1 − α/T). On
the boundary the score z of a period has a lighter right tail than N(0, 1) (it is discrete and
bounded), so that auditor runs far below its level and any comparison with it flatters the
aggregator. This one keeps the statistic and replaces the normal quantile by the exact critical
value of an unconditional test (in the manner of Suissa & Shuster 1985, *Exact unconditional
sample sizes for the 2×2 binomial trial*, JRSS-A 148, for the difference of two proportions):

    c* = min{ c : sup_{(p, q) in the null} P_{p,q}( Z_mono(a, b) > c ) ≤ α' },   α' = α/T,

where a ~ Bin(n, p), b ~ Bin(n, q) independently and the null is the claim's region on the event
(method.md §13.5): p ≤ s·q + d **and** its mirrored face 1 − q ≤ s·(1 − p) + d (Kairouz, Oh &
Viswanath 2015, Theorem 2.1: an (ε, δ) claim bounds the event and its complement). On the line
p = s·q + d the mirrored face holds only up to the claim's vertex

    q* = (1 − d)/(1 + s)                                              (method.md §13.5, eq. V)

(pure ε: q* = 1/(1 + e^ε), p* = e^ε/(1 + e^ε)); beyond it the points of the line are outside the
null, and a supremum taken over them would make the test conservative (at n = 200,
ε = 0.1, α/T = 2.5·10⁻⁴ the whole line gives c = 3.607 where 3.280 suffices).
Z_mono(a, b) = max_{a' ≤ a, b' ≥ b} Z(a', b') makes the rejection region monotone (more hits
of A(x), fewer of A(x'), never undo a rejection); the score z is already monotone, so for it
this changes nothing. For a monotone region the rejection probability grows with p, so the
supremum over the null is attained on the boundary p = s·q + d, 0 ≤ q ≤ q*, and is a maximum
over the single nuisance parameter q, taken on a grid and refined around its peak. A line with
s < 1 (a tangent of a trade-off curve, e.g. μ-GDP) touches the claim's region at one point only;
for it the supremum is taken over the whole line, a superset of the null (conservative). The test is exact (its size
never exceeds α'), and conservative only through the discreteness of the counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize_scalar
from scipy.stats import binom

from app.stats.sequential import SupportingLine

#: Largest n for which the (n+1)² table of the statistic is built (float32, about 100 MB).
MAX_EXACT_N = 5000


def naive_statistic(a: ArrayLike, b: ArrayLike, n: int, line: SupportingLine) -> NDArray[np.float64]:
    """The period statistic the naive test thresholds.

    With d = 0 it is the score z of method.md §1 (the restricted MLE of q on p = s·q, valid for
    any slope s > 0, so also for a GDP tangent with s < 1). With d > 0 it is the Wald form of
    p̂ − s·q̂ − d with the variance floored at 1/n; the exact calibration makes either valid.
    """
    a_arr = np.asarray(a, dtype=np.float64)
    b_arr = np.asarray(b, dtype=np.float64)
    s, d = line.slope, line.intercept
    p_hat, q_hat = a_arr / n, b_arr / n
    gap = p_hat - s * q_hat - d
    if d == 0.0:
        big_b = n + a_arr + s * (n + b_arr)
        disc = np.maximum(big_b * big_b - 8.0 * n * s * (a_arr + b_arr), 0.0)
        q_t = 2.0 * (a_arr + b_arr) / (big_b + np.sqrt(disc))
        p_t = s * q_t
        var = p_t * (1 - p_t) + s * s * q_t * (1 - q_t)
    else:
        var = p_hat * (1 - p_hat) + s * s * q_hat * (1 - q_hat)
    sigma = np.sqrt(np.maximum(var, 1.0 / n))
    return np.where(gap == 0.0, 0.0, math.sqrt(n) * gap / sigma)


@dataclass(frozen=True)
class ExactNaiveTest:
    """One period's exact test: reject when Z_mono(a, b) > threshold."""

    n: int
    slope: float
    intercept: float
    level: float
    threshold: float
    size: float  # sup over the null of the rejection probability (≤ level)
    worst_q: float  # the q attaining it
    #: The randomised test (eq. R of method.md §13.5): also reject with probability ``gamma`` when
    #: Z_mono equals ``random_value`` (the threshold itself, or the largest value of Z_mono when the
    #: plain test never rejects), with the gamma
    #: whose size is the level (bisection, 40 steps).
    gamma: float = 0.0
    randomized_size: float = 0.0
    random_value: float = math.inf

    def statistic(self, a: ArrayLike, b: ArrayLike) -> NDArray[np.float32]:
        """Z_mono(a, b) = max_{a' ≤ a, b' ≥ b} Z(a', b') (method.md §13.5), the value :meth:`rejects` compares."""
        table = _monotone_table(self.n, self.slope, self.intercept)
        return table[np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)]

    def rejects(self, a: ArrayLike, b: ArrayLike, u: ArrayLike | None = None) -> NDArray[np.bool_]:
        """Z_mono(a, b) > threshold; with uniforms ``u`` (same shape), also Z_mono = threshold and
        u < gamma (the randomised test of size exactly the level)."""
        z = self.statistic(a, b)
        out = z > self.threshold
        if u is not None and self.gamma > 0:
            out = out | ((z == np.float32(self.random_value)) & (np.asarray(u) < self.gamma))
        return out


@lru_cache(maxsize=4)
def _monotone_table(n: int, slope: float, intercept: float) -> NDArray[np.float32]:
    a = np.arange(n + 1, dtype=np.float64)[:, None]
    b = np.arange(n + 1, dtype=np.float64)[None, :]
    z = naive_statistic(a, b, n, SupportingLine(slope, intercept)).astype(np.float32)
    np.maximum.accumulate(z, axis=0, out=z)
    z = np.flip(np.maximum.accumulate(np.flip(z, axis=1), axis=1), axis=1)
    return np.ascontiguousarray(z)


def _size(table: NDArray[np.float32], threshold: float, n: int, line: SupportingLine,
          qs: NDArray[np.float64]) -> NDArray[np.float64]:
    """P_q(Z_mono > threshold) on the boundary p = s·q + d, for each q of ``qs``."""
    a_min = (table <= threshold).sum(axis=0)  # per b: the first a that rejects (n+1: none)
    b = np.arange(n + 1)
    p = np.clip(line.slope * qs + line.intercept, 0.0, 1.0)
    pmf_b = binom.pmf(b[None, :], n, qs[:, None])
    sf_a = binom.sf(a_min[None, :] - 1, n, p[:, None])
    return np.sum(pmf_b * sf_a, axis=1)


def null_q_max(line: SupportingLine) -> float:
    """The largest q of the null on the line p = s·q + d (method.md §13.5, eq. V).

    s ≥ 1 (the line of an (ε, δ) claim, pure ε with d = 0): the vertex q* = (1 − d)/(1 + s) where
    the mirrored face 1 − q ≤ s(1 − p) + d starts to bind. s < 1 (a tangent of a concave trade-off
    boundary): the whole line inside the unit square, min(1, (1 − d)/s), which contains the null.
    """
    s, d = line.slope, line.intercept
    if s >= 1.0:
        return (1.0 - d) / (1.0 + s)
    return min(1.0, (1.0 - d) / s) if s > 0 else 1.0


def _q_grid(q_max: float) -> NDArray[np.float64]:
    base = np.unique(np.concatenate([np.geomspace(1e-7, 1.0, 160), np.linspace(0.0, 1.0, 241)[1:]]))
    return base * q_max


def _sup_size(table: NDArray[np.float32], threshold: float, n: int, line: SupportingLine,
              qs: NDArray[np.float64]) -> tuple[float, float]:
    sizes = _size(table, threshold, n, line, qs)
    k = int(np.argmax(sizes))
    lo, hi = qs[max(k - 1, 0)], qs[min(k + 1, qs.size - 1)]
    best, best_q = float(sizes[k]), float(qs[k])
    if hi > lo:
        res = minimize_scalar(lambda q: -float(_size(table, threshold, n, line, np.array([q]))[0]),
                              bounds=(lo, hi), method="bounded", options={"xatol": (hi - lo) * 1e-4})
        if -res.fun > best:
            best, best_q = float(-res.fun), float(res.x)
    return best, best_q


@lru_cache(maxsize=64)
def exact_naive_test(n: int, line: SupportingLine, level: float) -> ExactNaiveTest:
    """The exact critical value of one period's test at ``level`` (method.md §13.5): the smallest
    c whose size, sup over 0 < q ≤ q* (:func:`null_q_max`) of P(Z_mono > c), is ≤ level."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if n > MAX_EXACT_N:
        raise ValueError(f"the exact naive test is built for n <= {MAX_EXACT_N}, got {n}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    n = int(n)
    table = _monotone_table(n, line.slope, line.intercept)
    q_max = null_q_max(line)
    if q_max <= 0:
        raise ValueError("the claim's line allows every (p, q): there is nothing to test")
    qs = _q_grid(q_max)
    candidates = np.unique(table)
    candidates = candidates[np.isfinite(candidates)]
    # Bisection for the smallest candidate whose sup size is ≤ level (size falls as c grows).
    # The largest candidate leaves an empty region (size 0), so the search always ends.
    lo, hi = 0, candidates.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _sup_size(table, float(candidates[mid]), n, line, qs)[0] <= level:
            hi = mid
        else:
            lo = mid + 1
    top = float(candidates[lo])
    gamma, rand_size = _randomisation(table, top, float(candidates[lo - 1]) if lo > 0 else -math.inf,
                                      n, line, qs, level)
    if lo == candidates.size - 1:  # no region but the empty one has size ≤ level: never rejects
        return ExactNaiveTest(n, line.slope, line.intercept, level, math.inf, 0.0, float("nan"), gamma, rand_size, top)
    size, worst_q = _sup_size(table, top, n, line, qs)
    return ExactNaiveTest(n, line.slope, line.intercept, level, top, size, worst_q, gamma, rand_size, top)


def _randomisation(table: NDArray[np.float32], c: float, c_lower: float, n: int, line: SupportingLine,
                   qs: NDArray[np.float64], level: float) -> tuple[float, float]:
    """γ of the randomised test (method.md §13.5, eq. R): reject when Z > c, and with probability γ
    when Z = c, with γ the largest in [0, 1] whose size sup_q [(1 − γ)·P_q(Z > c) + γ·P_q(Z > c⁻)]
    is ≤ level (c⁻ the next value below c; size is continuous and increasing in γ, so bisection)."""
    if not math.isfinite(c_lower):
        return 0.0, _sup_size(table, c, n, line, qs)[0]

    def size_at(g: float) -> float:
        def mixed(q: NDArray[np.float64]) -> NDArray[np.float64]:
            return (1 - g) * _size(table, c, n, line, q) + g * _size(table, c_lower, n, line, q)
        sizes = mixed(qs)
        k = int(np.argmax(sizes))
        lo_q, hi_q = qs[max(k - 1, 0)], qs[min(k + 1, qs.size - 1)]
        best = float(sizes[k])
        if hi_q > lo_q:
            res = minimize_scalar(lambda q: -float(mixed(np.array([q]))[0]), bounds=(lo_q, hi_q), method="bounded",
                                  options={"xatol": (hi_q - lo_q) * 1e-4})
            best = max(best, float(-res.fun))
        return best

    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if size_at(mid) <= level:
            lo = mid
        else:
            hi = mid
    return lo, size_at(lo)


def exact_naive_alarm_period(a: ArrayLike, b: ArrayLike, n: int, line: SupportingLine, alpha: float,
                             horizon: int, rng: np.random.Generator | None = None) -> NDArray[np.int64]:
    """First 1-based period whose exact test at α/T rejects, along the last axis; 0 if none.

    With ``rng`` the randomised test (size exactly α/T per period) is used, else the plain one
    (size ≤ α/T, smaller through the discreteness of the counts)."""
    if horizon < 1:
        raise ValueError("horizon must be >= 1")
    test = exact_naive_test(int(n), line, alpha / horizon)
    u = None if rng is None else rng.random(np.shape(a))
    rejects = test.rejects(a, b, u)
    hit = rejects.any(axis=-1)
    return np.where(hit, rejects.argmax(axis=-1) + 1, 0)
