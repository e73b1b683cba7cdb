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

Membership: :func:`event_contains` returns a boolean mask and :func:`count_in` the count ``a_t``
(or ``b_t``) of method.md §1. ``NaN`` outputs are never members. A shape that does not fit the
event (a tuple set on 1-D outputs, a box of dimension 3 on vectors of dimension 2, an interval on
strings, ...) raises ``ValueError``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

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
    "Box",
    "DiscreteSet",
    "Event",
    "EventAdapter",
    "Interval",
    "IntervalUnion",
    "count_in",
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


SetValue = Union[int, float, str, list[Union[int, float]]]


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
        if kind == "numbers":
            if any(math.isnan(v) for v in value):
                raise ValueError("set values must not be NaN (NaN outputs are never members)")
        elif kind == "tuples":
            lengths = {len(v) for v in value}
            if 0 in lengths:
                raise ValueError("tuple values must not be empty")
            if len(lengths) > 1:
                raise ValueError(f"all tuple values must have the same length; got lengths {sorted(lengths)}")
            if any(math.isnan(x) for v in value for x in v):
                raise ValueError("tuple values must not contain NaN")
        return value

    @property
    def value_kind(self) -> Literal["numbers", "strings", "tuples"]:
        return _value_kind(self.values[0])

    @property
    def dimension(self) -> int | None:
        """The tuple length for a set of tuples, ``None`` for a set of scalars."""
        return len(self.values[0]) if self.value_kind == "tuples" else None

    def describe(self) -> str:
        if self.value_kind == "tuples":
            items = ["(" + ",".join(_fmt(x) for x in v) + ")" for v in self.values]
        else:
            items = [_fmt(v) for v in self.values]
        return "{" + ", ".join(items) + "}"

    def contains(self, outputs: Any) -> np.ndarray:
        kind = self.value_kind
        if kind == "tuples":
            dim = len(self.values[0])
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


Event = Annotated[Union[Interval, IntervalUnion, DiscreteSet, Box], Field(discriminator="kind")]
"""Any event; JSON objects are told apart by their ``kind`` field."""

EventAdapter: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(title="Event"))

_EVENT_TYPES = (Interval, IntervalUnion, DiscreteSet, Box)


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
