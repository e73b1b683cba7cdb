"""Sizes: every size from 0 to a small k, a ladder over the whole declared range, and a bisection
around any size where the outputs change character (docs/search.md §8.3). For list-of-records and
tabular domains alike.

A threshold rule on the number of records (or units) — a mean published as 0 below t records,
counts under t published as 0, a key released only from t units on — shows only on a pair that
crosses t. Fixed sizes ({0, 1, 2, 4, max/2, max − 1, max}) cross it only by luck. Here:

- :func:`size_ladder`: every size 0..``DENSE`` and about 24 sizes spread geometrically over the rest
  of the declared range (the largest included); :func:`ladder_pairs` gives, for each *family* of
  databases (k copies of one record; for tables, k units in one group and k units each in every
  group), the pairs across k → k + 1 at each rung. These cost no samples.
- :func:`bisect_sizes` (adaptive; choosing samples only): draws ``probe`` outputs of each family's
  database at every rung, reduces them to their *character* (:func:`character`: which keys are
  always / sometimes released, which values carry an atom, whether an atom sits at 0, whether nulls
  appear), and bisects between adjacent rungs whose characters differ until the two sizes are
  adjacent (t − 1, t); the family's pairs there join the candidates. A rule at any size the domain
  allows is then crossed within ⌈log₂(gap)⌉ probes per change.

The probe outputs only choose which pairs to screen: they are drawn through
:meth:`SearchDraws.draw` and thrown away (never stored), so no event is ever tested on them; the
staged tests and the final certification draw their own fresh outputs (app.search.certify).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.sampling.protocol import database_key
from app.search.domain import CategoryRecords, InputDomain, VectorRecords
from app.search.pairs import CandidatePair, RecordSpace, valid_pairs
from app.search.protocols import SizeFamily
from app.search.tables import TableSizeFamily

__all__ = ["DENSE", "RecordSizeFamily", "SizeLadder", "SizeProbe", "bisect_sizes", "character", "ladder_pairs", "size_families",
           "size_ladder"]

#: Every size from 0 to this is tried.
DENSE = 12
#: Rungs of the ladder above DENSE (geometric, the largest size included).
LADDER_RUNGS = 24
#: A value counts as an atom when at least this share of the probe outputs take it exactly.
ATOM_SHARE = 0.5


def size_ladder(lo: int, hi: int, dense: int = DENSE, rungs: int = LADDER_RUNGS) -> list[int]:
    """Every size in [lo, min(hi, lo + dense)] and a geometric ladder over the rest of [lo, hi]."""
    sizes = set(range(lo, min(hi, lo + dense) + 1))
    start = max(lo + dense, 1)
    if hi > start:
        for g in np.geomspace(start, hi, rungs):
            sizes.add(int(round(g)))
        sizes.add(hi)
    return sorted(s for s in sizes if lo <= s <= hi)


class RecordSizeFamily:
    """k copies of one record (a high edge, or a middle value), and their neighbours across k → k + 1."""

    def __init__(self, domain: InputDomain, value: Any, other: Any, label: str) -> None:
        self.domain, self.value, self.other = domain, value, other
        self.name = f"records ({label})"

    def base(self, k: int) -> list[Any]:
        return [self.value] * k

    def pairs(self, k: int) -> list[CandidatePair]:
        d = self.domain
        out = []
        if "add_remove" in d.neighbours and d.size.min <= k and k + 1 <= d.size.max:
            out.append(CandidatePair(self.base(k), self.base(k + 1), "add_remove", "sizes",
                                     f"{k} against {k + 1} × {self.value!r}"))
        if "replace_one" in d.neighbours and self.other is not None:
            for m in (k, k + 1):
                if max(d.size.min, 1) <= m <= d.size.max:
                    out.append(CandidatePair(self.base(m), self.base(m - 1) + [self.other], "replace_one", "sizes",
                                             f"{m} × {self.value!r}, one replaced by {self.other!r}"))
        return out


def size_families(domain: InputDomain) -> list[SizeFamily]:
    """The database families whose size is varied (none for fixed-length answer vectors)."""
    if domain.is_table:
        kinds = ["same", "every"] if len(TableSizeFamily(domain, "same").space.base_groups()) > 1 else ["same"]
        return [TableSizeFamily(domain, k) for k in kinds]
    if domain.is_vector or domain.size.min == domain.size.max and "add_remove" not in domain.neighbours \
            and "replace_one" not in domain.neighbours:
        return []
    space = RecordSpace(domain)
    edges = space.edges()
    if isinstance(domain.records, CategoryRecords):
        vals = domain.records.values
        return [RecordSizeFamily(domain, vals[0], vals[1] if len(vals) > 1 else None, "first category")]
    if isinstance(domain.records, VectorRecords):
        return [RecordSizeFamily(domain, edges[1] if len(edges) > 1 else edges[0], edges[0], "a corner")]
    high = max(edges)
    low = min(edges)
    mid = edges[2] if len(edges) > 2 else edges[0]
    fams = [RecordSizeFamily(domain, high, low, "high edge")]
    if mid != high:
        fams.append(RecordSizeFamily(domain, mid, high, "middle"))
    return fams


class SizeLadder:
    """The size ladder as a :class:`app.search.protocols.PairGenerator` (:func:`ladder_pairs`)."""

    name = "sizes"

    def pairs(self, domain: InputDomain, seed: int = 0, validate: bool = True) -> list[CandidatePair]:
        return ladder_pairs(domain, validate=validate)


def ladder_pairs(domain: InputDomain, validate: bool = True) -> list[CandidatePair]:
    """The families' pairs at every rung of the ladder (interleaved by family), no samples;
    ``validate=False`` leaves the neighbour check to the caller."""
    fams = size_families(domain)
    if not fams:
        return []
    per = [[p for k in size_ladder(domain.size.min, domain.size.max) for p in f.pairs(k)] for f in fams]
    out: list[CandidatePair] = []
    for i in range(max(len(p) for p in per)):
        out += [p[i] for p in per if i < len(p)]
    return valid_pairs(domain, out) if validate else out


# ------------------------------------------------------------------------------------- character


def _atoms(values: np.ndarray) -> tuple[bool, bool]:
    """(an atom of ≥ ATOM_SHARE, that atom exactly 0) among finite ``values``."""
    v = values[np.isfinite(values)]
    if v.size < 10:  # too few values to call anything an atom
        return False, False
    uniq, counts = np.unique(v, return_counts=True)
    j = int(np.argmax(counts))
    if counts[j] < ATOM_SHARE * values.size:
        return False, False
    return True, bool(uniq[j] == 0)


def character(outputs: Any) -> frozenset:
    """What kind of outputs these are, robust to noise (module docstring): for keyed outputs which
    keys are always or sometimes released; for every key (or coordinate) whether nulls appear,
    whether one value carries at least half of the outputs (an atom), and whether that atom is 0."""
    from app.stats.keyed import KeyedSamples
    from app.stats.shapes import ListSamples

    feats: set[tuple] = set()
    if isinstance(outputs, KeyedSamples):
        n = len(outputs)
        if n == 0:
            return frozenset()
        for key in outputs.keys:
            released, value = outputs.column(key)
            present = float(released.mean())
            if present == 0:
                continue
            feats.add(("key", key, "always" if present == 1 else "sometimes"))
            vals = value[released]
            if np.isnan(vals).any():
                feats.add(("null", key))
            atom, zero = _atoms(vals)
            feats |= {("atom", key)} if atom else set()
            feats |= {("zero", key)} if zero else set()
        return frozenset(feats)
    if isinstance(outputs, ListSamples):
        feats |= {("length", int(w)) for w in set(outputs.lengths.tolist())}
        arr = outputs.values
    else:
        arr = np.asarray(outputs)
    if arr.dtype == object or arr.dtype.kind in "US":
        uniq, counts = np.unique(arr.astype(str), return_counts=True)
        return frozenset(("label", u) for u, c in zip(uniq, counts, strict=True) if c >= 0.1 * arr.size)
    arr = arr.astype(float).reshape(len(arr), -1)
    for j in range(arr.shape[1]):
        col = arr[:, j]
        if np.isnan(col).any():
            feats.add(("null", j))
        atom, zero = _atoms(col)
        feats |= {("atom", j)} if atom else set()
        feats |= {("zero", j)} if zero else set()
    return frozenset(feats)


@dataclass
class SizeProbe:
    """What the bisection did: the characters seen, the boundaries found, the outputs it drew."""

    boundaries: list[dict[str, Any]] = field(default_factory=list)
    probed: dict[str, list[int]] = field(default_factory=dict)
    outputs: int = 0
    pairs: list[CandidatePair] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"boundaries": self.boundaries, "probed_sizes": self.probed, "outputs": self.outputs,
                "pairs": len(self.pairs)}


async def bisect_sizes(draws: Any, domain: InputDomain, *, probe: int = 100, budget: int = 60_000,
                       max_boundaries: int = 8, deadline: float | None = None) -> SizeProbe:
    """Probe every family on the ladder and bisect where the character changes (module
    docstring). Draws at most ``budget`` outputs (phase ``screening``), never stored."""
    import time

    result = SizeProbe()
    fams = size_families(domain)
    ladder = size_ladder(domain.size.min, domain.size.max)
    if not fams or len(ladder) < 2:
        return result
    spent0 = draws.total

    def room() -> bool:
        return draws.total - spent0 + probe <= budget and (deadline is None or time.monotonic() < deadline)

    for fam in fams:
        seen: dict[int, frozenset | None] = {}

        async def char(k: int, fam: Any = fam, seen: dict = seen) -> frozenset | None:
            if k not in seen:
                db = fam.base(k)
                if domain.problem(db) is not None:
                    seen[k] = None
                    return None
                got = await draws.draw([db], probe, "screening", note=f"size probe {fam.name}")
                out = got.get(database_key(db))
                seen[k] = None if out is None else character(out)
            return seen[k]

        # the ladder, within the budget: all rungs when they fit, else a spread of them
        affordable = max(2, (budget - (draws.total - spent0)) // max(1, probe * len(fams)) // 2)
        rungs = ladder if len(ladder) <= affordable else \
            sorted({ladder[int(i)] for i in np.linspace(0, len(ladder) - 1, affordable).round()})
        for k in rungs:
            if not room():
                break
            await char(k)
        found = 0
        probed = [k for k in rungs if k in seen and seen[k] is not None]
        for a, b in zip(probed, probed[1:], strict=False):
            if seen[a] == seen[b]:
                continue
            lo, hi = a, b
            while hi - lo > 1 and room():
                mid = (lo + hi) // 2
                c = await char(mid)
                if c is None:
                    break
                if c != seen[lo]:
                    hi = mid
                else:
                    lo = mid
            if hi - lo == 1:
                changed = sorted(str(f) for f in seen[lo] ^ seen[hi])[:6]  # type: ignore[operator]
                result.boundaries.append({"family": fam.name, "sizes": [lo, hi], "changed": changed})
                result.pairs += fam.pairs(lo)
                found += 1
            if found >= max_boundaries:
                break
        result.probed[fam.name] = sorted(seen)
    result.outputs = draws.total - spent0
    result.pairs = valid_pairs(domain, result.pairs)
    return result
