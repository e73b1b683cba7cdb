"""Events: the sets of outputs ``E`` of a check ``(x, x', E)`` (method.md §1; seed 002, eq. 7).

A check counts how many of the ``n`` outputs of ``A(x)`` and of ``A(x')`` fall into ``E``. This
module defines the events users can send (as JSON) and counts membership without a Python loop
over the samples.

Output representations used across the project:

- real outputs: a 1-D float array of shape ``(n,)``;
- discrete outputs: a 1-D array of ints, floats or strings (dtype int, float, str or object);
- vector outputs (SVT answers, real vectors): a 2-D array of shape ``(n, d)``.

Events (pydantic v2 models, frozen, unknown fields rejected, told apart by ``kind``):

- :class:`Interval` (``kind="interval"``): an interval of the real line. ``None`` as an endpoint
  means infinite. An infinite endpoint is always open: ``closed_low``/``closed_high`` are forced
  to ``False`` when the endpoint is ``None``, whatever was sent. ``-inf`` as ``low`` and ``+inf``
  as ``high`` are accepted and stored as ``None``. Because infinite endpoints are open, the
  outputs ``±inf`` are never members of any interval, like ``NaN``.
- :class:`IntervalUnion` (``kind="union"``): a non-empty union of intervals.
- :class:`DiscreteSet` (``kind="set"``): a finite set of numbers, of strings, or of tuples (given
  as lists) for vector outputs, e.g. an SVT answer ``[0, 0, 1, -1]``.
- :class:`Box` (``kind="box"``): a box ``Π_j [low_j, high_j]`` for real vectors; ``None`` means
  unbounded (and, as for intervals, open: infinite coordinates are not members).
- :class:`LatticeSet` (``kind="lattice"``): points of a lattice ``offset + step·ℤ``.
- :class:`RowSet` (``kind="rows"``): whole vector or list outputs, ``null`` entries allowed.
- :class:`Projected` (``kind="projection"``): a scalar event on a statistic of a vector or list
  output (a coordinate, max, min, argmax, sum, length, the count of nulls, a learned score).

List outputs (``app.stats.shapes.ListSamples``) are accepted by row sets and projections.

Keyed outputs (``app.stats.keyed.KeyedSamples``: a set of keys with values, keys may be absent)
have events of their own (docs/audit.md §8). A key is *released* by an output that holds it
(with a value, or ``null``); *absent* otherwise:

- :class:`KeyReleased` (``kind="key"``): key ``a`` released, or (``released=false``) not released;
- :class:`KeyValue` (``kind="key_value"``): the value of key ``a`` in a scalar event; an output
  that does not release ``a`` is a member only with ``absent=true``, one that releases it as
  ``null`` only with ``nulls=true``;
- :class:`KeyCount` (``kind="key_count"``): the number of released keys in a scalar event;
- :class:`KeySet` (``kind="key_set"``): the released keys contain a set (``contains``), or some
  released key lies outside a set (``outside``: a key no choosing sample of x released, the event
  that catches key sets taken from the private data);
- :class:`KeySets` (``kind="key_sets"``): the set of released keys equals one of given sets;
- :class:`KeySum` (``kind="key_sum"``): the sum of the values of a set of keys in a scalar event;
  a key the output does not release counts 0, a key released as ``null`` makes the output no
  member (the sum of several keys' values: a violation spread over several keys, each moved by
  the allowed amount, shows only in their joint distribution).

A key the evaluated sample never released is absent from all its outputs, so an event chosen on
one sample applies to fresh samples that hold keys the choosing sample never saw.

Membership: :func:`event_contains` returns a boolean mask and :func:`count_in` the count ``a_t``
(or ``b_t``) of method.md §1. ``NaN`` outputs are never members. A shape that does not fit the
event (a tuple set on 1-D outputs, a box of dimension 3 on vectors of dimension 2, an interval on
strings, ...) raises ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

__all__ = [
    "KEYED_EVENT_TYPES",
    "KeyCount",
    "KeyReleased",
    "KeySet",
    "KeySets",
    "KeySum",
    "KeyValue",
    "Box",
    "LatticeSet",
    "Projected",
    "Projection",
    "RowSet",
    "feature_map",
    "feature_size",
    "first_entries",
    "DiscreteSet",
    "Event",
    "EventAdapter",
    "Interval",
    "IntervalUnion",
    "count_in",
    "count_many",
    "event_contains",
    "parse_event",
]


def _fmt(value: float | int | str) -> str:
    """A short, exact-enough rendering of an endpoint or a set value."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _lower_endpoint(value: float | None, what: str) -> float | None:
    """Normalise a lower endpoint: ``-inf`` means unbounded (``None``); ``NaN``/``+inf`` are errors."""
    if value is None:
        return None
    if math.isnan(value):
        raise ValueError(f"{what} must not be NaN")
    if math.isinf(value):
        if value < 0:
            return None
        raise ValueError(f"{what} must not be +inf (use a finite number, or null for -inf)")
    return value


def _upper_endpoint(value: float | None, what: str) -> float | None:
    """Normalise an upper endpoint: ``+inf`` means unbounded (``None``); ``NaN``/``-inf`` are errors."""
    if value is None:
        return None
    if math.isnan(value):
        raise ValueError(f"{what} must not be NaN")
    if math.isinf(value):
        if value > 0:
            return None
        raise ValueError(f"{what} must not be -inf (use a finite number, or null for +inf)")
    return value


# --------------------------------------------------------------------------------------------
# output arrays


def _as_outputs(outputs: Any) -> np.ndarray:
    from app.stats.keyed import KeyedSamples

    if isinstance(outputs, KeyedSamples):
        raise ValueError("the outputs are keyed (objects from keys to values): use a key event (key, key_value, "
                         "key_count, key_set, key_sets, key_sum)")
    arr = np.asarray(outputs)
    if arr.ndim == 0:
        raise ValueError("outputs must be a 1-D array of shape (n,) or a 2-D array of shape (n, d); got a scalar")
    if arr.ndim > 2:
        raise ValueError(f"outputs must be 1-D (n,) or 2-D (n, d); got an array of shape {arr.shape}")
    return arr


def _numeric(arr: np.ndarray, what: str) -> np.ndarray:
    """``arr`` as a real-valued array (int, unsigned or float), or a clear ``ValueError``."""
    kind = arr.dtype.kind
    if kind in "iuf":
        return arr
    if kind == "b":
        raise ValueError(f"{what} needs numeric outputs; got booleans (send 0/1 as integers)")
    if kind in "US":
        raise ValueError(f"{what} needs numeric outputs; got strings (use a DiscreteSet of strings)")
    if kind == "O":
        # numpy casts None to NaN, so a missing output is simply never a member.
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} needs numeric outputs; the object array holds non-numbers ({exc})") from None
    raise ValueError(f"{what} needs real-valued outputs; got dtype {arr.dtype}")


def _scalar_outputs(outputs: Any, what: str) -> np.ndarray:
    arr = _as_outputs(outputs)
    if arr.ndim != 1:
        raise ValueError(
            f"{what} applies to scalar outputs of shape (n,); got vector outputs of shape {arr.shape} "
            "(use a Box, or a DiscreteSet of tuples)"
        )
    return arr


def _vector_outputs(outputs: Any, dimension: int, what: str) -> np.ndarray:
    arr = _as_outputs(outputs)
    if arr.ndim != 2:
        raise ValueError(
            f"{what} of dimension {dimension} applies to vector outputs of shape (n, {dimension}); "
            f"got scalar outputs of shape {arr.shape}"
        )
    if arr.shape[1] != dimension:
        raise ValueError(
            f"{what} of dimension {dimension} does not fit outputs of dimension {arr.shape[1]} "
            f"(shape {arr.shape})"
        )
    return arr


# --------------------------------------------------------------------------------------------
# models

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid")


class Interval(BaseModel):
    """An interval of the real line; ``None`` endpoints are infinite and always open."""

    model_config = _MODEL_CONFIG

    kind: Literal["interval"] = "interval"
    low: float | None = None
    high: float | None = None
    # Validated even when omitted, so that an infinite endpoint is always stored as open.
    closed_low: bool = Field(default=True, validate_default=True)
    closed_high: bool = Field(default=True, validate_default=True)

    @field_validator("low")
    @classmethod
    def _check_low(cls, value: float | None) -> float | None:
        return _lower_endpoint(value, "low")

    @field_validator("high")
    @classmethod
    def _check_high(cls, value: float | None) -> float | None:
        return _upper_endpoint(value, "high")

    @field_validator("closed_low")
    @classmethod
    def _open_at_minus_infinity(cls, value: bool, info: ValidationInfo) -> bool:
        if "low" in info.data and info.data["low"] is None:
            return False
        return value

    @field_validator("closed_high")
    @classmethod
    def _open_at_plus_infinity(cls, value: bool, info: ValidationInfo) -> bool:
        if "high" in info.data and info.data["high"] is None:
            return False
        return value

    @model_validator(mode="after")
    def _check_order(self) -> Interval:
        if self.low is not None and self.high is not None:
            if self.low > self.high:
                raise ValueError(f"low ({_fmt(self.low)}) must be <= high ({_fmt(self.high)})")
            if self.low == self.high and not (self.closed_low and self.closed_high):
                raise ValueError(
                    f"the degenerate interval low == high == {_fmt(self.low)} must be closed on both "
                    "sides (otherwise it is empty)"
                )
        return self

    def describe(self) -> str:
        left = "[" if self.closed_low else "("
        right = "]" if self.closed_high else ")"
        low = "-inf" if self.low is None else _fmt(self.low)
        high = "inf" if self.high is None else _fmt(self.high)
        return f"{left}{low}, {high}{right}"

    def contains(self, outputs: Any) -> np.ndarray:
        arr = _numeric(_scalar_outputs(outputs, "an interval"), "an interval")
        low = -np.inf if self.low is None else self.low
        high = np.inf if self.high is None else self.high
        # closed_* is False at an infinite endpoint, so x > -inf / x < inf drops ±inf; NaN fails both.
        mask = (arr >= low) if self.closed_low else (arr > low)
        mask &= (arr <= high) if self.closed_high else (arr < high)
        return mask


class IntervalUnion(BaseModel):
    """A non-empty union of intervals (they may overlap)."""

    model_config = _MODEL_CONFIG

    kind: Literal["union"] = "union"
    intervals: list[Interval]

    @field_validator("intervals")
    @classmethod
    def _non_empty(cls, value: list[Interval]) -> list[Interval]:
        if not value:
            raise ValueError("a union needs at least one interval (an empty union is the empty event)")
        return value

    def describe(self) -> str:
        return " ∪ ".join(interval.describe() for interval in self.intervals)

    def contains(self, outputs: Any) -> np.ndarray:
        arr = _numeric(_scalar_outputs(outputs, "an interval union"), "an interval union")
        mask = np.zeros(arr.shape[0], dtype=bool)
        for interval in self.intervals:
            mask |= interval.contains(arr)
        return mask


SetValue = int | float | str | list[int | float]


class DiscreteSet(BaseModel):
    """A finite set of discrete outputs: numbers, strings, or tuples (lists) for vector outputs."""

    model_config = _MODEL_CONFIG

    kind: Literal["set"] = "set"
    values: list[SetValue]

    @field_validator("values", mode="before")
    @classmethod
    def _reject_booleans(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            for item in value:
                items = item if isinstance(item, (list, tuple)) else (item,)
                if any(isinstance(v, (bool, np.bool_)) for v in items):
                    raise ValueError("boolean values are not allowed in a set; use the integers 1 and 0")
        return value

    @field_validator("values")
    @classmethod
    def _check_values(cls, value: list[SetValue]) -> list[SetValue]:
        if not value:
            raise ValueError("a set needs at least one value (an empty set is the empty event)")
        kinds = {_value_kind(v) for v in value}
        if len(kinds) > 1:
            raise ValueError(
                "set values must be all numbers, all strings, or all tuples (lists); got a mix of "
                + " and ".join(sorted(kinds))
            )
        kind = kinds.pop()
        # one kind for all (checked above): the numbers and the tuples are all of value
        if kind == "numbers":
            if any(math.isnan(v) for v in value if isinstance(v, (int, float))):
                raise ValueError("set values must not be NaN (NaN outputs are never members)")
        elif kind == "tuples":
            tuples = [v for v in value if isinstance(v, list)]
            lengths = {len(v) for v in tuples}
            if 0 in lengths:
                raise ValueError("tuple values must not be empty")
            if len(lengths) > 1:
                raise ValueError(f"all tuple values must have the same length; got lengths {sorted(lengths)}")
            if any(math.isnan(x) for v in tuples for x in v):
                raise ValueError("tuple values must not contain NaN")
        return value

    @property
    def value_kind(self) -> Literal["numbers", "strings", "tuples"]:
        return _value_kind(self.values[0])

    @property
    def dimension(self) -> int | None:
        """The tuple length for a set of tuples, ``None`` for a set of scalars."""
        first = self.values[0]
        return len(first) if isinstance(first, list) else None

    def describe(self) -> str:
        # all values are of one kind (checked at validation)
        items = ["(" + ",".join(_fmt(x) for x in v) + ")" if isinstance(v, list) else _fmt(v) for v in self.values]
        return "{" + ", ".join(items) + "}"

    def contains(self, outputs: Any) -> np.ndarray:
        kind = self.value_kind
        first = self.values[0]
        if isinstance(first, list):  # the value kind "tuples"
            dim = len(first)
            arr = _numeric(_vector_outputs(outputs, dim, "a set of tuples"), "a set of tuples")
            return _rows_in(arr, np.asarray(self.values))
        arr = _scalar_outputs(outputs, f"a set of {kind}")
        if kind == "strings":
            if arr.dtype.kind == "S":
                arr = arr.astype(str)
            if arr.dtype.kind not in "UO":
                raise ValueError(f"a set of strings needs string outputs; got dtype {arr.dtype}")
            return np.isin(arr, np.asarray(self.values, dtype=object))
        if arr.dtype.kind == "O":
            # Object outputs may mix types; np.isin compares element-wise with ==, so a string
            # output simply is not a member of a set of numbers.
            return np.isin(arr, np.asarray(self.values, dtype=object))
        arr = _numeric(arr, "a set of numbers")
        return np.isin(arr, np.asarray(self.values))


def _value_kind(value: SetValue) -> Literal["numbers", "strings", "tuples"]:
    if isinstance(value, str):
        return "strings"
    if isinstance(value, list):
        return "tuples"
    return "numbers"


def _rows_in(arr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which rows of ``arr`` (n, d) equal some row of ``values`` (m, d).

    Rows are compared as raw bytes through a void view, so ``np.isin`` does one sort instead of
    an (n, m, d) broadcast. Both sides are cast to a common dtype first, and ``+ 0.0`` turns
    ``-0.0`` into ``0.0`` so that the bytes of equal floats agree. ``NaN`` never matches: the
    set holds no ``NaN`` (validated), and no finite value has ``NaN``'s bytes.
    """
    common = np.result_type(arr.dtype, values.dtype)
    a = np.ascontiguousarray(arr, dtype=common)
    v = np.ascontiguousarray(values, dtype=common)
    if common.kind == "f":
        a = a + 0.0
        v = v + 0.0
    row = np.dtype((np.void, common.itemsize * a.shape[1]))
    return np.isin(a.view(row).ravel(), v.view(row).ravel())


class Box(BaseModel):
    """A box ``Π_j [low_j, high_j]`` for real vectors; ``None`` bounds are unbounded (and open)."""

    model_config = _MODEL_CONFIG

    kind: Literal["box"] = "box"
    low: list[float | None]
    high: list[float | None]

    @field_validator("low")
    @classmethod
    def _check_low(cls, value: list[float | None]) -> list[float | None]:
        return [_lower_endpoint(v, f"low[{j}]") for j, v in enumerate(value)]

    @field_validator("high")
    @classmethod
    def _check_high(cls, value: list[float | None]) -> list[float | None]:
        return [_upper_endpoint(v, f"high[{j}]") for j, v in enumerate(value)]

    @model_validator(mode="after")
    def _check_shape(self) -> Box:
        if not self.low:
            raise ValueError("a box needs at least one dimension")
        if len(self.low) != len(self.high):
            raise ValueError(f"low and high must have the same length; got {len(self.low)} and {len(self.high)}")
        for j, (lo, hi) in enumerate(zip(self.low, self.high)):
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"low[{j}] ({_fmt(lo)}) must be <= high[{j}] ({_fmt(hi)})")
        return self

    @property
    def dimension(self) -> int:
        return len(self.low)

    def describe(self) -> str:
        parts = []
        for lo, hi in zip(self.low, self.high):
            left = "(-inf" if lo is None else "[" + _fmt(lo)
            right = "inf)" if hi is None else _fmt(hi) + "]"
            parts.append(f"{left}, {right}")
        return " × ".join(parts)

    def contains(self, outputs: Any) -> np.ndarray:
        arr = _numeric(_vector_outputs(outputs, self.dimension, "a box"), "a box")
        low_missing = np.array([v is None for v in self.low])
        high_missing = np.array([v is None for v in self.high])
        low = np.array([-np.inf if v is None else v for v in self.low])
        high = np.array([np.inf if v is None else v for v in self.high])
        # Finite bounds are closed; missing bounds are open at ±inf, which drops infinite coordinates.
        low_ok = np.where(low_missing, arr > low, arr >= low)
        high_ok = np.where(high_missing, arr < high, arr <= high)
        return np.all(low_ok & high_ok, axis=1)


# --------------------------------------------------------------------------------------------
# events for every output shape (docs/audit.md §2): lattice point sets, row sets, projections


class LatticeSet(BaseModel):
    """Points ``offset + k·step`` for ``k`` in ``points`` of a real output on a lattice.

    A lattice output is discrete: an interval between two lattice points holds nothing, so the
    events proposed for it are sets of lattice points. Membership tolerates float rounding
    (``app.stats.shapes.Lattice.on_lattice``)."""

    model_config = _MODEL_CONFIG

    kind: Literal["lattice"] = "lattice"
    step: float = Field(gt=0)
    offset: float = 0.0
    points: list[int]

    @field_validator("points")
    @classmethod
    def _non_empty(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("a lattice set needs at least one point")
        return sorted(set(value))

    def describe(self) -> str:
        head = ", ".join(_fmt(self.offset + k * self.step) for k in self.points[:8])
        return "{" + head + (", …" if len(self.points) > 8 else "") + f"}} on {_fmt(self.step)}ℤ"

    def contains(self, outputs: Any) -> np.ndarray:
        from app.stats.shapes import Lattice  # shapes imports nothing from events

        arr = _numeric(_scalar_outputs(outputs, "a lattice set"), "a lattice set").astype(np.float64)
        lat = Lattice(step=self.step, offset=self.offset)
        on = lat.on_lattice(arr)
        k = np.where(on, lat.index(np.where(np.isnan(arr), 0.0, arr)), np.nan)
        shift = int(round((self.offset - lat.offset) / self.step))  # points are relative to self.offset
        return on & np.isin(k, np.asarray(self.points, dtype=np.float64) + shift)


#: Sentinels of the row keys: a null entry, and the padding after a list's length.
_NULL_KEY = -1.7976931348623157e308
_PAD_KEY = 1.7976931348623157e308


def _row_keys(outputs: Any, width: int) -> np.ndarray:
    """Outputs (vectors or ListSamples) as (n, width) float rows with null/padding sentinels."""
    from app.stats.shapes import ListSamples

    if isinstance(outputs, ListSamples):
        vals = outputs.values[:, :width] if outputs.width >= width else outputs.padded(width)
        keys = np.where(np.isnan(vals), _NULL_KEY, vals + 0.0)
        keys[np.arange(width)[None, :] >= outputs.lengths[:, None]] = _PAD_KEY
        too_long = outputs.lengths > width
        keys[too_long] = np.nan  # never equal to anything
        return keys
    arr = _numeric(_as_outputs(outputs), "a row set").astype(np.float64)
    if arr.ndim != 2:
        raise ValueError("a row set applies to vector or list outputs")
    if arr.shape[1] > width:
        return np.full((arr.shape[0], width), np.nan)
    keys = np.where(np.isnan(arr), _NULL_KEY, arr + 0.0)
    if arr.shape[1] < width:
        keys = np.concatenate([keys, np.full((arr.shape[0], width - arr.shape[1]), _PAD_KEY)], axis=1)
    return keys


class RowSet(BaseModel):
    """A finite set of whole outputs of a vector or list shape; ``null`` entries allowed (SVT's ⊥,
    or an aborted query). A list output is a member when it equals a value, length included."""

    model_config = _MODEL_CONFIG

    kind: Literal["rows"] = "rows"
    values: list[list[float | None]]

    @field_validator("values")
    @classmethod
    def _non_empty(cls, value: list[list[float | None]]) -> list[list[float | None]]:
        if not value:
            raise ValueError("a row set needs at least one row")
        return value

    def describe(self) -> str:
        rows = ["(" + ",".join("⊥" if v is None else _fmt(v) for v in row) + ")" for row in self.values[:4]]
        return "{" + ", ".join(rows) + (", …" if len(self.values) > 4 else "") + "}"

    def contains(self, outputs: Any) -> np.ndarray:
        from app.stats.shapes import ListSamples

        width = max(max(len(v) for v in self.values), 1)
        if not isinstance(outputs, ListSamples):
            width = max(width, _as_outputs(outputs).shape[1] if _as_outputs(outputs).ndim == 2 else 1)
        keys = _row_keys(outputs, width)
        table = np.full((len(self.values), width), _PAD_KEY)
        for i, row in enumerate(self.values):
            table[i, : len(row)] = [_NULL_KEY if v is None else float(v) + 0.0 for v in row]
        row_type = np.dtype((np.void, 8 * width))
        a = np.ascontiguousarray(keys).view(row_type).ravel()
        b = np.ascontiguousarray(table).view(row_type).ravel()
        return np.isin(a, b) & ~np.isnan(keys).any(axis=1)


ProjectionKind = Literal["coordinate", "max", "min", "sum", "argmax", "argmin", "length", "count_null",
                         "count_value", "first_index", "first_value", "linear"]


def first_entries(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each output's first present entry (rows of ``values``, ``present`` its mask): whether it has
    one, its position and its value (position 0 and that entry's value where it has none)."""
    has = np.asarray(present.any(axis=1))
    first = present.argmax(axis=1)
    return has, first, values[np.arange(values.shape[0]), first]


class Projection(BaseModel):
    """A scalar statistic of a vector or list output (NaN, i.e. null, when undefined).

    - ``coordinate`` (``index``): the entry at ``index`` (null when null or beyond the length);
    - ``max``, ``min``, ``sum``, ``argmax``, ``argmin``: over the non-null entries;
    - ``length``; ``count_null``; ``count_value`` (``value``): entries equal to ``value``;
    - ``first_index``, ``first_value``: the position and value of the first non-null entry;
      ``first_value`` with ``low_index``/``high_index``: that value only when the position lies in
      ``[low_index, high_index]`` (either end open when absent), null otherwise — so that an event
      on it is an event on the joint law of the first non-null entry's position and value (SVT 3's
      first ⊤ and its noisy answer: "the first answer comes at a position ≤ k and is ≥ t");
    - ``linear``: a learned score ``w·(φ(o) − mean)/scale + b`` with the feature map φ of
      :func:`feature_map` (``width`` entries, their null, padding and after-the-first flags, length,
      null count, max, min, sum) — a DP-Sniper-style classifier stored as plain numbers.
    """

    model_config = _MODEL_CONFIG

    kind: ProjectionKind
    index: int | None = Field(default=None, ge=0)
    value: float | None = None
    width: int | None = Field(default=None, ge=1)
    mean: list[float] | None = None
    scale: list[float] | None = None
    weights: list[float] | None = None
    intercept: float = 0.0
    low_index: int | None = Field(default=None, ge=0)
    high_index: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _check(self) -> Projection:
        if self.kind == "coordinate" and self.index is None:
            raise ValueError("a coordinate projection needs its index")
        if (self.low_index is not None or self.high_index is not None) and self.kind != "first_value":
            raise ValueError("low_index and high_index apply to the first_value projection only")
        if self.low_index is not None and self.high_index is not None and self.low_index > self.high_index:
            raise ValueError(f"low_index ({self.low_index}) exceeds high_index ({self.high_index})")
        if self.kind == "count_value" and self.value is None:
            raise ValueError("count_value needs the value to count")
        if self.kind == "linear":
            if self.width is None or self.weights is None or self.mean is None or self.scale is None:
                raise ValueError("a linear projection needs width, mean, scale and weights")
            size = feature_size(self.width)
            if not (len(self.weights) == len(self.mean) == len(self.scale) == size):
                raise ValueError(f"a linear projection of width {self.width} needs {size} weights, means and scales")
        return self

    def describe(self) -> str:
        if self.kind == "coordinate":
            return f"o[{self.index}]"
        if self.kind == "count_value":
            return f"#{{j: o[j] = {_fmt(self.value)}}}"  # type: ignore[arg-type]
        if self.kind == "linear":
            return f"score(o) (learned, {len(self.weights or [])} features)"
        if self.kind == "first_value" and (self.low_index is not None or self.high_index is not None):
            lo = 0 if self.low_index is None else self.low_index
            hi = "∞" if self.high_index is None else self.high_index
            return f"first_value(o) at first_index(o) ∈ [{lo}, {hi}]"
        return f"{self.kind}(o)"

    def apply(self, outputs: Any, entries: tuple[np.ndarray, np.ndarray] | None = None,
              features: np.ndarray | None = None) -> np.ndarray:
        """The statistic of each output, float (n,), NaN where undefined (null). ``entries``:
        ``_entries_of(outputs)`` when the caller already has it (many statistics of one sample);
        ``features``: ``feature_map(outputs, width)`` likewise, for a linear projection."""
        values, valid = _entries_of(outputs) if entries is None else entries
        present = valid & ~np.isnan(values)
        n, width = values.shape
        kind = self.kind
        with np.errstate(invalid="ignore"):
            if kind == "coordinate":
                j = int(self.index)  # type: ignore[arg-type]
                return values[:, j].copy() if j < width else np.full(n, np.nan)
            if kind in ("max", "min", "argmax", "argmin"):
                fill = -np.inf if kind in ("max", "argmax") else np.inf
                filled = np.where(present, values, fill)
                none = ~present.any(axis=1)
                if kind in ("max", "min"):
                    out = filled.max(axis=1) if kind == "max" else filled.min(axis=1)
                else:
                    out = (filled.argmax(axis=1) if kind == "argmax" else filled.argmin(axis=1)).astype(np.float64)
                out[none] = np.nan
                return out
            if kind == "sum":
                out = np.where(present, values, 0.0).sum(axis=1)
                out[~present.any(axis=1)] = np.nan
                return out
            if kind == "length":
                return valid.sum(axis=1).astype(np.float64)
            if kind == "count_null":
                return (valid & np.isnan(values)).sum(axis=1).astype(np.float64)
            if kind == "count_value":
                return (present & (values == self.value)).sum(axis=1).astype(np.float64)
            if kind in ("first_index", "first_value"):
                has, first, value = first_entries(values, present)
                out = first.astype(np.float64) if kind == "first_index" else value
                if self.low_index is not None:
                    has &= first >= self.low_index
                if self.high_index is not None:
                    has &= first <= self.high_index
                return np.where(has, out, np.nan)
            # linear
            phi = features if features is not None else \
                feature_map(outputs, int(self.width), entries=(values, valid))  # type: ignore[arg-type]
            z = (phi - np.asarray(self.mean)) / np.asarray(self.scale)
            return z @ np.asarray(self.weights) + self.intercept


def _entries_of(outputs: Any) -> tuple[np.ndarray, np.ndarray]:
    """(values (n, W) float with NaN, valid (n, W): entry exists) for vectors and lists."""
    from app.stats.shapes import ListSamples

    if isinstance(outputs, ListSamples):
        return outputs.values.astype(np.float64), outputs.valid_mask()
    arr = _numeric(_as_outputs(outputs), "a projection").astype(np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    return arr, np.ones(arr.shape, dtype=bool)


def feature_size(width: int) -> int:
    return 4 * width + 5


def feature_map(outputs: Any, width: int, entries: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """φ(o) for the learned events (DP-Sniper's classifiers read a flattened output with flags for
    special values, Bichsel et al. §V): the first ``width`` entries (null and absent → 0), a null
    flag and an absent flag per entry, then length, null count, max, min and sum of the non-null
    entries (0 when none), and a flag per entry for "after the first non-null entry" (SVT's
    aborted answers once the cutoff is reached). Shape (n, 4·width + 5)."""
    values, valid = _entries_of(outputs) if entries is None else entries
    n, w = values.shape
    if w < width:
        values = np.concatenate([values, np.full((n, width - w), np.nan)], axis=1)
        valid = np.concatenate([valid, np.zeros((n, width - w), dtype=bool)], axis=1)
    values, valid = values[:, :width], valid[:, :width]
    null = valid & np.isnan(values)
    present = valid & ~null
    clean = np.where(present, values, 0.0)
    anyp = present.any(axis=1)
    mx = np.where(anyp, np.where(present, values, -np.inf).max(axis=1), 0.0)
    mn = np.where(anyp, np.where(present, values, np.inf).min(axis=1), 0.0)
    summary = np.stack([valid.sum(axis=1), null.sum(axis=1), mx, mn, clean.sum(axis=1)], axis=1).astype(np.float64)
    after = (np.cumsum(present, axis=1) - present) > 0
    return np.concatenate([clean, null.astype(np.float64), (~valid).astype(np.float64), summary,
                           after.astype(np.float64)], axis=1)


ScalarEvent = Annotated[Interval | IntervalUnion | DiscreteSet | LatticeSet, Field(discriminator="kind")]


class Projected(BaseModel):
    """``{o : s(o) ∈ event}`` for a scalar statistic ``s`` of a vector or list output
    (:class:`Projection`); with ``nulls``, outputs whose statistic is null are members too, and
    with no ``event``, only they are (e.g. "query 3 answered ⊥")."""

    model_config = _MODEL_CONFIG

    kind: Literal["projection"] = "projection"
    projection: Projection
    event: ScalarEvent | None = None
    nulls: bool = False

    @model_validator(mode="after")
    def _check(self) -> Projected:
        if self.event is None and not self.nulls:
            raise ValueError("a projection event needs an event on the statistic, or nulls=true (or both)")
        return self

    def describe(self) -> str:
        s = self.projection.describe()
        parts = ([f"{s} ∈ {self.event.describe()}"] if self.event is not None else []) + (
            [f"{s} is ⊥"] if self.nulls else [])
        return " or ".join(parts)

    def contains(self, outputs: Any) -> np.ndarray:
        return self.contains_statistic(self.projection.apply(outputs))

    def contains_statistic(self, stat: np.ndarray) -> np.ndarray:
        """Which outputs lie in the event, given their statistic (``projection.apply``)."""
        null = np.isnan(stat)
        mask = np.zeros(stat.shape[0], dtype=bool) if self.event is None else self.event.contains(stat) & ~null
        return mask | (null & self.nulls)


# --------------------------------------------------------------------------------------------
# keyed outputs (module docstring)

#: Longest key accepted in an event (a key is a group's name, not a document).
MAX_KEY_LENGTH = 1_000
#: Most keys one event may name.
MAX_EVENT_KEYS = 10_000

Key = Annotated[str, Field(min_length=0, max_length=MAX_KEY_LENGTH)]


def _keyed_outputs(outputs: Any, what: str) -> Any:
    from app.stats.keyed import KeyedSamples

    if not isinstance(outputs, KeyedSamples):
        raise ValueError(f"{what} applies to keyed outputs (objects from keys to values); got "
                         + ("list outputs" if hasattr(outputs, "lengths") else f"an array of shape {np.shape(outputs)}"))
    return outputs


def _key_list(value: list[str], what: str) -> list[str]:
    if len(value) > MAX_EVENT_KEYS:
        raise ValueError(f"{what} names {len(value)} keys; at most {MAX_EVENT_KEYS}")
    keys = sorted(set(value))
    if len(keys) != len(value):
        raise ValueError(f"{what} repeats a key")
    return keys


def _key_set_text(keys: list[str], limit: int = 6) -> str:
    shown = ", ".join(repr(k) for k in keys[:limit])
    return "{" + shown + (f", … ({len(keys)} keys)" if len(keys) > limit else "") + "}"


class KeyReleased(BaseModel):
    """Key ``key`` released (with a value or ``null``), or with ``released=false`` not released."""

    model_config = _MODEL_CONFIG

    kind: Literal["key"] = "key"
    key: Key
    released: bool = True

    def describe(self) -> str:
        return f"key {self.key!r} " + ("released" if self.released else "not released")

    def contains(self, outputs: Any) -> np.ndarray:
        released, _ = _keyed_outputs(outputs, "a key event").column(self.key)
        return released if self.released else ~released


class KeyValue(BaseModel):
    """``{o : o[key] ∈ event}``; with ``absent``, outputs that do not release ``key`` are members
    too, and with ``nulls``, outputs that release it as ``null``. With no ``event``, only those."""

    model_config = _MODEL_CONFIG

    kind: Literal["key_value"] = "key_value"
    key: Key
    event: ScalarEvent | None = None
    absent: bool = False
    nulls: bool = False

    @model_validator(mode="after")
    def _check(self) -> KeyValue:
        if self.event is None and not (self.absent or self.nulls):
            raise ValueError("a key_value event needs an event on the value, or absent/nulls (or both)")
        if self.event is not None and isinstance(self.event, DiscreteSet) and self.event.value_kind != "numbers":
            raise ValueError("the values of keyed outputs are numbers: a set of strings or tuples holds none")
        return self

    def describe(self) -> str:
        parts = [f"value({self.key!r}) ∈ {self.event.describe()}"] if self.event is not None else []
        if self.absent and self.nulls:
            parts.append(f"{self.key!r} not released or null")
        elif self.absent:
            parts.append(f"{self.key!r} not released")
        elif self.nulls:
            parts.append(f"value({self.key!r}) is null")
        return " or ".join(parts)

    def contains(self, outputs: Any) -> np.ndarray:
        keyed = _keyed_outputs(outputs, "a key_value event")
        released, value = keyed.column(self.key)
        null = released & np.isnan(value)
        mask = np.zeros(len(keyed), dtype=bool) if self.event is None else \
            self.event.contains(value) & released & ~null
        if self.absent:
            mask |= ~released
        if self.nulls:
            mask |= null
        return mask


class KeyCount(BaseModel):
    """``{o : |keys released by o| ∈ event}`` (the count includes keys released as ``null``)."""

    model_config = _MODEL_CONFIG

    kind: Literal["key_count"] = "key_count"
    event: ScalarEvent

    def describe(self) -> str:
        return f"|released keys| ∈ {self.event.describe()}"

    def contains(self, outputs: Any) -> np.ndarray:
        keyed = _keyed_outputs(outputs, "a key_count event")
        return self.event.contains(keyed.counts().astype(np.float64))


class KeySet(BaseModel):
    """``contains``: every key of ``keys`` released; ``outside``: some key not in ``keys``
    released (with an empty ``keys``, any key released). Keys are kept sorted."""

    model_config = _MODEL_CONFIG

    kind: Literal["key_set"] = "key_set"
    relation: Literal["contains", "outside"]
    keys: list[Key]

    @field_validator("keys")
    @classmethod
    def _sorted(cls, value: list[str]) -> list[str]:
        return _key_list(value, "a key_set event")

    @model_validator(mode="after")
    def _check(self) -> KeySet:
        if self.relation == "contains" and not self.keys:
            raise ValueError("'contains' needs at least one key (every output contains the empty set)")
        return self

    def describe(self) -> str:
        if self.relation == "contains":
            return f"released keys ⊇ {_key_set_text(self.keys)}"
        if not self.keys:
            return "some key released"
        return f"a key outside {_key_set_text(self.keys)} released"

    def contains(self, outputs: Any) -> np.ndarray:
        keyed = _keyed_outputs(outputs, "a key_set event")
        among = keyed.count_among(self.keys)
        if self.relation == "contains":
            return among == len(self.keys)
        return keyed.counts() > among


class KeySets(BaseModel):
    """The set of released keys equals one of ``sets`` (each a set of keys; ``[]`` is "no key
    released"). Each set is kept sorted, and the sets in the order given."""

    model_config = _MODEL_CONFIG

    kind: Literal["key_sets"] = "key_sets"
    sets: list[list[Key]]

    @field_validator("sets")
    @classmethod
    def _check_sets(cls, value: list[list[str]]) -> list[list[str]]:
        if not value:
            raise ValueError("a key_sets event needs at least one set of keys")
        if sum(len(v) for v in value) > MAX_EVENT_KEYS:
            raise ValueError(f"a key_sets event names more than {MAX_EVENT_KEYS} keys")
        sets = [_key_list(v, "a set of a key_sets event") for v in value]
        if len({tuple(v) for v in sets}) != len(sets):
            raise ValueError("a key_sets event repeats a set")
        return sets

    def describe(self) -> str:
        shown = ", ".join("∅" if not v else _key_set_text(v, 4) for v in self.sets[:4])
        more = f", … ({len(self.sets)} sets)" if len(self.sets) > 4 else ""
        return f"released keys ∈ {{{shown}{more}}}"

    def contains(self, outputs: Any) -> np.ndarray:
        return _keyed_outputs(outputs, "a key_sets event").key_set_in(self.sets)


class KeySum(BaseModel):
    """``{o : Σ_{k ∈ keys} v_k(o) ∈ event}``, with ``v_k(o)`` the value of key ``k`` in ``o`` and
    ``v_k(o) = 0`` when ``o`` does not release ``k`` (a group-by that leaves a group out adds nothing
    to the total); an output that releases one of the keys as ``null`` is no member (its sum is
    undefined, like ``NaN``). Keys are kept sorted (docs/audit.md §8)."""

    model_config = _MODEL_CONFIG

    kind: Literal["key_sum"] = "key_sum"
    keys: list[Key]
    event: ScalarEvent

    @field_validator("keys")
    @classmethod
    def _sorted(cls, value: list[str]) -> list[str]:
        keys = _key_list(value, "a key_sum event")
        if not keys:
            raise ValueError("a key_sum event needs at least one key")
        return keys

    @model_validator(mode="after")
    def _check(self) -> KeySum:
        if isinstance(self.event, DiscreteSet) and self.event.value_kind != "numbers":
            raise ValueError("the values of keyed outputs are numbers: a set of strings or tuples holds none")
        return self

    def describe(self) -> str:
        return f"Σ_{{k ∈ {_key_set_text(self.keys)}}} value(k) ∈ {self.event.describe()} (a key not released counts 0)"

    def sums(self, outputs: Any) -> np.ndarray:
        """``Σ_{k ∈ keys} v_k(o)`` of every output, float (n,): 0 when none of the keys is released,
        NaN when one is released as ``null``. Exact: one ``bincount`` over the entries of the keys."""
        keyed = _keyed_outputs(outputs, "a key_sum event")
        n = len(keyed)
        if not keyed.nnz:
            return np.zeros(n)
        inside = keyed.key_mask(self.keys)[keyed.key_index]
        return np.bincount(keyed.entry_rows()[inside], weights=keyed.values[inside], minlength=n)

    def contains(self, outputs: Any) -> np.ndarray:
        return self.event.contains(self.sums(outputs))


KEYED_EVENT_TYPES = (KeyReleased, KeyValue, KeyCount, KeySet, KeySets, KeySum)

Event = Annotated[Interval | IntervalUnion | DiscreteSet | Box | LatticeSet | RowSet | Projected | KeyReleased | KeyValue | KeyCount | KeySet | KeySets
                  | KeySum,
                  Field(discriminator="kind")]
"""Any event; JSON objects are told apart by their ``kind`` field."""

EventAdapter: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(title="Event"))

_EVENT_TYPES = (Interval, IntervalUnion, DiscreteSet, Box, LatticeSet, RowSet, Projected, *KEYED_EVENT_TYPES)


def parse_event(obj: Any) -> Event:
    """Validate ``obj`` (a dict, a JSON string/bytes, or an event model) into an event.

    Raises ``pydantic.ValidationError`` (a subclass of ``ValueError``) with the field at fault.
    """
    if isinstance(obj, _EVENT_TYPES):
        return obj
    if isinstance(obj, (str, bytes, bytearray)):
        return EventAdapter.validate_json(obj)
    return EventAdapter.validate_python(obj)


def event_contains(event: Event | dict, outputs: Any) -> np.ndarray:
    """Boolean mask of shape ``(n,)``: which outputs lie in ``event``. Vectorised over samples."""
    return parse_event(event).contains(outputs)


def count_in(event: Event | dict, outputs: Any) -> int:
    """The number of outputs in ``event`` (``a_t`` or ``b_t`` of method.md §1)."""
    return int(np.count_nonzero(event_contains(event, outputs)))


def count_many(events: Sequence[Event | dict], outputs: Any, block: int = 65_536) -> list[int]:
    """``count_in`` of each event on one sample, computing what the events share once per block of
    ``block`` outputs: the entries of vector and list outputs, each distinct statistic of the
    projection events, and the feature map of the learned ones (per width). Same counts as
    ``count_in``, each; the blocks bound the temporaries (the feature map of 65 536 vectors of
    10 entries is 23 MB)."""
    from app.stats.shapes import n_outputs, take_outputs

    parsed = [parse_event(e) for e in events]
    counts = [0] * len(parsed)
    groups: dict[str, list[int]] = {}
    for j, ev in enumerate(parsed):
        if isinstance(ev, Projected):
            groups.setdefault(ev.projection.model_dump_json(), []).append(j)
    n = n_outputs(outputs)
    for start in range(0, n, block):
        part = take_outputs(outputs, slice(start, min(n, start + block)))
        for j, ev in enumerate(parsed):
            if not isinstance(ev, Projected):
                counts[j] += int(np.count_nonzero(ev.contains(part)))
        if not groups:
            continue
        entries = _entries_of(part)
        features: dict[int, np.ndarray] = {}
        for members in groups.values():
            proj = parsed[members[0]].projection  # type: ignore[union-attr]
            phi = None
            if proj.kind == "linear":
                width = int(proj.width)  # type: ignore[arg-type]
                if width not in features:
                    features[width] = feature_map(part, width, entries=entries)
                phi = features[width]
            stat = proj.apply(part, entries, phi)
            for j in members:
                counts[j] += int(np.count_nonzero(parsed[j].contains_statistic(stat)))  # type: ignore[union-attr]
    return counts
