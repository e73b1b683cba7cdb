"""What every library adapter shares: the group-by query they serve, the table they read, the
keyed output they return and the tabular input domain they declare.

A database arrives at the endpoint as a JSON list of row objects
(``[{"user": 7, "city": "a", "spend": 12.5}, ...]``); one output is a JSON object
``{key: value}`` where a key left out is a key not released (partition selection).
The domain is the issue's tabular form (docs/sdk.md "Library adapters")::

    {"table": {"columns": {...}, "privacy_unit": "user", "rows_per_unit": {"min": 1}},
     "size": {"min": 0, "max": 100}, "neighbours": ["add_remove_unit"]}

What the library promises to enforce is left open in the domain (rows per unit has no ``max``,
a clamped value column has no bounds) so that a search tests the promise; what the library
takes on trust (a public key set) is declared as such.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["GroupBy", "bound_contributions", "keyed_output", "rows_of", "table_domain"]

Metric = typing.Literal["count", "unit_count", "sum", "mean"]
_METRICS = ("count", "unit_count", "sum", "mean")


@dataclass(frozen=True)
class GroupBy:
    """A group-by aggregate with the contribution bounds the libraries share.

    - ``by``: the column grouped on (its values become the output's keys, as strings);
    - ``metric``: ``count`` (rows), ``unit_count`` (distinct privacy units), ``sum`` or ``mean``
      of ``value`` clamped to [``low``, ``high``];
    - ``privacy_unit``: the column that identifies a person (None: every row is its own unit);
    - ``max_groups``: groups one unit may contribute to; ``max_rows_per_group``: rows one unit
      may contribute to one group;
    - ``public_keys``: the key set published without selection (None: keys are selected from the
      data by the library's partition selection, an (ε, δ) claim);
    - ``epsilon``, ``delta``: the budget given to the library (the claim is read back from it).
    """

    by: str
    metric: Metric = "count"
    privacy_unit: str | None = "user"
    value: str | None = None
    low: float | None = None
    high: float | None = None
    max_groups: int = 1
    max_rows_per_group: int = 1
    public_keys: tuple[str, ...] | None = None
    epsilon: float = 1.0
    delta: float = 0.0

    def __post_init__(self) -> None:
        if self.metric not in _METRICS:
            raise ValueError(f"metric: one of {_METRICS}, got {self.metric!r}")
        if self.metric in ("sum", "mean"):
            if self.value is None or self.low is None or self.high is None:
                raise ValueError(f"metric {self.metric!r}: value, low and high are required (the clamp)")
            if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
                raise ValueError(f"low, high: finite with low < high, got {self.low!r}, {self.high!r}")
        if self.metric == "unit_count" and self.privacy_unit is None:
            raise ValueError("metric 'unit_count' counts privacy units: privacy_unit is required")
        for name in ("max_groups", "max_rows_per_group"):
            v = getattr(self, name)
            if type(v) is not int or v < 1:
                raise ValueError(f"{name}: an integer >= 1, got {v!r}")
        if not (isinstance(self.epsilon, (int, float)) and math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError(f"epsilon: a finite number > 0, got {self.epsilon!r}")
        if not (0 <= self.delta < 1):
            raise ValueError(f"delta: in [0, 1), got {self.delta!r}")
        if self.public_keys is not None:
            keys = tuple(str(k) for k in self.public_keys)
            if not keys or len(set(keys)) != len(keys):
                raise ValueError("public_keys: a non-empty list of distinct keys")
            object.__setattr__(self, "public_keys", keys)
        elif self.delta <= 0:
            raise ValueError("partition selection (public_keys=None) needs delta > 0")

    @property
    def columns(self) -> tuple[str, ...]:
        cols = [c for c in (self.privacy_unit, self.by, self.value) if c is not None]
        return tuple(dict.fromkeys(cols))


def rows_of(database: typing.Any, query: GroupBy) -> list[dict[str, typing.Any]]:
    """The database as a list of row dicts with the query's columns, refused with the row and the
    reason when it is not one (the endpoint answers 500 with that text)."""
    if not isinstance(database, list):
        raise ValueError("a table database is a JSON list of row objects, e.g. [{\"user\": 7, \"city\": \"a\"}]")
    rows = []
    for i, row in enumerate(database):
        if not isinstance(row, Mapping):
            raise ValueError(f"row {i}: a JSON object, got {type(row).__name__}")
        missing = [c for c in query.columns if c not in row]
        if missing:
            raise ValueError(f"row {i}: missing column(s) {missing}")
        out = dict(row)
        out[query.by] = str(row[query.by])
        if query.value is not None:
            v = row[query.value]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"row {i}: {query.value} must be a finite number, got {v!r}")
            out[query.value] = float(v)
        rows.append(out)
    return rows


def keyed_output(pairs: typing.Iterable[tuple[typing.Any, typing.Any]]) -> dict[str, float]:
    """One keyed output: string keys, float values (a key the library suppressed is left out;
    a missing value (None, NaN) too, and a value the library could not compute (±inf: OpenDP's
    mean of a group whose noisy count came out 0))."""
    out: dict[str, float] = {}
    for key, value in pairs:
        if value is None:
            continue
        v = float(value)
        if not math.isfinite(v):
            continue
        out[str(key)] = v
    return out


def table_domain(query: GroupBy, *, size: tuple[int, int] = (0, 100), values: str = "open",
                 categories: Sequence[str] | None = None, neighbours: Sequence[str] = ("add_remove_unit",),
                 extra_columns: Mapping[str, Mapping[str, typing.Any]] | None = None) -> dict[str, typing.Any]:
    """The tabular input domain a user declares for ``query`` (the issue's JSON form, as a dict).

    - the privacy unit column is an ``id``; rows per unit have no ``max``, because the library
      promises to bound contributions (``max_groups``, ``max_rows_per_group``) and the search
      should test that promise;
    - the grouped column is a category over ``public_keys`` when the query publishes them, else
      over ``categories`` (what the data can hold) or open;
    - the value column is a real: unbounded when ``values="open"`` (the library promises to clamp
      to [low, high]), within [low, high] when ``values="declared"``;
    - ``size`` counts units.
    """
    if values not in ("open", "declared"):
        raise ValueError(f"values: 'open' or 'declared', got {values!r}")
    lo, hi = size
    if not (0 <= lo <= hi):
        raise ValueError(f"size: 0 <= min <= max, got {size!r}")
    columns: dict[str, dict[str, typing.Any]] = {}
    if query.privacy_unit is not None:
        columns[query.privacy_unit] = {"type": "id"}
    cat: dict[str, typing.Any] = {"type": "category"}
    universe = categories if categories is not None else query.public_keys
    if universe is not None:
        cat["values"] = [str(k) for k in universe]
    columns[query.by] = cat
    if query.value is not None:
        col: dict[str, typing.Any] = {"type": "real"}
        if values == "declared":
            col.update(low=query.low, high=query.high)
        columns[query.value] = col
    for name, spec in (extra_columns or {}).items():
        columns[name] = dict(spec)
    table: dict[str, typing.Any] = {"columns": columns}
    if query.privacy_unit is not None:
        table["privacy_unit"] = query.privacy_unit
        table["rows_per_unit"] = {"min": 1}
    return {"table": table, "size": {"min": lo, "max": hi}, "neighbours": list(neighbours)}


def bound_contributions(rows: list[dict[str, typing.Any]], query: GroupBy, rng: typing.Any) -> list[dict[str, typing.Any]]:
    """Contribution bounding for libraries that leave it to the caller (python-dp): each unit keeps
    at most ``max_groups`` of its groups, chosen uniformly, and at most ``max_rows_per_group`` rows
    in each, chosen uniformly. ``rng``: numpy's Generator or ``random.Random``."""
    if query.privacy_unit is None:
        return rows
    by_unit: dict[typing.Any, dict[str, list[dict[str, typing.Any]]]] = {}
    for row in rows:
        by_unit.setdefault(_unit_key(row[query.privacy_unit]), {}).setdefault(row[query.by], []).append(row)
    kept = []
    for groups in by_unit.values():
        keys = list(groups)
        if len(keys) > query.max_groups:
            keys = _choose(keys, query.max_groups, rng)
        for key in keys:
            mine = groups[key]
            kept.extend(mine if len(mine) <= query.max_rows_per_group else _choose(mine, query.max_rows_per_group, rng))
    return kept


def _unit_key(value: typing.Any) -> typing.Any:
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else repr(value)


def _choose(items: list[typing.Any], k: int, rng: typing.Any) -> list[typing.Any]:
    if hasattr(rng, "choice") and hasattr(rng, "integers"):  # numpy
        return [items[i] for i in rng.choice(len(items), size=k, replace=False)]
    return rng.sample(items, k)
