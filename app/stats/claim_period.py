"""The period statistic of one check under any claim (method.md §10.3).

Seed 002's statistic tests one linear constraint, ``p − e^ε q ≤ 0`` (eq. 7), with
``z = √n·D̂/σ̂`` (eq. 12). A claim's region (:mod:`app.stats.claims`) is an intersection of
such half-planes — two to four lines for (ε, δ), infinitely many tangents for μ-GDP — so each
period tests **one supporting line** ``cp·p + cq·q ≤ c0`` of the region:

    D̂ = cp·p̂ + cq·q̂ − c0
    σ̃² = max(cp²·p̃(1 − p̃) + cq²·q̃(1 − q̃), κ)                 (score-type variance)
    z  = √n·D̂ / σ̃                                            (z = 0 when D̂ = 0)

where (p̃, q̃) is the restricted maximum-likelihood estimate on the line (Farrington & Manning
1990, generalised to an intercept: :func:`app.stats.claims.line_mle`). With the line
``p − e^ε q ≤ 0`` this is exactly :func:`app.stats.period.period_statistic` (``score``).

Which line? Every supporting line is a valid null: inside the region, ``D ≤ 0``. Choosing it
from the same counts that are tested would test the *distance to the region*, whose null
distribution at a vertex of a polygon (e.g. the (ε, δ) corner where ``p = e^ε q + δ`` and
``1 − q = e^ε(1 − p) + δ`` meet) is a maximum of two normals, not N(0, 1) — the aggregator's
threshold would then be wrong. So the line of period t is chosen **before** period t's counts
are seen, from the counts of the previous periods (the *anchor*): the supporting line at the
restricted MLE of the anchor counts on the region's boundary (:func:`anchor_line`). Given the
past, z_t then tests a fixed true null, and is N(0, 1) at the boundary and stochastically
smaller inside it, whatever the line; the aggregator's threshold holds (it is monotone in each
z_t). The first period of a horizon, with no past, tests a line fixed a priori
(:func:`a_priori_line`): for (ε, δ) the face ``p ≤ e^ε q + δ``, which passes through the region's
vertex (payoff 0 there); for other claims the supporting line at the pseudo-counts alone. (A first
period that used its own counts measured +0.0006 to +0.0008 FAR at the (ε, δ) vertex, always upwards.)

Both directions are covered by one check: the region has a branch where the event is likelier
under x (``p ≤ h(q)``) and one where it is likelier under x' (``q ≤ h(p)``); the anchor picks
the branch the counts point to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from app.stats.claims import ApproxDP, Claim, Line, PureDP, boundary_mle, line_mle
from app.stats.period import DEFAULT_KAPPA, PeriodStatistic, checked_counts
from app.stats.sequential import _discounted_past, _MixtureBase

__all__ = [
    "ANCHOR_PERIODS",
    "ClaimPeriodStatistic",
    "anchor_line",
    "claim_period_statistic",
    "line_statistic",
]

#: Periods whose pooled counts choose the next period's line. Few, so that after a change the
#: line follows the changed mechanism within a few periods; enough to steady it.
ANCHOR_PERIODS = 4


@dataclass(frozen=True)
class ClaimPeriodStatistic(PeriodStatistic):
    """The per-period numbers of one check under a claim (arrays, 0-d for scalar input): those of
    the pure-ε statistic, plus the supporting line tested and the restricted estimates on it."""

    line: Line
    p_tilde: NDArray[np.float64]
    q_tilde: NDArray[np.float64]


def line_statistic(a: ArrayLike, b: ArrayLike, n: ArrayLike, line: Line,
                   kappa: float = DEFAULT_KAPPA) -> ClaimPeriodStatistic:
    """Score-type test of the linear null ``cp·p + cq·q ≤ c0`` on counts (a, b) out of n each.

    Generalises seed 002 eqs. (7), (12) with the Farrington–Manning restricted-MLE variance
    (method.md §1) to a line with an intercept. Vectorised over a, b, n and the line.
    """
    a_arr, b_arr, n_arr = checked_counts(a, b, n, kappa)
    p_hat = a_arr / n_arr
    q_hat = b_arr / n_arr
    d_hat = line.payoff(p_hat, q_hat)
    p_t, q_t = line_mle(a_arr, b_arr, n_arr, line)
    var = line.cp**2 * p_t * (1.0 - p_t) + line.cq**2 * q_t * (1.0 - q_t)
    sigma = np.sqrt(np.maximum(var, kappa))
    z = np.where(d_hat == 0.0, 0.0, np.sqrt(n_arr) * d_hat / sigma)
    return ClaimPeriodStatistic(p_hat=p_hat, q_hat=q_hat, d_hat=np.asarray(d_hat), sigma_hat=sigma, z=z,
                                line=line, p_tilde=p_t, q_tilde=q_t)


#: Pseudo-counts added to the anchor before fitting (Jeffreys' ½ per count): with no events
#: seen, the MLE would run to a corner of the region, whose tangents are arbitrarily steep.
ANCHOR_PSEUDO_COUNT = 0.5


def anchor_line(claim: Claim, a: ArrayLike, b: ArrayLike, n: ArrayLike) -> Line:
    """The supporting line at the restricted MLE of (pooled) anchor counts on the claim's boundary.

    The counts get :data:`ANCHOR_PSEUDO_COUNT` each (and n twice that), which keeps the line away
    from the region's corners when an event was rarely seen. Any supporting line is a valid null,
    so this only affects power.
    """
    a = np.asarray(a, dtype=np.float64) + ANCHOR_PSEUDO_COUNT
    b = np.asarray(b, dtype=np.float64) + ANCHOR_PSEUDO_COUNT
    n = np.asarray(n, dtype=np.float64) + 2 * ANCHOR_PSEUDO_COUNT
    return boundary_mle(claim, a, b, n).line


def a_priori_line(claim: Claim) -> Line:
    """The line of a period with no past (method.md §10.3): chosen before any count is seen.

    (ε, δ)-DP: ``p ≤ e^ε q + δ`` (Kairouz, Oh & Viswanath 2015), on which the region's vertex lies,
    so its payoff is 0 at every boundary point of that face (the line at the pseudo-counts
    alone has payoff ≈ −1.7 at the (1, 0.01) vertex). Any other claim: :func:`anchor_line` of no counts.
    """
    if isinstance(claim, ApproxDP):
        return Line.upper(np.exp(float(claim.epsilon)), float(claim.delta))
    return anchor_line(claim, 0.0, 0.0, 0.0)


class SequentialLines(NamedTuple):
    """Each period's line and counts as a horizon-free check takes them, for runs × periods of counts:
    the counts and the discounted past sums in the line's orientation ("lower" swaps x and x'), and
    the line ``a − s·b ≤ d`` in that orientation."""

    a: NDArray[np.float64]
    b: NDArray[np.float64]
    slope: NDArray[np.float64]
    intercept: NDArray[np.float64]
    past_a: NDArray[np.float64]
    past_b: NDArray[np.float64]
    past_n: NDArray[np.float64]


def sequential_lines(claim: Claim, a: ArrayLike, b: ArrayLike, n: ArrayLike) -> SequentialLines:
    """The lines the e-process and the e-detector of a check test, period by period, for counts of
    shape (runs, periods): what ``app.monitors.detectors.sequential_line`` chooses one period at a
    time (method.md §13.1), for simulations. A pure-ε claim: its own line ``p ≤ e^ε q``. Any other
    claim: :func:`anchor_line` at the past counts discounted by 0.9 per period (the detectors'
    ``anchor_counts``), :func:`a_priori_line` in a run's first period. All of it is predictable."""
    af = np.atleast_2d(np.asarray(a, dtype=np.float64))
    bf = np.atleast_2d(np.asarray(b, dtype=np.float64))
    nf = np.broadcast_to(np.asarray(n, dtype=np.float64), af.shape).astype(np.float64)
    r = _MixtureBase.ESTIMATE_DISCOUNT
    sa, sb, sn = (_discounted_past(x, r) for x in (af, bf, nf))
    if isinstance(claim, PureDP):
        full = np.ones_like(af)
        return SequentialLines(af, bf, np.exp(claim.epsilon) * full, 0.0 * full, sa, sb, sn)
    line, first = anchor_line(claim, sa, sb, sn), a_priori_line(claim)
    has_past = sn > 0
    swap = np.where(has_past, line.orientation, first.orientation) == "lower"
    return SequentialLines(np.where(swap, bf, af), np.where(swap, af, bf),
                           np.where(has_past, line.slope, first.slope),
                           np.where(has_past, line.intercept, first.intercept),
                           np.where(swap, sb, sa), np.where(swap, sa, sb), sn)


def pooled_anchor(recent: Sequence[Sequence[int]]) -> tuple[int, int, int] | None:
    """Sum the last :data:`ANCHOR_PERIODS` ``(a, b, n)`` triples (None when there are none)."""
    rows = [tuple(int(v) for v in r) for r in list(recent)[-ANCHOR_PERIODS:]]
    if not rows:
        return None
    a, b, n = (sum(col) for col in zip(*rows))
    return a, b, n


def claim_period_statistic(a: ArrayLike, b: ArrayLike, n: ArrayLike, claim: Claim, *,
                           anchor: tuple[ArrayLike, ArrayLike, ArrayLike] | None = None,
                           line: Line | None = None, kappa: float = DEFAULT_KAPPA) -> ClaimPeriodStatistic:
    """z of one or many periods under ``claim`` (method.md §10.3).

    The line tested is ``line`` if given, else the supporting line at the boundary MLE of the
    ``anchor`` counts ``(a₀, b₀, n₀)`` (the previous periods), else :func:`a_priori_line`.

    A pure-ε claim keeps seed 002's statistic: the fixed line ``p − e^ε q ≤ 0`` (eq. 7), so that
    monitors that claim ε behave exactly as before; the other side is watched by a ``symmetric``
    check, as before.
    """
    if line is None:
        if isinstance(claim, PureDP):
            line = Line.upper(np.exp(claim.epsilon), 0.0)
        elif anchor is not None:
            line = anchor_line(claim, *anchor)
        else:
            line = a_priori_line(claim)
    return line_statistic(a, b, n, line, kappa=kappa)


def line_from_state(state: Any) -> Line | None:
    """The line stored in a check's claim state (``{"line": {...}}``), if any."""
    if isinstance(state, dict) and isinstance(state.get("line"), dict):
        return Line.from_dict(state["line"])
    return None


def claim_z_path(a: ArrayLike, b: ArrayLike, n: int, claim: Claim, kappa: float = DEFAULT_KAPPA,
                 anchor_periods: int = ANCHOR_PERIODS) -> NDArray[np.float64]:
    """z_1..z_T of whole runs at once (batch form of what the runner does period by period).

    ``a`` and ``b`` have shape (R, T) (or (T,)); period t tests the line anchored on the pooled
    counts of periods ``t − anchor_periods .. t − 1`` (:func:`a_priori_line` at t = 1). The anchors
    depend on counts only, so every period's line is computed in one vectorised call.
    """
    a_arr = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b_arr = np.atleast_2d(np.asarray(b, dtype=np.float64))
    squeeze = np.ndim(a) == 1
    r, t_max = a_arr.shape
    if isinstance(claim, PureDP):
        z = claim_period_statistic(a_arr, b_arr, n, claim, kappa=kappa).z
        return z[0] if squeeze else z

    def window_sums(x: NDArray[np.float64]) -> NDArray[np.float64]:
        c = np.concatenate([np.zeros((r, 1)), np.cumsum(x, axis=1)], axis=1)  # c[:, t] = Σ_{s<t} x_s
        t = np.arange(t_max)
        lo = np.maximum(t - anchor_periods, 0)
        return c[:, t] - c[:, lo]

    periods = np.minimum(np.arange(t_max), anchor_periods).astype(np.float64)
    anchor_a, anchor_b = window_sums(a_arr), window_sums(b_arr)
    anchor_n = np.broadcast_to(periods * n, (r, t_max)).copy()
    first = periods == 0
    anchor_n[:, first] = float(n)  # placeholder counts for t = 1, replaced by the a-priori line below
    line = anchor_line(claim, anchor_a, anchor_b, anchor_n)
    prior = a_priori_line(claim)
    cp, cq, c0 = (np.array(np.broadcast_to(v, (r, t_max)), dtype=np.float64) for v in (line.cp, line.cq, line.c0))
    cp[:, first], cq[:, first], c0[:, first] = float(prior.cp), float(prior.cq), float(prior.c0)
    z = line_statistic(a_arr, b_arr, n, Line(cp, cq, c0), kappa=kappa).z
    return z[0] if squeeze else z
