"""One pair, one claim, samples until rejection: the published sequential MMD auditor against ours.

    nice -n 10 python bench/sequential_audit.py                          # the study (see docs/sequential.md)
    python bench/sequential_audit.py --mechanisms NonDPLaplace1 --epsilons 0.1 --runs 20 --methods ours

Methods (each run draws one stream of pairs (X_t, Y_t), X_t ~ M(x), Y_t ~ M(x'), and every
method reads the same stream; a method rejects at the first t with wealth ≥ 1/α, and its
"samples" are t pairs, i.e. t outputs per side, everything it used included):

``mmd``          González, Dulce-Rubio, Ramdas & Ribero, *Sequentially Auditing Differential Privacy*
                 (NeurIPS 2025, arXiv 2509.07055), re-implemented: payoff f_t(X_t) − f_t(Y_t) − τ with
                 f_t in the unit ball of a Gaussian-RBF RKHS learned by projected online gradient
                 ascent (step 1/(2√(Σ‖h_i‖²)), h_i = φ(X_i) − φ(Y_i)), bet by ONS capped at
                 1/(8 + 4τ), τ = √2·(1 − 2(1 − δ)/(1 + e^ε)) (derived in method.md §13.8).
                 Bandwidth: the median heuristic on 20 extra pairs that the test does not use
                 (as the paper; we count them separately, ``+20``).
``mmd-tau2``     the same with the notebook's τ = 2·(1 − 2(1 − δ)/(1 + e^ε)).
``mmd-notebook`` the notebook's arithmetic: τ = 2·TV_max and its witness normalisation, which
                 keeps the witness in the ball of radius 1/2 (see mmd_notebook_stopping_time).
``mmd-notebook-sqrt2``  the notebook's arithmetic with the paper's τ = √2·TV_max.
``ours``         app.stats.sequential.EProcess (the shipped e-process: start mixture, 16-bet grid),
                 one pair per period (n = 1), on an event E_t chosen *before* pair t from pairs
                 1..t−1 only (a predictable event: every event obeys the claim, so the payoff
                 1{X_t∈E_t} − s·1{Y_t∈E_t} − d has mean ≤ 0 under the null whatever E_t is, and the
                 product stays a test supermartingale; method.md §13.6). Candidates: half-lines,
                 central intervals and two-sided tails around the pooled median at pooled
                 quantiles, in both orientations (x against x' and x' against x); the one with
                 the largest D̂ − √(V̂/t) on the past pairs is used, none while it is ≤ 0.
                 No sample is set aside: every pair is used to learn the event after it was bet on.
``ours-first``   the same with the plain product from the first bet (``starts="first"``): a one-shot
                 audit has no stable run before the violation to forget.
``ours-v2``      ``ours-first`` betting on both faces of the claim (the event and its complement)
                 with the grid and the aGRAPA bet (method.md §13.3b).
``ours-v2-mixture``  both faces + aGRAPA with the start mixture (the service's e-process).
``ours-v3``      app.stats.onepair (method.md §13.10): a predictable *soft* payoff
                 h_t(X_t) − s·h_t(Y_t) − d with h_t = min(1, s(r̂ − s)₊/(r̂ + s²)), r̂ a ridge
                 logistic estimate of the likelihood ratio on pairs 1..t−1 (features u, |u|, |u ∓ 1|, u² of
                 the pooled-standardised output), the face (x against x' or x' against x) with the
                 larger past score, one ONS bet (no grid, plain product), bets from pair 3.
``ours-v3-oneface``  the same on the first face only.
``ours-v4``      app.stats.onepair's earlier default (method.md §13.10): ours-v3's witness with a stronger
                 ridge (ρ = 3 instead of 1) and the constant bet 0.9/(s + d) instead of the ONS bet (the
                 witness OP3 is already Kelly-sized). ``ours-v4-oneface``: the first face only.
``ours-v5``      app.stats.onepair as shipped: r̂ from Laplace or Gaussian location-scale fits of each side
                 (eq. OP2c), the witness h = (1 − 0.8·s/r̂)₊ capped at (t − 1)/10 (eq. OP3'), the
                 constant bet 0.9/(s + d). ``ours-v5-oneface``: the first face only.
``ours-v3-grid``, ``ours-v3-warm10``  ablations of ``ours-v3``: §13.3's 16-bet grid mixture instead of
                 the ONS bet; no bet before pair 11 (as ``ours``).

Mechanisms (x = (0), x' = (0, 1), the add/remove neighbours of the González et al. study; the
definitions are those of Kutta et al.'s comparison code, martindunsche/sequential_fdp_auditing,
which follows the formulas printed in González et al.; ε is both the mechanism's parameter and
the claim):

``NonDPLaplace1``   mean(x) + Lap(2/(|x|ε))              claim (ε, 0)-DP  — violates it
``NonDPGaussian1``  mean(x) + N(0, (2/(|x|ε))²)          claim (ε, 10⁻⁵)-DP — violates it
``DPLaplace``       sum(x)/ñ + Lap(2/(ñε)), ñ = max(10⁻¹², |x| + Lap(2/ε))      claim (ε, 0)-DP
``DPGaussian``      the same with Gaussian noise of those scales               claim (ε, 10⁻⁵)-DP
``TightLaplace``    mean(x) + Lap(0.5/ε): exactly ε-DP for this pair (on the boundary)
``TightGaussian``   mean(x) + N(0, σ²), σ the analytic Gaussian (Balle & Wang 2018) for sensitivity
                    0.5 at (ε, 10⁻⁵): exactly on the (ε, δ) boundary for this pair
``NonDPShiftLaplace``   mean(x) + Lap(0.25/ε): a pure location shift, 2ε-DP, claim ε-DP — violates it
``NonDPShiftGaussian``  TightGaussian with half its σ, claim (ε, 10⁻⁵)-DP — violates it
                    (not in González et al.: a violation by a shift, whose log-ratio is not in
                    ours-v3's model, to check that v3 is not fitted to the scale violations)
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm

from app.stats.onepair import audit_pairs
from app.stats.sequential import EProcess, SupportingLine

#: app.stats.onepair.OnePairAuditor's options of each one-pair version (ours-v5: the shipped defaults).
ONEPAIR_OPTIONS: dict[str, dict[str, float | str]] = {
    "ours-v3": {"model": "spline", "shape": "op3", "ramp": 0, "ridge": 1.0, "bet_rule": "ons"},
    "ours-v4": {"model": "spline", "shape": "op3", "ramp": 0},
    "ours-v5": {},
}

X_DB = (0.0,)
X_PRIME_DB = (0.0, 1.0)
GAUSSIAN_DELTA = 1e-5


# ---------------------------------------------------------------------------------------------
# Mechanisms
# ---------------------------------------------------------------------------------------------

def _analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ with δ(ε) ≤ delta for N(0, σ²) shifted by ``sensitivity`` (Balle & Wang 2018, Thm 8)."""
    def delta_of(sigma: float) -> float:
        a = sensitivity / (2 * sigma)
        b = epsilon * sigma / sensitivity
        return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))

    lo, hi = 1e-6, 1e6
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if delta_of(mid) > delta else (lo, mid)
    return hi


@dataclass(frozen=True)
class Mechanism:
    name: str
    draw: Callable[[np.random.Generator, tuple[float, ...], int, float], np.ndarray]
    delta: float
    dp: bool  # True when the mechanism satisfies its claim (a rejection is a false alarm)


def _noise(kind: str) -> Callable[[np.random.Generator, np.ndarray], np.ndarray]:
    if kind == "laplace":
        return lambda rng, scale: rng.laplace(0.0, scale)
    return lambda rng, scale: rng.normal(0.0, scale)


def _nondp1(kind: str):  # type: ignore[no-untyped-def]
    noise = _noise(kind)

    def draw(rng: np.random.Generator, x: tuple[float, ...], size: int, eps: float) -> np.ndarray:
        n = len(x)
        return sum(x) / n + noise(rng, np.full(size, 2.0 / (n * eps)))
    return draw


def _dp(kind: str):  # type: ignore[no-untyped-def]
    noise = _noise(kind)

    def draw(rng: np.random.Generator, x: tuple[float, ...], size: int, eps: float) -> np.ndarray:
        n_tilde = np.maximum(1e-12, len(x) + noise(rng, np.full(size, 2.0 / eps)))
        return sum(x) / n_tilde + noise(rng, 2.0 / (n_tilde * eps))
    return draw


def _tight_laplace(rng: np.random.Generator, x: tuple[float, ...], size: int, eps: float) -> np.ndarray:
    return sum(x) / len(x) + rng.laplace(0.0, 0.5 / eps, size)


def _tight_gaussian(rng: np.random.Generator, x: tuple[float, ...], size: int, eps: float) -> np.ndarray:
    return sum(x) / len(x) + rng.normal(0.0, _analytic_gaussian_sigma(eps, GAUSSIAN_DELTA, 0.5), size)


def _shift_laplace(rng: np.random.Generator, x: tuple[float, ...], size: int, eps: float) -> np.ndarray:
    return sum(x) / len(x) + rng.laplace(0.0, 0.25 / eps, size)


def _shift_gaussian(rng: np.random.Generator, x: tuple[float, ...], size: int, eps: float) -> np.ndarray:
    return sum(x) / len(x) + rng.normal(0.0, _analytic_gaussian_sigma(eps, GAUSSIAN_DELTA, 0.5) / 2, size)


MECHANISMS = {
    "NonDPLaplace1": Mechanism("NonDPLaplace1", _nondp1("laplace"), 0.0, False),
    "NonDPGaussian1": Mechanism("NonDPGaussian1", _nondp1("gaussian"), GAUSSIAN_DELTA, False),
    "DPLaplace": Mechanism("DPLaplace", _dp("laplace"), 0.0, True),
    "DPGaussian": Mechanism("DPGaussian", _dp("gaussian"), GAUSSIAN_DELTA, True),
    "TightLaplace": Mechanism("TightLaplace", _tight_laplace, 0.0, True),
    "TightGaussian": Mechanism("TightGaussian", _tight_gaussian, GAUSSIAN_DELTA, True),
    "NonDPShiftLaplace": Mechanism("NonDPShiftLaplace", _shift_laplace, 0.0, False),
    "NonDPShiftGaussian": Mechanism("NonDPShiftGaussian", _shift_gaussian, GAUSSIAN_DELTA, False),
}


# ---------------------------------------------------------------------------------------------
# Claims as concave boundaries p ≤ h(q) with tangents (method.md §13.1)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """A claim on one event, p ≤ h(q) with h concave, and its tangent line at q₀."""

    label: str
    h: Callable[[np.ndarray], np.ndarray]
    tangent: Callable[[float], SupportingLine]


def dp_claim(epsilon: float, delta: float) -> Claim:
    line = SupportingLine.approximate(epsilon, delta)
    return Claim(f"({epsilon:g}, {delta:g})-DP", lambda q: np.minimum(1.0, line.slope * q + line.intercept),
                 lambda q0: line)


def laplace_curve_claim(mu: float) -> Claim:
    """The trade-off curve of the Laplace mechanism with privacy parameter μ (Dong, Roth & Su 2022,
    §A; the claim Kutta et al. test for their Laplace benchmarks): p ≤ h(q) = 1 − f(q) with
    f(α) = 1 − e^μ α (α < e^{−μ}/2), e^{−μ}/(4α) (up to 1/2), e^{−μ}(1 − α) (above)."""
    e, ei = math.exp(mu), math.exp(-mu)

    def h(q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        return np.where(q < ei / 2, e * q, np.where(q <= 0.5, 1 - ei / (4 * np.maximum(q, 1e-300)),
                                                     1 - ei * (1 - q)))

    def tangent(q0: float) -> SupportingLine:
        q0 = min(max(q0, 1e-9), 1 - 1e-9)
        slope = e if q0 < ei / 2 else (ei / (4 * q0 * q0) if q0 <= 0.5 else ei)
        return SupportingLine(slope, max(float(h(np.array(q0))) - slope * q0, 0.0))

    return Claim(f"Laplace curve mu={mu:g}", h, tangent)


def gdp_claim(mu: float) -> Claim:
    from app.stats.sequential import gdp_supporting_line

    return Claim(f"{mu:g}-GDP", lambda q: norm.cdf(norm.ppf(np.clip(q, 1e-300, 1.0)) + mu),
                 lambda q0: gdp_supporting_line(mu, q0))


def claim_for(kind: str, mech: Mechanism, epsilon: float) -> Claim:
    """``dp``: the (ε, δ)-DP claim González et al. test; ``apt``: the claim Kutta et al. test on
    the same mechanism (Laplace trade-off curve, or μ-GDP with μ = ε for the Gaussian ones)."""
    if kind == "dp":
        return dp_claim(epsilon, mech.delta)
    return laplace_curve_claim(epsilon) if "Laplace" in mech.name else gdp_claim(epsilon)


# ---------------------------------------------------------------------------------------------
# The MMD auditor of González et al. (re-implemented from the paper's description)
# ---------------------------------------------------------------------------------------------

def mmd_tau(epsilon: float, delta: float, version: str = "paper") -> float:
    """τ(ε, δ) ≥ MMD(P, Q) for any (ε, δ)-DP pair and a kernel with 0 ≤ k ≤ 1 (docs/sequential.md).

    ``paper``: √2·TV_max; ``notebook``: 2·TV_max, with TV_max = 1 − 2(1 − δ)/(1 + e^ε) the largest
    total variation (ε, δ)-DP allows (Kairouz, Oh & Viswanath 2015).
    """
    tv = 1.0 - 2.0 * (1.0 - delta) / (1.0 + math.exp(epsilon))
    return (math.sqrt(2.0) if version == "paper" else 2.0) * tv


def median_bandwidth(x: np.ndarray, y: np.ndarray) -> float:
    z = np.concatenate([x, y])
    d = np.abs(z[:, None] - z[None, :])[np.triu_indices(z.size, 1)]
    med = float(np.median(d))
    return med if med > 0 and math.isfinite(med) else 1.0


def mmd_notebook_stopping_time(x: np.ndarray, y: np.ndarray, epsilon: float, delta: float, alpha: float,
                               bw: float, tau_version: str = "notebook") -> int:
    """The algorithm as the public notebook codes it (our code, its arithmetic), for comparison.

    Two differences from :func:`mmd_stopping_time`: τ = 2·TV_max, and the witness's
    normalisation. The notebook tracks s_t + aux_t, which equals ‖f‖² (aux_t = v_t/√m_t +
    ‖h_t‖²/(4m_t) is exactly the growth of ‖f‖² under the step h_t/(2√m_t)), and rescales by
    γ_t = min(1, 1/(2√(s_t + aux_t))), i.e. onto the ball of radius 1/2, while τ bounds the
    payoff of witnesses of norm 1: the witness earns half the margin it could.
    """
    tau = mmd_tau(epsilon, delta, tau_version)
    lam_max = 1.0 / (8.0 + 4.0 * tau)
    ons_const = 2.0 / (2.0 - math.log(3.0))
    inv2bw2 = 1.0 / (2.0 * bw * bw)
    horizon = x.size
    products = np.zeros(horizon)
    second_moments = np.zeros(horizon)
    aux_hist = np.zeros(horizon)
    m_t = 0.0
    log_wealth, lam, a_ons = 0.0, 0.0, 1.0
    log_target = math.log(1.0 / alpha)
    for t in range(horizon):
        xt, yt = x[t], y[t]
        increment = 2.0 - 2.0 * math.exp(-((xt - yt) ** 2) * inv2bw2)
        m_t += increment
        second_moments[t] = m_t
        if t > 0:
            xs, ys = x[:t], y[:t]
            kern = (np.exp(-((xs - xt) ** 2) * inv2bw2) - np.exp(-((xs - yt) ** 2) * inv2bw2)
                    + np.exp(-((ys - yt) ** 2) * inv2bw2) - np.exp(-((ys - xt) ** 2) * inv2bw2))
            v = float(np.sum(kern * products[:t] / (2.0 * np.sqrt(second_moments[:t]))))
        else:
            v = 0.0
        aux = (v / math.sqrt(m_t) + increment / (4.0 * m_t)) if m_t > 0 else 0.0
        aux_hist[t] = aux
        s_t = float(np.sum(aux_hist[:t] * products[:t] ** 2))
        total = s_t + aux
        gamma = min(1.0, 1.0 / (2.0 * math.sqrt(total))) if total > 0 else 1.0
        products[t] = 1.0
        products[: t + 1] *= gamma
        payoff = v - tau
        log_wealth += math.log1p(lam * payoff)
        if log_wealth >= log_target:
            return t + 1
        zz = -payoff / (1.0 + lam * payoff)
        a_ons += zz * zz
        lam = min(max(lam - ons_const * zz / a_ons, 0.0), lam_max)
    return 0


def mmd_stopping_time(x: np.ndarray, y: np.ndarray, epsilon: float, delta: float, alpha: float, bw: float,
                      version: str = "paper") -> int:
    """First t (1-based) with wealth ≥ 1/α, 0 if none within len(x) pairs."""
    tau = mmd_tau(epsilon, delta, version)
    lam_max = 1.0 / (8.0 + 4.0 * tau)
    ons_const = 2.0 / (2.0 - math.log(3.0))
    inv2bw2 = 1.0 / (2.0 * bw * bw)
    horizon = x.size
    coef = np.zeros(horizon)  # f = Σ_i coef_i·(φ(x_i) − φ(y_i))
    norm_sq = 0.0
    grad_sq_sum = 0.0
    log_wealth = 0.0
    lam = 0.0
    a_ons = 1.0
    log_target = math.log(1.0 / alpha)
    for t in range(horizon):
        xt, yt = x[t], y[t]
        if t > 0:
            xs, ys, c = x[:t], y[:t], coef[:t]
            kx = np.exp(-((xs - xt) ** 2) * inv2bw2) - np.exp(-((ys - xt) ** 2) * inv2bw2)
            ky = np.exp(-((xs - yt) ** 2) * inv2bw2) - np.exp(-((ys - yt) ** 2) * inv2bw2)
            v = float(np.dot(c, kx - ky))  # f_t(x_t) − f_t(y_t), f_t from pairs < t
        else:
            v = 0.0
        payoff = v - tau
        log_wealth += math.log1p(lam * payoff)
        if log_wealth >= log_target:
            return t + 1
        # ONS (Shekhar & Ramdas 2023, Algorithm 1) for the next bet.
        zz = -payoff / (1.0 + lam * payoff)
        a_ons += zz * zz
        lam = min(max(lam - ons_const * zz / a_ons, 0.0), lam_max)
        # Projected online gradient ascent on ⟨f, h_t⟩, h_t = φ(x_t) − φ(y_t).
        h_sq = 2.0 - 2.0 * math.exp(-((xt - yt) ** 2) * inv2bw2)
        grad_sq_sum += h_sq
        if grad_sq_sum <= 0:
            continue
        step = 1.0 / (2.0 * math.sqrt(grad_sq_sum))
        norm_sq = norm_sq + 2.0 * step * v + step * step * h_sq
        coef[t] = step
        nrm = math.sqrt(max(norm_sq, 0.0))
        if nrm > 1.0:
            coef[: t + 1] /= nrm
            norm_sq = 1.0
    return 0


# ---------------------------------------------------------------------------------------------
# Ours: the shipped e-process on predictable events
# ---------------------------------------------------------------------------------------------

QUANTILES = np.linspace(0.05, 0.95, 19)


def choose_event(xs: list[float], ys: list[float], claim: Claim, kappa: float = 1.0) -> tuple[str, float, float, bool, float] | None:
    """The event (kind, lo, hi), orientation and q̂ with the largest D̂ − κ·√(V̂/t) on the past pairs.

    ``xs`` and ``ys`` are the sorted past outputs of each side. Kinds: 'le' (y ≤ hi), 'gt'
    (y > lo), 'in' (lo < y ≤ hi), 'out' (y ≤ lo or y > hi). D̂ = p̂ − h(q̂) is the gap to the claim's
    boundary, V̂ uses the slope of its tangent at q̂. Returns None when no candidate has a
    positive score.
    """
    t = len(xs)
    ax, ay = np.asarray(xs), np.asarray(ys)
    pooled = np.sort(np.concatenate([ax, ay]))
    cuts = np.quantile(pooled, QUANTILES)
    med = float(np.median(pooled))
    radii = np.quantile(np.abs(pooled - med), QUANTILES)

    def frac(arr: np.ndarray, v: np.ndarray) -> np.ndarray:  # P(y ≤ v) on the past outputs
        return np.searchsorted(arr, v, side="right") / t

    cands = []
    px, py = frac(ax, cuts), frac(ay, cuts)
    cands.append(("le", np.full(cuts.size, -np.inf), cuts, px, py))
    cands.append(("gt", cuts, np.full(cuts.size, np.inf), 1 - px, 1 - py))
    lo, hi = med - radii, med + radii
    inx, iny = frac(ax, hi) - frac(ax, lo), frac(ay, hi) - frac(ay, lo)
    cands.append(("in", lo, hi, inx, iny))
    cands.append(("out", lo, hi, 1 - inx, 1 - iny))
    best = None
    best_score = 0.0
    for kind, los, his, p, q in cands:
        for swap in (False, True):
            pp, qq = (q, p) if swap else (p, q)
            gap = pp - claim.h(qq)
            slope = (claim.h(np.minimum(qq + 1e-3, 1.0)) - claim.h(np.maximum(qq - 1e-3, 0.0))) / 2e-3
            var = pp * (1 - pp) + slope * slope * qq * (1 - qq)
            score = gap - kappa * np.sqrt((var + 1.0 / t) / t)
            k = int(np.argmax(score))
            if score[k] > best_score:
                best_score = float(score[k])
                best = (kind, float(los[k]), float(his[k]), swap, float(qq[k]))
    return best


def _inside(kind: str, lo: float, hi: float, v: float) -> bool:
    if kind == "le":
        return v <= hi
    if kind == "gt":
        return v > lo
    if kind == "in":
        return lo < v <= hi
    return v <= lo or v > hi


def ours_stopping_time(x: np.ndarray, y: np.ndarray, claim: Claim, alpha: float, warmup: int = 10,
                       kappa: float = 1.0, starts: str = "mixture", faces: str = "one", agrapa: bool = False) -> int:
    """First t with the e-process ≥ 1/α on predictable events (one pair a period), 0 if none.

    The event, its orientation and the tangent of the claim's boundary at q̂ are all chosen from
    pairs 1..t−1 before pair t is read (method.md §13.6).
    """
    det = EProcess(alpha, claim.tangent(0.5), starts=starts, faces=faces, agrapa=agrapa)  # type: ignore[arg-type]
    xs: list[float] = []
    ys: list[float] = []
    for t in range(x.size):
        event = choose_event(xs, ys, claim, kappa) if t >= warmup else None
        if event is not None:
            kind, lo, hi, swap, q_hat = event
            hit_x, hit_y = _inside(kind, lo, hi, x[t]), _inside(kind, lo, hi, y[t])
            a, b = (int(hit_y), int(hit_x)) if swap else (int(hit_x), int(hit_y))
            if det.update(a, b, 1, line=claim.tangent(q_hat)).alarm:
                return t + 1
        bisect.insort(xs, float(x[t]))
        bisect.insort(ys, float(y[t]))
    return 0


# ---------------------------------------------------------------------------------------------
# The study
# ---------------------------------------------------------------------------------------------

def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta_dist.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(0.975, k + 1, n - k))
    return lo, hi


def run_cell(mech: Mechanism, epsilon: float, methods: list[str], runs: int, max_pairs: int, alpha: float,
             seed: int, claim_kind: str = "dp") -> dict[str, dict]:
    out: dict[str, list[int]] = {m: [] for m in methods}
    for r in range(runs):
        rng = np.random.default_rng([seed, r, int(epsilon * 1e6), sum(map(ord, mech.name))])
        bw_x = mech.draw(rng, X_DB, 20, epsilon)
        bw_y = mech.draw(rng, X_PRIME_DB, 20, epsilon)
        x = mech.draw(rng, X_DB, max_pairs, epsilon)
        y = mech.draw(rng, X_PRIME_DB, max_pairs, epsilon)
        for m in methods:
            if m == "ours":
                out[m].append(ours_stopping_time(x, y, claim_for(claim_kind, mech, epsilon), alpha))
            elif m.startswith(("ours-v3", "ours-v4", "ours-v5")):
                claim = claim_for(claim_kind, mech, epsilon)
                v3: dict[str, float | str] = dict(ONEPAIR_OPTIONS[m.split("-oneface")[0].replace("-grid", "").replace("-warm10", "")])
                if m == "ours-v3-grid":
                    v3["bet_rule"] = "grid"
                res = audit_pairs(x, y, claim.tangent(0.5) if claim_kind == "dp" else claim.tangent, alpha,
                                  faces="one" if m.endswith("-oneface") else "auto",
                                  warmup=10 if m == "ours-v3-warm10" else 2, **v3)
                out[m].append(res.rejected_at or 0)
            elif m.startswith("ours-"):  # our e-process's variants: plain product from the first bet, both faces, aGRAPA
                opts = {"ours-first": {"starts": "first"},
                        "ours-v2": {"starts": "first", "faces": "both", "agrapa": True},
                        "ours-v2-mixture": {"faces": "both", "agrapa": True}}[m]
                out[m].append(ours_stopping_time(x, y, claim_for(claim_kind, mech, epsilon), alpha, **opts))
            else:
                bw = median_bandwidth(bw_x, bw_y)
                if m.startswith("mmd-notebook"):
                    out[m].append(mmd_notebook_stopping_time(x, y, epsilon, mech.delta, alpha, bw,
                                                             "paper" if m.endswith("sqrt2") else "notebook"))
                else:
                    out[m].append(mmd_stopping_time(x, y, epsilon, mech.delta, alpha, bw,
                                                     "notebook" if m == "mmd-tau2" else "paper"))
    summary = {}
    for m, times in out.items():
        arr = np.array(times)
        rej = arr > 0
        lo, hi = clopper_pearson(int(rej.sum()), runs)
        summary[m] = {
            "rejection_rate": float(rej.mean()), "ci95": [lo, hi],
            "mean_pairs_to_reject": float(arr[rej].mean()) if rej.any() else None,
            "median_pairs_to_reject": float(np.median(arr[rej])) if rej.any() else None,
            "sd_pairs_to_reject": float(arr[rej].std(ddof=1)) if rej.sum() > 1 else None,
            "extra_pairs_for_bandwidth": 20 if m.startswith("mmd") else 0,
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS))
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.01, 0.1])
    ap.add_argument("--methods", nargs="+", default=["ours", "mmd"],
                    choices=["ours", "ours-first", "ours-v2", "ours-v2-mixture", "ours-v3", "ours-v3-oneface", "ours-v3-grid", "ours-v3-warm10",
                             "ours-v4", "ours-v4-oneface", "ours-v5", "ours-v5-oneface", "mmd", "mmd-tau2", "mmd-notebook",
                             "mmd-notebook-sqrt2"])
    ap.add_argument("--claims", nargs="+", default=["dp"], choices=["dp", "apt"],
                    help="dp: (eps, delta)-DP (all methods); apt: Kutta et al.'s claims (ours, ours-v3, ours-v3-oneface)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--max-pairs", type=int, default=3000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--json", type=str, default=None, help="Also write the results to this file.")
    args = ap.parse_args(argv)
    print(f"alpha={args.alpha} runs={args.runs} max pairs={args.max_pairs} seed={args.seed}; samples = pairs "
          "(outputs per side) until rejection, over the rejecting runs")
    print("| mechanism | eps | claim | method | rejected [95% CI] | mean pairs (sd) | median pairs |")
    print("|---|---|---|---|---|---|---|")
    results = []
    cells = [(name, eps, kind) for name in args.mechanisms for eps in args.epsilons for kind in args.claims]
    for name, eps, kind in cells:
        mech = MECHANISMS[name]
        methods = args.methods if kind == "dp" else ([m for m in args.methods if m in ("ours", "ours-v3", "ours-v3-oneface", "ours-v4",
                                                                            "ours-v4-oneface", "ours-v5", "ours-v5-oneface")]
                                                      or ["ours"])
        t0 = time.perf_counter()
        cell = run_cell(mech, eps, methods, args.runs, args.max_pairs, args.alpha, args.seed, kind)
        label = claim_for(kind, mech, eps).label
        for m, s in cell.items():
            mean = "—" if s["mean_pairs_to_reject"] is None else f"{s['mean_pairs_to_reject']:.0f}"
            sd = "" if s["sd_pairs_to_reject"] is None else f" ({s['sd_pairs_to_reject']:.0f})"
            med = "—" if s["median_pairs_to_reject"] is None else f"{s['median_pairs_to_reject']:.0f}"
            extra = " + 20" if s["extra_pairs_for_bandwidth"] and mean != "—" else ""
            print(f"| {name} | {eps} | {label} | {m} | {s['rejection_rate']:.2f} "
                  f"[{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}] | {mean}{sd}{extra} | {med} |", flush=True)
            results.append({"mechanism": name, "epsilon": eps, "claim": label, "dp": mech.dp, "method": m, **s})
        print(f"  ({name}, eps={eps}: {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"config": vars(args), "results": results}, fh, indent=1, allow_nan=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
