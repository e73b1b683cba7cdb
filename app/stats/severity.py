"""Severity: the events that sharpen a certified lower bound on one pair (docs/search.md §3.5).

After a search certifies a pair (x, x′), the first certified bound says only that the claim is
broken; it is often barely above the claim when the truth is ∞. This module chooses, on choosing
outputs of that pair, the events that should give the **strongest** held-out bound on ``n_test``
fresh outputs per side (the caller draws them; nothing here is ever tested on the outputs that
chose it):

- **atoms** (point events): an output value that one side produces with positive frequency and
  the other never produced in its choosing outputs (a median answered without noise, a release
  of exactly 0), one value at a time and the set of all of them;
- **tails at a ladder of depths**: half-lines ``t ≥ T`` / ``t ≤ T`` and two-sided tails
  ``|t − c| ≥ T`` placed so that the likelier side is expected to hold r = 10, 30, … 10⁴ of the
  ``n_test`` fresh outputs; beyond the choosing data the tails are extrapolated with an
  exponential fit of the top exceedances (only to place and rank the event: the test counts);
- the engine's own families re-chosen for ``n_test`` (app.stats.candidates.propose), which covers
  intervals, lattice sets, projections and learned events of vectors and lists.

Ranking is by the **predicted held-out bound** (:func:`predicted_bound`): the claim's bound at the
Clopper–Pearson corner (eq. HO, app.stats.heldout.test_claim) of the expected counts
``⌊p̃·n⌋`` and ``⌈q̃·n⌉``, with p̃ reduced and q̃ raised by two choosing standard errors (the
winner's curse, as app.stats.candidates.ranking_score).

When the tested event's count on the less likely side is 0 the bound is limited by the number of
draws, not by the mechanism: :func:`never_seen_upper` is the exact one-sided Clopper–Pearson upper
bound ``Q_upper = 1 − (α/2)^{1/N}`` for 0 of N (Clopper & Pearson 1934; the k = 0 case of
app.stats.heldout.clopper_pearson_upper), and the bound ``ln((P_lower − δ)/Q_upper)`` grows like
``ln N``: the data are consistent with an unbounded loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.stats.claims import Claim
from app.stats.events import DiscreteSet, Interval, IntervalUnion
from app.stats.heldout import clopper_pearson_lower, clopper_pearson_upper

__all__ = ["LADDER", "SeverityCandidate", "never_seen_upper", "predicted_bound", "severity_candidates"]

#: Expected counts of the likelier side in the fresh sample at which tails are placed.
LADDER = (10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000)
#: Most atoms proposed one by one per orientation, and most values in the set of all atoms.
MAX_ATOMS = 8
MAX_ATOM_SET = 64
#: Top exceedances used to fit an exponential tail (only to place and rank events).
TAIL_FIT = 200
SELECTION_Z = 2.0


def never_seen_upper(n: int, level: float) -> float:
    """The exact one-sided Clopper–Pearson upper bound on q after 0 events in ``n`` draws:
    ``1 − level^{1/n}`` (P(0 of n | q) = (1 − q)^n = level; Clopper & Pearson 1934, the k = 0
    case of app.stats.heldout.clopper_pearson_upper)."""
    if n < 1 or not 0 < level < 1:
        raise ValueError("n must be >= 1 and level in (0, 1)")
    return float(-math.expm1(math.log(level) / n))


def predicted_bound(claim: Claim, p: float, q: float, n: int, level: float) -> float:
    """The claim's bound expected from a held-out test at ``level`` with ``n`` fresh outputs per
    side when the event's probabilities are p (likelier side) and q: ``claim.bound`` at the
    Clopper–Pearson corner (eq. HO of app.stats.heldout.test_claim, each side at level/2) of the
    counts ``⌊p·n⌋`` and ``⌈q·n⌉``. −inf when ``⌊p·n⌋ = 0``."""
    a = math.floor(max(0.0, min(1.0, p)) * n)
    b = min(n, math.ceil(max(0.0, min(1.0, q)) * n))
    if a <= 0:
        return -math.inf
    p_lo = float(clopper_pearson_lower(a, n, level / 2))
    q_hi = float(clopper_pearson_upper(b, n, level / 2))
    return float(claim.bound(p_lo, q_hi))


@dataclass
class SeverityCandidate:
    """An event with its orientation (``x_first``: likelier under x), the choosing estimates used
    to rank it and the predicted bound at the fresh sample size."""

    event: Any
    x_first: bool
    p_tilde: float
    q_tilde: float
    predicted: float
    family: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {"event": self.event.model_dump(mode="json"), "describe": self.event.describe(),
                "x_first": self.x_first, "p_tilde": num(self.p_tilde), "q_tilde": num(self.q_tilde),
                "predicted": num(self.predicted), "family": self.family}


def _conservative(count: float, m: int, up: bool) -> float:
    """The choosing proportion moved by two standard errors against the event (winner's curse)."""
    p = (count + 0.5) / (m + 1.0)
    se = math.sqrt(p * (1 - p) / max(1, m))
    return min(1.0, p + SELECTION_Z * se) if up else max(0.0, p - SELECTION_Z * se)


def _atoms(a: np.ndarray, b: np.ndarray, claim: Claim, n: int, level: float, x_first: bool) -> list[SeverityCandidate]:
    """Point events: values that side ``a`` produced at least 3 times (an atom; a continuous
    output repeats with probability 0), ranked by the predicted bound."""
    va, ca = np.unique(a, return_counts=True)
    keep = ca >= 3
    va, ca = va[keep], ca[keep]
    if va.size == 0:
        return []
    vb, cb = np.unique(b, return_counts=True)
    cb_of = dict(zip(vb.tolist(), cb.tolist(), strict=True))
    ma, mb = a.size, b.size
    out: list[SeverityCandidate] = []
    never: list[tuple[float, Any]] = []
    for v, c in zip(va.tolist(), ca.tolist(), strict=True):
        c_b = cb_of.get(v, 0)
        p = _conservative(c, ma, up=False)
        q = _conservative(c_b, mb, up=True) if c_b else 0.0
        pred = predicted_bound(claim, p, q, n, level)
        if not math.isfinite(pred) and pred < 0:
            continue
        out.append(SeverityCandidate(DiscreteSet(values=[v]), x_first, p, q, pred, "atom",
                                     {"choosing": [int(c), int(c_b)]}))
        if c_b == 0:
            never.append((c, v))
    out.sort(key=lambda c: c.predicted, reverse=True)
    out = out[:MAX_ATOMS]
    if len(never) > 1:
        never.sort(reverse=True)
        values = [v for _, v in never[:MAX_ATOM_SET]]
        total = sum(c for c, _ in never[:MAX_ATOM_SET])
        p = _conservative(total, ma, up=False)
        out.append(SeverityCandidate(DiscreteSet(values=values), x_first, p, 0.0,
                                     predicted_bound(claim, p, 0.0, n, level), "atoms never seen on the other side",
                                     {"choosing": [int(total), 0]}))
    return out


def _tail_model(values: np.ndarray) -> tuple[float, float, int]:
    """(t_k, β, k): the k-th largest value and the mean excess of the top k over it, for the
    exponential extrapolation ``S(T) ≈ (k/m)·e^{−(T − t_k)/β}`` beyond the choosing data."""
    m = values.size
    k = int(min(TAIL_FIT, max(5, m // 20)))
    top = np.partition(values, m - k)[m - k:]
    t_k = float(top.min())
    beta = float(np.mean(top - t_k))
    return t_k, max(beta, 1e-12), k


def _survival(sorted_vals: np.ndarray, model: tuple[float, float, int], t: float) -> float:
    """P(value ≥ t) from the choosing data, extrapolated exponentially past its top exceedances."""
    m = sorted_vals.size
    count = m - int(np.searchsorted(sorted_vals, t, side="left"))
    t_k, beta, k = model
    if count >= 20 or t <= t_k:
        return _conservative(count, m, up=True) if count < m else 1.0
    return (k / m) * math.exp(-(t - t_k) / beta)


def _tails(a: np.ndarray, b: np.ndarray, claim: Claim, n: int, level: float, x_first: bool,
           transform: str, centre: float) -> list[SeverityCandidate]:
    """Tail events of statistic s(t) (upper: s = t; lower: s = −t; two-sided: s = |t − c|) at
    the ladder of depths, for the orientation 'a likelier than b'."""
    if transform == "upper":
        sa, sb = a, b
    elif transform == "lower":
        sa, sb = -a, -b
    else:
        sa, sb = np.abs(a - centre), np.abs(b - centre)
    sa, sb = np.sort(sa), np.sort(sb)
    if sa.size < 50 or sb.size < 50:
        return []
    ma = sa.size
    model_a, model_b = _tail_model(sa), _tail_model(sb)
    out = []
    for r in LADDER:
        target = r / n
        if target >= 0.5:
            continue
        if target * ma >= 20:  # inside the choosing data: the empirical quantile
            thr = float(sa[int(math.floor((1 - target) * ma))])
            p = _conservative(ma - int(np.searchsorted(sa, thr, side="left")), ma, up=False)
        else:  # beyond it: the exponential extrapolation
            t_k, beta, k = model_a
            thr = t_k + beta * math.log(k / (ma * target))
            p = target
        q = _survival(sb, model_b, thr)
        pred = predicted_bound(claim, p, q, n, level)
        if not math.isfinite(pred) and pred < 0:
            continue
        if transform == "upper":
            event: Any = Interval(low=thr, high=None)
        elif transform == "lower":
            event = Interval(low=None, high=-thr)
        else:
            event = IntervalUnion(intervals=[Interval(low=None, high=centre - thr), Interval(low=centre + thr, high=None)])
        out.append(SeverityCandidate(event, x_first, p, q, pred, f"tail ({transform}, depth {r})"))
    return out


def severity_candidates(x: np.ndarray, y: np.ndarray, claim: Claim, n_test: int, level: float) -> list[SeverityCandidate]:
    """Atoms and tail ladders for scalar numeric outputs x (of A(x)) and y (of A(x′)), both
    orientations, best predicted bound first (module docstring). Non-numeric or non-scalar
    outputs return []: the caller re-chooses with app.stats.candidates.propose."""
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim != 1 or y.ndim != 1 or x.dtype.kind not in "iuf" or y.dtype.kind not in "iuf":
        return []
    x = x[np.isfinite(x)].astype(np.float64)
    y = y[np.isfinite(y)].astype(np.float64)
    if x.size < 50 or y.size < 50:
        return []
    out: list[SeverityCandidate] = []
    for a, b, x_first in ((x, y, True), (y, x, False)):
        out += _atoms(a, b, claim, n_test, level, x_first)
        centre = float(np.median(a))
        for transform in ("upper", "lower", "two-sided"):
            out += _tails(a, b, claim, n_test, level, x_first, transform, centre)
    out.sort(key=lambda c: c.predicted, reverse=True)
    return out
