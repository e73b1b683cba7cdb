"""Horizon-free detectors on a check's per-period counts: an e-process and an e-detector.

Both bet on the same per-period e-values (method.md §13). A check's claim, on one event, is a
linear constraint on p = P(A(x) ∈ E) and q = P(A(x') ∈ E),

    p − s·q − d ≤ 0                                                   (the null, §13.1)

with s = e^ε, d = 0 for pure ε-DP, d = δ for (ε, δ)-DP (Kairouz, Oh & Viswanath 2015), or a
supporting line (s, d) of a concave trade-off boundary p ≤ h(q) (μ-GDP: Dong, Roth & Su 2022,
Definition 2.1 and Theorem 2.7), chosen before the period's counts are seen.

Per-period e-value (§13.2). In a period the n pairs (X_i, Y_i) are independent, so for a bet
λ ∈ [0, 1/(s+d)) the product Π_i (1 + λ·(X_i − s·Y_i − d)) has mean (1 + λ(p − sq − d))^n ≤ 1
under the null: a test-martingale increment in the betting form of Shekhar & Ramdas, *Nonparametric
two-sample testing by betting* (IEEE Trans. Inf. Theory 2023, arXiv 2112.09162) and Waudby-Smith &
Ramdas, *Estimating means of bounded random variables by betting* (JRSS-B 2024), with one bet per
sample. Only the counts (a, b) are observed, so the detector uses the product's conditional
expectation given (a, b): the overlap K = #{X_i = Y_i = 1} is then exactly hypergeometric
(population n, a successes, b draws), and by the tower property

    F(λ) = u^a · w^b · z^(n−a−b) · E_hyp[r^K],  r = v·z/(u·w),                        (§13.2, eq. (F))
    u = 1 + λ(1 − d),  v = 1 + λ(1 − s − d),  w = 1 − λ(s + d),  z = 1 − λ·d,

has E[F(λ)] = (1 + λ(p − sq − d))^n exactly, ≤ 1 under the null: an e-value with no loss against
the product (``payoff="per-sample"``, the default; log E_hyp[r^K] is
:func:`app.stats.overlap.log_overlap_mgf`, which never exceeds the exact value). Jensen's inequality
E[r^K] ≥ r^(ab/n) gives the closed-form lower bound (``payoff="per-sample-jensen"``, what shipped
before; an e-value too, but with mean below 1 on the boundary for the large bets)

    log F_J(λ) = a·log u + b·log w + (n − a − b)·log z + (a·b/n)·log r.

The detectors mix F over a fixed grid of bets λ_j = c_j/(s + d) with equal weights:

``EProcess``   a test supermartingale that mixes the bets and the period the betting starts:
               W_t = Σ_k ω_k Σ_j π_j Π_{k≤τ≤t} F_τ(λ_j) + (1 − Σ_{k≤t} ω_k), with start weights
               ω_k = 1/(2.11·(k+1)·ln²(k+1)) summing to less than 1 (``starts="mixture"``, the
               default), or ω_1 = 1 (``starts="first"``, the plain product). Alarm when W_t ≥ 1/α.
               By Ville's inequality P(W ever reaches 1/α) ≤ α under the null, with no horizon
               (§13.3). The start mixture costs log(1/ω_k) ≈ 2 ln k nats of evidence for a change
               at period k, and in exchange the wealth lost during a long stable run before it
               does not have to be won back.
``EDetector``  the mixture e-SR procedure of Shin, Ramdas & Rinaldo, *E-detectors: a nonparametric
               framework for sequential change detection* (NEJSDS 2024, arXiv 2203.03532): the
               SR-type e-detector M_t^j = F_t(λ_j)·(M_{t−1}^j + 1) for each bet, mixed as
               M_t = Σ_j π_j M_t^j (or the CUSUM-type, M_t^j = F_t(λ_j)·max(M_{t−1}^j, 1)). Alarm
               when M_t ≥ c. ARL ≥ c, and P(alarm within m periods) ≤ m/c (both derived in
               method.md §13.4); the shipped threshold is c = m/α, a false-alarm rate ≤ α over a
               window of m periods.

Both keep O(K) numbers of state (K = grid size, 16 by default), whatever t is, and serialise it
to JSON (finite floats only). ``update(a, b, n)`` costs O(K).

Which components the e-process mixes, and with what prior, is an :class:`EProcessDesign`:
the grid on one face (the first design), on both faces with the aGRAPA bet and equal weights
(:data:`BOTH_FACES_DESIGN`, method.md §13.3b), or on the face chosen each period from the past counts
(:func:`predictable_face`) with 0.8 of the prior on the aGRAPA bet (:data:`SERVICE_DESIGN`,
method.md §13.3c: what new e-process checks without a horizon run). A check with a horizon of H periods
runs :data:`HORIZON_DESIGN` for H (:func:`service_design`, method.md §13.3d): besides, a bet of fixed
scale for the gap a window of 0.3·H periods finds (:func:`tuned_fraction`), started uniformly within H,
with 0.7 of the prior. Any design is a test supermartingale under the claim, for every t; the service's
waste less evidence (docs/sequential.md, "an e-process that wastes less evidence", "the horizon-tuned bet").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, cast

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp
from scipy.stats import norm

from app.stats.overlap import log_overlap_mgf

#: Default grid of bet fractions c_j (λ_j = c_j/(s+d)): geometric from 5·10⁻³ to 0.8, 16 points
#: (ratio 1.40). The growth-optimal per-sample bet is c* ≈ (s+d)·D/V (method.md §13.2), so the grid
#: is tuned to gaps D from about 0.005·V/(s+d) to the largest bet, which keeps w = 1 − c ≥ 0.2.
DEFAULT_GRID_SIZE = 16
DEFAULT_GRID_LOW = 5e-3
DEFAULT_GRID_HIGH = 0.8

Payoff = Literal["per-sample", "per-sample-jensen", "per-period"]
#: The payoffs that bet once per sample (the exact conditional expectation, or its Jensen bound).
PER_SAMPLE_PAYOFFS = ("per-sample", "per-sample-jensen")
PAYOFFS = ("per-sample", "per-sample-jensen", "per-period")
EDetectorKind = Literal["sr", "cusum"]
Starts = Literal["mixture", "first"]

#: Normaliser of the start weights: Σ_{m≥2} 1/(m ln² m) < 2.0477 + 1/ln(10⁷) < 2.1098 (the
#: partial sum to 10⁷ plus the integral bound of the tail), so Σ_k ω_k < 1.
START_WEIGHT_NORMALISER = 2.11


def start_weight(k: int, starts: Starts = "mixture") -> float:
    """ω_k, the weight of the bets that start at period k ≥ 1 (method.md §13.3)."""
    if k < 1:
        raise ValueError("periods are numbered from 1")
    if starts == "first":
        return 1.0 if k == 1 else 0.0
    if starts != "mixture":
        raise ValueError(f"starts must be 'mixture' or 'first', got {starts!r}")
    return 1.0 / (START_WEIGHT_NORMALISER * (k + 1) * math.log(k + 1) ** 2)


#: The horizon-tuned bet's start weights keep this share for the periods after the horizon (method.md §13.3d).
TUNED_AFTER_HORIZON = 0.1
#: Its window, as a share of the horizon: the bet is Kelly's for the gap that this window finds (§13.3d).
TUNED_WINDOW = 0.3


def horizon_start_weight(k: int, horizon: int) -> float:
    """ω^H_k, the start weight of the horizon-tuned bet at period k ≥ 1 (method.md §13.3d).

    (1 − 0.1)/H for each k ≤ H; the j-th horizon after it (H·j < k ≤ H·(j + 1)) shares
    0.1·6/(π² j²) evenly. Σ_k ω^H_k = 1, so with finite H the bet re-arms after H, at a higher price.
    """
    if k < 1:
        raise ValueError("periods are numbered from 1")
    if horizon < 1:
        raise ValueError(f"the horizon must be >= 1 period, got {horizon!r}")
    j = (k - 1) // horizon
    if j == 0:
        return (1.0 - TUNED_AFTER_HORIZON) / horizon
    return TUNED_AFTER_HORIZON * 6.0 / (math.pi ** 2 * j * j) / horizon


def tuned_rate(alpha: float, horizon: int, weight: float, window: float = TUNED_WINDOW) -> float:
    """κ, the evidence per period the horizon-tuned bet is sized for (method.md §13.3d):

        κ = (log(1/α) + log H + log(1/τ)) / (window·H)

    the nats that its component, of prior weight τ and start weight 1/H, needs to reach 1/α, spread
    over a window of ``window``·H periods."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if horizon < 1 or not (0.0 < weight <= 1.0) or not (0.0 < window <= 1.0):
        raise ValueError(f"need horizon >= 1, weight in (0, 1] and window in (0, 1], got {horizon}, {weight}, {window}")
    return (math.log(1.0 / alpha) + math.log(horizon) + math.log(1.0 / weight)) / (window * horizon)


@dataclass(frozen=True)
class SupportingLine:
    """A line p = s·q + d that every (p, q) allowed by the claim lies on or below (method.md §13.1)."""

    slope: float
    intercept: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.slope) and self.slope >= 0):
            raise ValueError(f"slope s must be a finite number >= 0, got {self.slope!r}")
        if not (math.isfinite(self.intercept) and self.intercept >= 0):
            raise ValueError(f"intercept d must be a finite number >= 0, got {self.intercept!r}")
        if self.slope + self.intercept <= 0:
            raise ValueError("s + d must be > 0")

    @classmethod
    def pure(cls, epsilon: float) -> SupportingLine:
        """ε-DP on one event: p ≤ e^ε·q (Dwork & Roth 2014, Definition 2.4)."""
        return cls.approximate(epsilon, 0.0)

    @classmethod
    def approximate(cls, epsilon: float, delta: float) -> SupportingLine:
        """(ε, δ)-DP on one event: p ≤ e^ε·q + δ (Kairouz, Oh & Viswanath 2015, Theorem 2.1)."""
        if not (math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        if not (0 <= delta < 1):
            raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
        return cls(math.exp(epsilon), float(delta))

    def gap(self, p: ArrayLike, q: ArrayLike) -> NDArray[np.float64]:
        """p − s·q − d: ≤ 0 under the null, the per-sample mean payoff otherwise."""
        return np.asarray(p, dtype=np.float64) - self.slope * np.asarray(q, dtype=np.float64) - self.intercept


class OrientedLine(Protocol):
    """Any line object with ``slope``, ``intercept`` and ``orientation`` ("upper": p − s·q ≤ d;
    "lower": q − s·p ≤ d), such as ``app.stats.claims.Line`` (scalars or 0-d arrays)."""

    @property
    def slope(self) -> Any: ...

    @property
    def intercept(self) -> Any: ...


def resolve_line(line: SupportingLine | OrientedLine) -> tuple[SupportingLine, bool]:
    """(the line as p − s·q ≤ d, whether a and b must be swapped) for a line of either form.

    A "lower" line q − s·p ≤ d is the same test with the roles of x and x' exchanged, so the
    detector applies it to (b, a). The claim's region is symmetric, so each period may use either
    orientation, as long as it was chosen before the period's counts (method.md §13.1).
    """
    if isinstance(line, SupportingLine):
        return line, False
    orientation = str(np.asarray(getattr(line, "orientation", "upper")))
    if orientation not in ("upper", "lower"):
        raise ValueError(f"orientation must be 'upper' or 'lower', got {orientation!r}")
    return (SupportingLine(float(np.asarray(line.slope)), float(np.asarray(line.intercept))),
            orientation == "lower")


class ClaimBoundary(Protocol):
    """What a non-linear claim hands the detectors: a supporting line at a point q₀.

    The line must lie on or above the claim's boundary p = h(q) for every q (a tangent of a
    concave h does), so that the claim implies p ≤ s·q + d. Choose q₀ *before* the period's counts
    are drawn, for instance from :meth:`EProcess.estimate`.
    """

    def supporting_line(self, q0: float) -> SupportingLine: ...


def gdp_supporting_line(mu: float, q0: float) -> SupportingLine:
    """The tangent at q₀ of the μ-GDP boundary p ≤ h(q) = Φ(Φ⁻¹(q) + μ).

    μ-GDP (Dong, Roth & Su 2022, Definition 2.6) bounds a test's type II error by
    G_μ(α) = Φ(Φ⁻¹(1 − α) − μ); for the test that rejects on E this reads p ≤ 1 − G_μ(q) = h(q).
    h is concave with h(0) = 0, so its tangent s = h'(q₀) = exp(−μ·Φ⁻¹(q₀) − μ²/2),
    d = h(q₀) − s·q₀ ≥ 0 lies above h everywhere (method.md §13.1).
    """
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    q0 = min(max(float(q0), 1e-12), 1 - 1e-12)
    z0 = float(norm.ppf(q0))
    slope = math.exp(-mu * z0 - mu * mu / 2.0)
    intercept = max(float(norm.cdf(z0 + mu)) - slope * q0, 0.0)
    return SupportingLine(slope, intercept)


def bet_grid(size: int = DEFAULT_GRID_SIZE, low: float = DEFAULT_GRID_LOW, high: float = DEFAULT_GRID_HIGH) -> NDArray[np.float64]:
    """The bet fractions c_j ∈ (0, 1) of the mixture (geometric; λ_j = c_j/(s + d))."""
    if size < 1 or not (0 < low <= high < 1):
        raise ValueError(f"need size >= 1 and 0 < low <= high < 1, got {size}, {low}, {high}")
    return np.geomspace(low, high, int(size)) if size > 1 else np.array([high])


def _check_counts(a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64]) -> None:
    if np.any(n < 1):
        raise ValueError("n must be >= 1")
    if np.any((a < 0) | (a > n) | (b < 0) | (b > n)):
        raise ValueError("counts a and b must lie in [0, n]")


def log_period_evalues(
    a: ArrayLike,
    b: ArrayLike,
    n: ArrayLike,
    line: SupportingLine,
    grid: ArrayLike,
    payoff: Payoff = "per-sample",
) -> NDArray[np.float64]:
    """log F(λ_j) of one or many periods for every bet of the grid (method.md §13.2).

    ``a``, ``b``, ``n`` broadcast together (shape S); the result has shape S + (K,).

    ``per-sample`` (default) is the exact conditional expectation of the product over the n pairs
    given (a, b), eq. (F) above. ``per-sample-jensen`` is its closed-form Jensen lower bound (an
    e-value too, smaller). ``per-period`` bets once on the period's mean payoff
    g = (a − s·b)/n − d ∈ [−s−d, 1−d]: log(1 + λ·g). It is a valid e-value too, but its bet is capped
    at 1/(s+d) per period instead of per sample, so it gains at most O(1) per period however large n
    is (the comparison is in docs/sequential.md).
    """
    return log_evalues_sd(a, b, n, line.slope, line.intercept, grid, payoff)


def log_evalues_sd(a: ArrayLike, b: ArrayLike, n: ArrayLike, slope: ArrayLike, intercept: ArrayLike,
                   grid: ArrayLike, payoff: Payoff = "per-sample") -> NDArray[np.float64]:
    """log F(λ_j) of method.md §13.2 with a line (s, d) per period: ``slope`` and ``intercept``
    broadcast with ``a``, ``b``, ``n`` (shape S; each s ≥ 0, d ≥ 0, s + d > 0, chosen before the
    period's counts); the result has shape S + (K,). :func:`log_period_evalues` is the one-line case."""
    a_arr = np.asarray(a, dtype=np.float64)[..., None]
    b_arr = np.asarray(b, dtype=np.float64)[..., None]
    n_arr = np.asarray(n, dtype=np.float64)[..., None]
    _check_counts(a_arr, b_arr, n_arr)
    c = np.asarray(grid, dtype=np.float64)
    if np.any((c < 0) | (c >= 1)):
        raise ValueError("bet fractions must lie in [0, 1)")
    s = np.asarray(slope, dtype=np.float64)[..., None]
    d = np.asarray(intercept, dtype=np.float64)[..., None]
    if np.any(s < 0) or np.any(d < 0) or np.any(s + d <= 0):
        raise ValueError("lines need s >= 0, d >= 0 and s + d > 0")
    if payoff == "per-sample" and c.ndim == 1:
        shape = np.broadcast_shapes(a_arr.shape, b_arr.shape, n_arr.shape, s.shape, d.shape)[:-1]
        rows = _distinct_rows(*(np.broadcast_to(x[..., 0], shape) for x in (a_arr, b_arr, n_arr, s, d)))
        if rows is not None:  # many periods share (a, b, n, s, d): compute each once
            (ua, ub, un, us, ud), inverse = rows
            cols = [x[:, None] for x in (ua, ub, un, us, ud)]
            out = _log_product_expectation(cols[0], cols[1], cols[2], cols[3], cols[4], c / (cols[3] + cols[4]),
                                           payoff)
            return out[inverse].reshape(shape + (c.size,))
    lam = c / (s + d)
    if payoff == "per-period":
        g = (a_arr - s * b_arr) / n_arr - d
        return np.log1p(lam * g)
    return _log_product_expectation(a_arr, b_arr, n_arr, s, d, lam, payoff)


#: Below this many periods, or above this share of distinct ones, :func:`_distinct_rows` declines.
DEDUP_MIN_ROWS = 2048
DEDUP_MAX_SHARE = 0.5


def _distinct_rows(*cols: NDArray[np.float64]) -> tuple[list[NDArray[np.float64]], NDArray[np.intp]] | None:
    """(the distinct rows of the columns, the index of each row among them), or None when fewer than
    half of the rows repeat (the exact e-value costs a sum per row, a sort is cheaper than repeats)."""
    flat = [np.ascontiguousarray(x, dtype=np.float64).ravel() for x in cols]
    size = flat[0].size
    if size < DEDUP_MIN_ROWS:
        return None
    order = np.lexsort(flat[::-1])
    sorted_cols = [x[order] for x in flat]
    new = np.zeros(size, dtype=bool)
    new[0] = True
    for x in sorted_cols:
        new[1:] |= x[1:] != x[:-1]
    groups = int(new.sum())
    if groups > DEDUP_MAX_SHARE * size:
        return None
    inverse = np.empty(size, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return [x[new] for x in sorted_cols], inverse


def _log_product_expectation(a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64],
                             s: FloatOrArray, d: FloatOrArray, lam: NDArray[np.float64],
                             payoff: Payoff) -> NDArray[np.float64]:
    """log F(λ) of method.md §13.2 (eq. (F), or its Jensen bound) for bets λ broadcast with the counts."""
    if payoff not in PER_SAMPLE_PAYOFFS:
        raise ValueError(f"payoff must be one of {PAYOFFS}, got {payoff!r}")
    log_u = np.log1p(lam * (1.0 - d))
    log_v = np.log1p(lam * (1.0 - s - d))
    log_w = np.log1p(-lam * (s + d))
    log_z = np.log1p(-lam * d)
    log_r = log_v + log_z - log_u - log_w
    if payoff == "per-sample":
        overlap = log_overlap_mgf(a, b, n, log_r)  # log E_hyp[r^K], exact
    else:
        overlap = a * b / n * log_r  # Jensen: log r^(E K), E K = ab/n
    return a * log_u + b * log_w + (n - a - b) * log_z + overlap


@dataclass(frozen=True)
class SequentialStep:
    """What one period adds to a horizon-free detector: the fields a user plots.

    ``statistic`` and ``threshold`` are natural logarithms (log W_t against log(1/α) for the
    e-process, log M_t against log c for the e-detector), so that they stay finite.
    ``log_e_value`` is the period's own evidence, log(W_t/W_{t−1}) for the e-process.
    """

    t: int
    statistic: float
    threshold: float
    alarm: bool
    log_e_value: float


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class _MixtureBase:
    """Shared grid, line, running estimate and (de)serialisation of the two detectors."""

    kind = "base"
    #: Forgetting factor of the running (p, q) estimate that :meth:`estimate` returns.
    ESTIMATE_DISCOUNT = 0.9

    def __init__(self, line: SupportingLine, threshold: float, grid_size: int, grid_low: float, grid_high: float,
                 payoff: Payoff) -> None:
        if not (threshold > 1 and math.isfinite(threshold)):
            raise ValueError(f"the alarm threshold must be a finite number > 1, got {threshold!r}")
        if payoff not in PAYOFFS:
            raise ValueError(f"payoff must be one of {PAYOFFS}, got {payoff!r}")
        self.line = line
        self.log_threshold = math.log(threshold)
        self.grid_spec = (int(grid_size), float(grid_low), float(grid_high))
        self.grid = bet_grid(*self.grid_spec)
        self._log_prior = -math.log(self.grid.size)
        self.payoff: Payoff = payoff
        self.t = 0
        self.alarm_t: int | None = None
        self.max_statistic = -math.inf
        self._sums = [0.0, 0.0, 0.0]  # discounted a, b, n
        #: the faces bet on and the aGRAPA bet (method.md §13.3b, §13.3c); the subclasses set them
        self.faces: Faces = "one"
        self.agrapa = False
        #: κ of the horizon-tuned bet (method.md §13.3d), None without one; the e-process sets it
        self._tuned_rate: float | None = None

    def estimate(self) -> tuple[float, float]:
        """(p̃, q̃) from the past periods' counts (discounted, add-½ smoothed): predictable.

        A claim given as a boundary can take its supporting line at q̃ before the next period
        is drawn (:class:`ClaimBoundary`); the tangent at the true q maximises the payoff's mean.
        """
        sa, sb, sn = self._sums
        return (sa + 0.5) / (sn + 1.0), (sb + 0.5) / (sn + 1.0)

    def anchor_counts(self) -> tuple[float, float, float]:
        """The past periods' counts (a, b, n), each period discounted by 0.9 per period since.

        Predictable: call it before the next period is drawn and hand it to a claim, e.g.
        ``line = anchor_line(claim, *det.anchor_counts())`` (app.stats.claims), then
        ``det.update(a, b, n, line=line)``. All zeros before the first period.
        """
        return self._sums[0], self._sums[1], self._sums[2]

    def _log_increments(self, a: int, b: int, n: int, line: SupportingLine | OrientedLine | None) -> np.ndarray:
        """log e-values of the period for every component (one face and the grid; or, with ``faces`` and
        ``agrapa``, :func:`component_parts` on the past sums, which are predictable)."""
        if isinstance(a, bool) or isinstance(b, bool) or isinstance(n, bool):
            raise ValueError("counts must be integers")
        use, swap = resolve_line(line if line is not None else self.line)
        ca, cb = (b, a) if swap else (a, b)
        if self.faces == "one" and not self.agrapa:
            inc = log_period_evalues(ca, cb, n, use, self.grid, self.payoff)
        else:
            sa, sb, sn = self._sums
            pa, pb = (sb, sa) if swap else (sa, sb)  # the past, in this period's orientation (predictable)
            inc = component_parts(ca, cb, n, use.slope, use.intercept, pa, pb, sn, self.faces, self.agrapa,
                                  self.grid, self.payoff, self._tuned_rate)
        r = self.ESTIMATE_DISCOUNT
        self._sums = [r * self._sums[0] + a, r * self._sums[1] + b, r * self._sums[2] + n]
        return inc

    def _finish(self, statistic: float, log_e: float) -> SequentialStep:
        self.t += 1
        alarm = statistic >= self.log_threshold
        if alarm and self.alarm_t is None:
            self.alarm_t = self.t
        self.max_statistic = max(self.max_statistic, statistic)
        return SequentialStep(t=self.t, statistic=statistic, threshold=self.log_threshold, alarm=alarm,
                              log_e_value=log_e)

    def _base_state(self) -> dict[str, Any]:
        size, low, high = self.grid_spec
        return {
            "version": 1, "kind": self.kind, "slope": self.line.slope, "intercept": self.line.intercept,
            "log_threshold": self.log_threshold, "grid_size": size, "grid_low": low, "grid_high": high,
            "payoff": self.payoff, "t": self.t, "alarm_t": self.alarm_t,
            "max_statistic": _finite_or_none(self.max_statistic), "sums": list(self._sums),
        }

    def _load_base(self, state: dict[str, Any]) -> None:
        self.t = int(state["t"])
        self.alarm_t = state.get("alarm_t")
        ms = state.get("max_statistic")
        self.max_statistic = -math.inf if ms is None else float(ms)
        sums = [float(v) for v in state.get("sums", [0.0, 0.0, 0.0])]
        if len(sums) != 3:
            raise ValueError("invalid detector state: sums must hold three numbers")
        self._sums = sums

    @staticmethod
    def _check_state(state: dict[str, Any], kind: str, versions: tuple[int, ...] = (1,)) -> None:
        if state.get("version") not in versions or state.get("kind") != kind:
            raise ValueError(f"not a version-1 {kind} state: {state.get('kind')!r} v{state.get('version')!r}")


class EProcess(_MixtureBase):
    """The mixture test supermartingale of the claim (method.md §13.3): alarm when W_t ≥ 1/α.

    P(any false alarm, ever) ≤ α under the null, whatever the number of periods. With
    ``starts="first"`` it is the plain product from period 1, whose wealth keeps falling during a
    long stable run, so that a late change is found late (or, after a run well inside the null,
    practically never). The default ``starts="mixture"`` also bets from every later period k,
    with weight ω_k, at a cost of about 2 ln k nats for a change at period k.
    """

    kind = "e-process"

    def __init__(self, alpha: float, line: SupportingLine, grid_size: int = DEFAULT_GRID_SIZE,
                 grid_low: float = DEFAULT_GRID_LOW, grid_high: float = DEFAULT_GRID_HIGH,
                 payoff: Payoff = "per-sample", starts: Starts = "mixture", faces: Faces = "one",
                 agrapa: bool = False, agrapa_weight: float | None = None, tuned_weight: float | None = None,
                 horizon: int | None = None, window: float = TUNED_WINDOW) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        start_weight(1, starts)  # validates
        if faces not in ("one", "both", "auto"):
            raise ValueError(f"faces must be 'one', 'both' or 'auto', got {faces!r}")
        if (faces != "one" or agrapa) and payoff not in PER_SAMPLE_PAYOFFS:
            raise ValueError("both faces and the aGRAPA bet are per-sample bets")
        super().__init__(line, 1.0 / alpha, grid_size, grid_low, grid_high, payoff)
        self.alpha = float(alpha)
        self.starts: Starts = starts
        self.faces: Faces = faces
        self.agrapa = bool(agrapa)
        self.agrapa_weight = None if agrapa_weight is None else float(agrapa_weight)
        #: The horizon-tuned bet (method.md §13.3d): its share τ of the prior, the horizon H and the window.
        self.tuned_weight = None if tuned_weight is None else float(tuned_weight)
        self.horizon = None if horizon is None else int(horizon)
        self.window = float(window)
        design = self.design  # validates the weights and the horizon
        #: κ of the horizon-tuned bet (None without one; a tuned bet without a horizon is refused).
        self._tuned_rate = design.tuned_rate(self.alpha)
        #: Components of the mixture (method.md §13.3b, §13.3c, §13.3d): per face, the grid's bets
        #: (+ aGRAPA, + the horizon-tuned bet).
        self.components = component_count(self.grid.size, faces, self.agrapa, design.tuned)
        #: log π_j (method.md §13.3c); equal weights unless ``agrapa_weight`` is given.
        self._log_pi = design.log_prior()
        self._pi = np.exp(self._log_pi)
        self._tuned_mask = design.tuned_mask()
        self._log_prior = -math.log(self.components)
        self._log_r: np.ndarray | None = None  # log R_t^j; None while R = 0 (before period 1)
        self._started = 0.0  # Σ_{k≤t} ω_k

    @classmethod
    def from_design(cls, alpha: float, line: SupportingLine, design: EProcessDesign,
                    starts: Starts = "mixture") -> EProcess:
        """The e-process of an :class:`EProcessDesign` (e.g. :data:`SERVICE_DESIGN`)."""
        return cls(alpha, line, design.grid_size, payoff=design.payoff, starts=starts, faces=design.faces,
                   agrapa=design.agrapa, agrapa_weight=design.agrapa_weight, tuned_weight=design.tuned_weight,
                   horizon=design.horizon, window=design.window)

    @property
    def design(self) -> EProcessDesign:
        return EProcessDesign(self.faces, self.agrapa, self.agrapa_weight, self.grid.size,
                              self.payoff if self.payoff in PER_SAMPLE_PAYOFFS else "per-sample",
                              self.tuned_weight, self.horizon if self.tuned_weight is not None else None, self.window)


    @property
    def log_wealth(self) -> float:
        """log W_t (0 before the first period)."""
        cash = max(1.0 - self._started, 0.0)
        if self._log_r is None:
            return math.log(cash) if cash > 0 else -math.inf
        if self.agrapa_weight is None:
            invested = float(logsumexp(self._log_r) + self._log_prior)
        else:
            invested = float(logsumexp(self._log_r + self._log_pi))
        return float(np.logaddexp(invested, math.log(cash))) if cash > 0 else invested

    def update(self, a: int, b: int, n: int, line: SupportingLine | OrientedLine | None = None) -> SequentialStep:
        """Take a period's counts (a of n outputs of A(x) in E, b of n of A(x')).

        ``line`` overrides the claim's line for this period (a :class:`SupportingLine`, or any
        line with an orientation, :func:`resolve_line`); it must have been chosen before the
        counts were drawn.
        """
        before = self.log_wealth
        inc = self._log_increments(a, b, n, line)
        w = start_weight(self.t + 1, self.starts)
        prev = np.full(self.components, -np.inf) if self._log_r is None else self._log_r
        log_w: float | NDArray[np.float64]
        if self._tuned_rate is None:
            log_w = math.log(w) if w > 0 else -math.inf
            self._started += w
        else:  # the horizon-tuned bets start with ω^H_t (method.md §13.3d)
            assert self.horizon is not None
            ws = np.where(self._tuned_mask, horizon_start_weight(self.t + 1, self.horizon), w)
            with np.errstate(divide="ignore"):
                log_w = np.log(ws)
            self._started += float(self._pi @ ws)  # Σ_j π_j ω_{j,t}
        self._log_r = inc + np.logaddexp(prev, log_w)  # R_t = F_t·(R_{t−1} + ω_t)
        after = self.log_wealth
        return self._finish(after, after - before)

    def to_state(self) -> dict[str, Any]:
        """JSON state. Version 1 for the designs with equal weights (one or both faces,
        no face ``"auto"``); version 2 adds ``agrapa_weight`` and the face ``"auto"`` (method.md §13.3c);
        version 3 the horizon-tuned bet's ``tuned_weight``, ``horizon`` and ``window`` (§13.3d)."""
        state = self._base_state()
        state["alpha"] = self.alpha
        state["starts"] = self.starts
        state["faces"] = self.faces
        state["agrapa"] = self.agrapa
        if self.faces == "auto" or self.agrapa_weight is not None:
            state["version"] = 2
            state["agrapa_weight"] = self.agrapa_weight
        if self.tuned_weight is not None:
            state["version"] = 3
            state["tuned_weight"] = self.tuned_weight
            state["horizon"] = self.horizon
            state["window"] = self.window
        state["started"] = self._started
        state["log_r"] = None if self._log_r is None else [float(v) for v in self._log_r]
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> EProcess:
        cls._check_state(state, cls.kind, versions=(1, 2, 3))
        missing = [k for k in ("alpha", "slope", "intercept", "grid_size", "grid_low", "grid_high", "payoff", "t")
                   if k not in state]
        if state["version"] == 3 and state.get("tuned_weight") is not None and state.get("horizon") is None:
            missing.append("horizon")
        if missing:
            raise ValueError(f"invalid e-process state: missing {', '.join(missing)}")
        weight = state.get("agrapa_weight") if state["version"] in (2, 3) else None
        tuned = state.get("tuned_weight") if state["version"] == 3 else None
        obj = cls(state["alpha"], SupportingLine(state["slope"], state["intercept"]), state["grid_size"],
                  state["grid_low"], state["grid_high"], state["payoff"], state.get("starts", "mixture"),
                  state.get("faces", "one"), bool(state.get("agrapa", False)),  # states of the first design: one face
                  None if weight is None else float(weight), None if tuned is None else float(tuned),
                  None if tuned is None else int(state["horizon"]), float(state.get("window", TUNED_WINDOW)))
        if state.get("log_r") is not None:
            lr = np.asarray(state["log_r"], dtype=np.float64)
            if lr.shape != (obj.components,) or not np.all(np.isfinite(lr)):
                raise ValueError("invalid e-process state: log_r must hold one finite number per bet")
            obj._log_r = lr
        obj._started = float(state.get("started", 0.0))
        obj._load_base(state)
        return obj


def edetector_threshold(alpha: float, window: int) -> float:
    """c = m/α: an e-detector alarms falsely within m periods with probability ≤ α (method.md §13.4)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window!r}")
    return float(window) / alpha


class EDetector(_MixtureBase):
    """Mixture e-SR (default) or e-CUSUM change detector (method.md §13.4): alarm when M_t ≥ c.

    ``threshold`` is c: the average run length under the null is ≥ c, and a false alarm within
    any m periods from the start has probability ≤ m/c (build c with :func:`edetector_threshold`).
    Unlike the e-process it re-arms: each M_t^j pools only the periods since its last restart,
    so its delay after a change does not depend on how long the stable run before it was.
    """

    kind = "e-detector"

    def __init__(self, threshold: float, line: SupportingLine, variant: EDetectorKind = "sr",
                 grid_size: int = DEFAULT_GRID_SIZE, grid_low: float = DEFAULT_GRID_LOW,
                 grid_high: float = DEFAULT_GRID_HIGH, payoff: Payoff = "per-sample",
                 faces: Literal["one", "auto"] = "one") -> None:
        if variant not in ("sr", "cusum"):
            raise ValueError(f"variant must be 'sr' or 'cusum', got {variant!r}")
        if faces not in ("one", "auto"):
            raise ValueError(f"an e-detector bets on faces 'one' or 'auto', got {faces!r}")
        if faces != "one" and payoff not in PER_SAMPLE_PAYOFFS:
            raise ValueError("the predictable face is a per-sample bet")
        super().__init__(line, threshold, grid_size, grid_low, grid_high, payoff)
        self.variant: EDetectorKind = variant
        #: "auto": each period bets on the face :func:`predictable_face` picks from the past counts
        #: (method.md §13.3c): every period's e-values stay e-values given the past, so the ARL bound
        #: of §13.4 holds as it is, with the same 16 components.
        self.faces = faces
        self._log_m: np.ndarray | None = None  # None before the first period (M_0 = 0)

    @property
    def log_statistic(self) -> float:
        """log M_t of the mixture (−∞ before the first period)."""
        if self._log_m is None:
            return -math.inf
        return float(logsumexp(self._log_m) + self._log_prior)

    def update(self, a: int, b: int, n: int, line: SupportingLine | OrientedLine | None = None) -> SequentialStep:
        """Take a period's counts; ``line`` as in :meth:`EProcess.update`."""
        inc = self._log_increments(a, b, n, line)
        if self._log_m is None:
            self._log_m = inc.copy()  # M_1 = F_1·(0 + 1) = F_1·max(0, 1)
        elif self.variant == "sr":
            self._log_m = inc + np.logaddexp(self._log_m, 0.0)
        else:
            self._log_m = inc + np.maximum(self._log_m, 0.0)
        stat = self.log_statistic
        return self._finish(stat, float(logsumexp(inc) + self._log_prior))

    def to_state(self) -> dict[str, Any]:
        """JSON state: version 1 for one face (as before), version 2 with ``faces`` for the predictable face."""
        state = self._base_state()
        state["variant"] = self.variant
        if self.faces != "one":
            state["version"] = 2
            state["faces"] = self.faces
        state["log_m"] = None if self._log_m is None else [float(v) for v in self._log_m]
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> EDetector:
        cls._check_state(state, cls.kind, versions=(1, 2))
        faces = cast('Literal["one", "auto"]', state.get("faces", "one") if state["version"] == 2 else "one")
        obj = cls(math.exp(state["log_threshold"]), SupportingLine(state["slope"], state["intercept"]),
                  state["variant"], state["grid_size"], state["grid_low"], state["grid_high"], state["payoff"],
                  faces)
        if state.get("log_m") is not None:
            lm = np.asarray(state["log_m"], dtype=np.float64)
            if lm.shape != obj.grid.shape or not np.all(np.isfinite(lm)):
                raise ValueError("invalid e-detector state: log_m must hold one finite number per bet")
            obj._log_m = lm
        obj._load_base(state)
        obj.log_threshold = float(state["log_threshold"])
        return obj


# ---------------------------------------------------------------------------------------------
# Batch forms for simulations (same numbers as the classes; tests compare them).
# ---------------------------------------------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _mixture_recursion(inc: np.ndarray, log_r: np.ndarray, log_w: np.ndarray, cash: np.ndarray,
                       sr: bool, out: np.ndarray, offset: int,
                       log_prior: np.ndarray) -> None:  # pragma: no cover - compiled
    """Run R_t^j = F_t^j·(R_{t−1}^j + w_t) (or CUSUM: F_t^j·max(R_{t−1}^j, w_t)) over a chunk.

    ``inc`` is (R, C, K) of log F, ``log_r`` (R, K) the carried log R (−inf for 0), ``log_w`` (C, K)
    the log start weights of each component (method.md §13.3d: the horizon-tuned bet's differ),
    ``cash`` (C,) the uninvested weight after each period, ``log_prior`` (K,)
    the components' log weights log π_j (−log K each for equal weights; method.md §13.3, §13.3c).
    Writes log(Σ_j π_j R_t^j + cash_t) into ``out[:, offset + c]``.
    """
    n_rows, n_cols, k = inc.shape
    for r in range(n_rows):
        for c in range(n_cols):
            best = -np.inf
            for j in range(k):
                lw = log_w[c, j]
                prev = log_r[r, j]
                if sr:
                    hi = prev if prev > lw else lw
                    lo = lw if prev > lw else prev
                    comb = hi if lo == -np.inf else hi + np.log1p(np.exp(lo - hi))
                else:
                    comb = prev if prev > lw else lw
                v = inc[r, c, j] + comb
                log_r[r, j] = v
                if v + log_prior[j] > best:
                    best = v + log_prior[j]
            total = 0.0
            for j in range(k):
                total += np.exp(log_r[r, j] + log_prior[j] - best)
            mix = best + np.log(total)
            if cash[c] > 0.0:
                lc = np.log(cash[c])
                hi = mix if mix > lc else lc
                lo = lc if mix > lc else mix
                mix = hi + np.log1p(np.exp(lo - hi))
            out[r, offset + c] = mix


def _equal_prior(k: int) -> NDArray[np.float64]:
    """log π_j = −log K: the equal-weight mixture of K components."""
    return np.full(k, -math.log(k))


def _batch(a: ArrayLike, b: ArrayLike, n: int, line: SupportingLine, grid: ArrayLike | None, payoff: Payoff,
           chunk: int, weights: Callable[[int], float], sr: bool, cash_of: Callable[[float], float]) -> NDArray[np.float64]:
    a_arr = np.atleast_2d(np.asarray(a))
    b_arr = np.atleast_2d(np.asarray(b))
    g = bet_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    r, horizon = a_arr.shape
    out = np.empty((r, horizon))
    log_r = np.full((r, g.size), -np.inf)
    started = 0.0
    for lo in range(0, horizon, chunk):
        hi = min(horizon, lo + chunk)
        inc = np.ascontiguousarray(log_period_evalues(a_arr[:, lo:hi], b_arr[:, lo:hi], n, line, g, payoff))
        w = np.array([weights(t) for t in range(lo + 1, hi + 1)])
        cash = np.empty(hi - lo)
        for i, wt in enumerate(w):
            started += wt
            cash[i] = cash_of(started)
        with np.errstate(divide="ignore"):
            log_w = np.ascontiguousarray(np.repeat(np.log(w)[:, None], g.size, axis=1))
        _mixture_recursion(inc, log_r, log_w, cash, sr, out, lo, _equal_prior(g.size))
    return out


def e_process_paths_from_increments(inc: ArrayLike, starts: Starts = "mixture",
                                    log_prior: ArrayLike | None = None,
                                    tuned: NDArray[np.bool_] | None = None, horizon: int | None = None
                                    ) -> NDArray[np.float64]:
    """log W_1..log W_T of the e-process (method.md §13.3) from per-period log e-values ``inc`` of
    shape (R, T, K) (e.g. :func:`log_evalues_sd` with one line per period); result (R, T).

    ``log_prior``: log π_j of the K components (Σ π_j = 1, :func:`component_log_prior`); None for
    equal weights. ``tuned`` (K,) marks the horizon-tuned components, which start with the weights
    :func:`horizon_start_weight` of ``horizon`` instead of ω_k (method.md §13.3d)."""
    inc_arr = np.ascontiguousarray(np.asarray(inc, dtype=np.float64))
    if inc_arr.ndim != 3:
        raise ValueError("inc must have shape (R, T, K)")
    r, periods, k = inc_arr.shape
    out = np.empty((r, periods))
    log_r = np.full((r, k), -np.inf)
    if log_prior is None:
        lp = _equal_prior(k)
    else:
        lp = np.ascontiguousarray(np.asarray(log_prior, dtype=np.float64))
        if lp.shape != (k,) or not math.isclose(float(logsumexp(lp)), 0.0, abs_tol=1e-9):
            raise ValueError("log_prior must hold K log weights summing to 1")
    w = np.repeat(np.array([start_weight(t, starts) for t in range(1, periods + 1)])[:, None], k, axis=1)
    if tuned is not None and np.any(tuned):
        mask = np.asarray(tuned, dtype=bool)
        if mask.shape != (k,) or horizon is None:
            raise ValueError("tuned must mark K components, and the tuned components need the horizon")
        w[:, mask] = np.array([horizon_start_weight(t, horizon) for t in range(1, periods + 1)])[:, None]
    # the uninvested weight 1 − Σ_{k≤t} Σ_j π_j ω_{j,k} (1 − Σ_{k≤t} ω_k when every component starts alike)
    invested = w[:, 0] if tuned is None or not np.any(tuned) else w @ np.exp(lp)
    cash = np.maximum(1.0 - np.cumsum(invested), 0.0)
    with np.errstate(divide="ignore"):
        log_w = np.ascontiguousarray(np.log(w))
    _mixture_recursion(inc_arr, log_r, log_w, cash, True, out, 0, lp)
    return out




#: Bet fractions are capped like the grid's largest (w = 1 − c ≥ 0.2).
AGRAPA_CAP = DEFAULT_GRID_HIGH

Faces = Literal["one", "both", "auto"]
#: A supporting line's slope or intercept: one for all, or one per period (broadcast).
FloatOrArray = float | NDArray[np.float64]


def _payoff_moments(sa: ArrayLike, sb: ArrayLike, sn: ArrayLike, slope: FloatOrArray
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(p̃, q̃, σ̂²) from past (discounted) counts: p̃ = (Σa + ½)/(Σn + 1), q̃ likewise, and the
    per-pair payoff's variance σ̂² = p̃(1 − p̃) + s²q̃(1 − q̃) (X, Y independent; method.md §13.3b)."""
    sa, sb, sn = (np.asarray(v, dtype=np.float64) for v in (sa, sb, sn))
    p = (sa + 0.5) / (sn + 1.0)
    q = (sb + 0.5) / (sn + 1.0)
    return p, q, p * (1 - p) + slope * slope * q * (1 - q)


def agrapa_fraction(sa: ArrayLike, sb: ArrayLike, sn: ArrayLike, slope: FloatOrArray, intercept: FloatOrArray
                    ) -> NDArray[np.float64]:
    """The aGRAPA bet as a fraction c = λ·(s + d) ∈ [0, 0.8] from past (discounted) counts (method.md §13.3b).

    aGRAPA (Waudby-Smith & Ramdas 2024, JRSS-B, §5.1, "approximate GRAPA"; Kelly's growth rate to
    second order): λ = μ̂/(σ̂² + μ̂²) with μ̂, σ̂² the running mean and variance of the per-pair payoff
    X − sY − d. From the counts: μ̂ = p̃ − s·q̃ − d, σ̂² = p̃(1 − p̃) + s²q̃(1 − q̃) (X, Y independent),
    p̃ = (Σa + ½)/(Σn + 1), q̃ likewise. Predictable when the sums stop at the previous period.
    """
    p, q, var = _payoff_moments(sa, sb, sn, slope)
    mu = p - slope * q - intercept
    lam = np.where(mu > 0, mu / np.maximum(var + mu * mu, 1e-12), 0.0)
    return np.clip(lam * (slope + intercept), 0.0, AGRAPA_CAP)


def tuned_fraction(sa: ArrayLike, sb: ArrayLike, sn: ArrayLike, n: ArrayLike, slope: FloatOrArray,
                   intercept: FloatOrArray, rate: float) -> NDArray[np.float64]:
    """The horizon-tuned bet as a fraction c = λ·(s + d) ∈ (0, 0.8] (method.md §13.3d).

    λ = √(2κ/(n·σ̂²)) is Kelly's bet λ* = D/σ² for the gap D whose growth n·D²/(2σ²) is κ nats per
    period (:func:`tuned_rate`): it does not read the gap's estimate, only its variance σ̂² =
    p̃(1 − p̃) + s²q̃(1 − q̃) from the past (discounted, ½-smoothed) counts, as :func:`agrapa_fraction`.
    Predictable when the sums stop at the previous period; n is the period's number of pairs, fixed
    before its outputs are drawn."""
    var = _payoff_moments(sa, sb, sn, slope)[2]
    lam = np.sqrt(2.0 * rate / (np.asarray(n, dtype=np.float64) * np.maximum(var, 1e-12)))
    return np.clip(lam * (slope + intercept), 0.0, AGRAPA_CAP)


def _discounted_past(x: NDArray[np.float64], r: float) -> NDArray[np.float64]:
    """S_t = Σ_{τ<t} r^{t−1−τ} x_τ along the last axis (0 at t = 1): what the classes' ``_sums`` hold."""
    from scipy.signal import lfilter

    x = np.asarray(x, dtype=np.float64)
    return lfilter([0.0, 1.0], [1.0, -r], x, axis=-1)  # S_t = r·S_{t−1} + x_{t−1}


def predictable_face(pa: ArrayLike, pb: ArrayLike, pn: ArrayLike, slope: ArrayLike, intercept: ArrayLike
                     ) -> NDArray[np.bool_]:
    """True where the period bets on the complement face (method.md §13.3c): chosen from past counts only.

    With p̃ = (Σa + ½)/(Σn + 1), q̃ likewise (the past sums of :func:`agrapa_fraction`), the face
    p ≤ s·q + d has the estimated per-pair gap μ̂₁ = p̃ − s·q̃ − d and variance
    σ̂₁² = p̃(1 − p̃) + s²q̃(1 − q̃); the complement face 1 − q ≤ s(1 − p) + d has
    μ̂₂ = (1 − q̃) − s(1 − p̃) − d, σ̂₂² = q̃(1 − q̃) + s²p̃(1 − p̃). The period bets on the face with the
    larger μ̂/σ̂ (the one whose bets are expected to grow fastest, Kelly's n·μ²/(2σ²)); ties (no past:
    p̃ = q̃ = ½) go to the first face.
    """
    pa, pb, pn = (np.asarray(v, dtype=np.float64) for v in (pa, pb, pn))
    s = np.asarray(slope, dtype=np.float64)
    d = np.asarray(intercept, dtype=np.float64)
    p = (pa + 0.5) / (pn + 1.0)
    q = (pb + 0.5) / (pn + 1.0)
    vp, vq = p * (1 - p), q * (1 - q)
    z1 = (p - s * q - d) / np.sqrt(np.maximum(vp + s * s * vq, 1e-300))
    z2 = ((1 - q) - s * (1 - p) - d) / np.sqrt(np.maximum(vq + s * s * vp, 1e-300))
    return z2 > z1


def component_parts(ca: ArrayLike, cb: ArrayLike, nn: ArrayLike, slope: ArrayLike, intercept: ArrayLike,
                    pa: ArrayLike, pb: ArrayLike, pn: ArrayLike, faces: Faces, agrapa: bool,
                    grid: ArrayLike, payoff: Payoff = "per-sample", tuned: float | None = None) -> NDArray[np.float64]:
    """log e-values of every mixture component for counts (ca, cb) of n in this period's orientation.

    ``pa``, ``pb``, ``pn`` are the past periods' discounted counts in the same orientation (what the
    classes' ``_sums`` hold, predictable), ``slope``/``intercept`` the period's line; all broadcast
    (shape S). Result S + (C,), the components in the order of :func:`component_log_prior`: per face
    (the first, then the complement), the grid's bets, then the aGRAPA bet (method.md §13.3b); with
    ``faces="auto"`` one set of components on the face :func:`predictable_face` picks (§13.3c).
    ``payoff``: the per-sample e-value of §13.2, exact (default) or its Jensen bound. ``tuned``: the
    rate κ of :func:`tuned_rate`; adds the horizon-tuned bet after the aGRAPA bet on each face (§13.3d).
    """
    if payoff not in PER_SAMPLE_PAYOFFS:
        raise ValueError(f"the components bet per sample: payoff must be one of {PER_SAMPLE_PAYOFFS}, got {payoff!r}")
    ca, cb, nn, pa, pb, pn = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (ca, cb, nn, pa, pb, pn)))
    s = np.asarray(slope, dtype=np.float64)
    d = np.asarray(intercept, dtype=np.float64)
    if faces == "one":
        sides = [(ca, cb, pa, pb)]
    elif faces == "both":  # the complement: 1 − q ≤ s(1 − p) + d, counts (n − b, n − a)
        sides = [(ca, cb, pa, pb), (nn - cb, nn - ca, pn - pb, pn - pa)]
    elif faces == "auto":
        flip = predictable_face(pa, pb, pn, s, d)
        sides = [(np.where(flip, nn - cb, ca), np.where(flip, nn - ca, cb),
                  np.where(flip, pn - pb, pa), np.where(flip, pn - pa, pb))]
    else:
        raise ValueError(f"faces must be 'one', 'both' or 'auto', got {faces!r}")
    parts = []
    for fa, fb, qa, qb in sides:
        _check_counts(fa, fb, nn)
        parts.append(log_evalues_sd(fa, fb, nn, s, d, grid, payoff))
        if agrapa:
            c = agrapa_fraction(qa, qb, pn, s, d)
            parts.append(_log_evalue_fraction(fa, fb, nn, s, d, c, payoff)[..., None])
        if tuned is not None:
            c = tuned_fraction(qa, qb, pn, nn, s, d, tuned)
            parts.append(_log_evalue_fraction(fa, fb, nn, s, d, c, payoff)[..., None])
    return np.concatenate(parts, axis=-1)


def component_count(grid_size: int, faces: Faces, agrapa: bool, tuned: bool = False) -> int:
    """C, the number of mixture components (method.md §13.3b, §13.3c, §13.3d)."""
    return (2 if faces == "both" else 1) * (int(grid_size) + (1 if agrapa else 0) + (1 if tuned else 0))


def component_log_prior(grid_size: int, faces: Faces, agrapa: bool, agrapa_weight: float | None = None,
                        tuned_weight: float | None = None) -> NDArray[np.float64]:
    """log π_j of the components, in the order of :func:`component_parts` (method.md §13.3c, §13.3d).

    ``agrapa_weight=None``: equal weights 1/C (the e-process of §13.3b). A number ρ ∈ (0, 1): the
    aGRAPA bets share ρ (equally between the faces) and the grid's bets share 1 − ρ. With
    ``tuned_weight`` τ as well, the horizon-tuned bets share τ and the grid's 1 − ρ − τ > 0. Σ_j π_j = 1.
    """
    c = component_count(grid_size, faces, agrapa, tuned_weight is not None)
    if agrapa_weight is None:
        if tuned_weight is not None:
            raise ValueError("tuned_weight needs agrapa_weight")
        return np.full(c, -math.log(c))
    rho = float(agrapa_weight)
    if not agrapa or not (0.0 < rho < 1.0):
        raise ValueError(f"agrapa_weight needs the aGRAPA bet and a value in (0, 1), got {agrapa_weight!r}")
    tau = 0.0 if tuned_weight is None else float(tuned_weight)
    if tuned_weight is not None and not (0.0 < tau and rho + tau < 1.0):
        raise ValueError(f"tuned_weight needs a value in (0, 1 − agrapa_weight), got {tuned_weight!r}")
    n_faces = 2 if faces == "both" else 1
    per_face = np.concatenate([np.full(int(grid_size), (1.0 - rho - tau) / (n_faces * grid_size)), [rho / n_faces],
                               [tau / n_faces] if tuned_weight is not None else []])
    return np.log(np.tile(per_face, n_faces))


def face_increments(a: ArrayLike, b: ArrayLike, n: ArrayLike, line: SupportingLine, faces: Faces = "both",
                    agrapa: bool = True, grid: ArrayLike | None = None, payoff: Payoff = "per-sample",
                    tuned: float | None = None) -> NDArray[np.float64]:
    """log e-values of every component, shape (R, T, C), for the batch e-process (method.md §13.3b, §13.3c).

    Components: the grid bets on the face p ≤ s·q + d, then (``agrapa``) the aGRAPA bet on it; with
    ``faces="both"`` the same on the mirrored face 1 − q ≤ s(1 − p) + d, i.e. the counts (n − b, n − a)
    (Kairouz, Oh & Viswanath 2015: the claim bounds the event's complement too); with ``faces="auto"``
    one set on the face :func:`predictable_face` picks each period; ``tuned`` (a rate κ) adds the
    horizon-tuned bet on each face (§13.3d). Weights: :func:`component_log_prior`.
    """
    a2 = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b2 = np.atleast_2d(np.asarray(b, dtype=np.float64))
    g = bet_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    nn = np.broadcast_to(np.asarray(n, dtype=np.float64), a2.shape).astype(np.float64)
    if faces not in ("one", "both", "auto"):
        raise ValueError(f"faces must be 'one', 'both' or 'auto', got {faces!r}")
    r = _MixtureBase.ESTIMATE_DISCOUNT
    return component_parts(a2, b2, nn, line.slope, line.intercept, _discounted_past(a2, r), _discounted_past(b2, r),
                           _discounted_past(nn, r), faces, agrapa, g, payoff, tuned)


def _log_evalue_fraction(a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64], s: FloatOrArray,
                         d: FloatOrArray, c: NDArray[np.float64], payoff: Payoff = "per-sample") -> NDArray[np.float64]:
    """log F(λ) of §13.2 for a bet fraction c per period (λ = c/(s + d)); 0 where c = 0."""
    lam = np.asarray(c, dtype=np.float64) / (s + d)
    return _log_product_expectation(a, b, n, s, d, lam, payoff)


def e_detector_paths_from_increments(inc: ArrayLike, variant: EDetectorKind = "sr") -> NDArray[np.float64]:
    """log M_1..log M_T of the mixture e-detector (method.md §13.4) from log e-values ``inc`` of
    shape (R, T, K); result (R, T)."""
    inc_arr = np.ascontiguousarray(np.asarray(inc, dtype=np.float64))
    if inc_arr.ndim != 3:
        raise ValueError("inc must have shape (R, T, K)")
    r, horizon, k = inc_arr.shape
    out = np.empty((r, horizon))
    _mixture_recursion(inc_arr, np.full((r, k), -np.inf), np.zeros((horizon, k)), np.zeros(horizon), variant == "sr",
                       out, 0, _equal_prior(k))
    return out


def e_process_paths(a: ArrayLike, b: ArrayLike, n: int, line: SupportingLine, grid: ArrayLike | None = None,
                    payoff: Payoff = "per-sample", starts: Starts = "mixture", chunk: int = 4096) -> NDArray[np.float64]:
    """log W_1..log W_T of the e-process for counts of shape (R, T); result (R, T)."""
    return _batch(a, b, n, line, grid, payoff, chunk, lambda t: start_weight(t, starts), True,
                  lambda started: max(1.0 - started, 0.0))


def e_detector_paths(a: ArrayLike, b: ArrayLike, n: int, line: SupportingLine, variant: EDetectorKind = "sr",
                     grid: ArrayLike | None = None, payoff: Payoff = "per-sample",
                     chunk: int = 4096, faces: Literal["one", "auto"] = "one") -> NDArray[np.float64]:
    """log M_1..log M_T of the mixture e-detector for counts of shape (R, T); result (R, T).

    SR: M_t^j = F_t^j·(M_{t−1}^j + 1); CUSUM: F_t^j·max(M_{t−1}^j, 1) (M_0 = 0, so M_1 = F_1).
    ``faces="auto"``: each period on the predictable face, as :class:`EDetector` (the service's
    design); computed in blocks of runs of about ``chunk``·10³ numbers each.
    """
    if variant not in ("sr", "cusum"):
        raise ValueError(f"variant must be 'sr' or 'cusum', got {variant!r}")
    if faces == "one":
        return _batch(a, b, n, line, grid, payoff, chunk, lambda t: 1.0, variant == "sr", lambda started: 0.0)
    if faces != "auto" or payoff not in PER_SAMPLE_PAYOFFS:
        raise ValueError("an e-detector bets on faces 'one' or 'auto', per sample")
    a2, b2 = np.atleast_2d(np.asarray(a)), np.atleast_2d(np.asarray(b))
    g = bet_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    rows = max(1, (chunk * 1000) // max(1, a2.shape[1] * g.size))
    return np.concatenate([
        e_detector_paths_from_increments(face_increments(a2[i:i + rows], b2[i:i + rows], n, line, "auto", False, g,
                                                         payoff), variant)
        for i in range(0, a2.shape[0], rows)], axis=0)


@dataclass(frozen=True)
class EProcessDesign:
    """Which components an e-process mixes and with what weights (method.md §13.3b, §13.3c, §13.3d).

    ``faces``: "one", "both" (each face its own components) or "auto" (one set of components on the
    face :func:`predictable_face` picks each period); ``agrapa``: the aGRAPA bet besides the grid;
    ``agrapa_weight``: None for equal weights over the components, else the aGRAPA bets' share ρ;
    ``grid_size``: bets of the geometric grid from 0.005 to 0.8; ``payoff``: the period e-value of
    §13.2, exact (``"per-sample"``, default) or its Jensen bound (``"per-sample-jensen"``, label item
    ``jensen``). ``tuned_weight``: the share τ of the horizon-tuned bet (§13.3d; the grid keeps
    1 − ρ − τ), which needs ``horizon`` H (periods; :meth:`with_horizon`) and sizes its bet for a
    window of ``window``·H periods.
    """

    faces: Faces = "both"
    agrapa: bool = True
    agrapa_weight: float | None = None
    grid_size: int = DEFAULT_GRID_SIZE
    payoff: Payoff = "per-sample"
    tuned_weight: float | None = None
    horizon: int | None = None
    window: float = TUNED_WINDOW

    def __post_init__(self) -> None:
        if self.faces not in ("one", "both", "auto"):
            raise ValueError(f"faces must be 'one', 'both' or 'auto', got {self.faces!r}")
        if self.payoff not in PER_SAMPLE_PAYOFFS:
            raise ValueError(f"a design bets per sample: payoff must be one of {PER_SAMPLE_PAYOFFS}, got {self.payoff!r}")
        if self.horizon is not None and (isinstance(self.horizon, bool) or int(self.horizon) != self.horizon
                                         or self.horizon < 1):
            raise ValueError(f"the horizon must be an integer >= 1, got {self.horizon!r}")
        if not (0.0 < self.window <= 1.0):
            raise ValueError(f"window must lie in (0, 1], got {self.window!r}")
        component_log_prior(self.grid_size, self.faces, self.agrapa, self.agrapa_weight, self.tuned_weight)  # validates

    @property
    def grid(self) -> NDArray[np.float64]:
        return bet_grid(self.grid_size)

    @property
    def tuned(self) -> bool:
        """Whether the design has the horizon-tuned bet (method.md §13.3d)."""
        return self.tuned_weight is not None

    def with_horizon(self, horizon: int | None) -> EProcessDesign:
        """The same design for a horizon of ``horizon`` periods (None: no horizon)."""
        return replace(self, horizon=None if horizon is None else int(horizon))

    def log_prior(self) -> NDArray[np.float64]:
        return component_log_prior(self.grid_size, self.faces, self.agrapa, self.agrapa_weight, self.tuned_weight)

    def tuned_mask(self) -> NDArray[np.bool_]:
        """Which components (in :func:`component_parts` order) are the horizon-tuned bets."""
        per_face = [False] * (self.grid_size + (1 if self.agrapa else 0)) + ([True] if self.tuned else [])
        return np.array(per_face * (2 if self.faces == "both" else 1), dtype=bool)

    def tuned_rate(self, alpha: float) -> float | None:
        """κ of the horizon-tuned bet at level α (:func:`tuned_rate`), None without one."""
        if not self.tuned:
            return None
        if self.horizon is None:
            raise ValueError(f"the design {self.label!r} needs a horizon (with_horizon)")
        assert self.tuned_weight is not None
        return tuned_rate(alpha, self.horizon, self.tuned_weight, self.window)

    @property
    def label(self) -> str:
        """E.g. ``both,agrapa,grid=16``, ``auto,agrapa=0.5,grid=16``, ``auto,agrapa=0.8,grid=16,jensen`` or
        ``auto,agrapa=0.2,grid=16,tuned=0.7,horizon=200`` (what :meth:`parse` reads)."""
        ag = "" if not self.agrapa else (",agrapa" if self.agrapa_weight is None else f",agrapa={self.agrapa_weight:g}")
        jensen = ",jensen" if self.payoff == "per-sample-jensen" else ""
        tuned = "" if not self.tuned else f",tuned={self.tuned_weight:g}"
        if self.tuned and self.window != TUNED_WINDOW:
            tuned += f",window={self.window:g}"
        horizon = "" if self.horizon is None else f",horizon={self.horizon}"
        return f"{self.faces}{ag},grid={self.grid_size}{jensen}{tuned}{horizon}"

    @classmethod
    def parse(cls, text: str) -> EProcessDesign:
        faces, *rest = [t.strip() for t in text.split(",") if t.strip()]
        kw: dict[str, Any] = {"faces": faces, "agrapa": False}
        for item in rest:
            key, _, val = item.partition("=")
            if key == "agrapa":
                kw["agrapa"] = True
                kw["agrapa_weight"] = float(val) if val else None
            elif key == "grid":
                kw["grid_size"] = int(val)
            elif key == "jensen" and not val:
                kw["payoff"] = "per-sample-jensen"
            elif key == "tuned" and val:
                kw["tuned_weight"] = float(val)
            elif key == "window" and val:
                kw["window"] = float(val)
            elif key == "horizon" and val:
                kw["horizon"] = int(val)
            else:
                raise ValueError(f"unknown design item {item!r} in {text!r}")
        return cls(**kw)

    def increments(self, a: ArrayLike, b: ArrayLike, n: ArrayLike, line: SupportingLine,
                   alpha: float = 0.05) -> NDArray[np.float64]:
        """log e-values of every component, (R, T, C), for counts (R, T) and a fixed line (:func:`face_increments`)."""
        return face_increments(a, b, n, line, self.faces, self.agrapa, self.grid, self.payoff, self.tuned_rate(alpha))

    def paths_from_increments(self, inc: ArrayLike, starts: Starts = "mixture") -> NDArray[np.float64]:
        """log W_1..log W_T of this e-process from its components' log e-values (R, T, C)."""
        lp = None if self.agrapa_weight is None else self.log_prior()
        return e_process_paths_from_increments(inc, starts, lp, self.tuned_mask() if self.tuned else None,
                                               self.horizon)

    def paths(self, a: ArrayLike, b: ArrayLike, n: ArrayLike, line: SupportingLine,
              starts: Starts = "mixture", cells: int = 1 << 24, alpha: float = 0.05) -> NDArray[np.float64]:
        """log W_1..log W_T of this e-process for counts of shape (R, T) and a fixed line (a scalar n,
        or one per run and period); runs are taken in blocks of about ``cells`` numbers per component.
        ``alpha`` sizes the horizon-tuned bet (§13.3d) and is read only by designs that have one."""
        a2 = np.atleast_2d(np.asarray(a))
        b2 = np.atleast_2d(np.asarray(b))
        n2 = np.broadcast_to(np.asarray(n), a2.shape)
        rows = max(1, cells // max(1, a2.shape[1] * component_count(self.grid_size, self.faces, self.agrapa,
                                                                     self.tuned)))
        out = np.empty(a2.shape)
        for lo in range(0, a2.shape[0], rows):
            hi = min(a2.shape[0], lo + rows)
            out[lo:hi] = self.paths_from_increments(self.increments(a2[lo:hi], b2[lo:hi], n2[lo:hi], line, alpha),
                                                    starts)
        return out


#: The e-process on both faces (method.md §13.3b): the grid and aGRAPA, equal weights 1/34.
BOTH_FACES_DESIGN = EProcessDesign("both", True, None, DEFAULT_GRID_SIZE)
#: The service's e-process without a horizon (method.md §13.3c): the predictable face, the grid and
#: aGRAPA, with 0.8 of the prior on the aGRAPA bet (docs/sequential.md, "an e-process that wastes less
#: evidence").
SERVICE_DESIGN = EProcessDesign("auto", True, 0.8, DEFAULT_GRID_SIZE)
#: The service's e-process for a check with a horizon of H periods (method.md §13.3d;
#: ``HORIZON_DESIGN.with_horizon(H)``): the predictable face, the horizon-tuned bet with 0.7 of the
#: prior, the aGRAPA bet with 0.2 and the grid with 0.1 (docs/sequential.md, "the horizon-tuned bet").
HORIZON_DESIGN = EProcessDesign("auto", True, 0.2, DEFAULT_GRID_SIZE, tuned_weight=0.7)


def service_design(horizon: int | None) -> EProcessDesign:
    """The design a new e-process check runs: :data:`HORIZON_DESIGN` for its horizon of H periods,
    :data:`SERVICE_DESIGN` without one (method.md §13.3c, §13.3d)."""
    return SERVICE_DESIGN if horizon is None else HORIZON_DESIGN.with_horizon(horizon)


def design_of_state(state: dict[str, Any] | None) -> EProcessDesign | None:
    """The :class:`EProcessDesign` a stored e-process state runs (None for other detectors' states)."""
    if not state or state.get("kind") != EProcess.kind:
        return None
    version = state.get("version")
    weight = state.get("agrapa_weight") if version in (2, 3) else None
    tuned = state.get("tuned_weight") if version == 3 else None
    payoff = state.get("payoff", "per-sample")
    return EProcessDesign(state.get("faces", "one"), bool(state.get("agrapa", False)),
                          None if weight is None else float(weight), int(state.get("grid_size", DEFAULT_GRID_SIZE)),
                          payoff if payoff in PER_SAMPLE_PAYOFFS else "per-sample",
                          None if tuned is None else float(tuned),
                          None if tuned is None else int(state["horizon"]),
                          float(state.get("window", TUNED_WINDOW)) if tuned is not None else TUNED_WINDOW)
