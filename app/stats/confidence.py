"""Evidence that is valid at the alarm: an anytime-valid lower confidence bound, and a confirmation.

Pure functions (no I/O); method.md §11.2 (eq. CS) and §11.3 write the formulas out.

**Why.** An alarm happens at a stopping time τ, and the old evidence pooled a window chosen on
the same data (the lag that maximises eq. 13, or the periods since the statistic was last ≤ 0).
A fixed-sample bound computed on that window is not a 1 − α bound at τ (measured coverage 0.85–0.94,
docs/jobs_and_evidence.md). Two statements are valid at τ:

1. **A confidence sequence** (Howard, Ramdas, McAuliffe & Sekhon 2021, *Time-uniform, nonparametric,
   nonasymptotic confidence sequences*, Ann. Statist. 49(2), §3; Waudby-Smith & Ramdas 2024, JRSS-B,
   §4, "inverting a family of test supermartingales"). For each value θ of the claim's parameter
   (ε for ε- and (ε, δ)-DP, μ for μ-GDP, ρ for ρ-zCDP) the e-process W_t(θ) of method.md §13.3 tests
   H₀(θ): "every period's (p_t, q_t) lies in the θ-region" on all the check's periods since it
   started (the start mixture lets it ignore a long run before a change, with no window chosen on
   the data). For a grid θ₁ < θ₂ < … (which contains the claimed value) let

       LB_t = max{θ_j : for every k ≤ j, max_{s ≤ t} W_s(θ_k) ≥ 1/α}          (CS)

   (−∞ when θ₁ is not rejected). The regions grow with θ, so if the mechanism's parameter is
   θ* every θ_k ≥ θ* is a true null. LB_t ≥ θ* needs the smallest grid point θ_{k*} ≥ θ* rejected
   by time t, and by Ville's inequality P(∃t: W_t(θ_{k*}) ≥ 1/α) ≤ α. Hence

       P(∃t: LB_t ≥ θ*) ≤ α,

   at every t at once, in particular at the alarm τ, whatever rule chose τ: "θ > LB_τ" holds with
   probability ≥ 1 − α. The grid costs nothing in α (only the nearest null point matters); it
   costs resolution (LB is a grid value). The claim is contradicted when the claimed value is
   rejected, i.e. LB_τ ≥ θ_claim.

   For ε and (ε, δ) claims W_t(θ) is the service's e-process at θ (the predictable face of the claim,
   the grid and the aGRAPA bet with 0.8 of the prior, method.md §13.3c; or the design of the check's
   stored detector state). For a pure-ε claim W_t(θ_claim) is then the e-process detector's own
   statistic (the same line p ≤ e^ε q, the same orientation), and the bound rejects the claim exactly
   when that detector alarms. For (ε, δ) it is *not*: the detector bets each period on the claim's
   supporting line at the anchored estimate of the past periods (app.stats.claim_period.anchor_line,
   which may be either face of the region), while W_t(θ_claim) bets on the line p ≤ e^ε q + δ in the
   orientation of :func:`predictable_orientation`. Both are valid tests of the claim, but different
   ones: at the (1, 10⁻²) vertex they disagree in many periods (docs/method.md §11.2). For
   μ-GDP and ρ-zCDP it bets on both faces with the grid + aGRAPA on a line that changes every period
   (:func:`curve_increments`).
   The line of each period is chosen before its counts: the fixed line p ≤ e^θ q + δ for ε and
   (ε, δ) claims (the orientation the detectors test, p − e^θ q; for (ε, δ) the orientation is
   chosen from the past periods' counts, :func:`predictable_orientation`); for μ-GDP and ρ-zCDP a
   supporting line of the θ-region's boundary p = h_θ(q) at the past periods' estimate q̃ of q
   (method.md §13.1): the tangent of Φ(Φ⁻¹(q) + θ) for μ-GDP; for ρ-zCDP the region of
   app.stats.claims.ZCDP(θ), the intersection over ε of the half-planes of (ε, δ_θ(ε))-DP with
   δ_θ(ε) from dp-accounting's RDP conversion (app.stats.accounting), whose supporting line at q̃ is
   the tightest of them there, min_ε (e^ε q̃ + δ_θ(ε)) (:func:`zcdp_line`). The complement face
   1 − q ≤ h_θ(1 − p) (the same region: it is symmetric under (p, q) → (1 − q, 1 − p)) bets on the
   counts (n − b, n − a) with the line at 1 − p̃.

   **Why the zCDP regions qualify.** The argument above needs: if the mechanism is θ*-zCDP, every
   θ ≥ θ* on the grid is a true null. A θ*-zCDP mechanism is θ-zCDP (D_α ≤ θ*·α ≤ θ·α, Bun & Steinke
   2016, Def. 1.1), so it is (ε, δ_θ(ε))-DP for every ε (every RDP order gives a valid δ), so every
   event's (p, q) lies in each of ZCDP(θ)'s half-planes: H₀(θ) holds. (δ_θ(ε) also grows with θ for
   every ε: each order's bound does; tests/test_stats_confidence.py checks that h_θ grows with θ
   on the grid.) The grid region contains the exact one, so the sequence bounds the mechanism's
   ρ from below, never more.

2. **A confirmation on fresh samples** (``app.stats.evidence.confirmation``): outputs drawn after the alarm, never
   seen by the detector, counted in the alarm's event; the exact Clopper–Pearson test of the claim
   on them (app.stats.heldout.test_claim, each side at α/2), on both faces of the claim (the event
   and its complement, on the same box: one test at level α), in the alarm's orientation, is valid
   by construction, also *conditionally on the alarm having happened*. It is the only one of the
   three statements that stays at level α among false alarms; the CS and the alarm are about the
   same data.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.signal import lfilter
from scipy.special import ndtri
from scipy.stats import norm

from app.stats.claims import ZCDP, ApproxDP, Claim, GaussianDP, PureDP, supporting_line
from app.stats.sequential import (
    SERVICE_DESIGN,
    EProcessDesign,
    SupportingLine,
    agrapa_fraction,
    bet_grid,
    e_process_paths_from_increments,
    log_evalues_sd,
)

__all__ = ["ConfidenceSequence", "confidence_sequence", "curve_increments", "parameter_grid",
           "predictable_orientation", "zcdp_line"]

#: Step of the parameter grid of the confidence sequence (the lower bound is a multiple of it,
#: or the claimed value).
GRID_STEP = 0.02
#: The grid runs from 0 to the claimed value + max(SPAN_ABOVE, 2 × the claimed value).
SPAN_ABOVE = 3.0
#: Pseudo-counts of the predictable estimate of q (Jeffreys' ½), and the periods it pools.
ESTIMATE_PSEUDO = 0.5
ESTIMATE_PERIODS = 4
#: Discount of the past counts behind the aGRAPA bet (method.md §13.3b; the detectors' 0.9).
AGRAPA_DISCOUNT = 0.9

def _dp_delta(claim: Claim) -> float | None:
    """The fixed δ of an ε or (ε, δ) claim (0 for pure ε); None for μ-GDP and ρ-zCDP."""
    if isinstance(claim, ApproxDP):
        return claim.delta
    return 0.0 if isinstance(claim, PureDP) else None


def parameter_grid(claimed: float, step: float = GRID_STEP, span: float | None = None) -> NDArray[np.float64]:
    """θ₁ = 0 < θ₂ < … (every ``step``) up to claimed + max(3, 2·claimed), with the claimed value in it."""
    if not (math.isfinite(claimed) and claimed >= 0):
        raise ValueError(f"the claimed value must be a finite number >= 0, got {claimed!r}")
    if not step > 0:
        raise ValueError("step must be > 0")
    top = claimed + (max(SPAN_ABOVE, 2 * claimed) if span is None else span)
    grid = np.arange(0.0, top + step / 2, step)
    return np.unique(np.concatenate([grid, [claimed]]))


def _past_sums(x: NDArray[np.float64], periods: int) -> NDArray[np.float64]:
    """Σ of the last ``periods`` values before each t (0 at t = 1), along the last axis."""
    r, t_max = x.shape
    c = np.concatenate([np.zeros((r, 1)), np.cumsum(x, axis=1)], axis=1)
    t = np.arange(t_max)
    return c[:, t] - c[:, np.maximum(t - periods, 0)]


def predictable_orientation(a: ArrayLike, b: ArrayLike) -> NDArray[np.bool_]:
    """True where period t's test swaps x and x' (the past periods' counts had more hits on x'):
    chosen from periods t − 4 … t − 1 only, x at t = 1 (method.md §11.2)."""
    a2 = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b2 = np.atleast_2d(np.asarray(b, dtype=np.float64))
    return _past_sums(b2, ESTIMATE_PERIODS) > _past_sums(a2, ESTIMATE_PERIODS)


@functools.lru_cache(maxsize=1024)
def _zcdp_region(rho: float) -> ZCDP:
    """app.stats.claims.ZCDP(ρ) with its envelope built (cached: a grid of ρ is reused at every alarm)."""
    claim = ZCDP(rho)
    claim._upper_segments()
    return claim


def zcdp_line(rho: float, q: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(s, d) of the supporting line of the ρ-zCDP region's upper boundary p = h_ρ(q) at q (method.md §11.2).

    h_ρ is app.stats.claims.ZCDP(ρ).upper, the lower envelope over ε of e^ε q + δ_ρ(ε) and of the
    mirror lines 1 − e^−ε (1 − δ_ρ(ε) − q) (δ_ρ from dp-accounting's RDP accountant); its supporting
    line at q is app.stats.claims.supporting_line: the tightest of those lines at q (the mean of the
    two at a vertex), so s·q + d = h_ρ(q). ρ = 0 is the region p = q: the line p ≤ q. d is floored
    at 0 (a rounding guard: raising d only widens the half-plane)."""
    q = np.asarray(q, dtype=np.float64)
    if rho <= 0:
        return np.ones_like(q), np.zeros_like(q)
    line = supporting_line(_zcdp_region(float(rho)), q, q, "upper")
    return np.asarray(line.slope, dtype=np.float64) + 0.0 * q, np.maximum(np.asarray(line.intercept), 0.0) + 0.0 * q


def _lines(claim: Claim, theta: float, b_past: NDArray[np.float64], n_past: NDArray[np.float64]
           ) -> tuple[NDArray[np.float64] | float, NDArray[np.float64] | float]:
    """(s, d) of every period's line for the parameter value θ of the claim's family (method.md §13.1)."""
    delta = _dp_delta(claim)
    if delta is not None:
        return math.exp(theta), delta
    q0 = np.clip((b_past + ESTIMATE_PSEUDO) / (n_past + 2 * ESTIMATE_PSEUDO), 1e-12, 1 - 1e-12)
    if isinstance(claim, ZCDP):  # the supporting line of the θ-zCDP region at the past estimate of q
        return zcdp_line(theta, q0)
    assert isinstance(claim, GaussianDP)
    # μ-GDP: the tangent of h(q) = Φ(Φ⁻¹(q) + θ) at the past estimate of q (½ at t = 1).
    z0 = ndtri(q0)
    s = np.exp(-theta * z0 - theta * theta / 2.0)
    d = np.maximum(norm.cdf(z0 + theta) - s * q0, 0.0)
    return s, d


def _discounted_past(x: NDArray[np.float64], r: float = AGRAPA_DISCOUNT) -> NDArray[np.float64]:
    """S_t = Σ_{τ<t} r^{t−1−τ} x_τ along the last axis (0 at t = 1): predictable."""
    out = np.zeros_like(x, dtype=np.float64)
    if x.shape[-1] > 1:
        out[..., 1:] = lfilter([1.0], [1.0, -r], x[..., :-1], axis=-1)
    return out


def curve_increments(xa: NDArray[np.float64], xb: NDArray[np.float64], n: NDArray[np.float64], claim: Claim,
                     theta: float, bets: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """log e-values (R, T, C) of W_t(θ) for a μ-GDP or ρ-zCDP claim (method.md §11.2, §13.3b).

    Two faces, each with the grid bets and the aGRAPA bet (C = 2·(K + 1)), as the service's
    e-process: the face p ≤ h_θ(q), on (a, b) with the supporting line at q̃ = (Σb + ½)/(Σn + 1) over
    the past ``ESTIMATE_PERIODS`` periods, and the complement face 1 − q ≤ h_θ(1 − p), on
    (n − b, n − a) with the line at 1 − p̃. The region is symmetric under (p, q) → (1 − q, 1 − p),
    so both are supporting lines of it; everything is chosen from past periods only."""
    g = bet_grid() if bets is None else bets
    a_past, b_past, n_past = (_past_sums(v, ESTIMATE_PERIODS) for v in (xa, xb, n))
    past_n = _discounted_past(n)
    parts = []
    for fa, fb, f_past in ((xa, xb, b_past), (n - xb, n - xa, n_past - a_past)):
        s, d = _lines(claim, theta, f_past, n_past)
        parts.append(log_evalues_sd(fa, fb, n, s, d, g))
        c = agrapa_fraction(_discounted_past(fa), _discounted_past(fb), past_n, s, d)
        parts.append(log_evalues_sd(fa, fb, n, s, d, np.asarray(c)[..., None]))
    return np.concatenate(parts, axis=-1)


@dataclass(frozen=True)
class ConfidenceSequence:
    """LB_t of eq. (CS) for each run and period: ``lower`` (R, T), −inf where nothing is rejected;
    ``claim_rejected`` (R, T): the claimed value is outside the sequence by t (LB_t ≥ claimed)."""

    lower: NDArray[np.float64]
    claim_rejected: NDArray[np.bool_]
    grid: NDArray[np.float64]
    alpha: float


def confidence_sequence(a: ArrayLike, b: ArrayLike, n: ArrayLike, claim: Claim, alpha: float = 0.05,
                        grid: ArrayLike | None = None, design: EProcessDesign | None = None) -> ConfidenceSequence:
    """The anytime-valid lower confidence bound LB_t of eq. (CS) on the claim's parameter.

    ``a``, ``b``, ``n``: counts of shape (T,) or (R, T) (n may be a scalar), every period of the
    check since its detector started, oldest first. Cost O(G·R·T·K) (G grid values, K = 16 bets),
    stopping at the first grid value that no run rejects. ``design``: the e-process W(θ) of ε and
    (ε, δ) claims (default :data:`~app.stats.sequential.SERVICE_DESIGN`, method.md §13.3c; a check
    whose detector runs another design passes its own, :func:`~app.stats.sequential.design_of_state`).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    a2 = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b2 = np.atleast_2d(np.asarray(b, dtype=np.float64))
    n2 = np.broadcast_to(np.asarray(n, dtype=np.float64), a2.shape).astype(np.float64) if np.ndim(n) < 2 \
        else np.atleast_2d(np.asarray(n, dtype=np.float64))
    if a2.shape != b2.shape or a2.shape != n2.shape or a2.shape[1] < 1:
        raise ValueError("a, b and n must have the same shape (T,) or (R, T) with T >= 1")
    thetas = parameter_grid(claim.value) if grid is None else np.asarray(grid, dtype=np.float64)
    if thetas.ndim != 1 or thetas.size < 1 or np.any(np.diff(thetas) <= 0):
        raise ValueError("the grid must be increasing")
    delta = _dp_delta(claim)
    swap = predictable_orientation(a2, b2) if not isinstance(claim, PureDP) else np.zeros(a2.shape, bool)
    xa, xb = np.where(swap, b2, a2), np.where(swap, a2, b2)
    bets = bet_grid()
    des = SERVICE_DESIGN if design is None else design
    log_level = math.log(1.0 / alpha)
    lower = np.full(a2.shape, -np.inf)
    alive = np.ones(a2.shape, dtype=bool)
    for theta in thetas:
        if delta is not None:  # the service's e-process at θ (method.md §13.3b, §13.3c)
            log_w = des.paths_from_increments(
                des.increments(xa, xb, n2, SupportingLine.approximate(float(theta), delta), alpha))
        else:  # μ-GDP, ρ-zCDP: both faces, grid + aGRAPA, on the supporting lines at the past estimates
            log_w = e_process_paths_from_increments(curve_increments(xa, xb, n2, claim, float(theta), bets))
        rejected = np.maximum.accumulate(log_w, axis=1) >= log_level
        alive &= rejected
        lower[alive] = theta
        if not alive.any():
            break
    # H₀(θ_j) ⊇ H₀(θ_claim) for θ_j ≥ θ_claim: rejecting the larger null rejects the claim.
    return ConfidenceSequence(lower, lower >= claim.value, thetas, float(alpha))


def cs_claim_of(claim: Any) -> Claim | None:
    """The claim the confidence sequence is about: an :class:`app.stats.claims.Claim` as is; an
    object with ``epsilon`` (and ``delta``) as pure ε or (ε, δ); None for anything else."""
    if isinstance(claim, Claim):
        return claim
    if getattr(claim, "epsilon", None) is not None:
        delta = float(getattr(claim, "delta", 0.0) or 0.0)
        return ApproxDP(float(claim.epsilon), delta) if delta > 0 else PureDP(float(claim.epsilon))
    return None
