"""Candidate events for every output shape, chosen on one part of the samples (docs/audit.md §2).

Given choosing samples of ``A(x)`` and ``A(x')`` and the shape, :func:`propose` returns events
ranked by the lower bound on ε they are predicted to give on a held-out sample of ``n_test``
outputs per side at level ``level`` (the Clopper–Pearson bound of :mod:`app.stats.heldout` at the
choosing data's proportions). This is DP-Sniper's criterion (Bichsel et al., S&P 2021, §IV-B:
choose the threshold that maximises the lower confidence bound) applied to every family below:

- scalar reals: intervals and half-lines (tails) between quantiles of the pooled sample within
  the region C, and the neighbourhood ``t̂ ± h`` of MPL's t̂ (Askin, Kutta & Dette, S&P 2022, §IV);
- discrete scalars (integers, labels, a lattice, reals with atoms): prefix sets of outcomes sorted
  by their estimated likelihood ratio (the Neyman–Pearson sets; StatDP, Ding et al. CCS 2018, §4.1
  searches the same sets), and half-lines for numbers. A lattice output gets lattice point sets:
  intervals between lattice points hold nothing;
- vectors and lists: the scalar events above on projections (a coordinate, max, min, argmax,
  argmin, sum, length, the count of nulls, the first non-null entry and its position, the count
  of a value), sets of whole outputs for discrete vectors, **first-entry events** on the joint law
  of the first non-null entry's position and value (:func:`_first_entry`: "the first non-null entry
  is at a position in [k₁, k₂] and its value lies in an interval or half-line"; SVT 3's first ⊤
  and its noisy answer), and **learned events**: a logistic
  regression (scikit-learn) of "x or x′ given the output" on the feature map φ of
  :func:`app.stats.events.feature_map`, whose score is thresholded (DP-Sniper §IV-A). The
  classifier is stored as numbers in a ``linear`` projection, never as a pickle;
- keyed outputs (a set of keys with values; docs/audit.md §8): each key of either choosing
  sample released or not released; a key outside the keys x's (or x′'s) choosing sample released
  (the *new-key* events that catch key sets taken from the private data, scored by cross-fitting);
  the value of the most released keys through the scalar families above (an output that does not
  release the key is no member, unless the event says so); the sum of the values of the most
  released keys that both choosing samples release (``key_sum``: a loss spread over several keys,
  each moved by the allowed amount, shows only there), through the same families; the number of
  released keys; and sets of whole released key sets, ratio-sorted like the discrete outcomes.

No event that holds no choosing output, or every one, is ever proposed. The held-out samples are
never seen here: the caller tests the events on fresh samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from app.stats.events import (
    MAX_EVENT_KEYS,
    DiscreteSet,
    Interval,
    KeyCount,
    KeyReleased,
    KeySet,
    KeySets,
    KeySum,
    KeyValue,
    LatticeSet,
    Projected,
    Projection,
    RowSet,
    feature_map,
    feature_size,
    first_entries,
)
from app.stats.shapes import KeyedSamples, ListSamples, OutputShape

__all__ = ["Candidate", "ProposalSettings", "propose", "ranking_score", "scalar_statistics"]

#: Pooled fraction of tied values above which real outputs are treated as atoms.
ATOM_TIE_FRACTION = 0.5
#: Distinct values up to which a real statistic is also treated as discrete.
DISCRETE_MAX_VALUES = 64
#: First-entry events: the ranges [k₁, k₂] searched are those of the first ``FIRST_ENTRY_MAX_WIDTH``
#: positions.
FIRST_ENTRY_MAX_WIDTH = 16
#: First-entry events searched on one half of the choosing samples and ranked on the other, per
#: kind (interval, below, above) and orientation.
FIRST_ENTRY_RESCORED = 32
#: Keyed outputs: the most released keys whose values are searched (a key's value events), and
#: the fewest releases (both samples) a key needs for that.
KEYED_VALUE_KEYS = 16
KEYED_VALUE_MIN_RELEASES = 8
#: Keyed outputs: most distinct released key sets ranked as outcomes, and most sets in one event.
KEYED_MAX_OUTCOMES = 20_000
KEYED_MAX_SETS = 500


@dataclass(frozen=True)
class ProposalSettings:
    n_test: int
    level: float  # the per-event level α of the held-out test
    delta: float = 0.0
    region: tuple[float, float] | None = None
    target: float | None = None  # the claimed ε the test will try to refute (None: maximise the bound)
    grid: int = 48
    per_statistic: int = 3
    learned: bool = True
    learned_max_samples: int = 20_000
    seed: int = 0


@dataclass
class Candidate:
    """An event with its orientation (``x_first``: the event is likelier under x), its
    choosing-data proportions and its ranking score (:func:`ranking_score`)."""

    event: Any
    x_first: bool
    p_hat: float
    q_hat: float
    predicted: float
    statistic: str
    family: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event.model_dump(mode="json"), "describe": self.event.describe(),
                "x_first": self.x_first, "p_hat": self.p_hat, "q_hat": self.q_hat,
                "score": self.predicted if math.isfinite(self.predicted) else None,
                "statistic": self.statistic, "family": self.family}


#: Standard errors subtracted from a candidate's estimated log-ratio before ranking: the choosing
#: data rank thousands of candidates, and the best of them by luck would win otherwise (the
#: winner's curse).
SELECTION_Z = 2.0


def ranking_score(a: Any, na: int, b: Any, nb: int, s: ProposalSettings) -> np.ndarray:
    """How promising an event is for the held-out test, from its choosing counts a/na (the side
    that should be likelier) and b/nb. With ℓ̂ = ln(p̃ − δ) − ln q̃ (p̃ = (a + ½)/(na + 1), likewise
    q̃), its choosing standard error se_c and the held-out one se_t at ``n_test`` outputs per side,
    and z the normal quantile of the test's level:

    - with a target (the claimed ε): ``(ℓ̂ − 2·se_c − ε)/se_t − z``, the normal approximation of
      the held-out test's power to refute (Clopper–Pearson bounds in :mod:`app.stats.heldout`);
    - without: ``ℓ̂ − 2·se_c − z·se_t``, the held-out lower bound to expect.

    An event that holds (almost) every output has ℓ̂ ≈ 0 with a tiny se_t and ranks last when
    there is a claim to refute, however small its uncertainty."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    p = (a + 0.5) / (na + 1.0)
    q = (b + 0.5) / (nb + 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ell = np.log(np.maximum(p - s.delta, 1e-300)) - np.log(q)
        var = (1 - p) / p + (1 - q) / q
        se_c = np.sqrt((1 - p) / (na * p) + (1 - q) / (nb * q))
        se_t = np.sqrt(var / s.n_test)
    z = float(ndtri(1 - s.level / 2))  # the normal quantile (scipy.special: 50× cheaper than norm.ppf)
    cons = ell - SELECTION_Z * se_c
    if s.target is None:
        return cons - z * se_t
    return (cons - s.target) / np.maximum(se_t, 1e-12) - z


# --------------------------------------------------------------------------------------------
# scalar statistics


@dataclass
class _Stat:
    name: str
    sx: np.ndarray  # float with NaN = null (or object for labels)
    sxp: np.ndarray
    discrete: bool
    wrap: Callable[[Any, bool], Any]  # (inner scalar event or None, nulls) -> Event
    lattice: Any = None
    labels: bool = False


def _is_integral(v: np.ndarray) -> bool:
    v = v[~np.isnan(v)]
    return bool(v.size and np.all(v == np.round(v)))


def _best(cands: list[Candidate], k: int) -> list[Candidate]:
    cands = [c for c in cands if math.isfinite(c.predicted) or c.predicted == math.inf]
    cands.sort(key=lambda c: c.predicted, reverse=True)
    return cands[:k]


def _oriented(cx: np.ndarray, cxp: np.ndarray, nx: int, nxp: int, s: ProposalSettings
              ) -> tuple[np.ndarray, np.ndarray]:
    """Ranking scores for both orientations; a candidate must hold some but not all outputs."""
    total = cx + cxp
    valid = (total > 0) & (total < nx + nxp)
    fwd = ranking_score(cx, nx, cxp, nxp, s)
    bwd = ranking_score(cxp, nxp, cx, nx, s)
    return np.where(valid, fwd, -np.inf), np.where(valid, bwd, -np.inf)


def _continuous(st: _Stat, s: ProposalSettings, region: tuple[float, float] | None) -> list[Candidate]:
    x = st.sx[~np.isnan(st.sx)]
    y = st.sxp[~np.isnan(st.sxp)]
    nx, nxp = st.sx.shape[0], st.sxp.shape[0]
    pooled = np.concatenate([x, y])
    if region is not None:
        pooled = pooled[(pooled >= region[0]) & (pooled <= region[1])]
    if pooled.size < 4:
        return []
    # evenly spaced quantiles, and more in both tails, where the loss of many mechanisms lives
    tails = np.array([1e-4, 3e-4, 1e-3, 2e-3, 5e-3, 1e-2, 1.5e-2])
    levels = np.unique(np.concatenate([np.linspace(0, 1, s.grid), tails, 1 - tails]))
    grid = np.unique(np.quantile(pooled, levels))
    xs, ys = np.sort(x), np.sort(y)
    # F(≤ g) and F(< g) per side
    le_x, lt_x = np.searchsorted(xs, grid, "right"), np.searchsorted(xs, grid, "left")
    le_y, lt_y = np.searchsorted(ys, grid, "right"), np.searchsorted(ys, grid, "left")
    i, j = np.triu_indices(grid.size)
    cands: list[Candidate] = []
    specs = [("interval", le_x[j] - lt_x[i], le_y[j] - lt_y[i], grid[i], grid[j])]
    if region is None:
        g = np.arange(grid.size)
        specs.append(("below", le_x[g], le_y[g], np.full(grid.size, -np.inf), grid))
        specs.append(("above", x.size - lt_x[g], y.size - lt_y[g], grid, np.full(grid.size, np.inf)))
    for family, cx, cxp, lo, hi in specs:
        fwd, bwd = _oriented(cx.astype(float), cxp.astype(float), nx, nxp, s)
        for pred, x_first in ((fwd, True), (bwd, False)):
            top = np.argsort(pred)[::-1][: s.per_statistic]
            for t in top:
                if not np.isfinite(pred[t]):
                    continue
                event = Interval(low=None if np.isinf(lo[t]) else float(lo[t]),
                                 high=None if np.isinf(hi[t]) else float(hi[t]))
                a, b = (cx[t], cxp[t]) if x_first else (cxp[t], cx[t])
                cands.append(Candidate(st.wrap(event, False), x_first, a / (nx if x_first else nxp),
                                       b / (nxp if x_first else nx), float(pred[t]), st.name, family))
    return _best(cands, s.per_statistic)


def _cross_fit(inv: NDArray[np.int64], nx: int, nxp: int, m: int) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                                       NDArray[np.float64], int, int]:
    """Cross-fitting of outcome-ordered candidates: ``inv`` maps each of the nx + nxp choosing
    samples (those of x first) to one of m outcomes. The even-indexed half orders the outcomes by
    their smoothed log ratio; the odd half gives the counts (cx, cxp, out of nx', nxp') that predict
    each candidate's bound, so that outcomes seen once under x only do not look infinitely
    informative. Returns (ratio, cx, cxp, nx', nxp')."""
    half_x, half_y = np.arange(nx) % 2 == 0, np.arange(nxp) % 2 == 0
    ix, iy = inv[:nx], inv[nx:]
    ox = np.bincount(ix[half_x], minlength=m).astype(float)
    oy = np.bincount(iy[half_y], minlength=m).astype(float)
    ratio = np.log((ox + 0.5) / (half_x.sum() + 1)) - np.log((oy + 0.5) / (half_y.sum() + 1))
    cx = np.bincount(ix[~half_x], minlength=m).astype(float)
    cxp = np.bincount(iy[~half_y], minlength=m).astype(float)
    return ratio, cx, cxp, int((~half_x).sum()), int((~half_y).sum())


def _discrete(st: _Stat, s: ProposalSettings) -> list[Candidate]:
    nx, nxp = st.sx.shape[0], st.sxp.shape[0]
    if st.labels:
        keys_x = np.asarray([("\x00null" if v is None else str(v)) for v in st.sx], dtype=object)
        keys_y = np.asarray([("\x00null" if v is None else str(v)) for v in st.sxp], dtype=object)
        values, inv = np.unique(np.concatenate([keys_x, keys_y]).astype(str), return_inverse=True)
        null_index = int(np.searchsorted(values, "\x00null")) if "\x00null" in set(values) else -1
    else:
        both = np.concatenate([st.sx, st.sxp])
        if st.lattice is not None:
            both = np.where(np.isnan(both), np.nan, st.lattice.index(np.nan_to_num(both)))
        has_null = bool(np.isnan(both).any())
        filled = np.where(np.isnan(both), np.inf, both)  # null sorts last
        values, inv = np.unique(filled, return_inverse=True)
        null_index = values.size - 1 if has_null else -1
    m = values.size
    if m < 2:
        return []
    ratio, cx, cxp, nx, nxp = _cross_fit(inv, nx, nxp, m)
    cands: list[Candidate] = []

    def make(members: np.ndarray) -> Any:
        nulls = bool(null_index >= 0 and null_index in set(members.tolist()))
        vals = [int(v) for v in members if v != null_index]
        if not vals:
            return st.wrap(None, True)
        inner: DiscreteSet | LatticeSet
        if st.labels:
            inner = DiscreteSet(values=[str(values[v]) for v in vals])
        elif st.lattice is not None:
            inner = LatticeSet(step=st.lattice.step, offset=st.lattice.offset, points=[int(values[v]) for v in vals])
        else:
            nums = [float(values[v]) for v in vals]
            inner = DiscreteSet(values=[int(v) if v == int(v) and abs(v) < 2**53 else v for v in nums])
        return st.wrap(inner, nulls)

    for x_first, order in ((True, np.argsort(-ratio, kind="stable")), (False, np.argsort(ratio, kind="stable"))):
        ca = np.cumsum(cx[order])
        cb = np.cumsum(cxp[order])
        limit = min(m - 1, 4000)
        fwd, bwd = _oriented(ca[:limit], cb[:limit], nx, nxp, s)
        pred = fwd if x_first else bwd
        for t in np.argsort(pred)[::-1][: s.per_statistic]:
            if not np.isfinite(pred[t]):
                continue
            members = order[: t + 1]
            a, b = (ca[t], cb[t]) if x_first else (cb[t], ca[t])
            cands.append(Candidate(make(members), x_first, a / (nx if x_first else nxp), b / (nxp if x_first else nx),
                                   float(pred[t]), st.name, "set"))
    if not st.labels and null_index < 0 and st.lattice is None and m > 2:
        # tails {≤ v} and {≥ v} of numeric discrete values
        le_x, le_y = np.cumsum(cx), np.cumsum(cxp)
        for family, ccx, ccy, mk in (
                ("below", le_x, le_y, lambda t: Interval(high=float(values[t]))),
                ("above", nx - le_x + cx, nxp - le_y + cxp, lambda t: Interval(low=float(values[t])))):
            fwd, bwd = _oriented(ccx, ccy, nx, nxp, s)
            for pred, x_first in ((fwd, True), (bwd, False)):
                for t in np.argsort(pred)[::-1][:1]:
                    if np.isfinite(pred[t]):
                        a, b = (ccx[t], ccy[t]) if x_first else (ccy[t], ccx[t])
                        cands.append(Candidate(st.wrap(mk(t), False), x_first, a / (nx if x_first else nxp),
                                               b / (nxp if x_first else nx), float(pred[t]), st.name, family))
    return _best(cands, s.per_statistic)


def _rows(x: Any, y: Any, s: ProposalSettings, max_rows: int = 20_000) -> list[Candidate]:
    """Sets of whole outputs (discrete vectors and lists), ratio-sorted prefix sets."""
    from app.stats.events import _row_keys

    width = max(_width(x), _width(y))
    kx, ky = _row_keys(x, width), _row_keys(y, width)
    both = np.concatenate([kx, ky])
    row = np.dtype((np.void, 8 * width))
    keys = np.ascontiguousarray(both).view(row).ravel()
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    if uniq.size < 2 or uniq.size > max_rows:
        return []
    table = both[first]

    def wrap(members_idx: list[int]) -> Any:
        rows = []
        for i in members_idx:
            r = table[i]
            rr = [None if v == -1.7976931348623157e308 else float(v) for v in r if v != 1.7976931348623157e308]
            rows.append([None if v is None else (int(v) if v == int(v) else v) for v in rr])
        return RowSet(values=rows)

    nx = kx.shape[0]
    st = _Stat("row", np.arange(0), np.arange(0), True, lambda e, n: e)
    m = uniq.size
    nxp = both.shape[0] - nx
    ratio, cx, cxp, nx, nxp = _cross_fit(inv, nx, nxp, m)
    cands = []
    for x_first, order in ((True, np.argsort(-ratio, kind="stable")), (False, np.argsort(ratio, kind="stable"))):
        limit = min(m - 1, 500)
        ca, cb = np.cumsum(cx[order])[:limit], np.cumsum(cxp[order])[:limit]
        fwd, bwd = _oriented(ca, cb, nx, nxp, s)
        pred = fwd if x_first else bwd
        for t in np.argsort(pred)[::-1][: s.per_statistic]:
            if np.isfinite(pred[t]):
                a, b = (ca[t], cb[t]) if x_first else (cb[t], ca[t])
                cands.append(Candidate(wrap(order[: t + 1].tolist()), x_first, a / (nx if x_first else nxp),
                                       b / (nxp if x_first else nx), float(pred[t]), st.name, "rows"))
    return _best(cands, s.per_statistic)


def _width(outputs: Any) -> int:
    return outputs.width if isinstance(outputs, ListSamples) else int(np.asarray(outputs).shape[1])


def _learned(x: Any, y: Any, s: ProposalSettings) -> Projection | None:
    """A logistic regression of "x (1) or x′ (0)" on φ(o), as a ``linear`` projection."""
    from sklearn.linear_model import LogisticRegression

    width = min(max(_width(x), _width(y)), 64)
    rng = np.random.default_rng(s.seed)
    fx, fy = feature_map(x, width), feature_map(y, width)
    if fx.shape[0] > s.learned_max_samples:
        fx = fx[rng.choice(fx.shape[0], s.learned_max_samples, replace=False)]
    if fy.shape[0] > s.learned_max_samples:
        fy = fy[rng.choice(fy.shape[0], s.learned_max_samples, replace=False)]
    features = np.concatenate([fx, fy])
    labels = np.concatenate([np.ones(fx.shape[0]), np.zeros(fy.shape[0])])
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    z = (features - mean) / scale
    model = LogisticRegression(C=1.0, max_iter=300)
    try:
        model.fit(z, labels)
    except ValueError:
        return None
    weights = model.coef_[0]
    if not np.all(np.isfinite(weights)) or np.allclose(weights, 0):
        return None
    assert weights.size == feature_size(width)
    return Projection(kind="linear", width=width, mean=mean.tolist(), scale=scale.tolist(),
                      weights=weights.tolist(), intercept=float(model.intercept_[0]))


def _wrap_projection(projection: Projection) -> Callable[[Any, bool], Any]:
    return lambda inner, nulls: Projected(projection=projection, event=inner, nulls=nulls)


def scalar_statistics(x: Any, y: Any, shape: OutputShape) -> list[Projection]:
    """The projections tried for vector and list outputs of ``shape``."""
    width = max(_width(x), _width(y))
    projections: list[Projection] = [Projection(kind="coordinate", index=j) for j in range(min(width, 32))]
    projections += [Projection(kind=k) for k in ("max", "min", "sum", "argmax", "argmin")]
    if shape.container == "list":
        projections.append(Projection(kind="length"))
    if shape.nullable or shape.container == "list":
        projections += [Projection(kind="count_null"), Projection(kind="first_index"), Projection(kind="first_value")]
    return projections


def _first_entries(entries: tuple[np.ndarray, np.ndarray], width: int) -> tuple[np.ndarray, np.ndarray]:
    """(position, value) of each output's first non-null entry among its first ``width``; position
    −1 and value NaN when it has none."""
    values, valid = entries[0][:, :width], entries[1][:, :width]
    has, first, value = first_entries(values, valid & ~np.isnan(values))
    return np.where(has, first, -1), np.where(has, value, np.nan)


def _first_entry(ex: tuple[np.ndarray, np.ndarray], ey: tuple[np.ndarray, np.ndarray],
                 s: ProposalSettings) -> list[Candidate]:
    """Events on the joint law of the first non-null entry's position k and value v: ``k ∈ [k₁, k₂]
    and v ∈ [a, b]`` (or ``v ≤ b``, ``v ≥ a``), for every range of the first
    ``FIRST_ENTRY_MAX_WIDTH`` positions other than all of them (that is ``first_value`` alone,
    searched among the scalar statistics) and a, b on a grid of the pooled values' quantiles (more
    in the tails). SVT 3 answers its first ⊤ with a noisy value: where the ⊤ comes says how the
    noisy threshold compares with the earlier queries, the value how it compares with that query,
    and the loss is in the two together (the marginals are the statistics ``first_index`` and
    ``first_value``). Counts for every (range, interval) come from one table of per-position
    cumulative counts, so the family costs one sort of each sample.

    The family holds ~10⁵ events, and the best of them on the choosing data is mostly luck (the
    winner's curse that ``SELECTION_Z`` offsets for the smaller families): the events are searched
    on the even-indexed half of the choosing samples and ``FIRST_ENTRY_RESCORED`` of each kind and
    orientation are ranked by their counts on the odd half (:func:`ranking_score` at that half's
    size), as :func:`_cross_fit` does for outcome sets; the best ``per_statistic`` are returned."""
    width = min(ex[0].shape[1], ey[0].shape[1], FIRST_ENTRY_MAX_WIDTH)
    if width < 2:
        return []
    kx, vx = _first_entries(ex, width)
    ky, vy = _first_entries(ey, width)
    nx, nxp = kx.size, ky.size
    pooled = np.concatenate([vx[kx >= 0], vy[ky >= 0]])
    if pooled.size < 4:
        return []
    tails = np.array([1e-4, 3e-4, 1e-3, 2e-3, 5e-3, 1e-2, 1.5e-2])  # as in _continuous
    grid = np.unique(np.quantile(pooled, np.unique(np.concatenate([np.linspace(0, 1, s.grid), tails, 1 - tails]))))
    g = grid.size
    k1, k2 = np.triu_indices(width)
    proper = ~((k1 == 0) & (k2 == width - 1))
    k1, k2 = k1[proper], k2[proper]
    i, j = np.triu_indices(g)
    gi = np.arange(g)

    def families(k: np.ndarray, v: np.ndarray) -> list[np.ndarray]:
        """Counts (ranges × events) of each kind: intervals [grid_i, grid_j], v ≤ grid, v ≥ grid."""
        keep = k >= 0
        kk, vv = k[keep], v[keep]
        le = np.zeros((width + 1, g))
        lt = np.zeros((width + 1, g))
        for pos in range(width):
            vs = np.sort(vv[kk == pos])
            le[pos + 1] = np.searchsorted(vs, grid, "right")
            lt[pos + 1] = np.searchsorted(vs, grid, "left")
        tot = np.concatenate([[0.0], np.bincount(kk, minlength=width).astype(float)])
        cle, clt, ctot = np.cumsum(le, axis=0), np.cumsum(lt, axis=0), np.cumsum(tot)
        r_le, r_lt, r_tot = cle[k2 + 1] - cle[k1], clt[k2 + 1] - clt[k1], ctot[k2 + 1] - ctot[k1]
        return [r_le[:, j] - r_lt[:, i], r_le, r_tot[:, None] - r_lt]

    kinds = (("interval", i, j), ("below", np.full(g, -1), gi), ("above", gi, np.full(g, -1)))
    half_x, half_y = np.arange(nx) % 2 == 0, np.arange(nxp) % 2 == 0
    ax, bx = families(kx[half_x], vx[half_x]), families(kx[~half_x], vx[~half_x])
    ay, by = families(ky[half_y], vy[half_y]), families(ky[~half_y], vy[~half_y])
    na_x, na_y, nb_x, nb_y = int(half_x.sum()), int(half_y.sum()), int((~half_x).sum()), int((~half_y).sum())
    cands: list[Candidate] = []
    for f, (family, lo, hi) in enumerate(kinds):
        cols = ax[f].shape[1]
        search = _oriented(ax[f].ravel(), ay[f].ravel(), na_x, na_y, s)
        rescore = _oriented(bx[f].ravel(), by[f].ravel(), nb_x, nb_y, s)
        for o, x_first in ((0, True), (1, False)):
            top = np.argsort(search[o])[::-1][:FIRST_ENTRY_RESCORED]
            top = top[np.isfinite(search[o][top])]
            for t in top[np.argsort(rescore[o][top])[::-1][: s.per_statistic]]:
                if not np.isfinite(rescore[o][t]):
                    continue
                r, c = divmod(int(t), cols)
                projection = Projection(kind="first_value", low_index=int(k1[r]), high_index=int(k2[r]))
                event = Interval(low=None if lo[c] < 0 else float(grid[lo[c]]),
                                 high=None if hi[c] < 0 else float(grid[hi[c]]))
                cands.append(_candidate(Projected(projection=projection, event=event),
                                        float(ax[f][r, c] + bx[f][r, c]), float(ay[f][r, c] + by[f][r, c]), nx, nxp,
                                        x_first, float(rescore[o][t]), "first entry (position, value)",
                                        f"first entry {family}"))
    return _best(cands, s.per_statistic)


def _atoms(values: np.ndarray) -> bool:
    v = values[~np.isnan(values)]
    if v.size < 10:
        return False
    _, counts = np.unique(v, return_counts=True)
    return counts[counts > 1].sum() / v.size >= ATOM_TIE_FRACTION


def propose(x: Any, y: Any, shape: OutputShape, settings: ProposalSettings, *,
            mpl_event: Any = None) -> list[Candidate]:
    """Candidate events for the pair (x, x′), best predicted held-out bound first (module doc).

    ``x``, ``y``: choosing samples in the canonical form of ``shape``. ``mpl_event``: an extra
    event (e.g. MPL's ``t̂ ± h``) to rank with the others."""
    s = settings
    stats: list[_Stat] = []
    cands: list[Candidate] = []
    nx, nxp = _n(x), _n(y)
    if shape.container == "keyed":
        return _finish(_keyed(x, y, shape, s), x, y, s, mpl_event)
    if shape.container == "scalar":
        if shape.values in ("label",) or (np.asarray(x).dtype == object):
            stats.append(_Stat("output", np.asarray(x, dtype=object), np.asarray(y, dtype=object), True,
                               _scalar_wrap, labels=True))
        else:
            wrap = _wrap_projection(Projection(kind="coordinate", index=0)) if shape.nullable else _scalar_wrap
            fx, fy = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
            if shape.lattice is not None:
                stats.append(_Stat("output", fx, fy, True, wrap, lattice=shape.lattice))
                stats.append(_Stat("output", fx, fy, False, wrap))
            elif shape.values in ("integer", "discrete") or _is_integral(np.concatenate([fx, fy])):
                stats.append(_Stat("output", fx, fy, True, wrap))
            else:
                pooled = np.concatenate([fx, fy])
                if _atoms(pooled) or np.unique(pooled[~np.isnan(pooled)]).size <= DISCRETE_MAX_VALUES:
                    stats.append(_Stat("output", fx, fy, True, wrap))
                stats.append(_Stat("output", fx, fy, False, wrap))
    else:
        from app.stats.events import _entries_of

        ex, ey = _entries_of(x), _entries_of(y)
        for proj in scalar_statistics(x, y, shape):
            stats.extend(_numeric_stats(proj.describe(), proj.apply(x, ex), proj.apply(y, ey),
                                        _wrap_projection(proj)))
        if s.learned:
            # DP-Sniper trains the classifier and picks the threshold on separate samples
            hx, hy = np.arange(nx) % 2 == 0, np.arange(nxp) % 2 == 0
            learned = _learned(_take(x, hx), _take(y, hy), s)
            if learned is not None:
                stats.append(_Stat("learned score", learned.apply(_take(x, ~hx), (ex[0][~hx], ex[1][~hx])),
                                   learned.apply(_take(y, ~hy), (ey[0][~hy], ey[1][~hy])),
                                   False, _wrap_projection(learned)))
        if shape.nullable or shape.container == "list":
            cands.extend(_first_entry(ex, ey, s))
    region = s.region if shape.container == "scalar" else None
    for st in stats:
        found = _discrete(st, s) if st.discrete else _continuous(st, s, region)
        cands.extend(found)
    if shape.container != "scalar" and (shape.values == "integer" or _all_integral(x, y)):
        cands.extend(_rows(x, y, s))
    return _finish(cands, x, y, s, mpl_event)


def _finish(cands: list[Candidate], x: Any, y: Any, s: ProposalSettings, mpl_event: Any) -> list[Candidate]:
    """The candidates with MPL's event ranked among them, best first."""
    nx, nxp = _n(x), _n(y)
    if mpl_event is not None:
        from app.stats.events import event_contains

        cx = float(np.count_nonzero(event_contains(mpl_event, x)))
        cxp = float(np.count_nonzero(event_contains(mpl_event, y)))
        fwd, bwd = _oriented(np.array([cx]), np.array([cxp]), nx, nxp, s)
        x_first = bool(fwd[0] >= bwd[0])
        pred = float(max(fwd[0], bwd[0]))
        if math.isfinite(pred):
            a, b = (cx, cxp) if x_first else (cxp, cx)
            cands.append(Candidate(mpl_event, x_first, a / (nx if x_first else nxp), b / (nxp if x_first else nx),
                                   pred, "output", "mpl t̂ ± h"))
    cands.sort(key=lambda c: c.predicted, reverse=True)
    return cands


def _numeric_stats(name: str, sx: np.ndarray, sy: np.ndarray, wrap: Callable[[Any, bool], Any]) -> list[_Stat]:
    """A numeric statistic (NaN: null) as the families to search: discrete (integral, few values or
    atoms) and, for reals with many values, continuous too; none when it is constant."""
    both = np.concatenate([sx, sy])
    present = both[~np.isnan(both)]
    distinct = np.unique(present).size
    if present.size == 0 or (distinct < 2 and not np.isnan(both).any()):
        return []
    integral = _is_integral(both)
    discrete = integral or distinct <= DISCRETE_MAX_VALUES or _atoms(both)
    stats = [_Stat(name, sx, sy, discrete, wrap)]
    if discrete and not integral and distinct > DISCRETE_MAX_VALUES:
        stats.append(_Stat(name, sx, sy, False, wrap))
    return stats


# --------------------------------------------------------------------------------------------
# keyed outputs


def _candidate(event: Any, cx: float, cxp: float, nx: int, nxp: int, x_first: bool, score: float,
               statistic: str, family: str) -> Candidate:
    """A candidate from its counts in x's and x′'s samples (of sizes nx, nxp) and orientation."""
    a, b = (cx, cxp) if x_first else (cxp, cx)
    return Candidate(event, x_first, a / (nx if x_first else nxp), b / (nxp if x_first else nx), score,
                     statistic, family)


def _ranked(make: Callable[[int], Any], cx: np.ndarray, cxp: np.ndarray, nx: int, nxp: int, s: ProposalSettings,
            statistic: Callable[[int], str], family: str, k: int) -> list[Candidate]:
    """The k best of a family of events ``make(i)`` with counts ``cx[i]``, ``cxp[i]``, both ways."""
    fwd, bwd = _oriented(cx.astype(float), cxp.astype(float), nx, nxp, s)
    out: list[Candidate] = []
    for pred, x_first in ((fwd, True), (bwd, False)):
        for i in np.argsort(pred)[::-1][:k]:
            if np.isfinite(pred[i]):
                out.append(_candidate(make(int(i)), float(cx[i]), float(cxp[i]), nx, nxp, x_first, float(pred[i]),
                                      statistic(int(i)), family))
    return _best(out, k)


def _keyed(x: KeyedSamples, y: KeyedSamples, shape: OutputShape, s: ProposalSettings) -> list[Candidate]:
    """Candidate events of keyed outputs (module docstring)."""
    nx, nxp = len(x), len(y)
    union = tuple(sorted(set(x.keys) | set(y.keys)))
    x, y = x.reindexed(union), y.reindexed(union)
    fx, fy = x.key_frequencies().astype(float), y.key_frequencies().astype(float)
    cands: list[Candidate] = []
    if union:
        cands += _ranked(lambda i: KeyReleased(key=union[i]), fx, fy, nx, nxp, s,
                         lambda i: f"key {union[i]!r}", "key released", s.per_statistic)
        cands += _ranked(lambda i: KeyReleased(key=union[i], released=False), nx - fx, nxp - fy, nx, nxp, s,
                         lambda i: f"key {union[i]!r}", "key not released", s.per_statistic)
    cands += _new_keys(x, y, s)
    stats: list[_Stat] = []
    pooled = fx + fy
    for i in np.argsort(-pooled, kind="stable")[:KEYED_VALUE_KEYS]:
        if pooled[i] < KEYED_VALUE_MIN_RELEASES:
            break
        key = union[int(i)]
        (_, vx), (_, vy) = x.column(key), y.column(key)

        def wrap(inner: Any, nulls: bool, key: str = key) -> Any:
            return KeyValue(key=key, event=inner, absent=nulls, nulls=nulls and shape.nullable)

        for st in _numeric_stats(f"value({key!r})", vx, vy, wrap):
            if st.discrete and shape.lattice is not None and not _is_integral(np.concatenate([vx, vy])):
                st.lattice = shape.lattice
            stats.append(st)
    stats.extend(_key_sum_stats(x, y, fx, fy))
    stats.extend(_numeric_stats("|released keys|", x.counts().astype(float), y.counts().astype(float),
                                lambda inner, nulls: KeyCount(event=inner)))
    for st in stats:
        cands.extend(_discrete(st, s) if st.discrete else _continuous(st, s, None))
    cands.extend(_key_sets(x, y, s))
    return cands


def _key_sum_stats(x: KeyedSamples, y: KeyedSamples, fx: np.ndarray, fy: np.ndarray) -> list[_Stat]:
    """The sum ``Σ_{k ∈ K} v_k`` (:class:`~app.stats.events.KeySum`, docs/audit.md §8) over K, the
    (at most ``KEYED_VALUE_KEYS``) most released keys that both choosing samples release, each at
    least ``KEYED_VALUE_MIN_RELEASES`` times in all and never as ``null`` (a null makes the sum
    undefined); none with fewer than two such keys (one key's value is a ``key_value`` event). K and
    the thresholds come from the choosing samples only."""
    pooled = fx + fy
    m = len(x.keys)
    nulls = np.bincount(x.key_index, weights=np.isnan(x.values), minlength=m) \
        + np.bincount(y.key_index, weights=np.isnan(y.values), minlength=m)
    both = np.flatnonzero((fx > 0) & (fy > 0) & (pooled >= KEYED_VALUE_MIN_RELEASES) & (nulls == 0))
    chosen = both[np.argsort(-pooled[both], kind="stable")[:KEYED_VALUE_KEYS]]
    if chosen.size < 2:
        return []
    keys = sorted(x.keys[int(i)] for i in chosen)
    probe = KeySum(keys=keys, event=Interval(low=None, high=None))

    def wrap(inner: Any, nulls: bool) -> Any:
        return KeySum(keys=keys, event=inner)

    return _numeric_stats(probe.describe().split(" ∈ ")[0], probe.sums(x), probe.sums(y), wrap)


def _new_keys(x: KeyedSamples, y: KeyedSamples, s: ProposalSettings) -> list[Candidate]:
    """"Some key outside K released", K the keys one side's choosing sample released: a key set
    taken from the data releases keys under x′ that x never does. By construction no output of
    that side's sample releases a key outside K, so the event is scored by cross-fitting: K from
    the even-indexed half, counts on the odd half. The event proposed uses the keys of the whole
    sample (a larger K, so no likelier under that side than the cross-fitted estimate says)."""
    out: list[Candidate] = []
    hx, hy = np.arange(len(x)) % 2 == 0, np.arange(len(y)) % 2 == 0
    ox, oy = x[~hx], y[~hy]
    nx, nxp = len(ox), len(oy)
    if not (nx and nxp):
        return out
    for side, sample, half in (("x", x, hx), ("x′", y, hy)):
        keys = [sample.keys[int(i)] for i in np.flatnonzero(sample.key_frequencies())]
        if len(keys) > MAX_EVENT_KEYS:
            continue
        part = sample[half]
        known = [part.keys[int(i)] for i in np.flatnonzero(part.key_frequencies())]
        cx = float(np.count_nonzero(ox.counts() > ox.count_among(known)))
        cxp = float(np.count_nonzero(oy.counts() > oy.count_among(known)))
        event = KeySet(relation="outside", keys=keys)
        statistic = f"a key {side}'s sample never released"
        out += _ranked(_constant(event), np.array([cx]), np.array([cxp]), nx, nxp, s, _constant(statistic),
                       "new key", 1)
    return out


def _constant(value: Any) -> Callable[[int], Any]:
    return lambda i: value


def _key_sets(x: KeyedSamples, y: KeyedSamples, s: ProposalSettings) -> list[Candidate]:
    """Sets of whole released key sets (the outcomes), ratio-sorted prefix sets with cross-fitting
    as for discrete outputs (:func:`_cross_fit`)."""
    codes = np.concatenate([x.key_set_codes(), y.key_set_codes()])
    uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
    m = uniq.size
    if m < 2 or m > KEYED_MAX_OUTCOMES:
        return []
    nx0 = len(x)

    def members(j: int) -> list[str]:
        i = int(first[j])
        return sorted((x.row(i) if i < nx0 else y.row(i - nx0)).keys())

    ratio, cx, cxp, nx, nxp = _cross_fit(inv.ravel(), nx0, len(y), m)
    cands: list[Candidate] = []
    for x_first, order in ((True, np.argsort(-ratio, kind="stable")), (False, np.argsort(ratio, kind="stable"))):
        limit = min(m - 1, KEYED_MAX_SETS)
        ca, cb = np.cumsum(cx[order])[:limit], np.cumsum(cxp[order])[:limit]
        fwd, bwd = _oriented(ca, cb, nx, nxp, s)
        pred = fwd if x_first else bwd
        for t in np.argsort(pred)[::-1][: s.per_statistic]:
            if not np.isfinite(pred[t]):
                continue
            sets = [members(int(j)) for j in order[: t + 1]]
            if sum(map(len, sets)) > MAX_EVENT_KEYS:
                continue
            cands.append(_candidate(KeySets(sets=sets), float(ca[t]), float(cb[t]), nx, nxp, x_first,
                                    float(pred[t]), "released key set", "key sets"))
    return _best(cands, s.per_statistic)


def _scalar_wrap(inner: Any, nulls: bool) -> Any:
    if nulls and inner is None:
        raise ValueError("null outputs of a scalar shape have no event here")
    return inner


def _all_integral(x: Any, y: Any) -> bool:
    def vals(o: Any) -> np.ndarray:
        return (o.values[o.valid_mask()] if isinstance(o, ListSamples) else np.asarray(o, dtype=np.float64).ravel())

    v = np.concatenate([vals(x), vals(y)])
    return _is_integral(v) if v.size else False


def _take(outputs: Any, mask: np.ndarray) -> Any:
    return outputs[mask] if isinstance(outputs, ListSamples) else np.asarray(outputs)[mask]


def _n(outputs: Any) -> int:
    return len(outputs) if isinstance(outputs, (ListSamples, KeyedSamples)) else int(np.asarray(outputs).shape[0])
