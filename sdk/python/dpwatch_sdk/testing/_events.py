"""Events for the SDK's tester: what an output is reduced to (features), the events on those
features, and the candidates proposed from outputs already drawn.

Every output kind is reduced to a few **features**, each a number or a category per output:

- real and integer outputs: the value ``o`` (a category too when it takes few values: atoms);
- labels and discrete outputs: the value as a category;
- vectors: the first coordinates ``o₁ … o₈``, ``sum(o)``, ``max(o)``, ``min(o)`` and ``argmax(o)``
  (the whole vector as a category when it takes few values);
- lists: ``len(o)``, ``sum(o)``, ``max(o)``, ``min(o)``, the first entry and the number of ⊥;
- keyed outputs (a group-by with partition selection): the set of released keys as a category,
  the number of released keys, the sum of the released values, and for each of the (at most 8)
  keys released most often in the first batch whether it is released and its value (⊥ when not).

The events are intervals of a numeric feature and their complements (half-lines, two-sided tails),
and sets of categories: the prefixes of the categories ranked by their estimated likelihood ratio
(the Neyman–Pearson sets, which StatDP also searches: Ding et al., *Detecting Violations of
Differential Privacy*, CCS 2018, §4.1). DP-Sniper (Bichsel et al., S&P 2021) chooses thresholds
the same way, by the evidence they are predicted to give on fresh outputs; the tester ranks every
candidate by the growth rate of its bet (``_betting.growth``) at cautious values of (p, q).

Nothing here sees the outputs an event is tested on: candidates come from outputs drawn before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..protocol import Output, OutputError, check_outputs

__all__ = ["Batch", "Candidates", "Event", "Featurizer", "Interval", "OneOf", "Pool", "propose"]

#: Vector coordinates that get a feature of their own.
MAX_COORDINATES = 8
#: Distinct values up to which a numeric output is also a category (atoms).
MAX_ATOMS = 64
#: Categories a feature keeps (more are lumped as "another value", never part of an event).
MAX_CATEGORIES = 4096
#: Quantile levels of the interval grid (denser in the tails, where privacy loss hides).
GRID_SIZE = 40
#: Categories ranked for the Neyman–Pearson sets.
MAX_RANKED = 64


def _fmt(value: float) -> str:
    if value == math.inf:
        return "∞"
    if value == -math.inf:
        return "−∞"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value)).replace("-", "−")
    return f"{value:.4g}".replace("-", "−")


@dataclass(frozen=True)
class Interval:
    """``low ≤ f(o) ≤ high`` on a numeric feature (``inside``), or its complement."""

    feature: str
    low: float
    high: float
    inside: bool = True

    def mask(self, batch: Batch) -> NDArray[np.bool_]:
        v = batch.numeric[self.feature]
        within = (v >= self.low) & (v <= self.high)
        return within if self.inside else ~within

    def describe(self, featurizer: Featurizer) -> str:
        name = featurizer.label(self.feature)
        low, high = self.low, self.high
        if low == high:
            core = f"{name} = {_fmt(low)}"
            return core if self.inside else f"{name} ≠ {_fmt(low)}"
        if self.inside:
            if low == -math.inf:
                return f"{name} ≤ {_fmt(high)}"
            if high == math.inf:
                return f"{name} ≥ {_fmt(low)}"
            return f"{_fmt(low)} ≤ {name} ≤ {_fmt(high)}"
        if low == -math.inf:
            return f"{name} > {_fmt(high)}"
        if high == math.inf:
            return f"{name} < {_fmt(low)}"
        return f"{name} < {_fmt(low)} or {name} > {_fmt(high)}"


@dataclass(frozen=True)
class OneOf:
    """``f(o) ∈ {…}`` on a categorical feature (codes of the featurizer's vocabulary)."""

    feature: str
    codes: tuple[int, ...]

    def mask(self, batch: Batch) -> NDArray[np.bool_]:
        return np.isin(batch.categorical[self.feature], np.asarray(self.codes, dtype=np.int64))

    def describe(self, featurizer: Featurizer) -> str:
        name = featurizer.label(self.feature)
        values = [featurizer.value_text(self.feature, code) for code in self.codes]
        shown = ", ".join(values[:8]) + (f", … ({len(values)} values)" if len(values) > 8 else "")
        if len(values) == 1:
            return f"{name} = {values[0]}"
        return f"{name} ∈ {{{shown}}}"


Event = Interval | OneOf


@dataclass
class Batch:
    """One side's outputs of one draw, as features."""

    size: int
    numeric: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    categorical: dict[str, NDArray[np.int64]] = field(default_factory=dict)


class Featurizer:
    """Turns a sampler's raw outputs into features, with one vocabulary per categorical feature
    shared by both databases and every batch (so that a code means the same value everywhere).
    Which features a numeric output gets (atoms or not) is decided on the first batch and kept."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self._vocab: dict[str, dict[Any, int]] = {}
        self._values: dict[str, list[Any]] = {}
        self._atoms: bool | None = None
        self._rows: bool | None = None
        self._keys: list[str] | None = None

    # ------------------------------------------------------------------ naming

    def label(self, feature: str) -> str:
        if feature.startswith(("value:", "released:")):
            kind, key = feature.split(":", 1)
            return f"value({key!r})" if kind == "value" else f"[{key!r} released]"
        return {"keys": "released keys", "n_keys": "#keys(o)", "o": "o", "sum": "sum(o)", "max": "max(o)", "min": "min(o)", "argmax": "argmax(o)",
                "len": "len(o)", "first": "o₁", "nulls": "#⊥(o)", "null": "[o = ⊥]", "row": "o"}.get(
            feature, feature)

    def value_text(self, feature: str, code: int) -> str:
        value = self._values[feature][code]
        if isinstance(value, str):
            return '"' + value.replace('"', '\\"') + '"'
        if isinstance(value, tuple):
            return "(" + ", ".join(_fmt(v) for v in value) + ")"
        return _fmt(float(value))

    def _codes(self, feature: str, values: Sequence[Any] | NDArray[Any]) -> NDArray[np.int64]:
        vocab = self._vocab.setdefault(feature, {})
        known = self._values.setdefault(feature, [])
        if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
            uniques, inverse = np.unique(values, return_inverse=True)
            mapped = np.empty(uniques.size, dtype=np.int64)
            for i, u in enumerate(uniques.tolist()):
                mapped[i] = self._code_of(vocab, known, u)
            return mapped[inverse.reshape(-1)]
        return np.fromiter((self._code_of(vocab, known, v) for v in values), dtype=np.int64, count=len(values))

    @staticmethod
    def _code_of(vocab: dict[Any, int], known: list[Any], value: Any) -> int:
        code = vocab.get(value)
        if code is None:
            if len(known) >= MAX_CATEGORIES:
                return -1
            code = vocab[value] = len(known)
            known.append(value)
        return code

    # ------------------------------------------------------------------ extraction

    def extract(self, outputs: Any, n: int) -> Batch:
        """Features of ``n`` raw outputs; :class:`OutputError` when they are not ``n`` valid outputs."""
        kind = self.output.kind
        batch = Batch(n)
        if kind in ("real", "integer"):
            values = self._numbers(outputs, n)
            batch.numeric["o"] = values
            if self.output.nullable:
                batch.numeric["null"] = np.isnan(values).astype(np.float64)
            if self._atoms is None:
                finite = values[~np.isnan(values)]
                distinct = np.unique(finite).size
                self._atoms = kind == "integer" or distinct <= MAX_ATOMS or (
                    finite.size > 0 and distinct <= finite.size / 2)
            if self._atoms:
                batch.categorical["o"] = self._codes("o", np.where(np.isnan(values), np.inf, values))
            return batch
        if kind in ("label", "discrete"):
            values_list = check_outputs(outputs, n, self.output)
            if values_list and isinstance(values_list[0], str):
                batch.categorical["o"] = self._codes("o", values_list)
            else:
                numbers = np.asarray(values_list, dtype=np.float64)
                batch.numeric["o"] = numbers
                batch.categorical["o"] = self._codes("o", numbers)
            return batch
        if kind == "vector":
            matrix = self._matrix(outputs, n)
            for j in range(min(matrix.shape[1], MAX_COORDINATES)):
                batch.numeric[f"o{_subscript(j + 1)}"] = matrix[:, j]
            if matrix.shape[1] > 1:
                with np.errstate(invalid="ignore"):
                    batch.numeric["sum"] = np.nansum(matrix, axis=1)
                    batch.numeric["max"] = _nan_reduce(np.nanmax, matrix)
                    batch.numeric["min"] = _nan_reduce(np.nanmin, matrix)
                filled = np.where(np.isnan(matrix), -np.inf, matrix)
                batch.categorical["argmax"] = self._codes("argmax", (np.argmax(filled, axis=1) + 1).astype(np.float64))
            if self._rows is None:
                integral = bool(np.all(np.isnan(matrix) | (matrix == np.round(matrix))))
                self._rows = integral and np.unique(matrix, axis=0).shape[0] <= MAX_ATOMS
            if self._rows:
                batch.categorical["row"] = self._codes("row", [tuple(r) for r in matrix.tolist()])
            return batch
        if kind == "keyed":
            return self._keyed(batch, outputs, n)
        rows = check_outputs(outputs, n, self.output)
        lengths = np.array([len(r) for r in rows], dtype=np.float64)
        batch.numeric["len"] = lengths
        batch.categorical["len"] = self._codes("len", lengths)
        entries = [[math.nan if v is None else float(v) for v in r] for r in rows]
        batch.numeric["sum"] = np.array([math.fsum(v for v in r if v == v) for r in entries])
        batch.numeric["max"] = np.array([max((v for v in r if v == v), default=math.nan) for r in entries])
        batch.numeric["min"] = np.array([min((v for v in r if v == v), default=math.nan) for r in entries])
        batch.numeric["first"] = np.array([r[0] if r else math.nan for r in entries])
        batch.numeric["nulls"] = np.array([sum(v != v for v in r) for r in entries], dtype=np.float64)
        return batch

    def _keyed(self, batch: Batch, outputs: Any, n: int) -> Batch:
        rows = check_outputs(outputs, n, self.output)
        if self._keys is None:  # fixed on the first batch, which no event is tested on
            seen: dict[str, int] = {}
            for r in rows:
                for k in r:
                    seen[k] = seen.get(k, 0) + 1
            self._keys = sorted(seen, key=lambda k: (-seen[k], k))[:MAX_COORDINATES]
        batch.categorical["keys"] = self._codes("keys", ["{" + ", ".join(sorted(r)) + "}" for r in rows])
        counts = np.array([len(r) for r in rows], dtype=np.float64)
        batch.numeric["n_keys"] = counts
        batch.categorical["n_keys"] = self._codes("n_keys", counts)
        batch.numeric["sum"] = np.array([math.fsum(v for v in r.values() if v is not None) for r in rows])
        for key in self._keys:
            values = [r.get(key, None) for r in rows]
            batch.numeric[f"value:{key}"] = np.array([math.nan if v is None else float(v) for v in values])
            batch.categorical[f"released:{key}"] = self._codes(f"released:{key}", [float(key in r) for r in rows])
        return batch

    def _numbers(self, outputs: Any, n: int) -> NDArray[np.float64]:
        if isinstance(outputs, np.ndarray) and outputs.dtype.kind in "fiu" and outputs.ndim == 1:
            if outputs.shape[0] != n:
                raise OutputError(f"expected {n} outputs, got {outputs.shape[0]}")
            values = outputs.astype(np.float64, copy=False)
            bad = ~np.isfinite(values)
            if bad.any() and not (self.output.nullable and not np.isinf(values).any()):
                raise OutputError("the outputs contain NaN or infinity")
            if self.output.kind == "integer" and not np.array_equal(values[~bad], np.round(values[~bad])):
                raise OutputError("integer outputs must be whole numbers")
            return values
        checked = check_outputs(outputs, n, self.output)
        return np.array([math.nan if v is None else float(v) for v in checked], dtype=np.float64)

    def _matrix(self, outputs: Any, n: int) -> NDArray[np.float64]:
        if isinstance(outputs, np.ndarray) and outputs.dtype.kind in "fiu" and outputs.ndim == 2:
            if outputs.shape[0] != n:
                raise OutputError(f"expected {n} outputs, got {outputs.shape[0]}")
            if self.output.length is not None and outputs.shape[1] != self.output.length:
                raise OutputError(f"vector outputs have length {outputs.shape[1]}, expected {self.output.length}")
            values = outputs.astype(np.float64, copy=False)
            if not np.isfinite(values).all() and not (self.output.nullable and not np.isinf(values).any()):
                raise OutputError("the outputs contain NaN or infinity")
            return values
        rows = check_outputs(outputs, n, self.output)
        return np.array([[math.nan if v is None else float(v) for v in r] for r in rows], dtype=np.float64)


def _nan_reduce(f: Any, matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    if not np.isnan(matrix).any():
        return f(matrix, axis=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return f(matrix, axis=1)


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _subscript(k: int) -> str:
    return str(k).translate(_SUBSCRIPTS)


# ---------------------------------------------------------------------------- candidates


@dataclass
class Pool:
    """The outputs of one database drawn so far (for choosing): each batch's numeric features
    sorted once, and each categorical feature's counts."""

    size: int = 0
    sorted_numeric: dict[str, list[NDArray[np.float64]]] = field(default_factory=dict)
    category_counts: dict[str, NDArray[np.int64]] = field(default_factory=dict)

    def add(self, batch: Batch) -> None:
        self.size += batch.size
        for name, values in batch.numeric.items():
            self.sorted_numeric.setdefault(name, []).append(np.sort(values[~np.isnan(values)]))
        for name, codes in batch.categorical.items():
            counts = np.bincount(codes[codes >= 0], minlength=1)
            old = self.category_counts.get(name)
            if old is None:
                self.category_counts[name] = counts
            else:
                width = max(old.size, counts.size)
                self.category_counts[name] = (np.pad(old, (0, width - old.size))
                                              + np.pad(counts, (0, width - counts.size)))

    def count_le(self, name: str, points: NDArray[np.float64], strict: bool) -> NDArray[np.float64]:
        side: Literal["left", "right"] = "left" if strict else "right"
        total = np.zeros(points.size)
        for chunk in self.sorted_numeric.get(name, []):
            total += np.searchsorted(chunk, points, side=side)
        return total

    def finite(self, name: str) -> int:
        return sum(c.size for c in self.sorted_numeric.get(name, []))

    def thinned(self, name: str, limit: int) -> NDArray[np.float64]:
        chunks = self.sorted_numeric.get(name, [])
        total = sum(c.size for c in chunks)
        if total == 0:
            return np.empty(0)
        step = max(1, total // limit)
        return np.concatenate([c[::step] for c in chunks])


@dataclass
class Candidates:
    """Candidate events with their counts on the two pools: ``a`` of ``na`` outputs of x and ``b``
    of ``nb`` outputs of x′ fall in each. The events are built on demand (:meth:`event`): only the
    few that are chosen ever become objects."""

    a: NDArray[np.float64]
    b: NDArray[np.float64]
    na: int
    nb: int
    _segments: list[tuple[int, Callable[[int], Event]]] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.a.size)

    def event(self, index: int) -> Event:
        start = 0
        for stop, build in self._segments:
            if index < stop:
                return build(index - start)
            start = stop
        raise IndexError(index)


def _grid(values: NDArray[np.float64]) -> NDArray[np.float64]:
    u = np.linspace(0.0, 1.0, GRID_SIZE + 2)[1:-1]
    levels = 0.5 * (1 - np.cos(np.pi * u))
    return np.unique(np.quantile(values, levels, method="inverted_cdf"))


def _intervals(name: str, lows: NDArray[np.float64], highs: NDArray[np.float64],
               inside: bool) -> Callable[[int], Event]:
    return lambda k: Interval(name, float(lows[k]), float(highs[k]), inside)


def _prefixes(name: str, ranked: NDArray[np.int64]) -> Callable[[int], Event]:
    return lambda k: OneOf(name, tuple(sorted(ranked[:k + 1].tolist())))


def propose(pool_x: Pool, pool_y: Pool) -> Candidates:
    """Every candidate event on the pools' features, with its counts on each."""
    a_parts: list[NDArray[np.float64]] = []
    b_parts: list[NDArray[np.float64]] = []
    segments: list[tuple[int, Callable[[int], Event]]] = []
    total = 0
    na, nb = pool_x.size, pool_y.size

    def add(a: NDArray[np.float64], b: NDArray[np.float64], build: Callable[[int], Event]) -> None:
        nonlocal total
        a_parts.append(a)
        b_parts.append(b)
        total += a.size
        segments.append((total, build))

    for name in pool_x.sorted_numeric:
        values = np.concatenate([pool_x.thinned(name, 10_000), pool_y.thinned(name, 10_000)])
        if values.size == 0:
            continue
        grid = _grid(values)
        x_lt = np.concatenate([[0.0], pool_x.count_le(name, grid, strict=True)])
        y_lt = np.concatenate([[0.0], pool_y.count_le(name, grid, strict=True)])
        x_le = np.concatenate([pool_x.count_le(name, grid, strict=False), [float(pool_x.finite(name))]])
        y_le = np.concatenate([pool_y.count_le(name, grid, strict=False), [float(pool_y.finite(name))]])
        bounds_low = np.concatenate([[-math.inf], grid])
        bounds_high = np.concatenate([grid, [math.inf]])
        i, j = np.triu_indices(bounds_low.size)  # low index ≤ high index, so lows ≤ highs
        keep = ~((i == 0) & (j == bounds_high.size - 1))  # not the whole line
        i, j = i[keep], j[keep]
        lows, highs = bounds_low[i], bounds_high[j]
        a_in = x_le[j] - x_lt[i]
        b_in = y_le[j] - y_lt[i]
        add(a_in, b_in, _intervals(name, lows, highs, True))
        add(na - a_in, nb - b_in, _intervals(name, lows, highs, False))
    for name, counts_x in pool_x.category_counts.items():
        counts_y = pool_y.category_counts.get(name, np.zeros(1, dtype=np.int64))
        width = max(counts_x.size, counts_y.size)
        cx = np.pad(counts_x, (0, width - counts_x.size)).astype(np.float64)
        cy = np.pad(counts_y, (0, width - counts_y.size)).astype(np.float64)
        seen = np.flatnonzero(cx + cy > 0)
        if seen.size < 2:
            continue
        seen = seen[np.argsort(-(cx + cy)[seen], kind="stable")][:MAX_RANKED]
        ratio = np.log((cx[seen] + 0.5) / (na + 1.0)) - np.log((cy[seen] + 0.5) / (nb + 1.0))
        for order in (np.argsort(-ratio, kind="stable"), np.argsort(ratio, kind="stable")):
            ranked = seen[order]
            add(np.cumsum(cx[ranked])[:-1], np.cumsum(cy[ranked])[:-1], _prefixes(name, ranked))
    if not a_parts:
        return Candidates(np.empty(0), np.empty(0), na, nb)
    return Candidates(np.concatenate(a_parts), np.concatenate(b_parts), na, nb, segments)
