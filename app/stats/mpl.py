"""Maximum Privacy Loss: DPL, MPL and the lower bound LB (method.md §6).

Implements seed 003 (Askin, Kutta, Dette, *Statistical Quantification of Differential Privacy:
A Local Approach*, S&P 2022), §IV:

- :func:`tdde` — Algorithm 2, the truncated discrete density estimator ``f̂(t) = #{X_i = t}/n ∨ τ``;
- :func:`tkde` — Algorithm 1, the truncated Gaussian KDE ``f̂(t) = f̃(t) ∨ τ`` (eq. 8);
- :func:`dpl` — Algorithm 3: the empirical loss ``ℓ̂(t) = |ln f̂_x(t) − ln f̂_x'(t)|`` (eq. 20) over
  a bounded region ``C``, ``t̂ = argmax_C ℓ̂`` (eq. 22) and ``ε̂ = ℓ̂(t̂)`` (eq. 23);
- :func:`mpl_lower_bound` — Algorithm 4 lines 7–21: on fresh samples of size ``N``,
  ``LB = ℓ̂*(t̂) − Φ⁻¹(1−α)·σ̂_N/c_N`` (eq. 26) with σ̂² of §IV-B;
- :func:`mpl` — Algorithm 4 end to end, drawing the samples itself;
- :func:`table1_pairs` — the query-vector patterns of the paper's Table I (from StatDP).

Output kinds (the paper's ``discr`` switch):

- ``"discrete"``: outputs are a 1-D array of outcomes (ints, floats or strings) or a 2-D array of
  shape ``(n, k)`` whose distinct rows are the outcomes (e.g. SVT answer vectors);
- ``"continuous"``: outputs are real, ``(n,)`` or ``(n, d)`` with ``d ∈ {1, 2, 3}``.

Every result is a frozen dataclass with a ``to_dict()`` that ``json.dumps`` accepts.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from app.stats.kde import (
    DEFAULT_BETA,
    DEFAULT_GAMMA,
    MAX_DIMENSION,
    as_continuous_samples,
    gaussian_kernel_l2,
    kde_at,
    kde_on_grid,
    silverman_bandwidth,
    undersmoothed_bandwidth,
)

__all__ = [
    "PairSamples",
    "DEFAULT_ALPHA",
    "DEFAULT_GRID_POINTS",
    "DEFAULT_REGION_QUANTILE",
    "KINDS",
    "PAPER_N",
    "PAPER_N_FRESH",
    "PAPER_SVT_N",
    "PAPER_SVT_N_FRESH",
    "PAPER_SVT_TAU",
    "PAPER_TAU",
    "TABLE1_PATTERNS",
    "DPLResult",
    "Kind",
    "LowerBound",
    "MPLParams",
    "MPLResult",
    "QueryPattern",
    "default_region",
    "discrete_frequencies",
    "dpl",
    "dpl_best_coordinate",
    "KeyedStatistic",
    "dpl_best_keyed",
    "keyed_statistics",
    "kind_for_output",
    "mpl",
    "mpl_lower_bound",
    "real_rows",
    "table1_pairs",
    "tdde",
    "tkde",
]


@dataclass(frozen=True)
class PairSamples:
    """The outputs of one pair (x, x′) split for MPL (method.md §6; seed 003, §IV): ``choose_*`` pick the
    output t̂ where the loss is largest, ``bound_*`` (independent draws, the same size on both
    sides) bound the loss there, so that no bound is computed on the outputs that chose t̂."""

    label: dict[str, Any]
    choose_x: np.ndarray
    choose_xp: np.ndarray
    bound_x: np.ndarray
    bound_xp: np.ndarray


Kind = Literal["discrete", "continuous"]
KINDS: tuple[str, ...] = ("discrete", "continuous")

PAPER_N = 20_000
"""Seed 003 §V: DPL sample size ``n`` for Laplace, Noisy Max and the exponential mechanism."""
PAPER_N_FRESH = 50_000
"""Seed 003 §V: fresh sample size ``N`` of the inference step for the same algorithms."""
PAPER_TAU = 1e-3
"""Seed 003 §V: floor ``τ`` for the same algorithms."""
PAPER_SVT_N = 100_000
"""Seed 003 §V: ``n`` for the Sparse Vector Technique variants."""
PAPER_SVT_N_FRESH = 500_000
"""Seed 003 §V: ``N`` for the Sparse Vector Technique variants."""
PAPER_SVT_TAU = 1e-4
"""Seed 003 §V: ``τ`` for the Sparse Vector Technique variants."""
DEFAULT_ALPHA = 0.05
"""Seed 003 §V: ``α = 0.05`` (95 % confidence)."""
DEFAULT_REGION_QUANTILE = 0.01
"""Continuous ``C`` when none is given: per coordinate, the intersection of the two samples'
``[q, 1 − q]`` quantile ranges with ``q = 0.01`` (the paper picks ``C`` by hand)."""
DEFAULT_GRID_POINTS = {1: 1001, 2: 161, 3: 41}
"""Points per axis of the grid on which ``ℓ̂`` is maximised over a continuous ``C``."""

_TIE_TOLERANCE = 1e-12


def _check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be 'discrete' or 'continuous'; got {kind!r}")
    return str(kind)


def _check_params(params: Any, kind: str) -> MPLParams:
    params = params if params is not None else MPLParams()
    if not isinstance(params, MPLParams):
        raise ValueError(f"params must be an MPLParams; got {type(params).__name__}")
    if kind == "discrete" and params.region is not None:
        raise ValueError("region is the continuous C; for discrete outputs give C as outcomes")
    if kind == "continuous" and params.outcomes is not None:
        raise ValueError("outcomes is the discrete C; for continuous outputs give C as region")
    return params


def kind_for_output(output_kind: str) -> Kind:
    """The estimator kind for a mechanism's output kind: ``"real"`` → ``"continuous"``;
    ``"discrete"``, ``"vector"`` (tuples such as SVT answers) and ``"keyed"`` (the set of released
    keys; :class:`KeyedStatistic` picks the statistic) → ``"discrete"``."""
    if output_kind == "real":
        return "continuous"
    if output_kind in ("discrete", "vector", "keyed"):
        return "discrete"
    raise ValueError(f"output_kind must be 'real', 'discrete', 'vector' or 'keyed'; got {output_kind!r}")


# --------------------------------------------------------------------------------------------
# parameters


def _positive_int(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{what} must be an integer ≥ {minimum}; got {value!r}")
    return int(value)


def _open_unit(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0.0 < float(value) < 1.0):
        raise ValueError(f"{what} must be a number in (0, 1); got {value!r}")
    return float(value)


def _optional_positive(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a positive number or None; got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive finite number or None; got {value!r}")
    return value


def _normalise_region(region: Any) -> tuple[tuple[float, float], ...] | None:
    """``None``, ``(lo, hi)`` (one dimension) or ``((lo_1, hi_1), …, (lo_d, hi_d))``."""
    if region is None:
        return None
    try:
        items = list(region)
    except TypeError:
        raise ValueError(f"region must be (lo, hi) or a sequence of (lo, hi) pairs; got {region!r}") from None
    if len(items) == 2 and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in items):
        items = [tuple(items)]
    box = []
    for item in items:
        try:
            lo, hi = item
        except (TypeError, ValueError):
            raise ValueError(f"region must be (lo, hi) or a sequence of (lo, hi) pairs; got {region!r}") from None
        if any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in (lo, hi)):
            raise ValueError(f"region bounds must be numbers; got {item!r}")
        lo, hi = float(lo), float(hi)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"region must be closed and bounded with lo < hi in every dimension; got {item!r}")
        box.append((lo, hi))
    if not 1 <= len(box) <= MAX_DIMENSION:
        raise ValueError(f"region must have 1 to {MAX_DIMENSION} dimensions; got {len(box)}")
    return tuple(box)


def _normalise_outcomes(outcomes: Any) -> tuple[Any, ...] | None:
    if outcomes is None:
        return None
    if isinstance(outcomes, (str, bytes)):
        raise ValueError("outcomes must be a sequence of outcomes, not a single string")
    try:
        items = list(outcomes)
    except TypeError:
        raise ValueError(f"outcomes must be a sequence of outcomes; got {outcomes!r}") from None
    if not items:
        raise ValueError("outcomes (the discrete region C) must not be empty")
    normalised = []
    for item in items:
        if isinstance(item, np.ndarray):
            item = item.tolist()
        normalised.append(_to_python(tuple(item)) if isinstance(item, (list, tuple)) else _to_python(item))
    return tuple(normalised)


@dataclass(frozen=True)
class MPLParams:
    """Settings of DPL and MPL (seed 003, Algorithms 3 and 4).

    - ``n``: DPL sample size per database (used by :func:`mpl`; :func:`dpl` takes the arrays given).
    - ``N``: fresh sample size per database for the lower bound (Algorithm 4 lines 7–8).
    - ``tau``: the floor τ of TDDE/TKDE, used in both steps (condition (D); (C3)/(C4)).
    - ``alpha``: level; ``[LB, ∞)`` has asymptotic coverage ``1 − α`` (Theorem 2).
    - ``region``: continuous ``C`` as ``(lo, hi)`` or ``((lo, hi), …)`` per dimension; ``None``
      derives it from the samples (:data:`DEFAULT_REGION_QUANTILE`).
    - ``outcomes``: discrete ``C`` as a sequence of outcomes (tuples for vector outputs);
      ``None`` means every outcome observed in either sample, which gives the same maximum as
      ``C = 𝒴`` (outcomes seen in neither sample have ``ℓ̂ = |ln τ − ln τ| = 0``).
    - ``bandwidth``: DPL bandwidth ``h`` for both samples; ``None`` uses Silverman's rule on each
      sample separately (``h`` and ``h'`` of Algorithm 3).
    - ``h_max``: inference bandwidth; ``None`` uses the (C4) rule with ``beta`` and ``gamma``
      (:func:`app.stats.kde.undersmoothed_bandwidth`, which checks (C4)'s
      ``γ > ν/(6(1+ν))`` for the actual ``n`` and ``N`` when it is used).
    - ``grid_points``: grid points per axis over a continuous ``C`` (default
      :data:`DEFAULT_GRID_POINTS`).

    Defaults are the paper's for every algorithm but SVT; :meth:`for_output_kind` gives the SVT
    sizes for vector outputs.
    """

    n: int = PAPER_N
    N: int = PAPER_N_FRESH
    tau: float = PAPER_TAU
    alpha: float = DEFAULT_ALPHA
    region: tuple[tuple[float, float], ...] | None = None
    outcomes: tuple[Any, ...] | None = None
    bandwidth: float | None = None
    h_max: float | None = None
    beta: float = DEFAULT_BETA
    gamma: float = DEFAULT_GAMMA
    grid_points: int | None = None
    region_quantile: float = DEFAULT_REGION_QUANTILE

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "n", _positive_int(self.n, "n", 2))
        set_(self, "N", _positive_int(self.N, "N", 2))
        set_(self, "tau", _open_unit(self.tau, "tau"))
        set_(self, "alpha", _open_unit(self.alpha, "alpha"))
        set_(self, "region", _normalise_region(self.region))
        set_(self, "outcomes", _normalise_outcomes(self.outcomes))
        set_(self, "bandwidth", _optional_positive(self.bandwidth, "bandwidth"))
        set_(self, "h_max", _optional_positive(self.h_max, "h_max"))
        if isinstance(self.beta, bool) or not isinstance(self.beta, numbers.Real) or not 0 < self.beta <= 1:
            raise ValueError(f"beta (Hölder exponent, condition C1) must lie in (0, 1]; got {self.beta!r}")
        set_(self, "beta", float(self.beta))
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, numbers.Real) or not self.gamma > 0:
            raise ValueError(f"gamma (undersmoothing, condition C4) must be positive; got {self.gamma!r}")
        set_(self, "gamma", float(self.gamma))
        if self.grid_points is not None:
            set_(self, "grid_points", _positive_int(self.grid_points, "grid_points", 2))
            if self.grid_points > 100_001:
                raise ValueError(f"grid_points must be at most 100001; got {self.grid_points}")
        q = self.region_quantile
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0 <= q < 0.5:
            raise ValueError(f"region_quantile must lie in [0, 0.5); got {q!r}")
        set_(self, "region_quantile", float(q))

    @classmethod
    def for_output_kind(cls, output_kind: str, **overrides: Any) -> MPLParams:
        """The paper's settings for a mechanism's output kind (seed 003 §V, "Experiment settings"):
        ``n = 2·10⁴, N = 5·10⁴, τ = 10⁻³`` for ``"real"`` and ``"discrete"`` outputs and
        ``n = 10⁵, N = 5·10⁵, τ = 10⁻⁴`` for ``"vector"`` outputs (SVT). ``overrides`` replace any
        field."""
        kind_for_output(output_kind)
        base = cls(n=PAPER_SVT_N, N=PAPER_SVT_N_FRESH, tau=PAPER_SVT_TAU) if output_kind == "vector" else cls()
        return replace(base, **overrides) if overrides else base

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "N": self.N,
            "tau": self.tau,
            "alpha": self.alpha,
            "region": None if self.region is None else [list(b) for b in self.region],
            "outcomes": None if self.outcomes is None else [_jsonable(o) for o in self.outcomes],
            "bandwidth": self.bandwidth,
            "h_max": self.h_max,
            "beta": self.beta,
            "gamma": self.gamma,
            "grid_points": self.grid_points,
            "region_quantile": self.region_quantile,
        }


# --------------------------------------------------------------------------------------------
# discrete outcomes


def _to_python(value: Any) -> Any:
    """A numpy scalar or row as a plain Python value (tuples for rows)."""
    if isinstance(value, tuple):
        return tuple(_to_python(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_to_python(v) for v in value.tolist()) if value.ndim else _to_python(value.item())
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.str_):
        return str(value)
    return value


def _jsonable(value: Any) -> Any:
    value = _to_python(value)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _as_discrete_samples(samples: ArrayLike, what: str) -> np.ndarray:
    arr = np.asarray(samples)
    if arr.ndim not in (1, 2):
        raise ValueError(f"{what} must have shape (n,) (outcomes) or (n, k) (rows as outcomes); got {arr.shape}")
    if arr.shape[0] == 0 or (arr.ndim == 2 and arr.shape[1] == 0):
        raise ValueError(f"{what} must not be empty")
    if arr.ndim == 2 and not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{what}: vector outcomes must be numeric; got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
        raise ValueError(f"{what} must not contain NaN")
    if arr.dtype == object:
        try:
            arr = arr.astype(str) if all(isinstance(v, str) for v in arr) else arr
        except TypeError:
            raise ValueError(f"{what}: cannot compare these outcomes") from None
    return arr


def _encode(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """A common table of distinct outcomes and, per array, the index of each element in it.

    Integer rows are packed into mixed-radix integer codes (first column most significant), so
    the table is in lexicographic order, as ``np.unique(axis=0)`` would give, but in ``O(n)``
    when the codes are few (a ``bincount``) and one 1-D sort otherwise.
    """
    ndims = {a.ndim for a in arrays}
    if len(ndims) != 1:
        raise ValueError("samples mix scalar outcomes and vector outcomes")
    if arrays[0].ndim == 2 and len({a.shape[1] for a in arrays}) != 1:
        raise ValueError(f"vector outcomes have different lengths: {sorted({a.shape[1] for a in arrays})}")
    sizes = [a.shape[0] for a in arrays]
    try:
        both = np.concatenate(arrays, axis=0)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the samples' outcomes cannot be compared: {exc}") from None
    splits = np.cumsum(sizes)[:-1]
    integral = np.issubdtype(both.dtype, np.integer) or both.dtype == np.bool_
    if integral:
        rows = both.reshape(both.shape[0], -1)
        mins = rows.min(axis=0).astype(np.int64)
        spans = rows.max(axis=0).astype(np.int64) - mins + 1
        if float(np.prod(spans.astype(np.float64))) < 2.0**62:
            mult = np.ones(rows.shape[1], dtype=np.int64)
            for j in range(rows.shape[1] - 2, -1, -1):
                mult[j] = mult[j + 1] * spans[j + 1]
            codes = np.zeros(rows.shape[0], dtype=np.int64)
            for j in range(rows.shape[1]):  # column by column: no (n, k) int64 temporaries
                codes += (rows[:, j].astype(np.int64) - mins[j]) * mult[j]
            total = int(np.prod(spans))
            if total <= max(1 << 20, 4 * codes.size):
                present = np.flatnonzero(np.bincount(codes, minlength=total))
                lookup = np.empty(total, dtype=np.int64)
                lookup[present] = np.arange(present.size)
                inverse = lookup[codes]
                digits = (present[:, None] // mult[None, :]) % spans[None, :] + mins[None, :]
            else:
                present, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
                digits = rows[first]
            table = digits.astype(both.dtype).reshape((present.size,) + both.shape[1:])
            return table, np.split(inverse.reshape(-1), splits)
    try:
        if both.ndim == 1:
            table, inverse = np.unique(both, return_inverse=True)
        else:
            table, inverse = np.unique(both, axis=0, return_inverse=True)
    except TypeError as exc:
        raise ValueError(f"the samples' outcomes cannot be ordered: {exc}") from None
    return table, np.split(inverse.reshape(-1), splits)


def discrete_frequencies(samples_x: ArrayLike, samples_xp: ArrayLike) -> tuple[np.ndarray, NDArray[np.float64], NDArray[np.float64]]:
    """The outcomes seen in either sample and their relative frequencies in each.

    Returns ``(outcomes, freq_x, freq_xp)``: ``outcomes`` has shape ``(m,)`` or ``(m, k)`` (one
    distinct row per outcome), in sorted (lexicographic) order; the frequencies are the
    untruncated relative frequencies ``#{X_i = t}/n`` of seed 003 §IV-A.
    """
    x = _as_discrete_samples(samples_x, "samples of x")
    y = _as_discrete_samples(samples_xp, "samples of x'")
    table, (ix, iy) = _encode([x, y])
    m = table.shape[0]
    fx = np.bincount(ix, minlength=m) / x.shape[0]
    fy = np.bincount(iy, minlength=m) / y.shape[0]
    return table, fx, fy


def _outcome_array(outcomes: Any, like: np.ndarray) -> np.ndarray:
    """A sequence of outcomes as an array comparable with the samples ``like`` (no silent casts)."""
    try:
        arr = np.asarray(outcomes if isinstance(outcomes, np.ndarray) else list(outcomes))
    except (TypeError, ValueError):
        raise ValueError("the outcomes must be a sequence of outcomes of one shape") from None
    if like.ndim == 2 and (arr.ndim != 2 or arr.shape[1] != like.shape[1]):
        raise ValueError(f"the samples are vectors of length {like.shape[1]}: give outcomes as rows of that length")
    if like.ndim == 1 and arr.ndim != 1:
        raise ValueError("the samples hold scalar outcomes: give outcomes as a sequence of scalars")
    numeric = np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
    if np.issubdtype(like.dtype, np.integer) or like.dtype == np.bool_:
        if not numeric:
            raise ValueError("the samples hold integer outcomes but the given outcomes are not numbers")
        if np.issubdtype(arr.dtype, np.floating):
            if not np.all(np.isfinite(arr) & (arr == np.round(arr))):
                raise ValueError("the samples hold integer outcomes but some given outcomes are not integers")
            arr = arr.astype(np.int64)
    elif np.issubdtype(like.dtype, np.floating):
        if not numeric:
            raise ValueError("the samples hold numeric outcomes but the given outcomes are not numbers")
        arr = arr.astype(np.float64)
    elif numeric:
        raise ValueError("the samples hold string outcomes but the given outcomes are numbers")
    return arr


def tdde(samples: ArrayLike, outcomes: Any, tau: float) -> NDArray[np.float64]:
    """TDDE, seed 003 Algorithm 2: ``f̂(t) = #{X_i = t}/n ∨ τ`` at each of ``outcomes``.

    ``samples`` is ``(n,)`` or ``(n, k)`` (rows are outcomes); ``outcomes`` is a sequence of
    outcomes of the same type (tuples/rows for vector outputs). Returns shape ``(len(outcomes),)``.
    """
    tau = _open_unit(tau, "tau")
    x = _as_discrete_samples(samples, "samples")
    points = _outcome_array(outcomes, x)
    if points.shape[0] == 0:
        raise ValueError("outcomes must not be empty")
    table, (ix, ip) = _encode([x, points])
    counts = np.bincount(ix, minlength=table.shape[0])
    return np.maximum(counts[ip] / x.shape[0], tau)


def tkde(samples: ArrayLike, points: ArrayLike, h: float, tau: float) -> NDArray[np.float64]:
    """TKDE, seed 003 Algorithm 1: the Gaussian KDE (8) with bandwidth ``h``, ``∨ τ``, at ``points``.

    Exact summation (:func:`app.stats.kde.kde_at`); ``points`` is ``(m,)``/``(m, d)`` or one point.
    """
    tau = _open_unit(tau, "tau")
    return np.maximum(kde_at(samples, points, h), tau)


# --------------------------------------------------------------------------------------------
# DPL (Algorithm 3)


@dataclass(frozen=True, eq=False)
class DPLResult:
    """Output of DPL (seed 003, Algorithm 3) for one pair ``(x, x')``.

    ``epsilon_hat`` is ``ε̂ = ℓ̂(t̂)`` (eq. 23) and ``t_hat`` the location ``t̂`` (eq. 22): a float
    (1-D continuous), a tuple of floats (d-dimensional), or the outcome (a scalar, or a tuple for
    vector outputs). The loss curve:

    - discrete: ``outcomes`` (shape ``(m,)`` or ``(m, k)``) with ``f_x``, ``f_xp`` (TDDE values,
      truncated at τ) and ``loss`` of shape ``(m,)``;
    - continuous: ``grid`` (one array per axis over ``region``) with ``f_x``, ``f_xp`` (TKDE) and
      ``loss`` of shape ``(len(grid[0]), …)``.
    """

    kind: str
    epsilon_hat: float
    t_hat: Any
    n_x: int
    n_xp: int
    tau: float
    f_x: NDArray[np.float64]
    f_xp: NDArray[np.float64]
    loss: NDArray[np.float64]
    outcomes: np.ndarray | None = None
    grid: tuple[NDArray[np.float64], ...] | None = None
    region: tuple[tuple[float, float], ...] | None = None
    bandwidth_x: float | None = None
    bandwidth_xp: float | None = None

    def to_dict(self, include_curve: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "epsilon_hat": self.epsilon_hat,
            "t_hat": _jsonable(self.t_hat),
            "n_x": self.n_x,
            "n_xp": self.n_xp,
            "tau": self.tau,
            "region": None if self.region is None else [list(b) for b in self.region],
            "bandwidth_x": self.bandwidth_x,
            "bandwidth_xp": self.bandwidth_xp,
        }
        if include_curve:
            if self.outcomes is not None:
                out["outcomes"] = [_jsonable(o) for o in self.outcomes]
            if self.grid is not None:
                out["grid"] = [axis.tolist() for axis in self.grid]
            out["f_x"] = self.f_x.tolist()
            out["f_xp"] = self.f_xp.tolist()
            out["loss"] = self.loss.tolist()
        return out


def default_region(x: np.ndarray, y: np.ndarray, q: float = DEFAULT_REGION_QUANTILE) -> tuple[tuple[float, float], ...]:
    """The bounded region C when none is given: per coordinate, the intersection of the two
    samples' central ``[q, 1 − q]`` ranges (the paper picks C by hand, seed 003 §V); where they do
    not overlap (a flagrant violation, e.g. a noisy histogram at ε = 10), their **union**, so that C
    holds the mass of both samples and the loss between them is seen rather than refused."""
    x = x.reshape(x.shape[0], -1)
    y = y.reshape(y.shape[0], -1)
    qx = np.quantile(x, [q, 1.0 - q], axis=0)
    qy = np.quantile(y, [q, 1.0 - q], axis=0)
    lo = np.maximum(qx[0], qy[0])
    hi = np.minimum(qx[1], qy[1])
    apart = lo >= hi
    lo = np.where(apart, np.minimum(qx[0], qy[0]), lo)
    hi = np.where(apart, np.maximum(qx[1], qy[1]), hi)
    if np.any(lo >= hi):
        raise ValueError("the samples are constant in some coordinate, so no default region C exists; give region")
    return tuple((float(a), float(b)) for a, b in zip(lo, hi))


_default_region = default_region


def _dpl_discrete(x_raw: ArrayLike, y_raw: ArrayLike, params: MPLParams) -> DPLResult:
    x = _as_discrete_samples(x_raw, "samples of x")
    y = _as_discrete_samples(y_raw, "samples of x'")
    tau = params.tau
    if params.outcomes is None:
        outcomes, fx, fy = discrete_frequencies(x, y)
        fx, fy = np.maximum(fx, tau), np.maximum(fy, tau)
    else:
        outcomes = _outcome_array(params.outcomes, x)
        fx = tdde(x, outcomes, tau)
        fy = tdde(y, outcomes, tau)
    loss = np.abs(np.log(fx) - np.log(fy))
    # eq. (22) allows any maximiser; among ties take the outcome with the most mass (smallest σ̂)
    candidates = np.flatnonzero(loss >= loss.max() - _TIE_TOLERANCE)
    best = int(candidates[np.argmax(fx[candidates] + fy[candidates])])
    return DPLResult(
        kind="discrete",
        epsilon_hat=float(loss[best]),
        t_hat=_to_python(outcomes[best]),
        n_x=int(x.shape[0]),
        n_xp=int(y.shape[0]),
        tau=tau,
        f_x=fx,
        f_xp=fy,
        loss=loss,
        outcomes=outcomes,
    )


def _dpl_continuous(x_raw: ArrayLike, y_raw: ArrayLike, params: MPLParams) -> DPLResult:
    x = as_continuous_samples(x_raw, "samples of x")
    y = as_continuous_samples(y_raw, "samples of x'")
    d = x.shape[1]
    if y.shape[1] != d:
        raise ValueError(f"the two samples have different dimensions: {d} and {y.shape[1]}")
    region = params.region if params.region is not None else _default_region(x, y, params.region_quantile)
    if len(region) != d:
        raise ValueError(f"region has {len(region)} dimensions but the outputs have {d}")
    points = params.grid_points or DEFAULT_GRID_POINTS[d]
    grid = tuple(np.linspace(lo, hi, points) for lo, hi in region)
    h_x = params.bandwidth if params.bandwidth is not None else silverman_bandwidth(x)
    h_y = params.bandwidth if params.bandwidth is not None else silverman_bandwidth(y)
    fx = np.maximum(kde_on_grid(x, grid, h_x), params.tau)
    fy = np.maximum(kde_on_grid(y, grid, h_y), params.tau)
    loss = np.abs(np.log(fx) - np.log(fy))
    idx = np.unravel_index(int(np.argmax(loss)), loss.shape)
    coords = tuple(float(grid[j][idx[j]]) for j in range(d))
    return DPLResult(
        kind="continuous",
        epsilon_hat=float(loss[idx]),
        t_hat=coords[0] if d == 1 else coords,
        n_x=int(x.shape[0]),
        n_xp=int(y.shape[0]),
        tau=params.tau,
        f_x=fx,
        f_xp=fy,
        loss=loss,
        grid=grid,
        region=region,
        bandwidth_x=float(h_x),
        bandwidth_xp=float(h_y),
    )


def dpl(samples_x: ArrayLike, samples_xp: ArrayLike, kind: str, params: MPLParams | None = None) -> DPLResult:
    """DPL, seed 003 Algorithm 3, on samples already drawn from ``A(x)`` and ``A(x')``.

    Estimates both densities (TDDE, Algorithm 2, for ``kind="discrete"``; TKDE, Algorithm 1, with
    Silverman's bandwidth unless ``params.bandwidth`` is set, for ``kind="continuous"``), forms
    ``ℓ̂(t) = |ln f̂_x(t) − ln f̂_x'(t)|`` (eq. 20) over ``C`` (a grid over ``params.region`` for
    continuous outputs, the outcomes for discrete ones) and returns ``t̂ = argmax ℓ̂`` (eq. 22)
    and ``ε̂ = ℓ̂(t̂)`` (eq. 23) with the whole curve.
    """
    kind = _check_kind(kind)
    params = _check_params(params, kind)
    return _dpl_discrete(samples_x, samples_xp, params) if kind == "discrete" else _dpl_continuous(samples_x, samples_xp, params)


def real_rows(samples_x: ArrayLike, samples_xp: ArrayLike) -> bool:
    """Whether 2-D samples are vectors of reals (some entry not integral): such rows are almost all
    distinct, so reading them as discrete outcomes (TDDE on rows) gives ε̂ ≈ 0."""
    x, y = np.asarray(samples_x), np.asarray(samples_xp)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.floating):
        return False
    both = np.concatenate([x, y])
    finite = both[np.isfinite(both)]
    return bool(finite.size and np.any(finite != np.round(finite)))


def dpl_best_coordinate(samples_x: ArrayLike, samples_xp: ArrayLike,
                        params: MPLParams | None = None) -> tuple[int, DPLResult]:
    """DPL (Algorithm 3, TKDE) on each coordinate of vectors of reals; the coordinate with the
    largest ε̂ and its result. A coordinate is a post-processing of the output, so its loss is a
    lower bound on the vector's (seed 003 §II, post-processing); NaN entries (nulls) are dropped."""
    x, y = np.asarray(samples_x, dtype=np.float64), np.asarray(samples_xp, dtype=np.float64)
    params = params if params is not None else MPLParams()
    best: tuple[int, DPLResult] | None = None
    for j in range(x.shape[1]):
        cx, cy = x[:, j][np.isfinite(x[:, j])], y[:, j][np.isfinite(y[:, j])]
        if cx.size < 10 or cy.size < 10 or np.ptp(cx) == 0 or np.ptp(cy) == 0:
            continue
        res = _dpl_continuous(cx, cy, replace(params, region=None, outcomes=None))
        if best is None or res.epsilon_hat > best[1].epsilon_hat:
            best = (j, res)
    if best is None:
        raise ValueError("no coordinate of the vectors varies on both sides")
    return best


# --------------------------------------------------------------------------------------------
# keyed outputs (docs/mpl.md "Keyed outputs")

#: Keys whose own statistic is tried (the most released ones), and the fewest releases needed.
KEYED_MPL_KEYS = 16
KEYED_MPL_MIN_RELEASES = 10


@dataclass(frozen=True)
class KeyedStatistic:
    """A statistic of keyed outputs (app.stats.keyed.KeyedSamples) whose privacy loss MPL
    estimates; a post-processing of the output, so its loss is a lower bound on the output's
    (seed 003 §II):

    - ``key_set``: the set of released keys, an outcome per set (labelled by the JSON array of its
      sorted keys): where partition selection spends its δ, and where a key set taken from the
      data shows;
    - ``count``: the number of released keys;
    - ``key``: one key's output with "not released" as an outcome of its own: the rows
      ``(released, value)`` as discrete outcomes (values that are integers, on a lattice or few);
    - ``key`` with ``continuous``: the value of a key that every choosing output released, with
      real values (TKDE); an output that does not release it is dropped, as a vector coordinate's
      nulls are (the estimate is then of the value given the key is released).
    """

    kind: Literal["key_set", "count", "key"]
    key: str | None = None
    continuous: bool = False

    @property
    def estimator(self) -> Kind:
        return "continuous" if self.continuous else "discrete"

    def describe(self) -> str:
        if self.kind == "key_set":
            return "released key set"
        if self.kind == "count":
            return "|released keys|"
        return f"value({self.key!r})" if self.continuous else f"key {self.key!r} (not released, or its value)"

    def apply(self, outputs: Any) -> np.ndarray:
        if self.kind == "key_set":
            return outputs.key_set_labels()
        if self.kind == "count":
            return outputs.counts().astype(np.int64)
        released, value = outputs.column(self.key)
        if self.continuous:
            return value[released & np.isfinite(value)]
        return np.stack([released.astype(np.float64), np.where(released & np.isfinite(value), value, 0.0)], axis=1)

    def event(self, result: DPLResult) -> dict[str, Any]:
        """The smallest event at t̂ (a check's ``event``): the key set, count or value itself, or
        t̂ ± one bandwidth for a continuous value."""
        t = result.t_hat
        if self.kind == "key_set":
            import json

            return {"kind": "key_sets", "sets": [json.loads(str(t))]}
        if self.kind == "count":
            return {"kind": "key_count", "event": {"kind": "set", "values": [int(t)]}}
        if self.continuous:
            h = max(result.bandwidth_x or 0.0, result.bandwidth_xp or 0.0) or 0.1
            centre = float(t[0]) if isinstance(t, (tuple, list)) else float(t)
            return {"kind": "key_value", "key": self.key, "event": {"kind": "interval", "low": centre - h,
                                                                    "high": centre + h}}
        released, value = (float(v) for v in t)
        if not released:
            return {"kind": "key", "key": self.key, "released": False}
        number: float | int = int(value) if value == int(value) and abs(value) < 2**53 else value
        return {"kind": "key_value", "key": self.key, "event": {"kind": "set", "values": [number]}}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "continuous": self.continuous, "describe": self.describe()}


def keyed_statistics(samples_x: Any, samples_xp: Any) -> list[KeyedStatistic]:
    """The statistics tried on keyed outputs (:class:`KeyedStatistic`), chosen on these samples."""
    stats = [KeyedStatistic("key_set"), KeyedStatistic("count")]
    union = tuple(sorted(set(samples_x.keys) | set(samples_xp.keys)))
    x, y = samples_x.reindexed(union), samples_xp.reindexed(union)
    pooled = x.key_frequencies() + y.key_frequencies()  # sparse: the union may hold a key per output
    for j in np.argsort(-pooled, kind="stable")[:KEYED_MPL_KEYS]:
        if pooled[j] < KEYED_MPL_MIN_RELEASES:
            break
        (rx, vx), (ry, vy) = x.column(union[int(j)]), y.column(union[int(j)])
        values = np.concatenate([vx[rx], vy[ry]])
        values = values[np.isfinite(values)]
        always = bool(rx.all() and ry.all())
        distinct = np.unique(values).size
        discrete = bool(values.size and (np.all(values == np.round(values)) or distinct <= 64))
        if always and not discrete:
            stats.append(KeyedStatistic("key", union[int(j)], continuous=True))
        elif discrete or not always:
            stats.append(KeyedStatistic("key", union[int(j)]))
    return stats


def dpl_best_keyed(samples_x: Any, samples_xp: Any, params: MPLParams | None = None
                   ) -> tuple[KeyedStatistic, DPLResult]:
    """DPL (Algorithm 3) on each statistic of :func:`keyed_statistics`; the one with the largest
    ε̂ and its result. Choose it on the choosing samples only: its bound comes from others."""
    params = params if params is not None else MPLParams()
    best: tuple[KeyedStatistic, DPLResult] | None = None
    for stat in keyed_statistics(samples_x, samples_xp):
        sx, sy = stat.apply(samples_x), stat.apply(samples_xp)
        if len(sx) < 10 or len(sy) < 10:
            continue
        if stat.continuous:
            if np.ptp(sx) == 0 or np.ptp(sy) == 0:
                continue
            res = _dpl_continuous(sx, sy, replace(params, region=None, outcomes=None))
        else:
            res = _dpl_discrete(sx, sy, replace(params, region=None, outcomes=None))
            if res.outcomes is not None and len(res.outcomes) < 2:
                continue
        if best is None or res.epsilon_hat > best[1].epsilon_hat:
            best = (stat, res)
    if best is None:
        raise ValueError("no statistic of the keyed outputs varies")
    return best


# --------------------------------------------------------------------------------------------
# the lower bound (Algorithm 4, lines 7–21)


@dataclass(frozen=True)
class LowerBound:
    """The statistical lower bound of seed 003 eq. (26) at ``t̂``:

    ``LB = ℓ̂*(t̂) − z·σ̂_N/c_N`` with ``z = Φ⁻¹(1 − α)`` and, from §IV-B,

    - discrete: ``σ̂² = 1/f̂*_x + 1/f̂*_x' − 2``, ``c_N = √N``;
    - continuous: ``σ̂² = ∫K²·(1/f̂*_x + 1/f̂*_x')``, ``c_N = √(N·h_max^d)``, ``∫K² = (4π)^{−d/2}``.

    ``[LB, ∞)`` is an asymptotic ``1 − α`` confidence interval for the privacy loss at ``t̂``, hence
    for ``ε`` when ``t̂`` locates the maximum (Theorem 2).
    """

    kind: str
    lower_bound: float
    loss_star: float
    sigma_hat: float
    c_n: float
    z: float
    alpha: float
    t_hat: Any
    f_x_star: float
    f_xp_star: float
    N: int
    tau: float
    h_max: float | None = None
    kernel_l2: float | None = None

    def exceeds(self, epsilon: float) -> bool:
        """Whether the bound refutes an ε claim at level α: ``LB > ε``."""
        return bool(self.lower_bound > float(epsilon))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "lower_bound": self.lower_bound,
            "loss_star": self.loss_star,
            "sigma_hat": self.sigma_hat,
            "c_n": self.c_n,
            "z": self.z,
            "alpha": self.alpha,
            "t_hat": _jsonable(self.t_hat),
            "f_x_star": self.f_x_star,
            "f_xp_star": self.f_xp_star,
            "N": self.N,
            "tau": self.tau,
            "h_max": self.h_max,
            "kernel_l2": self.kernel_l2,
        }


def mpl_lower_bound(
    fresh_x: ArrayLike,
    fresh_xp: ArrayLike,
    t_hat: Any,
    kind: str,
    params: MPLParams | None = None,
) -> LowerBound:
    """Lines 9–21 of seed 003 Algorithm 4: ``LB`` (eq. 26) from fresh samples at a given ``t̂``.

    ``fresh_x`` and ``fresh_xp`` are ``N`` new outputs of ``A(x_max)`` and ``A(x'_max)``, drawn
    independently of the DPL samples that chose ``t̂`` (both of the same size ``N``). Continuous
    outputs use ``params.h_max`` or the undersmoothed rule of condition (C4), which needs
    ``params.n`` (the DPL sample size) to check γ. The floor is ``params.tau`` in both kinds.
    """
    kind = _check_kind(kind)
    params = _check_params(params, kind)
    tau = params.tau
    z = float(norm.ppf(1.0 - params.alpha))
    if kind == "discrete":
        x = _as_discrete_samples(fresh_x, "fresh samples of x")
        y = _as_discrete_samples(fresh_xp, "fresh samples of x'")
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"the fresh samples must have the same size N; got {x.shape[0]} and {y.shape[0]}")
        big_n = int(x.shape[0])
        outcome = [t_hat]
        fx = float(tdde(x, outcome, tau)[0])
        fy = float(tdde(y, outcome, tau)[0])
        sigma2 = 1.0 / fx + 1.0 / fy - 2.0
        c_n = math.sqrt(big_n)
        h_max = kernel_l2 = None
        t_out = _to_python(tuple(t_hat) if isinstance(t_hat, (list, np.ndarray)) else t_hat)
    else:
        x = as_continuous_samples(fresh_x, "fresh samples of x")
        y = as_continuous_samples(fresh_xp, "fresh samples of x'")
        if x.shape[1] != y.shape[1]:
            raise ValueError(f"the two samples have different dimensions: {x.shape[1]} and {y.shape[1]}")
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"the fresh samples must have the same size N; got {x.shape[0]} and {y.shape[0]}")
        big_n, d = x.shape
        point = np.asarray(t_hat, dtype=np.float64).reshape(-1)
        if point.size != d or not np.all(np.isfinite(point)):
            raise ValueError(f"t_hat must be a finite point of dimension {d}; got {t_hat!r}")
        if params.h_max is not None:
            h_max = params.h_max
        else:
            h_max = undersmoothed_bandwidth(x, y, n=params.n, beta=params.beta, gamma=params.gamma)
        fx = float(tkde(x, point[None, :], h_max, tau)[0])
        fy = float(tkde(y, point[None, :], h_max, tau)[0])
        kernel_l2 = gaussian_kernel_l2(d)
        sigma2 = kernel_l2 * (1.0 / fx + 1.0 / fy)
        c_n = math.sqrt(big_n * h_max**d)
        t_out = float(point[0]) if d == 1 else tuple(float(v) for v in point)
    loss_star = abs(math.log(fx) - math.log(fy))
    sigma = math.sqrt(max(sigma2, 0.0))
    return LowerBound(
        kind=kind,
        lower_bound=loss_star - z * sigma / c_n,
        loss_star=loss_star,
        sigma_hat=sigma,
        c_n=c_n,
        z=z,
        alpha=params.alpha,
        t_hat=t_out,
        f_x_star=fx,
        f_xp_star=fy,
        N=big_n,
        tau=tau,
        h_max=None if h_max is None else float(h_max),
        kernel_l2=kernel_l2,
    )


# --------------------------------------------------------------------------------------------
# MPL end to end (Algorithm 4)


@dataclass(frozen=True, eq=False)
class MPLResult:
    """Output of MPL (seed 003, Algorithm 4) over ``B`` pairs.

    ``pairs[b]`` is DPL on pair ``b``; ``chosen`` is the index of the pair with the largest ε̂
    (line 5) and ``lower_bound`` the bound of eq. (26) at its ``t̂`` from fresh samples.
    """

    kind: str
    params: MPLParams
    databases: tuple[tuple[Any, Any], ...]
    pairs: tuple[DPLResult, ...]
    chosen: int
    lower_bound: LowerBound
    B: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "B", len(self.pairs))

    @property
    def epsilon_hat(self) -> float:
        return self.pairs[self.chosen].epsilon_hat

    @property
    def t_hat(self) -> Any:
        return self.pairs[self.chosen].t_hat

    def to_dict(self, include_curves: bool = True) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "B": self.B,
            "params": self.params.to_dict(),
            "chosen": self.chosen,
            "epsilon_hat": self.epsilon_hat,
            "t_hat": _jsonable(self.t_hat),
            "lower_bound": self.lower_bound.to_dict(),
            "pairs": [
                {"x": _database_json(x), "xp": _database_json(xp), **r.to_dict(include_curve=include_curves)}
                for (x, xp), r in zip(self.databases, self.pairs)
            ],
        }


def _database_json(db: Any) -> Any:
    try:
        return np.asarray(db, dtype=np.float64).tolist()
    except (TypeError, ValueError):
        return repr(db)


def _pair_databases(pair: Any) -> tuple[Any, Any]:
    if hasattr(pair, "x") and hasattr(pair, "xp"):
        return pair.x, pair.xp
    try:
        x, xp = pair
    except (TypeError, ValueError):
        raise ValueError(f"each pair must be (x, x') or have .x and .xp; got {pair!r}") from None
    return x, xp


def _draw(sample_fn: Callable[..., Any], database: Any, size: int, rng: np.random.Generator, role: str) -> np.ndarray:
    out = np.asarray(sample_fn(database, size, rng))
    if out.ndim == 0 or out.shape[0] != size:
        raise ValueError(f"sample_fn returned {out.shape} outputs for {role}; expected {size} along the first axis")
    return out


def mpl(
    sample_fn: Callable[[Any, int, np.random.Generator], ArrayLike],
    pairs: Sequence[Any],
    kind: str,
    params: MPLParams | None = None,
    rng: np.random.Generator | None = None,
) -> MPLResult:
    """MPL, seed 003 Algorithm 4, drawing its own samples with ``sample_fn(database, n, rng)``.

    For each pair ``(x_b, x'_b)`` (tuples, or objects with ``.x``/``.xp`` such as
    :class:`QueryPattern`): draw ``n`` outputs of each and run :func:`dpl` (lines 2–4); take the
    pair with the largest ``ε̂`` and its ``t̂`` (lines 5–6; the first on ties); draw ``N`` fresh
    outputs of each of its databases (lines 7–8) and compute :func:`mpl_lower_bound`.
    """
    kind = _check_kind(kind)
    params = _check_params(params, kind)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (np.random.default_rng(seed))")
    if not callable(sample_fn):
        raise ValueError("sample_fn must be callable as sample_fn(database, n, rng)")
    databases = tuple(_pair_databases(p) for p in pairs)
    if not databases:
        raise ValueError("pairs must hold at least one pair of neighbouring databases")
    results = []
    for b, (x, xp) in enumerate(databases):
        sx = _draw(sample_fn, x, params.n, rng, f"x of pair {b}")
        sy = _draw(sample_fn, xp, params.n, rng, f"x' of pair {b}")
        results.append(dpl(sx, sy, kind, params))
    chosen = int(np.argmax([r.epsilon_hat for r in results]))
    x, xp = databases[chosen]
    fresh_x = _draw(sample_fn, x, params.N, rng, "fresh x")
    fresh_xp = _draw(sample_fn, xp, params.N, rng, "fresh x'")
    bound = mpl_lower_bound(fresh_x, fresh_xp, results[chosen].t_hat, kind, params)
    return MPLResult(
        kind=kind,
        params=params,
        databases=databases,
        pairs=tuple(results),
        chosen=chosen,
        lower_bound=bound,
    )


# --------------------------------------------------------------------------------------------
# Table I of seed 003: query-vector patterns (from StatDP, Ding et al. 2018)

TABLE1_PATTERNS: tuple[str, ...] = (
    "one_above",
    "one_below",
    "one_above_rest_below",
    "one_below_rest_above",
    "half_half",
    "all_above",
    "all_below",
    "x_shape",
)


@dataclass(frozen=True)
class QueryPattern:
    """One neighbouring pair of query-answer vectors ``q = x``, ``q' = xp`` (``|q_i − q'_i| ≤ 1``)."""

    name: str
    x: tuple[int, ...]
    xp: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "x": list(self.x), "xp": list(self.xp)}


def table1_pairs(k: int) -> tuple[QueryPattern, ...]:
    """The eight input patterns of seed 003 Table I (StatDP's patterns) for ``k`` queries.

    With ``h = ⌊k/2⌋``, each pattern against ``x' = (1, …, 1)`` except X Shape:

    ==========================  ============================  ==========================
    name                        x                             x'
    ==========================  ============================  ==========================
    one_above                   (2, 1, …, 1)                  (1, …, 1)
    one_below                   (0, 1, …, 1)                  (1, …, 1)
    one_above_rest_below        (2, 0, …, 0)                  (1, …, 1)
    one_below_rest_above        (0, 2, …, 2)                  (1, …, 1)
    half_half                   (2 ×h, 0 ×(k−h))              (1, …, 1)
    all_above                   (2, …, 2)                     (1, …, 1)
    all_below                   (0, …, 0)                     (1, …, 1)
    x_shape                     (1 ×h, 0 ×(k−h))              (0 ×h, 1 ×(k−h))
    ==========================  ============================  ==========================

    Our copy of the paper lost one row of Table I and shows Half Half as ``(0,0,0,1,1,1)``; we use
    StatDP's definition (``generate_databases``: half the queries up, half down), the source the
    table cites. Every pair is adjacent for sensitivity-1 counting queries.
    """
    k = _positive_int(k, "k (the number of queries)", 2)
    h = k // 2
    ones = (1,) * k
    rows = {
        "one_above": ((2,) + (1,) * (k - 1), ones),
        "one_below": ((0,) + (1,) * (k - 1), ones),
        "one_above_rest_below": ((2,) + (0,) * (k - 1), ones),
        "one_below_rest_above": ((0,) + (2,) * (k - 1), ones),
        "half_half": ((2,) * h + (0,) * (k - h), ones),
        "all_above": ((2,) * k, ones),
        "all_below": ((0,) * k, ones),
        "x_shape": ((1,) * h + (0,) * (k - h), (0,) * h + (1,) * (k - h)),
    }
    return tuple(QueryPattern(name, *rows[name]) for name in TABLE1_PATTERNS)
