"""Candidate pairs for tabular domains (docs/search.md §8.2): tables of privacy units, each
owning rows, and their neighbours under the declared unit or row relations. No samples.

A table is built from units; a unit is a list of rows, each row a group (the value of the first
category or bool column, the *group column*) and a level for the numeric columns (``typical``,
``high``, ``low``, ``far+``, ``far-``, ``extreme``). The families:

- **units** (:func:`unit_pairs`): a base table of k units (all in one group, spread over the
  groups, every unit touching every group, every unit owning the most rows allowed) against the
  same table with one unit added, removed or replaced, or one row added, removed or replaced. The
  units moved: one row; the most rows allowed (far more, 100 and 1 000 rows, when
  ``rows_per_unit.max`` is absent); one row in every group; a group nobody else has (a key that
  only this unit brings; for declared categories, one no other unit uses: an empty group filled);
  extreme and far values on open sides; a duplicate of an existing unit; the same table with its
  rows in reverse order (distance 0) and with a neighbour;
- **sizes** (:class:`TableSizeFamily`, used by app.search.sizes): tables of k units for every k
  from 0 to a small k and on a ladder over the declared range, all units in one group or every
  unit in every group, with their neighbours at k → k + 1.

Every pair is checked with :meth:`InputDomain.relation` before it is returned.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from app.search.domain import InputDomain
from app.search.pairs import (
    FAR,
    FLOAT_MAX,
    INT_FAR,
    CandidatePair,
    halton_points,
    valid_pairs,
)
from app.search.table_domain import (
    INT64_MAX,
    MAX_ROWS,
    BoolColumn,
    CategoryColumn,
    IdColumn,
    IntegerColumn,
    RealColumn,
    TableSpec,
)

__all__ = ["TableSizeFamily", "TableSpace", "UnitMoves", "unit_pairs", "unit_pairs_raw"]

#: Rows of the heavy units tried when rows_per_unit.max is absent ("far more" than a pipeline's bound).
UNBOUNDED_ROWS = (100, 1_000)
#: Groups a unit touching every group covers at most.
MAX_GROUPS = 50
#: A group (key) that no base table uses: what a unit bringing a key of its own carries.
NEW_KEY = "zz-only-this-unit"
LEVELS = ("typical", "high", "low", "far+", "far-", "extreme+", "extreme-")
#: Sizes from 0 up to this are all tried; above, a ladder.
DENSE_SIZES = 12


class TableSpace:
    """Rows, units and tables of a tabular domain."""

    def __init__(self, domain: InputDomain) -> None:
        assert domain.table is not None
        self.domain = domain
        self.spec: TableSpec = domain.table
        self.unit_col = self.spec.privacy_unit
        cols = self.spec.columns
        self.group_col = next((k for k, c in cols.items() if isinstance(c, CategoryColumn)), None) or \
            next((k for k, c in cols.items() if isinstance(c, BoolColumn)), None)
        gc = cols[self.group_col] if self.group_col else None
        if isinstance(gc, CategoryColumn):
            self.groups: list[Any] = list(gc.values) if gc.values is not None else [f"g{i}" for i in range(4)]
            self.open_groups = gc.values is None
        elif isinstance(gc, BoolColumn):
            self.groups, self.open_groups = [True, False], False
        else:
            self.groups, self.open_groups = [None], False
        self.lo_rows = self.spec.min_rows
        self.hi_rows = self.spec.max_rows

    # values --------------------------------------------------------------------------------

    def _numeric(self, col: Any, level: str) -> Any:
        integer = isinstance(col, IntegerColumn)
        lo, hi = col.low, col.high
        if level in ("typical", "high", "low"):
            if lo is not None and hi is not None:
                v = {"typical": (lo + hi) / 2, "high": hi, "low": lo}[level]
            elif lo is not None:
                v = {"typical": lo + 1, "high": lo + 10, "low": lo}[level]
            elif hi is not None:
                v = {"typical": hi - 1, "high": hi, "low": hi - 10}[level]
            else:
                v = {"typical": 1, "high": 10, "low": -10}[level]
        elif level in ("far+", "far-"):
            m = (INT_FAR if integer else FAR)[1]
            v = (hi if hi is not None else (lo or 0) + m) if level == "far+" else (lo if lo is not None else (hi or 0) - m)
        else:
            big = INT64_MAX if integer else FLOAT_MAX
            v = (hi if hi is not None else big) if level == "extreme+" else (lo if lo is not None else -big)
        if integer:
            v = int(round(v)) if math.isfinite(v) else INT64_MAX
            return max(-INT64_MAX, min(INT64_MAX, v))
        v = float(v)
        return 0.0 if v == 0 else v

    def row(self, uid: Any, group: Any = None, level: str = "typical") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, col in self.spec.columns.items():
            if name == self.unit_col:
                out[name] = uid
            elif isinstance(col, IdColumn):
                out[name] = uid if isinstance(uid, int) else 0
            elif name == self.group_col:
                out[name] = self.groups[0] if group is None else group
            elif isinstance(col, CategoryColumn):
                out[name] = col.values[0] if col.values is not None else "k0"
            elif isinstance(col, BoolColumn):
                out[name] = True
            elif isinstance(col, (IntegerColumn, RealColumn)):
                out[name] = self._numeric(col, level)
        return out

    @property
    def new_key(self) -> Any:
        """A group no base table uses: open categories get a fresh string; declared ones their last value."""
        if self.open_groups:
            return NEW_KEY
        return self.groups[-1] if len(self.groups) > 1 else None

    def base_groups(self) -> list[Any]:
        """The groups base tables spread over: all but the last declared one (kept empty)."""
        g = self.groups
        return g[:-1] if len(g) > 1 and not self.open_groups else g

    # units ---------------------------------------------------------------------------------

    def unit(self, uid: Any, rows: list[tuple[Any, str]]) -> list[dict[str, Any]]:
        """One unit's rows (padded to rows_per_unit.min with copies of its first row)."""
        rows = list(rows)
        while len(rows) < self.lo_rows:
            rows.append(rows[0])
        return [self.row(uid, g, lvl) for g, lvl in rows]

    def max_rows_list(self) -> list[int]:
        if self.unit_col is None:
            return [1]
        if self.hi_rows is None:
            return [max(self.lo_rows, r) for r in UNBOUNDED_ROWS]
        return [self.hi_rows]

    def unit_kinds(self) -> list[tuple[str, list[tuple[Any, str]]]]:
        """The units a neighbour adds or swaps in (module docstring)."""
        g0 = self.base_groups()[0]
        kinds: list[tuple[str, list[tuple[Any, str]]]] = [("one row", [(g0, "high")])]
        for r in self.max_rows_list():
            if r > 1:
                kinds.append((f"{r} rows in one group", [(g0, "high")] * r))
        every = self.groups[:MAX_GROUPS] + ([NEW_KEY] if self.open_groups else [])
        cap = self.hi_rows if self.hi_rows is not None else len(every)
        if len(every) > 1 and cap > 1:
            kinds.append((f"one row in each of {min(cap, len(every))} groups", [(g, "high") for g in every[:cap]]))
            if self.hi_rows is None or self.hi_rows >= 2 * len(every):
                reps = (self.hi_rows or 4 * len(every)) // len(every)
                kinds.append((f"{reps} rows in each of {len(every)} groups", [(g, "high") for g in every] * reps))
        if self.new_key is not None and self.new_key != g0:
            kinds.append((f"a group nobody else has ({json.dumps(self.new_key)})", [(self.new_key, "high")]))
            if self.hi_rows is None or self.hi_rows > 1:
                r = self.max_rows_list()[0]
                kinds.append((f"{r} rows in a group nobody else has", [(self.new_key, "high")] * r))
        for lvl in ("low", "far+", "far-", "extreme+", "extreme-"):
            kinds.append((f"one row at {lvl}", [(g0, lvl)]))
            r = self.max_rows_list()[0]
            if r > 1 and lvl in ("far+", "far-"):
                kinds.append((f"{r} rows at {lvl}", [(g0, lvl)] * r))
        out, seen = [], set()
        for name, rows in kinds:
            key = json.dumps(self.unit(0, rows), sort_keys=True)
            if key not in seen and len(rows) <= MAX_ROWS:
                seen.add(key)
                out.append((name, rows))
        return out

    # tables --------------------------------------------------------------------------------

    def base(self, k: int, kind: str, seed: int = 0) -> list[dict[str, Any]]:
        """A table of ``k`` units: ``same`` (one row each, one group), ``spread`` (groups and levels
        from a Halton sequence), ``every`` (each unit one row in every base group), ``heavy`` (each
        unit the most rows allowed, one group)."""
        groups = self.base_groups()
        rows: list[dict[str, Any]] = []
        if kind == "spread" and k:
            u = halton_points(2, k, seed + 17 * k)
        for i in range(k):
            uid = i + 1
            if kind == "same":
                spec = [(groups[0], "typical")]
            elif kind == "spread":
                lvl = ("typical", "high", "low")[int(u[i][1] * 3)]
                spec = [(groups[int(u[i][0] * len(groups))], lvl)]
            elif kind == "every":
                cap = self.hi_rows if self.hi_rows is not None else len(groups)
                spec = [(g, "typical") for g in groups[:max(1, cap)]]
            else:  # heavy
                r = self.hi_rows if self.hi_rows is not None else 20
                spec = [(groups[0], "typical")] * max(1, r)
            rows += self.unit(uid, spec)
        return rows

    def units_of(self, table: list[dict[str, Any]]) -> list[Any]:
        if self.unit_col is None:
            return list(range(len(table)))
        seen: dict[Any, None] = {}
        for r in table:
            seen.setdefault(r[self.unit_col], None)
        return list(seen)

    def without_unit(self, table: list[dict[str, Any]], uid: Any) -> list[dict[str, Any]]:
        if self.unit_col is None:
            return table[:uid] + table[uid + 1:]
        return [r for r in table if r[self.unit_col] != uid]

    def fresh_id(self, table: list[dict[str, Any]]) -> int:
        ids = [u for u in self.units_of(table) if isinstance(u, int)] if self.unit_col else []
        return (max(ids) + 1) if ids else 1_000_000


def _moves(space: TableSpace, x: list[dict[str, Any]], note: str, source: str) -> Iterator[CandidatePair]:
    """The neighbours of ``x`` under the declared relations (module docstring)."""
    d = space.domain
    rel = d.neighbours
    units = space.units_of(x)
    k = len(units)
    kinds = space.unit_kinds()
    first = units[0] if units else None
    if "add_remove_unit" in rel or ("add_remove_row" in rel and space.unit_col is None):
        r = "add_remove_unit" if "add_remove_unit" in rel else "add_remove_row"
        if k + 1 <= d.size.max:
            uid = space.fresh_id(x)
            for name, rows in kinds:
                yield CandidatePair(x, x + space.unit(uid, rows), r, source, f"{note}, a unit added: {name}")
            if first is not None:  # a duplicate of an existing unit (same rows, a new id)
                if space.unit_col is None:
                    dup = [dict(x[0])]
                else:
                    dup = [{**row, space.unit_col: uid} for row in x if row[space.unit_col] == first]
                yield CandidatePair(x, x + dup, r, source, f"{note}, a duplicate of unit {first!r} added")
        if k >= 1 and k - 1 >= d.size.min:
            yield CandidatePair(x, space.without_unit(x, first), r, source, f"{note}, unit {first!r} removed")
    if "replace_unit" in rel and k >= 1:
        rest = space.without_unit(x, first)
        for name, rows in kinds:
            uid = first if space.unit_col is not None else 0
            yield CandidatePair(x, rest + space.unit(uid, rows), "replace_unit", source,
                                f"{note}, unit {first!r} replaced by: {name}")
    if "add_remove_row" in rel and space.unit_col is not None and k >= 1:
        own = [row for row in x if row[space.unit_col] == first]
        extra = [(space.base_groups()[0], "high"), (space.new_key, "high"), (space.base_groups()[0], "far+")]
        if space.hi_rows is None or len(own) + 1 <= space.hi_rows:
            for g, lvl in extra:
                if g is None and space.group_col is not None:
                    continue
                yield CandidatePair(x, x + [space.row(first, g, lvl)], "add_remove_row", source,
                                    f"{note}, a row ({g}, {lvl}) added to unit {first!r}")
        if len(own) - 1 >= space.lo_rows:
            i = next(i for i, row in enumerate(x) if row[space.unit_col] == first)
            yield CandidatePair(x, x[:i] + x[i + 1:], "add_remove_row", source, f"{note}, a row of unit {first!r} removed")
        elif len(own) == 1 and k - 1 >= d.size.min:
            yield CandidatePair(x, space.without_unit(x, first), "add_remove_row", source,
                                f"{note}, the one row of unit {first!r} removed")
        if k + 1 <= d.size.max and space.lo_rows == 1:
            yield CandidatePair(x, x + space.unit(space.fresh_id(x), [(space.new_key or space.groups[0], "high")]),
                                "add_remove_row", source, f"{note}, a row of a new unit added")
    if "replace_row" in rel and x:
        row0 = x[0]
        uid = row0[space.unit_col] if space.unit_col else None
        subs = [(g, "typical") for g in space.groups[1:3]] + [(space.new_key, "typical")] + \
            [(row0.get(space.group_col) if space.group_col else None, lvl) for lvl in ("high", "low", "far+", "far-")]
        for g, lvl in subs:
            if g is None and space.group_col is not None:
                continue
            new = space.row(uid, g, lvl)
            if space.unit_col is None:
                new = {**new, **{c: row0[c] for c, col in space.spec.columns.items() if isinstance(col, IdColumn)}}
            yield CandidatePair(x, [new] + x[1:], "replace_row", source, f"{note}, row 0 replaced by ({g}, {lvl})")


def unit_pairs(domain: InputDomain, seed: int = 0) -> list[CandidatePair]:
    """Base tables at a few sizes with every unit move (module docstring)."""
    return valid_pairs(domain, unit_pairs_raw(domain, seed))


def unit_pairs_raw(domain: InputDomain, seed: int = 0) -> list[CandidatePair]:
    space = TableSpace(domain)
    lo, hi = domain.size.min, domain.size.max
    sizes = sorted({s for s in (lo, 0, 1, 2, 5, min(hi, 20), hi) if lo <= s <= hi and s <= 200})
    out: list[CandidatePair] = []
    per_kind: list[list[CandidatePair]] = []
    for kind in ("same", "spread", "every", "heavy"):
        pairs: list[CandidatePair] = []
        for k in sizes:
            if kind != "same" and k == 0:
                continue
            pairs += _moves(space, space.base(k, kind, seed), f"{k} units ({kind})", "units")
        per_kind.append(pairs)
    for i in range(max((len(p) for p in per_kind), default=0)):
        out += [p[i] for p in per_kind if i < len(p)]
    order: list[CandidatePair] = []
    # the order of rows: the same table reversed, and reversed with a neighbour
    k = min(hi, 8)
    if k >= 1:
        x = space.base(k, "spread", seed)
        if len(x) >= 2:
            order.append(CandidatePair(x, x[::-1], "identical", "units", "rows in reverse order"))
            for p in _moves(space, x, f"{k} units (spread)", "units"):
                order.append(CandidatePair(p.x, p.x_prime[::-1], p.relation, "units", p.note + ", rows reversed"))
                break
    out = out[:4] + order + out[4:]  # early, so that a small limit keeps them
    return out


class UnitMoves:
    """The table unit moves as a :class:`app.search.protocols.PairGenerator` (:func:`unit_pairs`)."""

    name = "units"

    def pairs(self, domain: InputDomain, seed: int = 0, validate: bool = True) -> list[CandidatePair]:
        return unit_pairs(domain, seed) if validate else unit_pairs_raw(domain, seed)


class TableSizeFamily:
    """Tables of k units of one kind and their neighbours across k → k + 1 (app.search.sizes)."""

    def __init__(self, domain: InputDomain, kind: str) -> None:
        self.space = TableSpace(domain)
        self.domain = domain
        self.kind = kind
        self.name = f"tables ({kind})"

    def base(self, k: int) -> list[dict[str, Any]]:
        return self.space.base(k, self.kind)

    def pairs(self, k: int) -> list[CandidatePair]:
        """Pairs across sizes k and k + 1: the unit added (the relations that add), and at both
        sizes the first unit replaced or moved to a group nobody else has."""
        d, sp = self.domain, self.space
        out: list[CandidatePair] = []
        lo, hi = d.size.min, d.size.max
        if lo <= k and k + 1 <= hi:
            for r in ("add_remove_unit", "add_remove_row"):
                if r in d.neighbours and (r == "add_remove_unit" or sp.unit_col is None or sp.lo_rows == 1):
                    x, xp = self.base(k), self.base(k + 1)
                    out.append(CandidatePair(x, xp, r, "sizes", f"{k} against {k + 1} units ({self.kind})"))
        for m in (k, k + 1):
            if not max(lo, 1) <= m <= hi:
                continue
            x = self.base(m)
            first = sp.units_of(x)[0]
            rest = sp.without_unit(x, first)
            moved = sp.new_key if sp.new_key is not None else sp.groups[-1]
            uid = first if sp.unit_col is not None else 0
            if "replace_unit" in d.neighbours:  # the first unit moved to a group nobody else has
                out.append(CandidatePair(x, rest + sp.unit(uid, [(moved, "typical")]), "replace_unit", "sizes",
                                         f"{m} units ({self.kind}), unit {first!r} moved to {moved!r}"))
            if "replace_row" in d.neighbours:
                new = {**x[0], **({sp.group_col: moved} if sp.group_col else {})}
                out.append(CandidatePair(x, [new] + x[1:], "replace_row", "sizes",
                                         f"{m} units ({self.kind}), row 0 moved to {moved!r}"))
            if "add_remove_row" in d.neighbours and sp.unit_col is not None and len(x) > len(rest) > 0:
                i = next(i for i, r in enumerate(x) if r[sp.unit_col] == first)
                out.append(CandidatePair(x, x[:i] + x[i + 1:], "add_remove_row", "sizes",
                                         f"{m} units ({self.kind}), a row of unit {first!r} removed"))
        return out
