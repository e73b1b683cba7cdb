"""Candidate pairs and the values of records: what every generator of the search builds on
(app/search/generators.py, sizes.py, tables.py import it; it imports none of them).

- :class:`CandidatePair`: a pair of databases, the relation it satisfies and where it came from;
- :class:`RecordSpace`: the values one record may take (edge values, far values, the unit cube);
- :func:`halton_points`, :func:`valid_pairs`: quasi-random points, and the pairs that are
  neighbours under the domain (checked exactly), each once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.sampling.protocol import database_key
from app.search.domain import (
    INT64_MAX,
    CategoryRecords,
    InputDomain,
    IntegerRecords,
    VectorRecords,
)

__all__ = ["FAR", "FLOAT_MAX", "INT_FAR", "CandidatePair", "RecordSpace", "halton_points", "pair_key",
           "unique_values", "valid_pairs"]

FLOAT_MAX = 1.7976931348623157e308
#: Magnitudes tried far outside the typical range when a side of the domain is open.
FAR = (1e3, 1e6, 1e9, 1e15)
INT_FAR = (1_000, 10**6, 2**31, 2**53)
def pair_key(x: Any, xp: Any) -> str:
    a, b = database_key(x), database_key(xp)
    return a + "|" + b if a <= b else b + "|" + a


@dataclass(frozen=True)
class CandidatePair:
    """A pair of neighbouring databases and where it came from."""

    x: list[Any]
    x_prime: list[Any]
    relation: str  # the declared relation it satisfies, or "identical"
    source: str  # statdp | halton | edge | uniform | refined
    note: str = ""

    @property
    def key(self) -> str:
        return pair_key(self.x, self.x_prime)

    def to_dict(self) -> dict[str, Any]:
        return {"x": self.x, "x_prime": self.x_prime, "relation": self.relation, "source": self.source,
                "note": self.note}


def _num(v: Any, integer: bool) -> Any:
    if integer:
        return int(v)
    f = float(v)
    return 0.0 if f == 0 else f  # no -0.0 in JSON


class RecordSpace:
    """The values one record may take: edge values, far values, and a map from the unit cube."""

    def __init__(self, domain: InputDomain) -> None:
        self.domain = domain
        self.spec = domain.records
        spec = self.spec
        if isinstance(spec, VectorRecords):
            self.dim = spec.dim
            self.lows, self.highs = spec.lows(), spec.highs()
        else:
            self.dim = 1
            lo = getattr(spec, "low", None)
            hi = getattr(spec, "high", None)
            self.lows, self.highs = [lo], [hi]
        self.integer = isinstance(spec, IntegerRecords)

    @property
    def bounded(self) -> bool:
        return isinstance(self.spec, CategoryRecords) or all(
            lo is not None and hi is not None for lo, hi in zip(self.lows, self.highs))

    # scalar coordinates ---------------------------------------------------------------------

    def _clip(self, v: float, j: int) -> Any:
        lo, hi = self.lows[j], self.highs[j]
        if self.integer:
            v = int(round(v)) if math.isfinite(v) else (INT64_MAX if v > 0 else -INT64_MAX)
            v = max(-INT64_MAX, min(INT64_MAX, v))
        if lo is not None and v < lo:
            v = lo
        if hi is not None and v > hi:
            v = hi
        return _num(v, self.integer)

    def coordinate_edges(self, j: int) -> list[Any]:
        lo, hi = self.lows[j], self.highs[j]
        if lo is not None and hi is not None:
            vals = [lo, hi, (lo + hi) / 2, lo + (hi - lo) / 4, lo + 3 * (hi - lo) / 4]
            if lo < 0 < hi:
                vals.append(0)
            if self.integer:
                vals += [lo + 1, hi - 1]
        elif lo is not None:
            vals = [lo, lo + 1, lo + 10]
        elif hi is not None:
            vals = [hi, hi - 1, hi - 10]
        else:
            vals = [0, 1, -1, 0.5] if not self.integer else [0, 1, -1, 2]
        return unique_values(self._clip(v, j) for v in vals)

    def coordinate_far(self, j: int) -> list[Any]:
        """Values far out on each open side (nothing where the domain is bounded)."""
        lo, hi = self.lows[j], self.highs[j]
        mags = INT_FAR if self.integer else FAR
        out: list[Any] = []
        for m in mags:
            if hi is None:
                out.append(self._clip((lo or 0) + m, j))
            if lo is None:
                out.append(self._clip((hi or 0) - m, j))
        return unique_values(out)

    def coordinate_extreme(self, j: int) -> list[Any]:
        """The largest magnitudes a record can carry on each open side (and the smallest float)."""
        lo, hi = self.lows[j], self.highs[j]
        big = INT64_MAX if self.integer else FLOAT_MAX
        out: list[Any] = []
        if hi is None:
            out.append(self._clip(big, j))
        if lo is None:
            out.append(self._clip(-big, j))
        if not self.integer and (lo is None or lo <= 5e-324) and (hi is None or hi >= 5e-324):
            out.append(5e-324)
        return unique_values(out)

    def coordinate_from_unit(self, u: float, j: int) -> Any:
        lo, hi = self.lows[j], self.highs[j]
        if lo is not None and hi is not None:
            if self.integer:
                return self._clip(lo + math.floor(u * (hi - lo + 1)), j)
            return self._clip(lo + u * (hi - lo), j)
        # an open side: a signed magnitude from about 0.01 to 1e9, spread evenly in log scale
        t = 2.0 * u - 1.0
        mag = (10.0 ** (11.0 * abs(t)) - 1.0) * 0.01
        if lo is not None:
            v = lo + mag
        elif hi is not None:
            v = hi - mag
        else:
            v = math.copysign(mag, t)
        return self._clip(v, j)

    # whole records -----------------------------------------------------------------------------

    def _record(self, coords: list[Any]) -> Any:
        return coords if isinstance(self.spec, VectorRecords) else coords[0]

    def edges(self) -> list[Any]:
        """A handful of typical edge records: the bounds (corners for vectors), the middle, 0."""
        spec = self.spec
        if isinstance(spec, CategoryRecords):
            return list(spec.values)
        if not isinstance(spec, VectorRecords):
            return self.coordinate_edges(0)
        per = [self.coordinate_edges(j) for j in range(self.dim)]
        out = [[p[i % len(p)] for p in per] for i in range(3)]  # low corner, high corner, middle
        for j in range(min(self.dim, 4)):  # one coordinate high, the rest low
            rec = [p[0] for p in per]
            rec[j] = per[j][1] if len(per[j]) > 1 else per[j][0]
            out.append(rec)
        return unique_values(out)

    def far(self) -> list[Any]:
        if isinstance(self.spec, CategoryRecords):
            return []
        if not isinstance(self.spec, VectorRecords):
            return self.coordinate_far(0)
        out = []
        for i in range(len(FAR)):
            cols = [self.coordinate_far(j) for j in range(self.dim)]
            if all(cols):
                out.append([c[min(i, len(c) - 1)] for c in cols])
        return unique_values(out)

    def extreme(self) -> list[Any]:
        if isinstance(self.spec, CategoryRecords):
            return []
        if not isinstance(self.spec, VectorRecords):
            return self.coordinate_extreme(0)
        cols = [self.coordinate_extreme(j) for j in range(self.dim)]
        if not all(cols):
            return []
        return unique_values([[c[0] for c in cols], [c[-1] for c in cols]])

    def from_unit(self, u: np.ndarray) -> Any:
        """One record from ``self.width`` coordinates in [0, 1)."""
        spec = self.spec
        if isinstance(spec, CategoryRecords):
            m = len(spec.values)
            return spec.values[min(m - 1, int(u[0] * m))]
        return self._record([self.coordinate_from_unit(float(u[j]), j) for j in range(self.dim)])

    @property
    def width(self) -> int:
        return 1 if isinstance(self.spec, CategoryRecords) else self.dim


def unique_values(values: Iterable[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for v in values:
        k = json.dumps(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def halton_points(d: int, n: int, seed: int) -> np.ndarray:
    """``n`` scrambled Halton points in [0, 1)^d (the first 64 dimensions; the rest uniform)."""
    from scipy.stats import qmc

    rng = np.random.default_rng(seed)
    k = max(1, min(d, 64))
    pts = qmc.Halton(d=k, scramble=True, seed=rng).random(n)
    if d > k:
        pts = np.hstack([pts, rng.random((n, d - k))])
    return pts[:, :d] if d else np.zeros((n, 0))


def valid_pairs(domain: InputDomain, pairs: Iterable[CandidatePair]) -> list[CandidatePair]:
    """The pairs that are neighbouring under the domain (exactly), each once (either order)."""
    out, seen = [], set()
    for p in pairs:
        rel = domain.relation(p.x, p.x_prime)
        if rel is None:
            continue
        if p.key in seen:
            continue
        seen.add(p.key)
        out.append(p if rel == p.relation else CandidatePair(p.x, p.x_prime, rel, p.source, p.note))
    return out
