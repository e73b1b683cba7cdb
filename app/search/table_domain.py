"""Tabular input domains: a database is a table of rows, one person (the privacy unit) may own
many rows, and a neighbour adds, removes or replaces one unit or one row (docs/search.md §8).

The JSON form, as the ``table`` field of :class:`app.search.domain.InputDomain`::

    {"table": {"columns": {"user":  {"type": "id"},
                           "city":  {"type": "category", "values": ["a", "b", "c", "d"]},
                           "spend": {"type": "real", "low": 0, "high": 100}},
               "privacy_unit": "user",
               "rows_per_unit": {"min": 1, "max": 5}},
     "size": {"min": 0, "max": 200},
     "neighbours": ["add_remove_unit"]}

- column types: ``id`` (a JSON integer or string naming something, e.g. a person), ``integer`` and
  ``real`` (optional ``low``/``high``; without them any finite value), ``category`` (``values``, or
  open: any string), ``bool``;
- ``privacy_unit`` names an ``id`` column; without it every row is its own unit;
- ``rows_per_unit``: how many rows one unit owns, ``min`` (default 1) to ``max`` (absent: unbounded,
  which is how a pipeline that promises to bound contributions is tested);
- ``size`` counts **units**;
- neighbours: ``add_remove_unit`` (one unit with all its rows), ``replace_unit`` (one unit's rows
  replaced by other rows, the number of units kept), ``add_remove_row`` and ``replace_row`` (one
  row, for row-level claims).

A database is the JSON list of its rows, each an object with exactly the declared columns:
``[{"user": 7, "city": "a", "spend": 12.5}, …]``. Rows form a multiset (their order does not
matter: the same rows in another order are the same database, at distance 0), and a unit is the
multiset of rows that carry its id.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

from app.search.bounds import INT64_MAX, check_range, number_problem

__all__ = ["BoolColumn", "CategoryColumn", "IdColumn", "IntegerColumn", "RealColumn", "RowsPerUnit", "TableSpec",
           "TABLE_RELATIONS", "MAX_COLUMNS", "MAX_ROWS", "row_key", "table_problem", "table_relation"]

MAX_COLUMNS = 64
#: The most rows a database of a table domain may hold in all (a database is sent as one JSON list).
MAX_ROWS = 100_000
MAX_CATEGORIES = 1_000
TABLE_RELATIONS = ("add_remove_unit", "replace_unit", "add_remove_row", "replace_row")


class IdColumn(BaseModel):
    """An identifier: a JSON integer or string (e.g. the person a row belongs to)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["id"]


class IntegerColumn(BaseModel):
    """A JSON integer, in ``[low, high]`` when given."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["integer"]
    low: StrictInt | None = Field(None, ge=-INT64_MAX, le=INT64_MAX)
    high: StrictInt | None = Field(None, ge=-INT64_MAX, le=INT64_MAX)

    @model_validator(mode="after")
    def _bounds(self) -> IntegerColumn:
        check_range(self.low, self.high)
        return self


class RealColumn(BaseModel):
    """A finite number, in ``[low, high]`` when given."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["real"]
    low: float | None = None
    high: float | None = None

    @model_validator(mode="after")
    def _bounds(self) -> RealColumn:
        check_range(self.low, self.high)
        return self


class CategoryColumn(BaseModel):
    """One of ``values`` (strings or integers); without ``values``, any string (open keys)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["category"]
    values: list[StrictStr | StrictInt] | None = Field(None, min_length=1, max_length=MAX_CATEGORIES)

    @model_validator(mode="after")
    def _distinct(self) -> CategoryColumn:
        if self.values is not None and len({(type(v).__name__, v) for v in self.values}) != len(self.values):
            raise ValueError("values must all be different")
        return self


class BoolColumn(BaseModel):
    """JSON ``true`` or ``false``."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["bool"]


Column = Annotated[IdColumn | IntegerColumn | RealColumn | CategoryColumn | BoolColumn, Field(discriminator="type")]


class RowsPerUnit(BaseModel):
    """How many rows one privacy unit owns: ``min`` to ``max`` (absent: unbounded)."""

    model_config = ConfigDict(extra="forbid")
    min: int = Field(1, ge=1, le=MAX_ROWS)
    max: int | None = Field(None, ge=1, le=MAX_ROWS, description="Most rows per unit; absent: no limit.")

    @model_validator(mode="after")
    def _order(self) -> RowsPerUnit:
        if self.max is not None and self.min > self.max:
            raise ValueError("rows_per_unit.min must not exceed rows_per_unit.max")
        return self


class TableSpec(BaseModel):
    """The rows of a table (module docstring)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "columns": {"user": {"type": "id"}, "city": {"type": "category", "values": ["a", "b", "c", "d"]},
                    "spend": {"type": "real", "low": 0, "high": 100}},
        "privacy_unit": "user", "rows_per_unit": {"min": 1, "max": 5}}]})

    columns: dict[str, Column] = Field(min_length=1, max_length=MAX_COLUMNS, description="Column name → type.")
    privacy_unit: str | None = Field(None, description="The id column that names a row's owner; absent: every row "
                                     "is its own unit.")
    rows_per_unit: RowsPerUnit | None = Field(None, description="Rows one unit owns (with privacy_unit only).")

    @model_validator(mode="after")
    def _consistent(self) -> TableSpec:
        for name in self.columns:
            if not name:
                raise ValueError("column names must not be empty")
        if self.privacy_unit is not None:
            col = self.columns.get(self.privacy_unit)
            if col is None:
                raise ValueError(f"privacy_unit {self.privacy_unit!r} is not one of the columns")
            if not isinstance(col, IdColumn):
                raise ValueError(f"privacy_unit {self.privacy_unit!r} must be a column of type id, not {col.type}")
        elif self.rows_per_unit is not None and (self.rows_per_unit.min != 1 or self.rows_per_unit.max not in (None, 1)):
            raise ValueError("rows_per_unit needs a privacy_unit (without one every row is its own unit)")
        return self

    # ---------------------------------------------------------------------------------- reading

    @property
    def min_rows(self) -> int:
        return self.rows_per_unit.min if self.privacy_unit and self.rows_per_unit else 1

    @property
    def max_rows(self) -> int | None:
        """Most rows per unit (None: unbounded)."""
        if self.privacy_unit is None:
            return 1
        return self.rows_per_unit.max if self.rows_per_unit else None

    def describe(self) -> str:
        cols = ", ".join(f"{k}: {_describe_column(c)}" for k, c in self.columns.items())
        if self.privacy_unit is None:
            unit = "every row its own unit"
        else:
            hi = self.max_rows
            unit = f"unit {self.privacy_unit!r} with {self.min_rows}–{'∞' if hi is None else hi} rows"
        return f"table ({cols}; {unit})"


def _describe_column(c: Any) -> str:
    if isinstance(c, CategoryColumn):
        return "open category" if c.values is None else f"category {c.values[:4]}{'…' if len(c.values) > 4 else ''}"
    if isinstance(c, (RealColumn, IntegerColumn)):
        if c.low is None and c.high is None:
            return c.type
        return f"{c.type} [{'−∞' if c.low is None else c.low}, {'∞' if c.high is None else c.high}]"
    return c.type


# ------------------------------------------------------------------------------------------ values


def value_problem(column: Any, value: Any) -> str | None:
    """Why ``value`` is not a value of ``column``, or None."""
    if isinstance(column, IdColumn):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return f"{value!r} is not an id (a JSON integer or string)"
        if isinstance(value, int) and abs(value) > INT64_MAX:
            return f"{value} is outside the signed 64-bit range"
        return None
    if isinstance(column, BoolColumn):
        return None if isinstance(value, bool) else f"{value!r} is not true or false"
    if isinstance(column, CategoryColumn):
        if column.values is None:
            return None if isinstance(value, str) else f"{value!r} is not a string"
        return None if any(type(value) is type(v) and value == v for v in column.values) else \
            f"{value!r} is not one of the categories"
    return number_problem(value, column.low, column.high, integer=isinstance(column, IntegerColumn))


def _tag(value: Any) -> Any:
    """A value as a dictionary key: numbers compare exactly (1 == 1.0), strings and booleans are
    tagged so that "1", 1 and true stay apart."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, str):
        return ("str", value)
    return ("num", value)


def row_key(row: dict[str, Any]) -> tuple:
    """A row as a hashable key (the multiset of rows is a Counter of these)."""
    return tuple(sorted((k, _tag(v)) for k, v in row.items()))


def _units(spec: TableSpec, rows: list[dict[str, Any]]) -> Counter:
    """The database as a multiset of units, each a (sorted) tuple of its rows' keys."""
    if spec.privacy_unit is None:
        return Counter((row_key(r),) for r in rows)
    by: dict[Any, list[tuple]] = {}
    for r in rows:
        by.setdefault(_tag(r[spec.privacy_unit]), []).append(row_key(r))
    return Counter(tuple(sorted(v)) for v in by.values())


def table_problem(spec: TableSpec, size_min: int, size_max: int, database: Any) -> str | None:
    """Why ``database`` is not a table of the domain, or None."""
    if not isinstance(database, list):
        return "a database is a JSON list of rows (objects)"
    if len(database) > MAX_ROWS:
        return f"{len(database)} rows, more than {MAX_ROWS}"
    names = set(spec.columns)
    per_unit: Counter = Counter()
    for i, row in enumerate(database):
        if not isinstance(row, dict):
            return f"row {i}: a row is a JSON object of the columns"
        if set(row) != names:
            missing, extra = sorted(names - set(row)), sorted(set(row) - names)
            return f"row {i}: " + "; ".join(([f"missing column(s) {missing}"] if missing else [])
                                            + ([f"undeclared column(s) {extra}"] if extra else []))
        for name, col in spec.columns.items():
            problem = value_problem(col, row[name])
            if problem:
                return f"row {i}, column {name!r}: {problem}"
        per_unit[_tag(row[spec.privacy_unit]) if spec.privacy_unit else i] += 1
    units = len(per_unit)
    if not size_min <= units <= size_max:
        return f"{units} units, outside size {size_min}–{size_max}"
    lo, hi = spec.min_rows, spec.max_rows
    for unit, n in per_unit.items():
        if n < lo or (hi is not None and n > hi):
            name = unit[1] if isinstance(unit, tuple) else unit
            return f"unit {name!r} owns {n} rows, outside rows_per_unit {lo}–{'∞' if hi is None else hi}"
    return None


def table_relation(spec: TableSpec, neighbours: list[str], x: list[dict[str, Any]],
                   x_prime: list[dict[str, Any]]) -> str | None:
    """The declared relation under which two tables of the domain (already checked) are
    neighbours, ``"identical"`` when they hold the same rows, or None. Exact: numbers compare as
    Python numbers (1 == 1.0), ids compare by value."""
    rx, ry = Counter(map(row_key, x)), Counter(map(row_key, x_prime))
    if rx == ry:
        return "identical"
    ux, uy = _units(spec, x), _units(spec, x_prime)
    only_x, only_y = ux - uy, uy - ux
    nx, ny = sum(only_x.values()), sum(only_y.values())
    if "add_remove_unit" in neighbours and sorted((nx, ny)) == [0, 1]:
        return "add_remove_unit"
    if "replace_unit" in neighbours and nx == ny == 1:
        # the same number of units, one unit's rows replaced (its id may change, but must not merge
        # into another unit: the unit counts above would then differ by more than one)
        return "replace_unit"
    dx, dy = rx - ry, ry - rx
    mx, my = sum(dx.values()), sum(dy.values())
    if "add_remove_row" in neighbours and sorted((mx, my)) == [0, 1]:
        return "add_remove_row"
    if "replace_row" in neighbours and mx == my == 1:
        return "replace_row"
    return None
