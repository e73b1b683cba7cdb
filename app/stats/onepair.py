"""One pair a period: a predictable soft payoff and a constant bet (method.md §13.10).

The audit reads one pair at a time, X_t ~ M(x) and Y_t ~ M(x'), and tests a claim that bounds
every event E by a line, P(X ∈ E) ≤ s·P(Y ∈ E) + d: (ε, δ)-DP with s = e^ε, d = δ (Kairouz, Oh &
Viswanath 2015), or a supporting line (s, d) of a concave trade-off boundary p ≤ h(q) (f-DP, μ-GDP;
Dong, Roth & Su 2022), which lies above the boundary, so every event obeys it too (§13.1).

**Soft payoff** (eq. OP1). For any h: outputs → [0, 1] the claim implies

    E h(X) = ∫₀¹ P(h(X) > u) du ≤ ∫₀¹ (s·P(h(Y) > u) + d) du = s·E h(Y) + d,

since each level set {h > u} is an event. So with h_t, (s_t, d_t) and a bet λ_t ∈ [0, c/(s_t + d_t)],
c < 1, all functions of pairs 1..t−1 only,

    Z_t = h_t(X_t) − s_t·h_t(Y_t) − d_t,    E[Z_t | pairs < t] ≤ 0,    1 + λ_t Z_t ≥ 1 − c > 0,

and W_t = Π_{i≤t} (1 + λ_i Z_i) is a non-negative supermartingale with W_0 = 1 under the claim
(it need not be i.i.d.: only the conditional mean is used). Ville's inequality gives
P(∃t: W_t ≥ 1/α) ≤ α: the audit rejects at the first t with W_t ≥ 1/α and its level holds at
every t, with no horizon. An (ε, δ) claim and the symmetric trade-off curves used here also bound
the pair in the other order, P(Y ∈ E) ≤ s·P(X ∈ E) + d, so the "second face"
Z_t = h_t(Y_t) − s_t·h_t(X_t) − d_t is valid too; the face is chosen from the past (eq. OP5).

**The witness h_t** (eqs. OP2c, OP3'; shipped, ours-v5). r̂_t is the likelihood ratio of two laws
of one location-scale family fitted to the past outputs of each side (eq. OP2c):

    log r̂_t(v) = log f((v − m̃_x)/b̃_x)/b̃_x − log f((v − m̃_y)/b̃_y)/b̃_y,                             (OP2c)

f the Laplace or the Gaussian density, whichever has the larger maximised log-likelihood of both
sides' pairs < t; (m, b) each side's maximum-likelihood centre and scale (median and mean absolute
deviation, or mean and root mean square deviation), shrunk towards the pooled fit (m₀, b₀) with a
pseudo-count κ = 1: m̃ = (n·m + κ·m₀)/(n + κ), b̃ = (n·b + κ·b₀)/(n + κ) (Laplace; b̃² likewise for
the Gaussian). Two parameters a side, each estimated at the parametric rate, where the spline of
OP2 has six learnt from a classification. The witness is

    h_t(v) = min((t − 1)/T₀, (1 − a·s/r̂_t(v))₊),  a = 0.8,  T₀ = 10,                              (OP3')

the Kelly fraction of a bet on "came from X" against the line, started a little below r̂ = s (a < 1:
the growth-optimal soft witness is positive below r = s, since the payoff pairs h(X) with h(Y);
`bench/onepair_oracle.py`), and capped while fewer than T₀ pairs are past, where a witness fitted
on 2–9 pairs can put h = 1 where Y still lands and lose most of the wealth in one pair. Both are
functions of the past and of t, so (OP1) holds. A wrong family costs power, never level.

**The earlier witness** (eqs. OP2, OP3; ours-v3, ours-v4: ``model="spline", shape="op3", ramp=0``).
With one pair a period and h fixed, the bet λ maximising E log(1 + λZ) ≈ λD − λ²V/2 is D/V;
maximising over h point by point, dropping the covariance of h(X) and h(Y), gives the pointwise
Kelly witness g(v) = (r(v) − s)₊/(r(v) + s²). We bet λ·h with h = min(1, s·g):

    h_t(v) = min(1, s·(r̂_t(v) − s)₊ / (r̂_t(v) + s²)),                                  (OP3)

with r̂_t a ridge-penalised logistic regression of "came from X" on past outputs of both sides:

    log r̂_t(v) = β₀ + β₁u + β₂|u| + β₃|u − 1| + β₄|u + 1| + β₅u²,  u = clip((v − m_t)/σ_t, ±10),   (OP2)

m_t the pooled median and σ_t the pooled median absolute deviation of pairs 1..t−1: a linear spline
with knots at 0 and ±1 pooled MAD plus a quadratic term. The penalty ρ·Σ_{k≥1} β_k²/2 (ρ = 3; 1 in
ours-v3) shrinks r̂ towards 1 (h = 0: no bet) while data are few.

**The bet** (eq. OP4). The bet is the constant

    λ_t = c/(s_t + d_t),  c = 0.9,

the largest that keeps every factor ≥ 1 − c; how much is at stake is decided by h_t. Against the
earlier online Newton step on the realised payoffs (OP4', ``bet_rule="ons"``: Cutkosky & Orabona
2018, as used for testing by betting in Shekhar & Ramdas 2023, Algorithm 1),

    g_t = −Z_t/(1 + λ_t Z_t),  A_t = 1 + Σ_{i≤t} g_i²,
    λ_{t+1} = clip(λ_t − (2/(2 − log 3))·g_t/A_t, 0, c/(s_{t+1} + d_{t+1})),  λ_1 = 0,

it saves the pairs the ONS bet spends ramping up from 0 and shrinking after a loss
(docs/sequential.md, "Where the one-pair auditor loses").

**The face** (eq. OP5). With both faces the witness of the second is the same shape on 1/r̂; the
face used at t is the one with the larger in-sample score D̂/√V̂ of the uncapped witness on pairs < t
(none while both D̂ ≤ 0).

The state is the past outputs (the witness is re-fitted on them after every pair up to 128, then
after every ⌈t/64⌉-th pair; in between the last fitted witness is used, still a function of the
past), the fitted laws (or the six coefficients of OP2, or the atoms of OP2b), the face, the line
and the bet.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from app.stats.sequential import SupportingLine, bet_grid

Faces = Literal["one", "auto"]
BetRule = Literal["constant", "ons", "grid"]
RatioModel = Literal["location-scale", "spline"]
WitnessShape = Literal["shifted-kelly", "op3"]
LineOrTangent = SupportingLine | Callable[[float], SupportingLine]

#: Features are clipped to ±U pooled MADs (OP2): far outliers (the DPLaplace mechanism divides by
#: a noisy count that may be 10⁻¹²) cannot make the design matrix overflow.
FEATURE_CLIP = 10.0
#: Number of features of eq. OP2.
N_FEATURES = 6
#: The ONS constant 2/(2 − log 3) of Cutkosky & Orabona (2018) (OP4).
ONS_CONSTANT = 2.0 / (2.0 - math.log(3.0))


def soft_payoff(hx: ArrayLike, hy: ArrayLike, slope: float, intercept: float) -> NDArray[np.float64]:
    """Z = h(X) − s·h(Y) − d (method.md §13.10, eq. OP1); mean ≤ 0 under the claim for h ∈ [0, 1]."""
    hx_a, hy_a = np.asarray(hx, dtype=np.float64), np.asarray(hy, dtype=np.float64)
    if np.any((hx_a < 0) | (hx_a > 1) | (hy_a < 0) | (hy_a > 1)):
        raise ValueError("a witness takes values in [0, 1]")
    return hx_a - slope * hy_a - intercept


def kelly_witness(log_ratio: ArrayLike, slope: float) -> NDArray[np.float64]:
    """h = min(1, s·(r − s)₊/(r + s²)), r = exp(log_ratio) (method.md §13.10, eq. OP3)."""
    lr = np.asarray(log_ratio, dtype=np.float64)
    # (r − s)/(r + s²) = (1 − s e^{−ℓ})/(1 + s² e^{−ℓ}): stable for large ℓ, 0 below ℓ = log s.
    em = np.exp(-np.clip(lr, -700.0, 700.0))
    g = np.maximum(1.0 - slope * em, 0.0) / (1.0 + slope * slope * em)
    return np.minimum(1.0, slope * g)


#: a of eq. OP3': the witness bets from r̂ > a·s on, a little below the line's slope.
SHIFT = 0.8
#: T₀ of eq. OP3': the witness is capped at (t − 1)/T₀ while fewer than T₀ pairs are past.
RAMP = 10


def shifted_kelly_witness(log_ratio: ArrayLike, slope: float, shift: float = SHIFT) -> NDArray[np.float64]:
    """h = (1 − a·s/r)₊ in [0, 1], r = exp(log_ratio) (method.md §13.10, eq. OP3')."""
    lr = np.asarray(log_ratio, dtype=np.float64)
    return np.clip(1.0 - shift * slope * np.exp(-np.clip(lr, -700.0, 700.0)), 0.0, 1.0)


def ramp_cap(past: int, ramp: int = RAMP) -> float:
    """The cap min(1, (t − 1)/T₀) on the witness at pair t, ``past`` = t − 1 (eq. OP3'); 1 when T₀ = 0."""
    return 1.0 if ramp <= 0 else min(1.0, past / ramp)


#: Pseudo-count κ of the pooled fit in each side's location and scale (eq. OP2c).
KAPPA = 1.0
Family = Literal["laplace", "gaussian"]


def _centre_scale(a: NDArray[np.float64], family: Family) -> tuple[float, float]:
    """Maximum-likelihood (centre, scale): (median, mean |a − median|) or (mean, root mean square deviation)."""
    if family == "laplace":
        m = float(np.median(a))
        return m, float(np.mean(np.abs(a - m)))
    m = float(np.mean(a))
    return m, float(np.sqrt(np.mean((a - m) ** 2)))


def _log_density(v: NDArray[np.float64], m: float, b: float, family: Family) -> NDArray[np.float64]:
    if family == "laplace":
        return -math.log(2.0 * b) - np.abs(v - m) / b
    return -0.5 * math.log(2.0 * math.pi) - math.log(b) - 0.5 * ((v - m) / b) ** 2


def _positive(b: float, fallback: float) -> float:
    return b if (b > 0 and math.isfinite(b)) else fallback


@dataclass(frozen=True)
class LocationScaleFit:
    """A fitted pair of laws of one family, X ~ f((v − m_x)/b_x)/b_x and Y ~ f((v − m_y)/b_y)/b_y (eq. OP2c)."""

    family: Family
    mx: float
    bx: float
    my: float
    by: float

    def log_ratio(self, v: ArrayLike) -> NDArray[np.float64]:
        """log r̂(v) = log f_X(v) − log f_Y(v) (eq. OP2c)."""
        va = np.asarray(v, dtype=np.float64)
        return _log_density(va, self.mx, self.bx, self.family) - _log_density(va, self.my, self.by, self.family)


def fit_location_scale(xs: ArrayLike, ys: ArrayLike, kappa: float = KAPPA) -> LocationScaleFit:
    """The Laplace or Gaussian pair of laws fitted to the past outputs of each side (method.md §13.10, eq. OP2c).

    Each family is fitted to each side by maximum likelihood; the family with the larger maximised
    log-likelihood of both sides is kept. Each side's centre and scale are then shrunk towards the
    pooled fit with a pseudo-count κ: m̃ = (n·m + κ·m₀)/(n + κ), b̃ = (n·b + κ·b₀)/(n + κ) (Laplace)
    or b̃² = (n·b² + κ·b₀²)/(n + κ) (Gaussian), which keeps r̂ near 1 while n is small and b̃ > 0."""
    xa, ya = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    n = xa.size
    pooled = np.concatenate([xa, ya])
    # each family's fits: (log-likelihood of both sides, the pooled (m₀, b₀), each side's (m, b))
    fits: dict[Family, tuple[float, tuple[float, float], list[tuple[float, float]]]] = {}
    for name in ("laplace", "gaussian"):
        fam: Family = name  # type: ignore[assignment]
        m0, b0 = _centre_scale(pooled, fam)
        b0 = _positive(b0, 1.0)
        sides = [_centre_scale(side, fam) for side in (xa, ya)]
        ll = sum(float(np.sum(_log_density(side, m, _positive(b, b0 * 1e-6), fam)))
                 for side, (m, b) in zip((xa, ya), sides, strict=True))
        fits[fam] = (ll, (m0, b0), sides)
    family: Family = "laplace" if fits["laplace"][0] >= fits["gaussian"][0] else "gaussian"
    _, (m0, b0), sides = fits[family]
    params = []
    for m, b in sides:
        mt = (n * m + kappa * m0) / (n + kappa)
        bt = ((n * b + kappa * b0) / (n + kappa) if family == "laplace"
              else math.sqrt((n * b * b + kappa * b0 * b0) / (n + kappa)))
        params += [mt, _positive(bt, b0)]
    return LocationScaleFit(family, *params)


def features(u: ArrayLike) -> NDArray[np.float64]:
    """(1, u, |u|, |u − 1|, |u + 1|, u²) of the standardised output u (method.md §13.10, eq. OP2)."""
    ua = np.clip(np.asarray(u, dtype=np.float64), -FEATURE_CLIP, FEATURE_CLIP)
    return np.stack([np.ones_like(ua), ua, np.abs(ua), np.abs(ua - 1.0), np.abs(ua + 1.0), ua * ua], axis=-1)


#: The past outputs are read as atoms (eq. OP2b) when at most this share of the pooled past outputs
#: are distinct values: integer outputs, lattices, outputs rounded to a grid.
ATOM_SHARE = 0.5
#: Pseudo-count of each side at every atom seen (eq. OP2b).
ATOM_PSEUDO = 1.0


def atom_log_ratio(xs: ArrayLike, ys: ArrayLike, pseudo: float = ATOM_PSEUDO
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The atoms seen (sorted) and log r̂ at each, log((c_x + κ)/(c_y + κ)) (method.md §13.10, eq. OP2b).

    For outputs that repeat (integers, a lattice) a smooth model of log r cannot see a support that
    differs atom by atom; the counts of each value on each side can. An atom never seen gets
    log r̂ = 0 (:func:`atom_lookup`), hence h = 0: no bet on it."""
    xa, ya = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    vals, inv = np.unique(np.concatenate([xa, ya]), return_inverse=True)
    return vals, _atom_counts_log_ratio(inv, xa.size, vals.size, pseudo)


def _atom_counts_log_ratio(inv: NDArray[np.intp], n_x: int, n_vals: int, pseudo: float = ATOM_PSEUDO
                           ) -> NDArray[np.float64]:
    """log((c_x + κ)/(c_y + κ)) per atom from the pooled outputs' atom indices, x's first (eq. OP2b)."""
    cx = np.bincount(inv[:n_x], minlength=n_vals)
    cy = np.bincount(inv[n_x:], minlength=n_vals)
    return np.log((cx + pseudo) / (cy + pseudo))


def atom_lookup(vals: NDArray[np.float64], log_ratio: NDArray[np.float64], v: ArrayLike) -> NDArray[np.float64]:
    """log r̂ at the outputs ``v``: the atom's value, 0 where ``v`` is no atom seen (eq. OP2b)."""
    va = np.asarray(v, dtype=np.float64)
    idx = np.clip(np.searchsorted(vals, va), 0, vals.size - 1)
    return np.where(vals[idx] == va, log_ratio[idx], 0.0)


def standardiser(pooled: NDArray[np.float64]) -> tuple[float, float]:
    """(m, σ): the pooled median and median absolute deviation (1 if it is 0) (eq. OP2)."""
    m = float(np.median(pooled))
    sc = float(np.median(np.abs(pooled - m)))
    if not (sc > 0 and math.isfinite(sc)):
        sc = float(np.mean(np.abs(pooled - m)))
    if not (sc > 0 and math.isfinite(sc)):
        sc = 1.0
    return m, sc


def fit_log_ratio(design: NDArray[np.float64], label: NDArray[np.float64], beta: NDArray[np.float64],
                  ridge: float, iterations: int = 3) -> NDArray[np.float64]:
    """Ridge-penalised logistic regression (label 1 = came from X), damped Newton from ``beta``.

    Maximises Σ [y_i η_i − log(1 + e^{η_i})] − ridge·Σ_{k≥1} β_k²/2 (eq. OP2; the intercept gets
    a tiny penalty, 10⁻³, so the system is always positive definite). With as many outputs from
    each side, η = log r̂ estimates the log likelihood ratio.
    """
    pen = np.full(design.shape[1], float(ridge))
    pen[0] = 1e-3

    def objective(eta: NDArray[np.float64], b: NDArray[np.float64]) -> float:
        return float(label @ eta - np.logaddexp(0.0, eta).sum() - 0.5 * (pen * b) @ b)

    beta = np.asarray(beta, dtype=np.float64).copy()
    eta = design @ beta
    current = objective(eta, beta)
    for _ in range(iterations):
        prob = 0.5 * (1.0 + np.tanh(0.5 * eta))
        grad = design.T @ (label - prob) - pen * beta
        hess = (design.T * (prob * (1.0 - prob))) @ design
        hess[np.diag_indices_from(hess)] += pen
        step = np.linalg.solve(hess, grad)
        a = 1.0
        while a > 1e-4:
            cand = beta + a * step
            eta_c = design @ cand
            val = objective(eta_c, cand)
            if val >= current:
                beta, eta, current = cand, eta_c, val
                break
            a *= 0.5
        else:
            break
    return beta


def ons_step(bet: float, payoff: float, a_sum: float, bet_cap: float) -> tuple[float, float]:
    """One online Newton step on −log(1 + λZ) (eq. OP4', the earlier bet): returns (next bet, next A)."""
    g = -payoff / (1.0 + bet * payoff)
    a_sum += g * g
    return min(max(bet - ONS_CONSTANT * g / a_sum, 0.0), bet_cap), a_sum


@dataclass
class OnePairResult:
    """The rejection time (1-based pair index, None if never) and the path of log W_t."""

    rejected_at: int | None
    log_wealth: NDArray[np.float64]
    bets: NDArray[np.float64]
    payoffs: NDArray[np.float64]


@dataclass
class OnePairAuditor:
    """The one-pair e-process of method.md §13.10: ``update(x, y)`` bets on one pair, then learns.

    ``line`` is the claim's line (s, d), or a function q₀ ↦ tangent line of a concave boundary at
    q₀ (taken at q̂ = the past Y-mean of the witness, a fixed point iterated twice; predictable).
    ``cap`` c < 1 is the bet fraction λ(s + d) (OP4); ``warmup`` pairs are read without a bet (at
    least 2, so both sides have outputs to fit on).

    The shipped witness (ours-v5) is ``model="location-scale"`` (r̂ from Laplace or Gaussian fits of
    each side, eq. OP2c, pseudo-count ``kappa``) with ``shape="shifted-kelly"`` (eq. OP3': h =
    (1 − a·s/r̂)₊, a = ``shift``, capped at (t − 1)/T₀ for T₀ = ``ramp`` pairs). The earlier ours-v4
    is ``model="spline", shape="op3", ramp=0`` (OP2, OP3; ``ridge`` is ρ of OP2); with ``ridge=1``
    and ``bet_rule="ons"`` it is ours-v3 (OP4'); ``bet_rule="grid"`` (an ablation) bets the
    equal-weight mixture of §13.3's 16 constant bets.
    """

    alpha: float
    line: LineOrTangent
    ridge: float = 3.0
    cap: float = 0.9
    warmup: int = 2
    faces: Faces = "auto"
    bet_rule: BetRule = "constant"
    atoms: bool = True  # eq. OP2b for outputs that repeat (False: the smooth model always; an ablation)
    model: RatioModel = "location-scale"  # eq. OP2c (shipped) or the spline of OP2 (ours-v3, ours-v4)
    shape: WitnessShape = "shifted-kelly"  # eq. OP3' (shipped) or OP3 (ours-v3, ours-v4)
    shift: float = SHIFT  # a of eq. OP3'
    ramp: int = RAMP  # T₀ of eq. OP3' (0: no cap)
    kappa: float = KAPPA  # κ of eq. OP2c
    t: int = 0
    log_w: float = 0.0
    bet: float = 0.0
    a_sum: float = 1.0
    rejected_at: int | None = None
    _xs: NDArray[np.float64] = field(default_factory=lambda: np.empty(64))
    _ys: NDArray[np.float64] = field(default_factory=lambda: np.empty(64))
    _beta: NDArray[np.float64] = field(default_factory=lambda: np.zeros(N_FEATURES))
    _std: tuple[float, float] = (0.0, 1.0)
    _atoms: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None  # eq. OP2b when outputs repeat
    _fit: LocationScaleFit | None = None  # eq. OP2c
    _face: int = 0  # 0: none, 1: Z = h(X) − s h(Y) − d, 2: Z = h(Y) − s h(X) − d
    _line: SupportingLine | None = None
    _grid_log_w: NDArray[np.float64] = field(default_factory=lambda: np.zeros(16))

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        if not 0 < self.cap < 1:
            raise ValueError("cap must be in (0, 1)")
        if self.warmup < 2:
            raise ValueError("warmup must be at least 2")
        if self.model not in ("location-scale", "spline") or self.shape not in ("shifted-kelly", "op3"):
            raise ValueError("model must be 'location-scale' or 'spline', shape 'shifted-kelly' or 'op3'")
        if not (0 < self.shift and self.kappa > 0 and self.ramp >= 0):
            raise ValueError("shift and kappa must be positive, ramp non-negative")
        self._line = self._tangent(0.5)

    @property
    def threshold(self) -> float:
        return math.log(1.0 / self.alpha)

    def _tangent(self, q0: float) -> SupportingLine:
        return self.line if isinstance(self.line, SupportingLine) else self.line(q0)

    def _log_ratio(self, v: ArrayLike) -> NDArray[np.float64]:
        if self._atoms is not None:
            return atom_lookup(*self._atoms, v)
        if self._fit is not None:
            return self._fit.log_ratio(v)
        m, sc = self._std
        return features((np.asarray(v, dtype=np.float64) - m) / sc) @ self._beta

    def _shape(self, log_ratio: NDArray[np.float64], slope: float) -> NDArray[np.float64]:
        """The witness of a log-ratio before the ramp's cap: OP3' or OP3."""
        if self.shape == "op3":
            return kelly_witness(log_ratio, slope)
        return shifted_kelly_witness(log_ratio, slope, self.shift)

    def witness(self, v: ArrayLike, face: int, slope: float) -> NDArray[np.float64]:
        """h_t of the current face (OP3' or OP3, capped by the ramp); the second face uses 1/r̂."""
        lr = self._log_ratio(v)
        return np.minimum(self._shape(lr if face == 1 else -lr, slope), ramp_cap(self.t, self.ramp))

    def _refit(self) -> None:
        t = self.t
        xs, ys = self._xs[:t], self._ys[:t]
        pooled = np.concatenate([xs, ys])
        vals, inv = np.unique(pooled, return_inverse=True)
        if self.atoms and vals.size <= ATOM_SHARE * pooled.size:  # outputs repeat: atoms (OP2b)
            atom_lr = _atom_counts_log_ratio(inv, t, vals.size)
            self._atoms = (vals, atom_lr)
            lr = atom_lr[inv]
        elif self.model == "location-scale":  # eq. OP2c
            self._atoms = None
            self._fit = fit_location_scale(xs, ys, self.kappa)
            lr = self._fit.log_ratio(pooled)
        else:
            self._atoms = None
            self._std = standardiser(pooled)
            m, sc = self._std
            design = features((pooled - m) / sc)
            label = np.concatenate([np.ones(t), np.zeros(t)])
            self._beta = fit_log_ratio(design, label, self._beta, self.ridge)
            lr = design @ self._beta
        # The face and the line for the next pair, from pairs 1..t only (OP5).
        best, best_face, best_line = 0.0, 0, self._tangent(0.5)
        for face in ((1, 2) if self.faces == "auto" else (1,)):
            # face 1 bets h(X) − s h(Y) with h from r̂; face 2 bets h(Y) − s h(X) with h from 1/r̂
            lr_a, lr_b = (lr[:t], lr[t:]) if face == 1 else (-lr[t:], -lr[:t])
            line = self._line if self._line is not None else self._tangent(0.5)
            if not isinstance(self.line, SupportingLine):
                for _ in range(2):  # q̂ = past Y-mean of the witness, the tangent there
                    q_hat = float(self._shape(lr_b, line.slope).mean())
                    line = self._tangent(min(max(q_hat, 1e-6), 1 - 1e-6))
            ha = self._shape(lr_a, line.slope)
            hb = self._shape(lr_b, line.slope)
            ma, mb = float(ha.mean()), float(hb.mean())
            d_hat = ma - line.slope * mb - line.intercept
            v_hat = float(ha @ ha) / t - ma * ma + line.slope ** 2 * (float(hb @ hb) / t - mb * mb) + 1.0 / t
            score = d_hat / math.sqrt(v_hat)
            if score > best:
                best, best_face, best_line = score, face, line
        self._face, self._line = best_face, best_line

    def _store(self, x: float, y: float) -> None:
        if self.t >= self._xs.size:
            self._xs = np.concatenate([self._xs, np.empty(self._xs.size)])
            self._ys = np.concatenate([self._ys, np.empty(self._ys.size)])
        self._xs[self.t], self._ys[self.t] = x, y
        self.t += 1

    def update(self, x: float, y: float) -> tuple[float, float]:
        """Bet on the pair (x, y) with what pairs 1..t−1 chose, then learn from it.

        Returns (λ_t, Z_t) (0, 0 when no bet). Sets ``rejected_at`` at the first W_t ≥ 1/α.
        """
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError("outputs must be finite numbers")
        bet, payoff = 0.0, 0.0
        if self.t >= self.warmup and self._face and self._line is not None:
            s, d = self._line.slope, self._line.intercept
            hx, hy = (float(v) for v in self.witness(np.array([x, y]), self._face, s))
            payoff = (hx - s * hy - d) if self._face == 1 else (hy - s * hx - d)
            if self.bet_rule == "grid":  # ablation: the equal-weight mixture of §13.3's 16 bets
                self._grid_log_w += np.log1p(bet_grid() / (s + d) * payoff)
                top = float(self._grid_log_w.max())
                self.log_w = top + math.log(float(np.mean(np.exp(self._grid_log_w - top))))
            elif self.bet_rule == "ons":  # the earlier ours-v3: one online Newton step bet (OP4')
                bet = min(self.bet, self.cap / (s + d))
                self.log_w += math.log1p(bet * payoff)
                self.bet, self.a_sum = ons_step(bet, payoff, self.a_sum, self.cap / (s + d))
            else:  # the constant bet c/(s + d) on the Kelly-sized witness (OP4)
                bet = self.cap / (s + d)
                self.log_w += math.log1p(bet * payoff)
        self._store(float(x), float(y))
        if self.rejected_at is None and self.log_w >= self.threshold:
            self.rejected_at = self.t
        t = self.t
        if t >= self.warmup and (t <= 128 or t % max(1, -(-t // 64)) == 0):
            self._refit()
        return bet, payoff


def audit_pairs(x: ArrayLike, y: ArrayLike, line: LineOrTangent, alpha: float, stop: bool = True,
                **options: float | int | str) -> OnePairResult:
    """Run the one-pair audit of method.md §13.10 on the stream (x_t, y_t); stop at rejection if ``stop``."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError("x and y must be 1-d arrays of the same length")
    aud = OnePairAuditor(alpha, line, **options)  # type: ignore[arg-type]
    logw, bets, pays = [], [], []
    for xt, yt in zip(xa, ya):
        b, z = aud.update(float(xt), float(yt))
        logw.append(aud.log_w)
        bets.append(b)
        pays.append(z)
        if stop and aud.rejected_at is not None:
            break
    return OnePairResult(aud.rejected_at, np.array(logw), np.array(bets), np.array(pays))
