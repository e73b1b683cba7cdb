"""A monitor check's detection power: the smallest violation it catches within K periods with probability ≥ 0.9.

Pure functions (no I/O); docs/method.md §13.11 writes the formulas out. Pure-ε claims only: the check
tests one event E on a pair (x, x') against the line p ≤ e^ε q (seed 002 eq. 7; method.md §13.1), with
q = P[M(x') ∈ E] and p = P[M(x) ∈ E]. A *violation of size X* on this check is p = min(1, e^X·q) at the
check's own q: the mechanism's ε on this event is X > ε_claim. With n outputs per side and period,
a ~ Bin(n, p) and b ~ Bin(n, q) independently in every period.

**E-process** (method.md §13.3c; W_t ≥ 1/level alarms) and **e-detector** (§13.4; M_t ≥ c alarms). Both
statistics are mixtures with positive weights, so each is at least one component's weight times that
component's product of period e-values. For the grid bet λ_j = c_j/(s + d) with prior weight π_j, and
(e-process) the start weight ω_{t₀} of the bets that start at the period t₀ the violation starts at (§13.3):

    log W_{t₀+K−1} ≥ log ω_{t₀} + log π_j + Σ_{t₀ ≤ t < t₀+K} L_t(λ_j)                          (P1)

(the e-detector's e-SR has R ≥ the product of the F_t since any start, so the same with ω = 1). L_t is
the Jensen lower bound of the per-sample log e-value of §13.2 (app.stats.sequential.log_evalues_sd with
``payoff="per-sample-jensen"``). The detectors bet the exact e-value (§13.2 eq. (F)), which is ≥ e^{L_t}
period by period, so (P1) holds for them with this L_t as well (a lower bound):

    L(a, b) = a·log u + b·log w + (n − a − b)·log z + (ab/n)·(log v + log z − log u − log w),

with u = 1 + λ(1 − d), v = 1 + λ(1 − s − d), w = 1 − λ(s + d), z = 1 − λd. L = κ₀ + κ_a·a + κ_b·b + β·ab is
bilinear in (a, b), so its mean and variance under independent binomials are exact (condition on b):

    E L   = κ₀ + κ_a·np + κ_b·nq + β·n²pq,
    Var L = np(1 − p)·[(κ_a + β·nq)² + β²·nq(1 − q)] + (κ_b + β·np)²·nq(1 − q).                (P2)

The K periods are independent, so Σ L_t has mean K·E L and variance K·Var L; by the central limit
theorem (a normal approximation, checked by simulation in tests/test_monitor_power.py)

    P(alarm within K) ≥ max_j Φ((K·E L_j − c_j) / √(K·Var L_j)),
    c_j = log(threshold) + log(1/π_j) + log(1/ω_{t₀}).                                          (P3)

The first inequality is exact (an alarm at K is an alarm within K, and the mixture is ≥ each
component); only Φ is an approximation. The bound ignores the aGRAPA bet (which adapts and usually
does better than any fixed grid bet) and assumes the e-process bets on the violated face, which the
predictable face picks once the past counts point there.

**Aggregator** (seed 002 eq. 13, alarm when M_t > q_{1−α}(T, γ)): M_K ≥ S_K / (√T·(K/T)^γ) (the lag
k = K term). A period's score z_t = √n·D̂/σ̃ (eq. 12, with the restricted-MLE variance σ̃² of the null,
method.md §1) is ≈ N(z̄, r²) under the violation, with z̄ the score at the expected counts (np, nq),
D = p − e^ε q, V = p(1 − p) + e^{2ε} q(1 − q) and r = √V/σ̃ = √V·z̄/(√n·D) (the score divides by the
null's variance, not the truth's), so

    P(alarm within K) ≥ Φ((K·z̄ − q·√T·(K/T)^γ) / (√K·r))          (K ≤ T).                    (P4)

The smallest X with the bound ≥ 0.9 is found by bisection on X (the bound grows with p).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from scipy.stats import norm

from app.stats.period import period_statistic
from app.stats.sequential import DEFAULT_GRID_SIZE, START_WEIGHT_NORMALISER, bet_grid, component_log_prior

__all__ = ["DetectionPower", "detection_probability", "log_evalue_moments", "smallest_caught_violation"]

PowerDetector = Literal["aggregator", "e-process", "e-detector"]

#: The probability the statement is made at ("caught within K periods with probability ≥ 0.9").
DEFAULT_PROBABILITY = 0.9


@dataclass(frozen=True)
class DetectionPower:
    """The smallest violation ε ≥ ``epsilon`` caught within ``periods`` periods with probability ≥ ``probability``.

    ``epsilon`` is None when no violation of this event is (even p = 1 at the check's q)."""

    detector: str
    claimed_epsilon: float
    epsilon: float | None
    periods: int
    probability: float
    n: int
    q: float
    violation_p: float | None
    bound: float | None  # the (P3)/(P4) value at ``epsilon``

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def log_evalue_moments(n: int, p: float, q: float, slope: float, intercept: float,
                       fractions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E L, Var L) of one period's per-sample log e-value for each bet fraction c_j (eq. P2)."""
    c = np.asarray(fractions, dtype=np.float64)
    s, d = float(slope), float(intercept)
    lam = c / (s + d)
    log_u, log_v = np.log1p(lam * (1.0 - d)), np.log1p(lam * (1.0 - s - d))
    log_w, log_z = np.log1p(-lam * (s + d)), np.log1p(-lam * d)
    beta = (log_v + log_z - log_u - log_w) / n
    k_a, k_b, k_0 = log_u - log_z, log_w - log_z, n * log_z
    mean = k_0 + k_a * n * p + k_b * n * q + beta * n * n * p * q
    var = (n * p * (1 - p) * ((k_a + beta * n * q) ** 2 + beta ** 2 * n * q * (1 - q))
           + (k_b + beta * n * p) ** 2 * n * q * (1 - q))
    return mean, np.maximum(var, 0.0)


def _normal_tail(mean_sum: np.ndarray, sd_sum: np.ndarray, level: np.ndarray) -> np.ndarray:
    """P(N(mean_sum, sd_sum²) ≥ level), with sd 0 read as a point mass."""
    with np.errstate(divide="ignore", invalid="ignore"):
        zs = np.where(sd_sum > 0, (mean_sum - level) / np.where(sd_sum > 0, sd_sum, 1.0),
                      np.where(mean_sum >= level, np.inf, -np.inf))
    return norm.cdf(zs)


def detection_probability(detector: PowerDetector, *, n: int, p: float, q: float, epsilon: float, periods: int,
                          log_threshold: float | None = None, threshold: float | None = None,
                          horizon: int | None = None, gamma: float = 0.25, start: int = 1) -> float:
    """The lower bound (P3) or (P4) on P(the check's detector alarms within ``periods`` periods).

    e-process / e-detector: ``log_threshold`` = log(1/level) or log c (the state's ``log_threshold``);
    aggregator: ``threshold`` = q_{1−α}(T, γ) and ``horizon`` = T. ``start``: the period the violation starts
    at (the e-process's start weight ω_start, §13.3; the aggregator needs start − 1 + periods ≤ T; the
    e-detector's e-SR restarts on its own, R ≥ the product from any start)."""
    if isinstance(start, bool) or not isinstance(start, int) or start < 1:
        raise ValueError(f"start must be an integer >= 1, got {start!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(periods, bool) or not isinstance(periods, int) or periods < 1:
        raise ValueError(f"periods must be an integer >= 1, got {periods!r}")
    if not (0.0 <= p <= 1.0 and 0.0 <= q <= 1.0):
        raise ValueError(f"p and q must lie in [0, 1], got {p}, {q}")
    s = math.exp(float(epsilon))
    if detector == "aggregator":
        if threshold is None or horizon is None or horizon < 1:
            raise ValueError("the aggregator needs its threshold and horizon")
        if start - 1 + periods > horizon:
            raise ValueError(f"start - 1 + periods ({start - 1 + periods}) must not exceed the horizon ({horizon})")
        var = p * (1 - p) + s * s * q * (1 - q)
        gap = p - s * q
        # z̄: the period's score (eq. 12, restricted-MLE variance σ̃², method.md §1) at the expected counts;
        # the score's sd under the violation is r = √V/σ̃ (σ̃ is the null's variance, not the truth's)
        z_bar = float(period_statistic(n * p, n * q, n, float(epsilon)).z)
        if gap <= 0 or var <= 0 or z_bar <= 0:
            return 0.0 if gap <= 0 else (1.0 if var <= 0 else 0.0)
        r = math.sqrt(var) * z_bar / (math.sqrt(n) * gap)
        need = float(threshold) * math.sqrt(horizon) * (periods / horizon) ** gamma
        return float(norm.cdf((periods * z_bar - need) / (math.sqrt(periods) * r)))
    if detector not in ("e-process", "e-detector"):
        raise ValueError(f"unknown detector {detector!r}")
    if log_threshold is None:
        raise ValueError(f"the {detector} needs its log threshold")
    grid = bet_grid(DEFAULT_GRID_SIZE)
    log_pi: np.ndarray
    if detector == "e-process":  # the service's design: the grid shares 0.2 of the prior (method.md §13.3c)
        log_pi = component_log_prior(DEFAULT_GRID_SIZE, "auto", True, 0.8)[:DEFAULT_GRID_SIZE]
        log_omega1 = -math.log(START_WEIGHT_NORMALISER * (start + 1) * math.log(start + 1.0) ** 2)
    else:  # the e-detector: 16 equal weights, e-SR ≥ the product from period 1
        log_pi = np.full(DEFAULT_GRID_SIZE, -math.log(DEFAULT_GRID_SIZE))
        log_omega1 = 0.0
    log_mean, log_var = log_evalue_moments(n, p, q, s, 0.0, grid)
    level = float(log_threshold) - log_pi - log_omega1
    return float(np.max(_normal_tail(periods * log_mean, np.sqrt(periods * log_var), level)))


def smallest_caught_violation(detector: PowerDetector, *, n: int, q: float, epsilon: float, periods: int,
                              probability: float = DEFAULT_PROBABILITY, log_threshold: float | None = None,
                              threshold: float | None = None, horizon: int | None = None,
                              gamma: float = 0.25, start: int = 1, tolerance: float = 0.01) -> DetectionPower:
    """The smallest X > ``epsilon`` (to ``tolerance``, rounded up) with the bound (P3)/(P4) ≥ ``probability``
    at p = min(1, e^X q): "a violation of ε ≥ X on this check is caught within K periods with probability
    ≥ 0.9". The bound grows with p, so bisection on X ∈ (ε, ln(1/q)] finds it."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability must lie in (0, 1), got {probability!r}")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1], got {q!r}")

    def bound(x: float) -> float:
        p = min(1.0, math.exp(x) * q)
        return detection_probability(detector, n=n, p=p, q=q, epsilon=epsilon, periods=periods,
                                     log_threshold=log_threshold, threshold=threshold, horizon=horizon, gamma=gamma,
                                     start=start)

    def result(x: float | None) -> DetectionPower:
        return DetectionPower(detector, float(epsilon), x, int(periods), float(probability), int(n), float(q),
                              None if x is None else min(1.0, math.exp(x) * q), None if x is None else bound(x))

    if q <= 0.0 or epsilon >= -math.log(q):  # p ≤ e^ε q allows p = 1 already: no violation on this event
        return result(None)
    hi = -math.log(q)  # p = 1
    if bound(hi) < probability:
        return result(None)
    lo = float(epsilon)
    while hi - lo > tolerance:
        mid = 0.5 * (lo + hi)
        if bound(mid) >= probability:
            hi = mid
        else:
            lo = mid
    up = round(math.ceil(hi / tolerance) * tolerance, 12)  # a round figure, never below the bisection's
    return result(up if up <= -math.log(q) and bound(up) >= probability else hi)
