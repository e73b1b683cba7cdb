"""Output shapes: what a mechanism's outputs look like, declared or detected (docs/audit.md §1).

An :class:`OutputShape` is a JSON-serialisable contract for one output:

- ``container``: ``"scalar"``, ``"vector"`` (fixed ``length``), ``"list"`` (variable length,
  optionally at most ``max_length``) or ``"keyed"`` (a JSON object from string keys to numbers, a
  key left out being a key not released: a group-by with partition selection), with an optional
  declared universe ``keys`` (``None``: open, any key) and ``max_keys`` per output;
- ``values``: ``"real"``, ``"integer"``, ``"label"`` (strings; scalars only) or ``"discrete"``
  (integers or labels, whichever an answer uses: the legacy ``output_kind="discrete"``);
- ``lattice``: for reals on a grid ``offset + step·ℤ`` (rounded Laplace, a float implementation
  that snaps to a grid);
- ``nullable``: whether ``null`` ("no answer", SVT's ⊥) may appear, as a scalar or as an entry;
- ``labels`` / ``bounds``: an optional declared support (a label set; a closed numeric range).

Canonical in-memory representation (docs/protocol.md §3):

==============================  ===============================================================
shape                           array
==============================  ===============================================================
scalar real (lattice or not)    float64 ``(n,)``, NaN for null
scalar integer                  int64 ``(n,)``; float64 ``(n,)`` with NaN for null if nullable
scalar label                    object ``(n,)`` of ``str`` (``None`` for null)
scalar discrete                 as integer or label, whichever the answer holds
vector of length d              float64 ``(n, d)``, NaN for null
list                            :class:`ListSamples`: float64 ``(n, L)`` NaN-padded + int64
                                lengths ``(n,)``; entries before the length that are NaN are nulls
keyed                           :class:`~app.stats.keyed.KeyedSamples`: compressed sparse rows
                                over a sorted key table; no entry = not released, NaN = null
==============================  ===============================================================

:func:`detect_shape` infers a shape from samples and reports its evidence (lattice step found,
fraction of nulls, lengths seen); :func:`conformance` checks outputs against a shape and names
the first breach (type, length or support) with an offending sample. :func:`to_canonical`
converts decoded JSON outputs to the canonical arrays, raising :class:`ShapeBreach`.

Lattice detection is an approximate real GCD (Euclid's algorithm with a tolerance) of the gaps
between distinct values: all values lie on ``offset + step·ℤ`` up to float rounding.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from app.stats.keyed import KeyedInputError, KeyedSamples, concat_keyed, keyed_from_rows

__all__ = [
    "Breach",
    "KeyedSamples",
    "Lattice",
    "ListSamples",
    "OutputShape",
    "ShapeBreach",
    "ShapeDetection",
    "concat_outputs",
    "conformance",
    "detect_lattice",
    "detect_shape",
    "n_outputs",
    "outputs_nbytes",
    "own_outputs",
    "take_outputs",
    "to_canonical",
]

Container = Literal["scalar", "vector", "list", "keyed"]
Values = Literal["real", "integer", "label", "discrete"]
BreachKind = Literal["type", "length", "support"]

#: Integers beyond this lose precision in float64; integral floats above it are refused as integers.
MAX_EXACT_FLOAT_INT = 2.0**53
#: Relative tolerance of lattice membership (float rounding of ``k·step`` and of ``offset``).
LATTICE_RTOL = 1e-9
_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid")


class Lattice(BaseModel):
    """The grid ``offset + step·ℤ``; ``offset`` is normalised into ``[0, step)``."""

    model_config = _MODEL_CONFIG

    step: float = Field(gt=0, description="Spacing of the grid.")
    offset: float = Field(default=0.0, description="Any point of the grid; stored reduced into [0, step).")

    @field_validator("step", "offset")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("lattice step and offset must be finite")
        return value

    @model_validator(mode="after")
    def _reduce(self) -> Lattice:
        reduced = math.fmod(self.offset, self.step)
        if reduced < 0:
            reduced += self.step
        if abs(reduced - self.step) <= LATTICE_RTOL * self.step:
            reduced = 0.0
        object.__setattr__(self, "offset", reduced + 0.0)
        return self

    def index(self, values: Any) -> np.ndarray:
        """The nearest grid index ``round((v − offset)/step)`` of each value (float array)."""
        v = np.asarray(values, dtype=np.float64)
        return np.round((v - self.offset) / self.step)

    def tolerance(self, values: Any) -> np.ndarray:
        v = np.abs(np.asarray(values, dtype=np.float64))
        return LATTICE_RTOL * np.maximum(self.step, 1e-9 * v) + 64 * np.finfo(np.float64).eps * v

    def on_lattice(self, values: Any) -> np.ndarray:
        """Which values lie on the grid (NaN: False)."""
        v = np.asarray(values, dtype=np.float64)
        k = self.index(v)
        with np.errstate(invalid="ignore"):
            return np.abs(v - (self.offset + k * self.step)) <= self.tolerance(v)


class OutputShape(BaseModel):
    """The contract of one output (module docstring). ``OutputShape()`` is a real scalar."""

    model_config = _MODEL_CONFIG

    container: Container = "scalar"
    values: Values = "real"
    lattice: Lattice | None = None
    length: int | None = Field(default=None, ge=1, le=100_000, description="Vector length (vectors only).")
    max_length: int | None = Field(default=None, ge=1, le=100_000, description="Longest list allowed (lists only).")
    nullable: bool = False
    labels: list[str] | None = Field(default=None, description="Declared label set (label scalars).")
    bounds: tuple[float, float] | None = Field(default=None, description="Declared closed range of numeric values.")
    keys: list[str] | None = Field(default=None, max_length=100_000, description=(
        "Keyed outputs only: the declared universe of keys (strings; an integer key is sent as its decimal "
        "string). A released key outside it breaches the contract. Null: an open universe, any key."))
    max_keys: int | None = Field(default=None, ge=1, le=100_000, description=(
        "Keyed outputs only: the most keys one output may release."))

    @model_validator(mode="after")
    def _check(self) -> OutputShape:
        if self.container == "vector" and self.length is None:
            raise ValueError("a vector shape needs its length")
        if self.container != "vector" and self.length is not None:
            raise ValueError("length is for vectors; a list takes max_length")
        if self.container != "list" and self.max_length is not None:
            raise ValueError("max_length is for lists")
        if self.values in ("label", "discrete") and self.container != "scalar":
            raise ValueError("labels (strings) are allowed in scalar outputs only (a keyed output's keys are "
                             "strings; its values are real or integer)")
        if self.container != "keyed" and (self.keys is not None or self.max_keys is not None):
            raise ValueError("keys and max_keys are for keyed outputs")
        if self.keys is not None:
            if not self.keys:
                raise ValueError("a declared key universe must not be empty (null: an open universe)")
            if len(set(self.keys)) != len(self.keys):
                repeated = next(k for k in self.keys if self.keys.count(k) > 1)
                raise ValueError(f"the declared keys repeat the key {repeated!r}")
        if self.lattice is not None and self.values != "real":
            raise ValueError("a lattice is for real values (integers are the lattice ℤ already)")
        if self.labels is not None:
            if self.values not in ("label", "discrete"):
                raise ValueError("labels are for label (or discrete) scalars")
            if not self.labels:
                raise ValueError("a declared label set must not be empty")
        if self.bounds is not None:
            lo, hi = self.bounds
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ValueError("bounds must be finite with low <= high")
            if self.values == "label":
                raise ValueError("bounds are for numeric values")
        return self

    # ------------------------------------------------------------------ legacy kinds

    @classmethod
    def from_output_kind(cls, output_kind: str, dim: int | None = None) -> OutputShape:
        """An ``output_kind`` (``real | discrete | vector`` + ``dim`` ``| keyed``) as a shape. A kind
        names the container, not whether entries may be null: a vector or keyed kind reads ``null``
        entries (SVT's ⊥, a key released without a value); a declared ``OutputShape`` says more."""
        if output_kind == "real":
            return cls()
        if output_kind == "discrete":
            return cls(values="discrete")
        if output_kind == "vector":
            if dim is None:
                raise ValueError("a vector output kind needs its dim")
            return cls(container="vector", length=dim, nullable=True)
        if output_kind == "keyed":
            if dim is not None:
                raise ValueError("a keyed output kind takes no dim (declare max_keys in a shape)")
            return cls(container="keyed", nullable=True)
        raise ValueError(f"output_kind must be 'real', 'discrete', 'vector' or 'keyed'; got {output_kind!r}")

    @property
    def output_kind(self) -> str:
        """The closest ``output_kind``: ``real``, ``discrete``, ``vector`` (lists too) or ``keyed``."""
        if self.container == "keyed":
            return "keyed"
        if self.container != "scalar":
            return "vector"
        return "real" if self.values == "real" else "discrete"

    @property
    def dim(self) -> int | None:
        return self.length

    @property
    def numeric(self) -> bool:
        return self.values in ("real", "integer")

    @property
    def discrete(self) -> bool:
        """Whether each value takes countably many, separated values (integers, labels, a lattice)."""
        return self.values != "real" or self.lattice is not None

    @property
    def binary_capable(self) -> bool:
        """Whether the binary float64 answer format can carry this shape (docs/protocol.md §4);
        keyed outputs are JSON only (§3.2 says why)."""
        return self.values in ("real", "integer") and self.container != "keyed"

    def describe(self) -> str:
        base = {"real": "real", "integer": "integer", "label": "label", "discrete": "integer or label"}[self.values]
        if self.lattice is not None:
            base = f"real on the lattice {_g(self.lattice.offset)} + {_g(self.lattice.step)}ℤ"
        if self.container == "vector":
            text = f"vector of {self.length} × {base}"
        elif self.container == "list":
            text = f"list of {base}" + (f" (≤ {self.max_length})" if self.max_length else "")
        elif self.container == "keyed":
            universe = "open keys" if self.keys is None else (
                f"keys in {{{', '.join(repr(k) for k in self.keys[:6])}{', …' if len(self.keys) > 6 else ''}}}")
            text = f"keyed {base} ({universe}" + (f", ≤ {self.max_keys} per output" if self.max_keys else "") + ")"
        else:
            text = f"{base} scalar"
        return text + (", null allowed" if self.nullable else "")


def _g(x: float) -> str:
    return f"{x:.10g}"


class Breach(BaseModel):
    """What broke a shape: ``kind`` (type, length or support), a sentence, and an offending sample."""

    model_config = _MODEL_CONFIG

    kind: BreachKind
    detail: str
    index: int | None = Field(default=None, description="Index of the offending output in its batch.")
    sample: JsonValue = Field(default=None, description="The offending output (truncated if long).")


class ShapeBreach(ValueError):
    """Outputs do not fit a shape; ``breach`` says how."""

    def __init__(self, breach: Breach) -> None:
        super().__init__(breach.detail)
        self.breach = breach


# --------------------------------------------------------------------------------------------
# list samples


@dataclass(frozen=True, eq=False)
class ListSamples:
    """Variable-length outputs: ``values`` (n, L) float64 padded with NaN after each row's
    ``lengths[i]`` entries; NaN before the length is a null entry."""

    values: np.ndarray
    lengths: np.ndarray

    def __post_init__(self) -> None:
        if self.values.ndim != 2 or self.lengths.ndim != 1 or self.values.shape[0] != self.lengths.shape[0]:
            raise ValueError("ListSamples needs values (n, L) and lengths (n,)")

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def width(self) -> int:
        return int(self.values.shape[1])

    def __getitem__(self, index: Any) -> ListSamples:
        if isinstance(index, (int, np.integer)):
            index = slice(int(index), int(index) + 1)
        return ListSamples(self.values[index], self.lengths[index])

    def padded(self, width: int) -> np.ndarray:
        if width < self.width:
            raise ValueError("cannot pad to a smaller width")
        if width == self.width:
            return self.values
        out = np.full((len(self), width), np.nan)
        out[:, : self.width] = self.values
        return out

    def valid_mask(self) -> np.ndarray:
        """(n, L) True where an entry exists (before the row's length)."""
        return np.arange(self.width)[None, :] < self.lengths[:, None]

    def row(self, i: int) -> list[float | None]:
        return [None if math.isnan(v) else float(v) for v in self.values[i, : int(self.lengths[i])]]

    def tolist(self) -> list[list[float | None]]:
        return [self.row(i) for i in range(len(self))]


def n_outputs(outputs: Any) -> int:
    return len(outputs) if isinstance(outputs, (ListSamples, KeyedSamples)) else int(np.asarray(outputs).shape[0])


def take_outputs(outputs: Any, index: Any) -> Any:
    """Rows ``index`` (a slice or an index array) of canonical outputs."""
    if isinstance(outputs, (ListSamples, KeyedSamples)):
        return outputs[index]
    return np.asarray(outputs)[index]


def outputs_nbytes(outputs: Any) -> int:
    """The bytes the arrays of canonical outputs hold (for an object array of labels, its
    pointers plus the size of each distinct label once: equal labels are one shared object)."""
    if isinstance(outputs, ListSamples):
        return int(outputs.values.nbytes + outputs.lengths.nbytes)
    if isinstance(outputs, KeyedSamples):
        return int(outputs.indptr.nbytes + outputs.key_index.nbytes + outputs.values.nbytes)
    arr = np.asarray(outputs)
    if arr.dtype == object:
        return int(arr.nbytes + sum(sys.getsizeof(v) for v in {id(v): v for v in arr.ravel()}.values()))
    return int(arr.nbytes)


def own_outputs(outputs: Any) -> Any:
    """A copy of canonical outputs that holds only its own rows: a slice of a larger array (a
    view) keeps the whole array alive, which a copy lets go."""
    if isinstance(outputs, ListSamples):
        return ListSamples(outputs.values.copy(), outputs.lengths.copy())
    if isinstance(outputs, KeyedSamples):
        return KeyedSamples(outputs.keys, outputs.indptr.copy(), outputs.key_index.copy(), outputs.values.copy())
    return np.array(outputs, copy=True)


def concat_outputs(parts: Sequence[Any]) -> Any:
    """Concatenate canonical outputs of one shape (lists are padded to the widest; keyed outputs
    are put over the union of their key tables)."""
    if not parts:
        raise ValueError("nothing to concatenate")
    if isinstance(parts[0], KeyedSamples):
        if not all(isinstance(p, KeyedSamples) for p in parts):
            raise ValueError("cannot concatenate keyed outputs with other outputs")
        return concat_keyed(parts)
    if isinstance(parts[0], ListSamples):
        width = max(p.width for p in parts)
        return ListSamples(np.concatenate([p.padded(width) for p in parts]),
                           np.concatenate([p.lengths for p in parts]))
    return np.concatenate([np.asarray(p) for p in parts])


# --------------------------------------------------------------------------------------------
# decoded JSON -> canonical arrays


def _type_name(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a non-integer number", str: "a string",
            list: "an array", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _short(value: Any) -> JsonValue:
    """A JSON-able, bounded copy of an offending output."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, dict):
        items = list(value.items())
        shown: dict[str, JsonValue] = {str(k): _short(v) for k, v in items[:20]}
        if len(items) > 20:
            shown["…"] = f"{len(items) - 20} more keys"
        return shown
    if isinstance(value, (list, tuple)):
        head = [_short(v) for v in list(value)[:20]]
        return head + (["…"] if len(value) > 20 else [])
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return _short(float(value))
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + "…"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]


def _breach(kind: BreachKind, detail: str, index: int | None = None, sample: Any = None) -> ShapeBreach:
    return ShapeBreach(Breach(kind=kind, detail=detail, index=index, sample=_short(sample)))


def _first(samples: Sequence[Any], bad: Any) -> int:
    for i, v in enumerate(samples):
        if bad(v):
            return i
    return -1  # pragma: no cover


def _numbers(samples: Sequence[Any], shape: OutputShape, what: str) -> np.ndarray:
    """Scalars that must be numbers (or null when nullable) -> float64 with NaN for null."""
    allowed = {int, float} | ({type(None)} if shape.nullable else set())
    kinds = set(map(type, samples))
    if not kinds <= allowed:
        i = _first(samples, lambda v: type(v) not in allowed)
        v = samples[i]
        hint = " (the shape allows no null)" if v is None else (
            " (booleans are not accepted: send 0/1)" if type(v) is bool else "")
        raise _breach("type", f"{what} must be numbers; output {i} is {_type_name(v)}{hint}", i, v)
    try:
        arr = np.array(samples, dtype=np.float64)
    except OverflowError:
        i = _first(samples, lambda v: type(v) is int and abs(v) > 1e308)
        raise _breach("type", f"output {i} is an integer too large for float64", i, str(samples[i])) from None
    if np.isinf(arr).any():
        i = int(np.flatnonzero(np.isinf(arr))[0])
        raise _breach("type", f"output {i} is not finite", i, samples[i])
    return arr


def _check_integral(arr: np.ndarray, raw: Sequence[Any] | None, what: str, row_of: Any = None) -> None:
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(arr) & ((arr != np.round(arr)) | (np.abs(arr) > MAX_EXACT_FLOAT_INT))
    if bad.any():
        pos = np.argwhere(bad)[0]
        i = int(pos[0])
        sample = raw[i] if raw is not None else (arr[i] if row_of is None else row_of(i))
        value = arr[tuple(pos)]
        reason = "beyond ±2^53" if abs(value) > MAX_EXACT_FLOAT_INT else "not an integer"
        raise _breach("type", f"{what} must be integers (16.0 counts as 16); output {i} holds {float(value)!r}, {reason}",
                      i, sample)


def _scalar(samples: list, shape: OutputShape) -> np.ndarray:
    values = shape.values
    if values == "discrete":
        kinds = set(map(type, samples)) - {type(None)}
        values = "label" if kinds == {str} else "integer"
        if kinds == {int, str} or (str in kinds and len(kinds) > 1):
            i = _first(samples, lambda v: type(v) is not str and v is not None)
            raise _breach("type", "discrete outputs must be all integers or all strings, not a mix", i, samples[i])
    if values == "label":
        allowed = {str} | ({type(None)} if shape.nullable else set())
        if not set(map(type, samples)) <= allowed:
            i = _first(samples, lambda v: type(v) not in allowed)
            raise _breach("type", f"label outputs must be strings; output {i} is {_type_name(samples[i])}",
                          i, samples[i])
        arr = np.empty(len(samples), dtype=object)
        arr[:] = samples
        return arr
    kinds = set(map(type, samples))
    if values == "integer" and kinds == {int}:
        try:
            return np.array(samples, dtype=np.int64)
        except OverflowError:
            i = _first(samples, lambda v: not -(2**63) <= v < 2**63)
            raise _breach("type", f"integer output {i} does not fit in a signed 64-bit integer", i,
                          str(samples[i])) from None
    arr = _numbers(samples, shape, "integer outputs" if values == "integer" else "real outputs")
    if values == "integer":
        _check_integral(arr, samples, "integer outputs")
        if not shape.nullable:
            return arr.astype(np.int64)
    return arr


def _rows(samples: list, shape: OutputShape) -> tuple[list, np.ndarray]:
    bad_row = [i for i, row in enumerate(samples) if type(row) is not list]
    if bad_row:
        i = bad_row[0]
        what = "vector" if shape.container == "vector" else "list"
        raise _breach("type", f"{what} outputs must be arrays; output {i} is {_type_name(samples[i])}", i, samples[i])
    return samples, np.fromiter(map(len, samples), dtype=np.int64, count=len(samples))


def _entries(rows: list, lengths: np.ndarray, shape: OutputShape) -> np.ndarray:
    """All entries of all rows, flat, as float64 (NaN for null), type-checked."""
    flat = list(chain.from_iterable(rows))
    allowed = {int, float} | ({type(None)} if shape.nullable else set())
    if not set(map(type, flat)) <= allowed:
        pos = _first(flat, lambda v: type(v) not in allowed)
        i = int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
        v = flat[pos]
        hint = " (the shape allows no null)" if v is None else (
            " (booleans are not accepted)" if type(v) is bool else "")
        raise _breach("type", f"entries must be numbers; output {i} holds {_type_name(v)}{hint}", i, rows[i])
    try:
        arr = np.array(flat, dtype=np.float64)
    except OverflowError:
        raise _breach("type", "an integer entry is too large for float64") from None
    if np.isinf(arr).any():
        pos = int(np.flatnonzero(np.isinf(arr))[0])
        i = int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
        raise _breach("type", f"output {i} holds a non-finite entry", i, rows[i])
    return arr


def to_canonical(shape: OutputShape, samples: Any) -> Any:
    """Decoded JSON outputs (a list) -> the canonical array for ``shape`` (module docstring).

    Checks type and length (not the declared support: :func:`conformance` does). Raises
    :class:`ShapeBreach`. Float-valued integers such as ``16.0`` are accepted as integers.
    """
    if not isinstance(samples, list):
        raise _breach("type", f"outputs must be a list, got {_type_name(samples)}")
    if shape.container == "scalar":
        return _scalar(samples, shape)
    if shape.container == "keyed":
        try:
            return keyed_from_rows(samples, nullable=shape.nullable, integer=shape.values == "integer",
                                   max_keys=shape.max_keys)
        except KeyedInputError as exc:
            raise _breach(exc.kind, exc.detail, exc.index, exc.sample) from None  # type: ignore[arg-type]
    rows, lengths = _rows(samples, shape)
    if shape.container == "vector":
        bad = np.flatnonzero(lengths != shape.length)
        if bad.size:
            i = int(bad[0])
            raise _breach("length", f"vector outputs must have length {shape.length}; output {i} has {lengths[i]}",
                          i, rows[i])
    elif shape.max_length is not None:
        bad = np.flatnonzero(lengths > shape.max_length)
        if bad.size:
            i = int(bad[0])
            raise _breach("length", f"list outputs may hold at most {shape.max_length} entries; output {i} has "
                          f"{lengths[i]}", i, rows[i])
    flat = _entries(rows, lengths, shape)
    if shape.values == "integer":
        _check_integral_rows(flat, np.cumsum(lengths), rows)
    if shape.container == "vector":
        assert shape.length is not None  # OutputShape's validator: a vector shape has its length
        return flat.reshape(len(rows), shape.length) if rows else np.empty((0, shape.length))
    width = int(lengths.max()) if lengths.size else 0
    values = np.full((len(rows), max(width, 1)), np.nan)
    if flat.size:
        row_idx = np.repeat(np.arange(len(rows)), lengths)
        starts = np.cumsum(lengths) - lengths
        col_idx = np.arange(flat.size) - np.repeat(starts, lengths)
        values[row_idx, col_idx] = flat
    return ListSamples(values, lengths)


def _check_integral_rows(flat: np.ndarray, ends: np.ndarray, rows: list) -> None:
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(flat) & ((flat != np.round(flat)) | (np.abs(flat) > MAX_EXACT_FLOAT_INT))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        i = int(np.searchsorted(ends, pos, side="right"))
        raise _breach("type", f"entries must be integers (16.0 counts as 16); output {i} holds {float(flat[pos])!r}",
                      i, rows[i])


# --------------------------------------------------------------------------------------------
# conformance


def _support_breach(shape: OutputShape, values: np.ndarray, row_of: Any) -> ShapeBreach | None:
    """Lattice and bounds checks on a float array (NaN = null, skipped)."""
    present = ~np.isnan(values)
    if shape.lattice is not None:
        off = present & ~shape.lattice.on_lattice(values)
        if off.any():
            pos = np.argwhere(off)[0]
            i = int(pos[0])
            return _breach("support", f"output {i} holds {float(values[tuple(pos)])!r}, which is off the lattice "
                           f"{_g(shape.lattice.offset)} + {_g(shape.lattice.step)}ℤ", i, row_of(i))
    if shape.bounds is not None:
        lo, hi = shape.bounds
        with np.errstate(invalid="ignore"):
            out = present & ((values < lo) | (values > hi))
        if out.any():
            pos = np.argwhere(out)[0]
            i = int(pos[0])
            return _breach("support", f"output {i} holds {float(values[tuple(pos)])!r}, outside the declared range "
                           f"[{_g(lo)}, {_g(hi)}]", i, row_of(i))
    return None


def conformance(shape: OutputShape, outputs: Any) -> Breach | None:
    """``None`` when every output fits ``shape``, else the first :class:`Breach` (type, length or
    support) with an offending sample. ``outputs``: decoded JSON (a list) or canonical arrays."""
    if isinstance(outputs, list):
        try:
            outputs = to_canonical(shape, outputs)
        except ShapeBreach as exc:
            return exc.breach
    else:
        breach = _canonical_type_breach(shape, outputs)
        if breach is not None:
            return breach
    if isinstance(outputs, KeyedSamples):
        return _keyed_support_breach(shape, outputs)
    if isinstance(outputs, ListSamples):
        values, row_of = outputs.values, outputs.row
    else:
        arr = np.asarray(outputs)
        if arr.dtype == object:  # labels
            if shape.labels is not None:
                known = set(shape.labels)
                for i, v in enumerate(arr):
                    if v is not None and v not in known:
                        return Breach(kind="support", detail=f"output {i} is the label {v!r}, not a declared one",
                                      index=i, sample=_short(v))
            return None
        values = arr.astype(np.float64)
        row_of = (lambda i: arr[i].tolist())  # noqa: E731
    found = _support_breach(shape, values, row_of)
    return None if found is None else found.breach


def _keyed_support_breach(shape: OutputShape, outputs: KeyedSamples) -> Breach | None:
    """A released key outside the declared universe, or a value off the lattice or the bounds."""
    if shape.keys is not None and outputs.nnz:
        outside = ~outputs.key_mask(shape.keys)[outputs.key_index]
        if outside.any():
            pos = int(np.argmax(outside))
            i = int(outputs.entry_rows()[pos])
            key = outputs.keys[int(outputs.key_index[pos])]
            return Breach(kind="support", detail=f"output {i} releases the key {key!r}, which is not a declared key",
                          index=i, sample=_short(outputs.row(i)))
    rows = outputs.entry_rows()
    found = _support_breach(shape, outputs.values, lambda pos: outputs.row(int(rows[pos])))
    if found is None:
        return None
    # _support_breach names the entry; the breach names the output that holds it
    pos = found.breach.index if found.breach.index is not None else 0
    i = int(rows[pos])
    return found.breach.model_copy(update={"index": i, "detail": found.breach.detail.replace(
        f"output {pos} holds", f"output {i} holds", 1)})


def _keyed_type_breach(shape: OutputShape, outputs: Any) -> Breach | None:
    if not isinstance(outputs, KeyedSamples):
        sample = outputs.row(0) if isinstance(outputs, ListSamples) and len(outputs) else (
            np.asarray(outputs)[0] if not isinstance(outputs, ListSamples) and len(np.asarray(outputs)) else None)
        return Breach(kind="type", detail=f"expected {shape.describe()}, got arrays, not objects", index=0,
                      sample=_short(sample))
    counts = outputs.counts()
    if shape.max_keys is not None and counts.size and int(counts.max()) > shape.max_keys:
        i = int(np.argmax(counts > shape.max_keys))
        return Breach(kind="length", detail=f"output {i} releases {int(counts[i])} keys, more than max_keys="
                      f"{shape.max_keys}", index=i, sample=_short(outputs.row(i)))
    values = outputs.values
    rows = outputs.entry_rows()
    nulls = np.isnan(values)
    if nulls.any() and not shape.nullable:
        i = int(rows[int(np.argmax(nulls))])
        return Breach(kind="type", detail=f"output {i} releases a key with a null value, and the shape allows none",
                      index=i, sample=_short(outputs.row(i)))
    if shape.values == "integer":
        with np.errstate(invalid="ignore"):
            bad = ~nulls & (values != np.round(values))
        if bad.any():
            i = int(rows[int(np.argmax(bad))])
            return Breach(kind="type", detail=f"expected integers; output {i} holds {float(values[bad][0])!r}",
                          index=i, sample=_short(outputs.row(i)))
    return None


def _canonical_type_breach(shape: OutputShape, outputs: Any) -> Breach | None:
    """Type/length checks on arrays already in memory (e.g. from the binary format)."""
    if shape.container == "keyed" or isinstance(outputs, KeyedSamples):
        if shape.container != "keyed":
            return Breach(kind="type", detail=f"expected {shape.describe()}, got keyed outputs (objects)", index=0,
                          sample=_short(outputs.row(0)) if len(outputs) else None)
        return _keyed_type_breach(shape, outputs)
    if isinstance(outputs, ListSamples):
        if shape.container != "list":
            return Breach(kind="type", detail=f"expected {shape.describe()}, got variable-length lists",
                          index=0, sample=_short(outputs.row(0)) if len(outputs) else None)
        if shape.max_length is not None and len(outputs) and int(outputs.lengths.max()) > shape.max_length:
            i = int(np.argmax(outputs.lengths > shape.max_length))
            return Breach(kind="length", detail=f"output {i} has {int(outputs.lengths[i])} entries, more than "
                          f"{shape.max_length}", index=i, sample=_short(outputs.row(i)))
        values = outputs.values[outputs.valid_mask()]
    else:
        arr = np.asarray(outputs)
        if shape.container == "scalar" and arr.ndim != 1:
            return Breach(kind="type", detail=f"expected {shape.describe()}, got arrays of shape {arr.shape[1:]}",
                          index=0, sample=_short(arr[0]) if len(arr) else None)
        if shape.container != "scalar" and arr.ndim != 2:
            return Breach(kind="type", detail=f"expected {shape.describe()}, got scalars", index=0,
                          sample=_short(arr[0]) if len(arr) else None)
        if shape.container == "vector" and arr.shape[1] != shape.length:
            return Breach(kind="length", detail=f"vector outputs must have length {shape.length}; got {arr.shape[1]}",
                          index=0, sample=_short(arr[0]) if len(arr) else None)
        if arr.dtype == object or arr.dtype.kind in "US":
            if shape.values not in ("label", "discrete"):
                return Breach(kind="type", detail=f"expected {shape.describe()}, got labels", index=0,
                              sample=_short(arr[0]) if len(arr) else None)
            return None
        if shape.values == "label":
            return Breach(kind="type", detail="expected labels, got numbers", index=0,
                          sample=_short(arr[0]) if len(arr) else None)
        values = arr.astype(np.float64).reshape(-1)
    nulls = np.isnan(values)
    if nulls.any() and not shape.nullable:
        return Breach(kind="type", detail="an output holds null (NaN) but the shape allows none", index=None)
    if shape.values in ("integer", "discrete"):
        present = values[~nulls]
        bad = present != np.round(present)
        if bad.any():
            return Breach(kind="type", detail=f"expected integers; got {float(present[bad][0])!r}", index=None,
                          sample=_short(float(present[bad][0])))
    return None


# --------------------------------------------------------------------------------------------
# detection


def _approx_gcd(a: float, b: float, tol: float) -> float:
    """Euclid's algorithm on reals, stopping when the remainder is within ``tol``."""
    a, b = max(a, b), min(a, b)
    while b > tol:
        r = math.fmod(a, b)
        if r > b - tol:
            r = 0.0
        a, b = b, r
    return a


def _fits(v: np.ndarray, step: float, origin: float, tol: float) -> bool:
    k = np.round((v - origin) / step)
    return bool(np.all(np.abs(v - (origin + k * step)) <= tol))


def detect_lattice(values: Any, *, max_points: int = 200_000, min_distinct: int = 5) -> Lattice | None:
    """The coarsest grid ``offset + step·ℤ`` holding every finite value, or ``None``.

    An approximate GCD of the gaps between distinct sorted values (Euclid's algorithm with a
    tolerance of 10⁻¹² of the largest |value|, far above float rounding and far below any grid
    worth the name), then a least-squares refinement of the step, then the shortest decimal
    rendering of the step that still fits. ``None`` with fewer than ``min_distinct`` distinct
    values (any few points lie on some grid), when the GCD falls to the tolerance (continuous
    values), or when the grid has more than ``max_points`` points across the observed range.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = np.unique(v[np.isfinite(v)])
    if v.size < max(2, min_distinct):
        return None
    span = float(v[-1] - v[0])
    scale = max(1.0, float(np.max(np.abs(v))))
    tol = 1e-12 * scale
    gaps = np.diff(v)
    g = float(gaps.min())
    if g <= 10 * tol:
        return None
    for _ in range(200):
        ratio = gaps / g
        bad = np.abs(ratio - np.round(ratio)) * g > tol * (2 + ratio)
        if not bad.any():
            break
        g = _approx_gcd(g, float(gaps[bad][0]), tol)
        if g <= 10 * tol or span / g > max_points:
            return None
    else:  # pragma: no cover
        return None
    if span / g > max_points:
        return None
    # least squares on the integer indices, then the shortest decimal step that fits
    k = np.round((v - v[0]) / g)
    if k[-1] > 0:
        g = float(np.dot(k, v - v[0]) / np.dot(k, k))
    fit_tol = 4 * tol + 1e-9 * g
    for digits in range(1, 16):
        short = float(f"{g:.{digits}g}")
        if short > 0 and abs(short - g) <= 1e-6 * g and _fits(v, short, float(v[0]), fit_tol):
            g = short
            break
    residues = np.mod(v - v[0], g)
    residues = np.where(residues > g / 2, residues - g, residues)
    offset = float(v[0] + residues.mean())
    for digits in range(1, 16):
        short = float(f"{math.fmod(offset, g):.{digits}g}")
        if _fits(v, g, short, fit_tol):
            offset = short
            break
    return Lattice(step=g, offset=offset)


class ShapeDetection(BaseModel):
    """A detected shape with the evidence it rests on."""

    model_config = ConfigDict(frozen=True)

    shape: OutputShape
    evidence: dict[str, JsonValue]


def _scalar_evidence(values: np.ndarray) -> dict[str, Any]:
    finite = values[np.isfinite(values)]
    distinct, counts = np.unique(finite, return_counts=True) if finite.size else (finite, np.array([], int))
    tied = int(counts[counts > 1].sum())
    return {"distinct_values": int(distinct.size), "tied_fraction": round(tied / max(1, finite.size), 4),
            "range": [float(finite.min()), float(finite.max())] if finite.size else None}


def detect_shape(samples: Any, *, max_lattice_points: int = 200_000) -> ShapeDetection:
    """Infer the shape of ``samples`` (decoded JSON outputs, or canonical arrays) with evidence.

    - strings → label scalar; numbers → integer scalar when all are integral (``16.0`` too), a
      real on a lattice when :func:`detect_lattice` finds a grid, else a real scalar;
    - arrays of one common length → vector; of several lengths → list (``max_length`` is not
      inferred: the longest seen is in the evidence);
    - objects → keyed, with an open universe of keys (the keys seen are evidence, not a contract:
      a key the sample never showed may still be released);
    - ``null`` anywhere → nullable.

    Raises ``ValueError`` for outputs no shape describes (booleans, objects whose values are not
    numbers, a mix of scalars and arrays, an empty sample).
    """
    if isinstance(samples, (ListSamples, KeyedSamples)):
        samples = samples.tolist()
    elif isinstance(samples, np.ndarray):
        samples = [None if isinstance(v, float) and math.isnan(v) else v for v in samples.tolist()] \
            if samples.ndim == 1 else [[None if isinstance(x, float) and math.isnan(x) else x for x in row]
                                       for row in samples.tolist()]
    if not isinstance(samples, list) or not samples:
        raise ValueError("shape detection needs a non-empty list of outputs")
    n = len(samples)
    kinds = set(map(type, samples))
    evidence: dict[str, Any] = {"n": n}
    if dict in kinds:
        if kinds != {dict}:
            raise ValueError("outputs mix objects and other values")
        return _detect_keyed(samples, evidence, max_lattice_points)
    if bool in kinds:
        raise ValueError("outputs hold booleans; no output shape describes them (send 0/1)")
    if list in kinds:
        if kinds - {list}:
            raise ValueError("outputs mix arrays and scalars")
        lengths = np.fromiter(map(len, samples), dtype=np.int64, count=n)
        flat = list(chain.from_iterable(samples))
        ftypes = set(map(type, flat))
        if ftypes - {int, float, type(None)}:
            raise ValueError(f"array entries must be numbers or null; got {sorted(t.__name__ for t in ftypes)}")
        values = np.array(flat, dtype=np.float64) if flat else np.empty(0)
        nullable = bool(np.isnan(values).any())
        distinct_lengths = np.unique(lengths)
        evidence.update({"lengths": distinct_lengths[:50].tolist(), "max_length": int(lengths.max()),
                         "null_fraction": round(float(np.isnan(values).mean()) if values.size else 0.0, 4)})
        evidence.update(_scalar_evidence(values))
        present = values[~np.isnan(values)]
        integral = bool(present.size and np.all(present == np.round(present)) and
                        np.all(np.abs(present) <= MAX_EXACT_FLOAT_INT))
        lattice = None if integral or not present.size else detect_lattice(present, max_points=max_lattice_points)
        evidence["lattice"] = None if lattice is None else lattice.model_dump()
        kind: Values = "integer" if integral else "real"
        if distinct_lengths.size == 1 and distinct_lengths[0] >= 1:
            shape = OutputShape(container="vector", length=int(distinct_lengths[0]), values=kind,
                                lattice=lattice, nullable=nullable)
        else:
            shape = OutputShape(container="list", values=kind, lattice=lattice, nullable=nullable)
        return ShapeDetection(shape=shape, evidence=evidence)
    scalar_kinds = kinds - {type(None)}
    nulls = sum(1 for v in samples if v is None)
    evidence["null_fraction"] = round(nulls / n, 4)
    nullable = nulls > 0
    if not scalar_kinds:
        raise ValueError("every output is null; the shape cannot be told")
    if str in scalar_kinds:
        if scalar_kinds != {str}:
            raise ValueError("outputs mix strings and numbers")
        labels = sorted({v for v in samples if v is not None})
        evidence.update({"distinct_values": len(labels), "labels": labels[:50]})
        return ShapeDetection(shape=OutputShape(values="label", nullable=nullable), evidence=evidence)
    values = np.array(samples, dtype=np.float64)
    evidence.update(_scalar_evidence(values))
    present = values[~np.isnan(values)]
    if np.isinf(present).any():
        raise ValueError("outputs hold non-finite numbers")
    integral = bool(np.all(present == np.round(present)) and np.all(np.abs(present) <= MAX_EXACT_FLOAT_INT))
    evidence["integral"] = integral
    if integral:
        evidence["lattice"] = None
        return ShapeDetection(shape=OutputShape(values="integer", nullable=nullable), evidence=evidence)
    lattice = detect_lattice(present, max_points=max_lattice_points)
    evidence["lattice"] = None if lattice is None else lattice.model_dump()
    return ShapeDetection(shape=OutputShape(values="real", lattice=lattice, nullable=nullable), evidence=evidence)


def _detect_keyed(samples: list, evidence: dict[str, Any], max_lattice_points: int) -> ShapeDetection:
    try:
        keyed = keyed_from_rows(samples, nullable=True, integer=False)
    except KeyedInputError as exc:
        raise ValueError(f"objects that are not keyed outputs: {exc.detail}") from None
    values = keyed.values
    counts = keyed.counts()
    frequencies = keyed.key_frequencies()
    order = np.argsort(-frequencies, kind="stable")[:50]
    evidence.update({"distinct_keys": len(keyed.keys), "keys": [keyed.keys[int(i)] for i in order],
                     "keys_per_output": [int(counts.min()), int(counts.max())] if counts.size else None,
                     "null_fraction": round(float(np.isnan(values).mean()) if values.size else 0.0, 4)})
    evidence.update(_scalar_evidence(values))
    present = values[~np.isnan(values)]
    integral = bool(present.size and np.all(present == np.round(present))
                    and np.all(np.abs(present) <= MAX_EXACT_FLOAT_INT))
    lattice = None if integral or not present.size else detect_lattice(present, max_points=max_lattice_points)
    evidence["lattice"] = None if lattice is None else lattice.model_dump()
    shape = OutputShape(container="keyed", values="integer" if integral else "real", lattice=lattice,
                        nullable=bool(np.isnan(values).any()))
    return ShapeDetection(shape=shape, evidence=evidence)
