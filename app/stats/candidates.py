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
  of a value), sets of whole outputs for discrete vectors, and **learned events**: a logistic
  regression (scikit-learn) of "x or x′ given the output" on the feature map φ of
  :func:`app.stats.events.feature_map`, whose score is thresholded (DP-Sniper §IV-A). The
  classifier is stored as numbers in a ``linear`` projection, never as a pickle.

No event that holds no choosing output, or every one, is ever proposed. The held-out samples are
never seen here: the caller tests the events on fresh samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from app.stats.events import (
    DiscreteSet,
    Interval,
    LatticeSet,
    Projected,
    Projection,
    RowSet,
    feature_map,
    feature_size,
)
from scipy.special import ndtri

from app.stats.shapes import ListSamples, OutputShape

__all__ = ["Candidate", "ProposalSettings", "propose", "ranking_score", "scalar_statistics"]

#: Pooled fraction of tied values above which real outputs are treated as atoms.
ATOM_TIE_FRACTION = 0.5
#: Distinct values up to which a real statistic is also treated as discrete.
DISCRETE_MAX_VALUES = 64


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
    nx, nxp = _n(x), _n(y)
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
            sx, sy = proj.apply(x, ex), proj.apply(y, ey)
            both = np.concatenate([sx, sy])
            present = both[~np.isnan(both)]
            if present.size == 0 or (np.unique(present).size < 2 and not np.isnan(both).any()):
                continue
            discrete = _is_integral(both) or np.unique(present).size <= DISCRETE_MAX_VALUES or _atoms(both)
            stats.append(_Stat(proj.describe(), sx, sy, discrete, _wrap_projection(proj)))
            if discrete and not _is_integral(both) and np.unique(present).size > DISCRETE_MAX_VALUES:
                stats.append(_Stat(proj.describe(), sx, sy, False, _wrap_projection(proj)))
        if s.learned:
            # DP-Sniper trains the classifier and picks the threshold on separate samples
            hx, hy = np.arange(nx) % 2 == 0, np.arange(nxp) % 2 == 0
            learned = _learned(_take(x, hx), _take(y, hy), s)
            if learned is not None:
                stats.append(_Stat("learned score", learned.apply(_take(x, ~hx), (ex[0][~hx], ex[1][~hx])),
                                   learned.apply(_take(y, ~hy), (ey[0][~hy], ey[1][~hy])),
                                   False, _wrap_projection(learned)))
    cands: list[Candidate] = []
    region = s.region if shape.container == "scalar" else None
    for st in stats:
        found = _discrete(st, s) if st.discrete else _continuous(st, s, region)
        cands.extend(found)
    if shape.container != "scalar" and (shape.values == "integer" or _all_integral(x, y)):
        cands.extend(_rows(x, y, s))
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
    return len(outputs) if isinstance(outputs, ListSamples) else int(np.asarray(outputs).shape[0])
