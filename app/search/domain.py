"""The input domain a privacy claim covers: which databases, and which pairs of them are neighbours
(docs/search.md §1).

A mechanism declares its domain as JSON::

    {"records": {"type": "real", "low": 0, "high": 1},
     "size": {"min": 0, "max": 10},
     "neighbours": ["add_remove"]}

- ``records.type`` is ``real``, ``integer``, ``category`` (with ``values``) or ``vector`` (``dim``,
  optional ``low``/``high``, a number for every coordinate or a list of ``dim`` numbers). Without
  ``low``/``high`` the claim must hold for every finite value: that is how a mechanism that
  promises to clamp is tested with values far outside its clamp.
- ``neighbours`` is one or more of ``add_remove`` (one record more or less), ``replace_one`` (one
  record changed; same size), and ``linf``/``l1`` with a top-level ``sensitivity``: the database
  is then a fixed-length vector of query answers, and a neighbour moves every answer by at most
  the sensitivity (``linf``) or the whole vector by at most it in ℓ1 (``l1``), the setting of
  StatDP and DP-Sniper for sparse vector, noisy max and histograms.

A database goes into the sampling protocol as the JSON list of its records, as ``x`` does. For
``add_remove`` and ``replace_one`` the records form a multiset (the usual definition): two lists
with the same records in another order are the same database, at distance 0, so the claim bounds
them too. For ``linf``/``l1`` a position is a query, and order matters.

:meth:`InputDomain.relation` checks exactly (rational arithmetic on the floats sent) that a pair
is neighbouring; the search certifies only pairs that pass it.

A tabular domain declares ``table`` instead of ``records`` (app.search.table_domain): columns, a
privacy unit and the rows one unit owns; its neighbours add, remove or replace a unit or a row.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

from app.search.bounds import INT64_MAX, check_finite, check_range, number_problem
from app.search.table_domain import TABLE_RELATIONS, TableSpec, table_problem, table_relation

__all__ = ["CategoryRecords", "InputDomain", "IntegerRecords", "Neighbour", "RealRecords", "SizeRange",
           "VectorRecords", "DOMAIN_EXAMPLES", "TABLE_DOMAIN_EXAMPLES"]

#: The largest database size a domain may declare (a database is sent as one JSON list).
MAX_SIZE = 10_000
MAX_DIM = 256
MAX_CATEGORIES = 1_000
#: Largest |value| of an integer record: JSON integers beyond the signed 64-bit range are refused
#: by the sampling protocol's own parser and by most endpoints.

Neighbour = Literal["add_remove", "replace_one", "linf", "l1", "add_remove_unit", "replace_unit", "add_remove_row",
                    "replace_row"]
RECORD_RELATIONS = ("add_remove", "replace_one")
VECTOR_RELATIONS = ("linf", "l1")


class RealRecords(BaseModel):
    """Each record is a real number, in ``[low, high]`` when given (each side optional)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"type": "real", "low": 0, "high": 1},
                                                                              {"type": "real"}]})

    type: Literal["real"]
    low: float | None = Field(None, description="Smallest record (finite); none: no lower limit.")
    high: float | None = Field(None, description="Largest record (finite); none: no upper limit.")

    @model_validator(mode="after")
    def _bounds(self) -> RealRecords:
        check_range(self.low, self.high)
        return self


class IntegerRecords(BaseModel):
    """Each record is an integer (JSON integer), in ``[low, high]`` when given."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"type": "integer", "low": 0, "high": 100}]})

    type: Literal["integer"]
    low: StrictInt | None = Field(None, ge=-INT64_MAX, le=INT64_MAX, description="Smallest record; none: no limit.")
    high: StrictInt | None = Field(None, ge=-INT64_MAX, le=INT64_MAX, description="Largest record; none: no limit.")

    @model_validator(mode="after")
    def _bounds(self) -> IntegerRecords:
        check_range(self.low, self.high)
        return self


class CategoryRecords(BaseModel):
    """Each record is one of ``values`` (strings or integers)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"type": "category", "values": ["a", "b", "c"]}]})

    type: Literal["category"]
    values: list[StrictStr | StrictInt] = Field(min_length=1, max_length=MAX_CATEGORIES,
                                                description="The categories, all different.")

    @model_validator(mode="after")
    def _distinct(self) -> CategoryRecords:
        if len({(type(v).__name__, v) for v in self.values}) != len(self.values):
            raise ValueError("values must all be different")
        return self


class VectorRecords(BaseModel):
    """Each record is a list of ``dim`` reals, each coordinate in ``[low, high]`` when given."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"type": "vector", "dim": 3, "low": -1, "high": 1}]})

    type: Literal["vector"]
    dim: int = Field(ge=1, le=MAX_DIM, description="Coordinates per record.")
    low: float | list[float] | None = Field(None, description="Smallest coordinate: one number for all, or `dim` numbers.")
    high: float | list[float] | None = Field(None, description="Largest coordinate: one number for all, or `dim` numbers.")

    @model_validator(mode="after")
    def _bounds(self) -> VectorRecords:
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, list):
                if len(value) != self.dim:
                    raise ValueError(f"{name} must be one number or a list of dim = {self.dim} numbers")
                for v in value:
                    check_finite(v, name)
            else:
                check_finite(value, name)
        lows, highs = self.lows(), self.highs()
        if any(lo is not None and hi is not None and not lo < hi for lo, hi in zip(lows, highs)):
            raise ValueError("every coordinate's low must be below its high")
        return self

    def lows(self) -> list[float | None]:
        return list(self.low) if isinstance(self.low, list) else [self.low] * self.dim

    def highs(self) -> list[float | None]:
        return list(self.high) if isinstance(self.high, list) else [self.high] * self.dim


Records = Annotated[RealRecords | IntegerRecords | CategoryRecords | VectorRecords, Field(discriminator="type")]


class SizeRange(BaseModel):
    """How many records a database holds: ``min`` to ``max`` (both included)."""

    model_config = ConfigDict(extra="forbid")

    min: int = Field(ge=0, le=MAX_SIZE, description="Fewest records (0: the empty database is in the domain).")
    max: int = Field(ge=0, le=MAX_SIZE, description=f"Most records (at most {MAX_SIZE}).")

    @model_validator(mode="after")
    def _order(self) -> SizeRange:
        if self.min > self.max:
            raise ValueError("size.min must not exceed size.max")
        return self


DOMAIN_EXAMPLES: list[dict[str, Any]] = [
    {"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 0, "max": 10}, "neighbours": ["add_remove"]},
    {"records": {"type": "integer", "low": 0, "high": 100}, "size": {"min": 1, "max": 50},
     "neighbours": ["add_remove", "replace_one"]},
    {"records": {"type": "category", "values": ["a", "b", "c", "d"]}, "size": {"min": 1, "max": 20},
     "neighbours": ["replace_one"]},
    {"records": {"type": "vector", "dim": 2, "low": -1, "high": 1}, "size": {"min": 1, "max": 10},
     "neighbours": ["add_remove"]},
    {"records": {"type": "real"}, "size": {"min": 10, "max": 10}, "neighbours": ["linf"], "sensitivity": 1},
]
#: Tabular domains (app.search.table_domain), kept apart from the list-of-records examples.
TABLE_DOMAIN_EXAMPLES: list[dict[str, Any]] = [
    {"table": {"columns": {"user": {"type": "id"}, "city": {"type": "category", "values": ["a", "b", "c", "d"]},
                           "spend": {"type": "real", "low": 0, "high": 100}},
               "privacy_unit": "user", "rows_per_unit": {"min": 1, "max": 5}},
     "size": {"min": 0, "max": 200}, "neighbours": ["add_remove_unit"]},
    {"table": {"columns": {"city": {"type": "category"}, "amount": {"type": "integer", "low": 0, "high": 10},
                           "member": {"type": "bool"}}},
     "size": {"min": 1, "max": 1000}, "neighbours": ["add_remove_row", "replace_row"]},
]

DOMAIN_DESCRIPTION = (
    "The databases the privacy claim covers (docs/search.md §1). `records`: `{\"type\": \"real\"|\"integer\", "
    "\"low\"?, \"high\"?}`, `{\"type\": \"category\", \"values\": [...]}` or `{\"type\": \"vector\", \"dim\": d, "
    "\"low\"?, \"high\"?}`; without `low`/`high` the claim must hold for every finite value. `size`: `{\"min\", "
    "\"max\"}` records (0 to 10000). `neighbours`: one or more of `add_remove`, `replace_one` (records form a "
    "multiset) or `linf`/`l1` with a top-level `sensitivity` > 0 (the database is a fixed-length vector of "
    "query answers, `size.min` = `size.max`; real or integer records; not mixed with the record relations). "
    "A database is sent to the mechanism as the JSON list of its records. A tabular domain declares `table` "
    "instead of `records`: `{\"columns\": {name: {\"type\": \"id\"|\"integer\"|\"real\"|\"category\"|\"bool\", ...}}, "
    "\"privacy_unit\"?: an id column, \"rows_per_unit\"?: {\"min\", \"max\"?}}`, `size` counts units and "
    "`neighbours` are `add_remove_unit`, `replace_unit`, `add_remove_row`, `replace_row`; a database is then a "
    "JSON list of row objects, e.g. `[{\"user\": 7, \"city\": \"a\", \"spend\": 12.5}]`."
)


class InputDomain(BaseModel):
    """The input domain of a claim (module docstring)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"description": DOMAIN_DESCRIPTION,
                                                                 "examples": DOMAIN_EXAMPLES + TABLE_DOMAIN_EXAMPLES})

    records: Records | None = Field(None, description="What one record is (a list-of-records domain).")
    table: TableSpec | None = Field(None, description="The columns of a table, its privacy unit and the rows one "
                                    "unit owns (a tabular domain, docs/search.md §8; `size` then counts units).")
    size: SizeRange
    neighbours: list[Neighbour] = Field(min_length=1, max_length=4, description="The neighbour relations covered.")
    sensitivity: float | None = Field(None, gt=0, description="For `linf`/`l1`: how far a neighbour moves the "
                                      "answers (every answer by at most it, or the vector by at most it in ℓ1).")

    @model_validator(mode="after")
    def _consistent(self) -> InputDomain:
        rel = self.neighbours
        if len(set(rel)) != len(rel):
            raise ValueError("neighbours must not repeat")
        if (self.records is None) == (self.table is None):
            raise ValueError("declare exactly one of records (a list of records) and table (rows with columns)")
        tabular = [r for r in rel if r in TABLE_RELATIONS]
        if self.table is not None:
            if len(tabular) != len(rel):
                raise ValueError("a table domain takes the neighbours add_remove_unit, replace_unit, add_remove_row "
                                 f"and replace_row, not {[r for r in rel if r not in TABLE_RELATIONS]}")
            if self.sensitivity is not None:
                raise ValueError("sensitivity applies to linf and l1 neighbours only")
            if "add_remove_unit" in rel and self.size.max == self.size.min:
                raise ValueError("add_remove_unit needs size.max > size.min (a table and one with a unit more)")
            if "replace_unit" in rel and self.size.max < 1:
                raise ValueError("replace_unit needs tables of at least one unit")
            if "add_remove_row" in rel and self.size.max == self.size.min and (
                    self.table.max_rows is not None and self.table.max_rows == self.table.min_rows):
                raise ValueError("add_remove_row needs room for one row more: a size range or rows_per_unit.min < max")
            if "replace_row" in rel and self.size.max < 1:
                raise ValueError("replace_row needs tables of at least one row")
            return self
        if tabular:
            raise ValueError(f"{tabular[0]} is for table domains; list-of-records domains take add_remove, "
                             "replace_one, linf or l1")
        vector = [r for r in rel if r in VECTOR_RELATIONS]
        record = [r for r in rel if r in RECORD_RELATIONS]
        if vector and record:
            raise ValueError("linf/l1 treat the database as a vector of query answers and add_remove/replace_one "
                             "as a multiset of records: declare one kind")
        if vector:
            if self.sensitivity is None:
                raise ValueError(f"{vector[0]} needs a top-level sensitivity > 0")
            check_finite(self.sensitivity, "sensitivity")
            if self.records.type not in ("real", "integer"):
                raise ValueError(f"{vector[0]} needs real or integer records (query answers), not {self.records.type}")
            if self.size.min != self.size.max or self.size.min < 1:
                raise ValueError(f"{vector[0]} needs a fixed number of answers: size.min = size.max >= 1")
            if self.records.type == "integer" and self.sensitivity != int(self.sensitivity):
                raise ValueError("integer answers need an integer sensitivity")
            rec = self.records
            if rec.low is not None and rec.high is not None and rec.high - rec.low < 0:
                raise ValueError("low must be below high")
        elif self.sensitivity is not None:
            raise ValueError("sensitivity applies to linf and l1 neighbours only")
        if "add_remove" in rel and self.size.max == self.size.min:
            raise ValueError("add_remove needs size.max > size.min (a database and one with a record more)")
        if "replace_one" in rel:
            if self.size.max < 1:
                raise ValueError("replace_one needs databases of at least one record")
            if isinstance(self.records, CategoryRecords) and len(self.records.values) < 2:
                raise ValueError("replace_one needs at least two categories")
        return self

    # ---------------------------------------------------------------------------------- reading

    @property
    def is_vector(self) -> bool:
        """True for linf/l1 domains (a database is a vector of query answers)."""
        return self.neighbours[0] in VECTOR_RELATIONS

    @property
    def vector_sensitivity(self) -> float:
        """``sensitivity`` of a linf/l1 domain, which validation makes required there."""
        if self.sensitivity is None:
            raise ValueError("only a linf/l1 domain has a sensitivity")
        return self.sensitivity

    @property
    def is_table(self) -> bool:
        """True for tabular domains (a database is a list of row objects)."""
        return self.table is not None

    def describe(self) -> str:
        if self.table is not None:
            size = f"{self.size.min}" if self.size.min == self.size.max else f"{self.size.min}–{self.size.max}"
            return f"{size} units: {self.table.describe()}; neighbours: {', '.join(self.neighbours)}"
        r = self.records
        if isinstance(r, CategoryRecords):
            rec = f"categories {r.values[:6]}{'…' if len(r.values) > 6 else ''}"
        elif isinstance(r, VectorRecords):
            rec = f"vectors of {r.dim} reals" + _range(r.low, r.high)
        else:
            rec = f"{r.type}s" + _range(r.low, r.high)
        size = f"{self.size.min}" if self.size.min == self.size.max else f"{self.size.min}–{self.size.max}"
        rels = ", ".join(self.neighbours) + (f" (sensitivity {self.sensitivity:g})" if self.sensitivity else "")
        what = "answers" if self.is_vector else "records"
        return f"{size} {what}: {rec}; neighbours: {rels}"

    def record_problem(self, value: Any) -> str | None:
        """Why ``value`` is not a record of the domain, or None."""
        r = self.records
        if isinstance(r, CategoryRecords):
            return None if any(type(value) is type(v) and value == v for v in r.values) else \
                f"{value!r} is not one of the categories"
        if isinstance(r, VectorRecords):
            if not isinstance(value, list) or len(value) != r.dim:
                return f"a record must be a list of {r.dim} numbers"
            for v, lo, hi in zip(value, r.lows(), r.highs()):
                problem = number_problem(v, lo, hi, integer=False)
                if problem:
                    return problem
            return None
        return number_problem(value, r.low, r.high, integer=isinstance(r, IntegerRecords))

    def problem(self, database: Any) -> str | None:
        """Why ``database`` is not in the domain, or None."""
        if self.table is not None:
            return table_problem(self.table, self.size.min, self.size.max, database)
        if not isinstance(database, list):
            return "a database is a JSON list of records"
        if not self.size.min <= len(database) <= self.size.max:
            return f"{len(database)} records, outside size {self.size.min}–{self.size.max}"
        for i, value in enumerate(database):
            problem = self.record_problem(value)
            if problem:
                return f"record {i}: {problem}"
        return None

    def relation(self, x: Any, x_prime: Any) -> str | None:
        """The declared relation under which ``x`` and ``x_prime`` are neighbours (``"identical"``
        when they are the same database), or None. Exact: floats are compared as rationals."""
        if self.problem(x) is not None or self.problem(x_prime) is not None:
            return None
        if self.table is not None:
            return table_relation(self.table, list(self.neighbours), x, x_prime)
        if self.is_vector:
            s = Fraction(self.vector_sensitivity)
            diffs = [_exact_gap(a, b) for a, b in zip(x, x_prime)]
            if not any(diffs):
                return "identical"
            if "linf" in self.neighbours and max(diffs) <= s:
                return "linf"
            if "l1" in self.neighbours and sum(diffs) <= s:
                return "l1"
            return None
        cx, cy = Counter(map(_hashable, x)), Counter(map(_hashable, x_prime))
        if cx == cy:
            return "identical"
        only_x, only_y = cx - cy, cy - cx
        nx, ny = sum(only_x.values()), sum(only_y.values())
        if "add_remove" in self.neighbours and sorted((nx, ny)) == [0, 1]:
            return "add_remove"
        if "replace_one" in self.neighbours and nx == ny == 1:
            return "replace_one"
        return None


def _range(low: Any, high: Any) -> str:
    if low is None and high is None:
        return " (any finite value)"
    lo = "−∞" if low is None else (f"{low:g}" if not isinstance(low, list) else str(low))
    hi = "∞" if high is None else (f"{high:g}" if not isinstance(high, list) else str(high))
    return f" in [{lo}, {hi}]"


def _exact_gap(a: float | int, b: float | int) -> Fraction | int:
    """|a − b| exactly (as a rational when floats are involved)."""
    if isinstance(a, int) and isinstance(b, int):
        return abs(a - b)
    return abs(Fraction(a) - Fraction(b))


def _hashable(value: Any) -> Any:
    """A record as a dictionary key. Numbers compare exactly in Python (1 == 1.0, and 2**53 + 1 !=
    2.0**53), so they are their own keys; strings are tagged so that "1" is not 1."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, str):
        return ("str", value)
    return value
