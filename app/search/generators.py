"""Candidate pairs of neighbouring databases that cost no samples (docs/search.md §3.1).

DP-Auditorium's split (Kong et al., *DP-Auditorium*, 2024, ``dp_auditorium/generators``): a
generator proposes databases from the declared input domain, never looking at outputs. Four
families:

- :func:`statdp_patterns`: StatDP's input patterns (Ding et al., CCS 2018, ``generate_databases``;
  seed 003 Table I) as DP-Sniper's ``PatternGenerator`` applies them (Bichsel et al., S&P 2021):
  for query-answer vectors (``linf``) all eight patterns, for ``l1`` the one-answer ones, and for
  records the single-entry patterns (a database of 1s with one record at 0 or 2, or one record
  fewer), clipped to the domain's bounds, at several base levels and scaled by the sensitivity;
- :func:`halton_pairs`: low-discrepancy base databases (a scrambled Halton sequence,
  ``scipy.stats.qmc``) at several sizes, with their remove-one/add-one and replace-one neighbours,
  as Google's stochastic tester does (``cc/testing/stochastic_tester.h``: Halton databases and
  every database one record away), and for answer vectors their neighbours along StatDP's
  directions and along Halton sign vectors;
- :func:`edge_pairs`: the bounds, values far outside them where the domain has none, sizes 0, 1,
  2 and the maximum, extreme magnitudes (up to the largest float and 64-bit integer), and
  reordered records;
- :func:`uniform_pair`: one pair uniformly at random over the domain (the baseline random search).

Every pair is checked with :meth:`InputDomain.relation` before it is returned: a pair that is not
neighbouring under the declared relations would make a correct mechanism look broken.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from app.sampling.protocol import database_key
from app.search.domain import (
    CategoryRecords,
    InputDomain,
    IntegerRecords,
    VectorRecords,
)
from app.search.pairs import (
    CandidatePair,
    RecordSpace,
    halton_points,
    pair_key,
    unique_values,
    valid_pairs,
)
from app.search.protocols import PairGenerator
from app.search.sizes import SizeLadder
from app.search.tables import UnitMoves

__all__ = ["FAMILIES", "GENERATORS", "CandidatePair", "EdgeCases", "HaltonNeighbours", "PairGenerator", "RecordSpace",
           "StatDPPatterns", "candidate_pairs", "edge_pairs", "halton_pairs", "statdp_patterns",
           "uniform_pair", "database_key", "pair_key"]

#: Records removed or replaced per base database: all when it has at most this many.
MAX_NEIGHBOURS_PER_BASE = 12
DEFAULT_LIMIT = 300


# --------------------------------------------------------------------------------------------
# records


def record_sizes(domain: InputDomain, limit: int = 7) -> list[int]:
    """Database sizes worth trying: the smallest and largest, 1, 2, and a few in between."""
    lo, hi = domain.size.min, domain.size.max
    wanted = [lo, hi, 1, 2, lo + 1, hi - 1, (lo + hi) // 2]
    g = max(lo, 1)
    while g < hi:
        wanted.append(g)
        g *= 4
    sizes = sorted({s for s in wanted if lo <= s <= hi})
    if len(sizes) > limit:  # keep the ends and spread the rest
        keep = {sizes[0], sizes[-1]} | {s for s in sizes if s in (1, 2)}
        rest = [s for s in sizes if s not in keep]
        idx = np.linspace(0, len(rest) - 1, max(0, limit - len(keep))).round().astype(int)
        sizes = sorted(keep | {rest[i] for i in idx})
    return sizes


# --------------------------------------------------------------------------------------------
# neighbours


def _neighbour_indices(db: list[Any], limit: int = MAX_NEIGHBOURS_PER_BASE) -> list[int]:
    """Which records to remove or replace: all when few, else the extremes and a spread."""
    k = len(db)
    if k <= limit:
        return list(range(k))

    def score(v: Any) -> float:
        if isinstance(v, list):
            return float(np.sum(np.abs(v)))
        return float(v) if isinstance(v, (int, float)) else 0.0

    vals = [score(v) for v in db]
    chosen = {int(np.argmin(vals)), int(np.argmax(vals)), 0, k - 1}
    chosen |= {int(i) for i in np.linspace(0, k - 1, limit - len(chosen) + 2).round()}
    return sorted(chosen)[:limit]


def _record_neighbours(domain: InputDomain, space: RecordSpace, x: list[Any], pool: list[Any],
                       source: str, note: str) -> Iterator[CandidatePair]:
    k = len(x)
    if "add_remove" in domain.neighbours:
        if k - 1 >= domain.size.min:
            seen = set()
            for i in _neighbour_indices(x):
                rec = json.dumps(x[i])
                if rec in seen:
                    continue
                seen.add(rec)
                yield CandidatePair(x, x[:i] + x[i + 1:], "add_remove", source, f"{note}, record {i} removed")
        if k + 1 <= domain.size.max:
            for v in pool:
                yield CandidatePair(x, x + [v], "add_remove", source, f"{note}, {json.dumps(v)} added")
    if "replace_one" in domain.neighbours and k >= 1:
        for i in _neighbour_indices(x, max(4, MAX_NEIGHBOURS_PER_BASE // 2)):
            for v in pool:
                if json.dumps(v) != json.dumps(x[i]):
                    yield CandidatePair(x, x[:i] + [v] + x[i + 1:], "replace_one", source,
                                        f"{note}, record {i} replaced by {json.dumps(v)}")


def _fit_vector(domain: InputDomain, space: RecordSpace, x: list[Any], target: list[Any]) -> list[Any]:
    """``target`` clipped to the bounds and pulled towards ``x`` until it is exactly a neighbour
    (float rounding in x + s·d may overshoot the sensitivity by an ulp)."""
    y = [space._clip(float(t), 0) for t in target]
    s = Fraction(domain.vector_sensitivity)
    rel = domain.neighbours
    for _ in range(64):
        diffs = [abs(Fraction(a) - Fraction(b)) for a, b in zip(x, y)]
        if ("linf" in rel and max(diffs) <= s) or ("l1" in rel and sum(diffs) <= s):
            return y
        j = int(np.argmax([float(d) for d in diffs]))
        if space.integer:
            y[j] = y[j] - 1 if y[j] > x[j] else y[j] + 1
        else:
            y[j] = float(np.nextafter(y[j], x[j]))
    return list(x)


#: StatDP's directions on k answers, as multiples of the sensitivity: (name, d(k)).
def _statdp_directions(k: int) -> list[tuple[str, list[int]]]:
    h = k // 2
    return [("one above", [1] + [0] * (k - 1)), ("one below", [-1] + [0] * (k - 1)),
            ("one above rest below", [1] + [-1] * (k - 1)), ("one below rest above", [-1] + [1] * (k - 1)),
            ("half half", [1] * h + [-1] * (k - h)), ("all above", [1] * k), ("all below", [-1] * k)]


def _vector_moves(domain: InputDomain, k: int, extra_signs: np.ndarray | None = None) -> list[tuple[str, list[float]]]:
    """Directions d with x' = x + d: StatDP's (linf), one-answer moves and splits (l1)."""
    s = float(domain.vector_sensitivity)
    moves: list[tuple[str, list[float]]] = []
    if "linf" in domain.neighbours:
        moves += [(name, [s * v for v in d]) for name, d in _statdp_directions(k)]
        if extra_signs is not None:
            for i, row in enumerate(extra_signs):
                moves.append((f"sign vector {i}", [s if u >= 0.5 else -s for u in row]))
    if "l1" in domain.neighbours:
        for j in sorted({0, k - 1, k // 2}):
            for sign in (1, -1):
                d = [0.0] * k
                d[j] = sign * s
                moves.append((f"answer {j} {'+' if sign > 0 else '−'}{s:g}", d))
        if k >= 2:
            half = s / 2 if not isinstance(domain.records, IntegerRecords) else float(int(s // 2))
            if half:
                moves.append(("split up/down", [half, -half] + [0.0] * (k - 2)))
            if not isinstance(domain.records, IntegerRecords):
                moves.append(("spread", [s / k] * k))
    return moves


def _vector_pairs(domain: InputDomain, space: RecordSpace, x: list[Any], moves: list[tuple[str, list[float]]],
                  source: str, note: str) -> Iterator[CandidatePair]:
    for name, d in moves:
        xp = _fit_vector(domain, space, x, [a + b for a, b in zip(x, d)])
        rel = domain.relation(x, xp)
        if rel and rel != "identical":
            yield CandidatePair(list(x), xp, rel, source, f"{note}, {name}")


# --------------------------------------------------------------------------------------------
# the families


def statdp_patterns(domain: InputDomain) -> list[CandidatePair]:
    """StatDP's patterns (module docstring), clipped to the domain as DP-Sniper does."""
    space = RecordSpace(domain)
    out: list[CandidatePair] = []
    if domain.is_vector:
        k = domain.size.max
        s = float(domain.vector_sensitivity)
        levels = unique_values([space._clip(v, 0) for v in (s, 0.0, *space.coordinate_edges(0)[:3])])
        for c in levels:
            base = [c] * k
            out += _vector_pairs(domain, space, base, _vector_moves(domain, k), "statdp", f"all answers {c:g}")
        if "linf" in domain.neighbours and k >= 2:  # X shape: (s ×h, 0 ×rest) against (0 ×h, s ×rest)
            h = k // 2
            x = [space._clip(s, 0)] * h + [space._clip(0.0, 0)] * (k - h)
            xp = _fit_vector(domain, space, x, [space._clip(0.0, 0)] * h + [space._clip(s, 0)] * (k - h))
            if domain.relation(x, xp) not in (None, "identical"):
                out.append(CandidatePair(x, xp, "linf", "statdp", "x shape"))
        return valid_pairs(domain, out)
    # records: a database of "1"s with one record at "0" or "2", or one record fewer, the levels
    # clipped to the domain (DP-Sniper's PatternGenerator with single-entry differences)
    if isinstance(space.spec, CategoryRecords):
        vals = space.spec.values
        one, zero, two = vals[min(1, len(vals) - 1)], vals[0], vals[min(2, len(vals) - 1)]
    else:
        def level(v: float) -> Any:
            coords = [space._clip(v, j) for j in range(space.dim)]
            return coords if isinstance(space.spec, VectorRecords) else coords[0]
        one, zero, two = level(1.0), level(0.0), level(2.0)
    for k in sorted({domain.size.max, max(domain.size.min, min(domain.size.max, 2))}):
        if k < 1:
            continue
        base = [one] * k
        out += list(_record_neighbours(domain, space, base, unique_values([zero, two]), "statdp", f"{k} × {json.dumps(one)}"))
    return valid_pairs(domain, out)


def halton_pairs(domain: InputDomain, bases_per_size: int = 3, seed: int = 0) -> list[CandidatePair]:
    """Halton base databases and their neighbours (module docstring)."""
    space = RecordSpace(domain)
    out: list[CandidatePair] = []
    if domain.is_vector:
        k = domain.size.max
        pts = halton_points(k, 2 * bases_per_size + 2, seed)
        signs = halton_points(k, 3, seed + 1)
        for b, u in enumerate(pts):
            base = [space.coordinate_from_unit(float(v), 0) for v in u]
            out += _vector_pairs(domain, space, base, _vector_moves(domain, k, signs), "halton", f"Halton base {b}")
        return valid_pairs(domain, out)
    pool_extra = halton_points(space.width, 8, seed + 7)
    for k in record_sizes(domain):
        if k == 0:
            pool = unique_values(space.edges()[:3] + [space.from_unit(u) for u in pool_extra[:2]])
            out += _record_neighbours(domain, space, [], pool, "halton", "empty base")
            continue
        pts = halton_points(k * space.width, bases_per_size, seed + 101 * k)
        for b, u in enumerate(pts):
            base = [space.from_unit(u[i * space.width:(i + 1) * space.width]) for i in range(k)]
            pool = unique_values(space.edges()[:2] + space.far()[:1] + [space.from_unit(pool_extra[b % len(pool_extra)])])
            out += _record_neighbours(domain, space, base, pool, "halton", f"Halton base {b} of {k} records")
    return valid_pairs(domain, out)


def edge_pairs(domain: InputDomain) -> list[CandidatePair]:
    """Bounds, far and extreme values, sizes 0/1/2/max and reordered records (module docstring)."""
    space = RecordSpace(domain)
    out: list[CandidatePair] = []
    edges, far, extreme = space.edges(), space.far(), space.extreme()
    if domain.is_vector:
        k = domain.size.max
        levels = unique_values(edges + far[:2] + far[-2:] + extreme)
        for c in levels:
            out += _vector_pairs(domain, space, [c] * k, _vector_moves(domain, k)[:8], "edge", f"all answers {c!r}")
        return valid_pairs(domain, out)
    lo, hi = domain.size.min, domain.size.max
    values = unique_values(edges + far + extreme)
    rel = domain.neighbours
    if "add_remove" in rel:
        if lo == 0:  # the empty database against one record
            out += [CandidatePair([], [v], "add_remove", "edge", "empty database") for v in values]
        for k in sorted({s for s in (1, 2, hi) if lo <= s - 1 and s <= hi}):
            for v in values:  # k equal records against k − 1
                out.append(CandidatePair([v] * k, [v] * (k - 1), "add_remove", "edge", f"{k} × {json.dumps(v)}"))
            if len(edges) >= 2:  # the other extreme added to a database at one bound
                a, b = edges[0], edges[1]
                out.append(CandidatePair([a] * (k - 1) + [b], [a] * (k - 1), "add_remove", "edge",
                                         f"{k - 1} × {json.dumps(a)} and one {json.dumps(b)}"))
                out.append(CandidatePair([b] * (k - 1) + [a], [b] * (k - 1), "add_remove", "edge",
                                         f"{k - 1} × {json.dumps(b)} and one {json.dumps(a)}"))
        out += _mixed_magnitudes(space, max(1, hi), lo, hi, far + extreme)
    if "replace_one" in rel:
        for k in sorted({s for s in (1, 2, hi) if max(lo, 1) <= s <= hi}):
            for v in values:
                for w in values:
                    if json.dumps(v) < json.dumps(w):
                        out.append(CandidatePair([v] * k, [v] * (k - 1) + [w], "replace_one", "edge",
                                                 f"{k} records: one {json.dumps(v)} replaced by {json.dumps(w)}"))
    # reordered records: the same multiset in another order (distance 0), and with a neighbour
    if hi >= 2:
        k = hi if hi <= 64 else max(lo, min(hi, 16))
        u = halton_points(k * space.width, 1, 12345)[0]
        base = [space.from_unit(u[i * space.width:(i + 1) * space.width]) for i in range(k)]
        if len(base) >= 2:
            out.append(CandidatePair(base, base[::-1], "identical", "edge", "reversed order"))
            if "add_remove" in rel and k - 1 >= lo:
                out.append(CandidatePair(base, base[1:][::-1], "add_remove", "edge",
                                         "first record removed, order reversed"))
            if "replace_one" in rel and edges:
                out.append(CandidatePair(base, ([edges[0]] + base[1:])[::-1], "replace_one", "edge",
                                         "first record replaced, order reversed"))
    return valid_pairs(domain, out)


def _mixed_magnitudes(space: RecordSpace, k: int, lo: int, hi: int, far: list[Any]) -> list[CandidatePair]:
    """Large records of both signs in one database, one removed: clamps applied to a sum instead
    of to each record show here (the sum stays in range while a record is far out)."""
    out = []
    if isinstance(space.spec, (CategoryRecords, VectorRecords)) or k < 2:
        return out
    pos = [v for v in far if v > 0]
    neg = [v for v in far if v < 0]
    for big in neg[:3] + pos[:3]:
        for small in (pos if big < 0 else neg)[:2]:
            if abs(small) >= abs(big):
                continue
            x = [big] + [small] * (k - 1)
            if lo <= k - 1:
                out.append(CandidatePair(x, x[1:], "add_remove", "edge",
                                         f"one {big:g} among {k - 1} × {small:g}, removed"))
    return out


def uniform_pair(domain: InputDomain, rng: np.random.Generator) -> CandidatePair:
    """One neighbouring pair drawn uniformly: a size, records from the unit cube, a relation and a
    random neighbour (the baseline random search, as DP-Auditorium's runner draws its trials)."""
    if domain.is_table:
        raise ValueError("uniform pairs are drawn for list-of-records domains only")
    space = RecordSpace(domain)
    for _ in range(100):
        relation = str(rng.choice(domain.neighbours))
        if domain.is_vector:
            k = domain.size.max
            x = [space.coordinate_from_unit(float(v), 0) for v in rng.random(k)]
            s = float(domain.vector_sensitivity)
            if relation == "linf":
                d = list(rng.uniform(-s, s, size=k))
            else:
                raw = rng.uniform(-1, 1, size=k)
                d = list(raw / max(np.abs(raw).sum(), 1e-12) * s * rng.random())
            xp = _fit_vector(domain, space, x, [a + b for a, b in zip(x, d)])
        else:
            lo, hi = domain.size.min, domain.size.max
            if relation == "add_remove":
                k = int(rng.integers(lo, hi))  # x has k records, x' one more
                x = [space.from_unit(rng.random(space.width)) for _ in range(k)]
                xp = x + [space.from_unit(rng.random(space.width))]
            else:
                k = int(rng.integers(max(lo, 1), hi + 1))
                x = [space.from_unit(rng.random(space.width)) for _ in range(k)]
                i = int(rng.integers(0, k))
                xp = x[:i] + [space.from_unit(rng.random(space.width))] + x[i + 1:]
        rel = domain.relation(x, xp)
        if rel is not None and rel != "identical":
            return CandidatePair(x, xp, rel, "uniform", "uniform random")
    raise ValueError("could not draw a neighbouring pair from the domain")


class StatDPPatterns:
    """StatDP's input patterns (:func:`statdp_patterns`) as a :class:`PairGenerator`."""

    name = "statdp"

    def pairs(self, domain: InputDomain, seed: int = 0, validate: bool = True) -> list[CandidatePair]:
        return statdp_patterns(domain)


class EdgeCases:
    """The edge cases (:func:`edge_pairs`) as a :class:`PairGenerator`."""

    name = "edge"

    def pairs(self, domain: InputDomain, seed: int = 0, validate: bool = True) -> list[CandidatePair]:
        return edge_pairs(domain)


class HaltonNeighbours:
    """Halton base databases and their neighbours (:func:`halton_pairs`) as a :class:`PairGenerator`."""

    name = "halton"

    def pairs(self, domain: InputDomain, seed: int = 0, validate: bool = True) -> list[CandidatePair]:
        return halton_pairs(domain, seed=seed)


#: Every generator by name.
GENERATORS: dict[str, PairGenerator] = {
    g.name: g for g in (StatDPPatterns(), EdgeCases(), HaltonNeighbours(), SizeLadder(), UnitMoves())
}
#: The families a search of a list-of-records domain chooses (``families``) → their generators: the
#: size ladder goes with the edge cases (every size 0..12 and a ladder above).
FAMILIES: dict[str, tuple[str, ...]] = {"statdp": ("statdp",), "edge": ("edge", "sizes"), "halton": ("halton",)}
#: StatDP's patterns come first; the others are interleaved in this order.
_LEADING = ("statdp",)
_INTERLEAVED = ("edge", "halton", "sizes")
#: A tabular domain's generators, interleaved.
TABLE_GENERATORS = ("sizes", "units")


def table_pairs(domain: InputDomain, limit: int, seed: int = 0) -> list[CandidatePair]:
    """The candidates of a tabular domain: the size ladder and the unit moves, interleaved, at
    most ``limit``."""
    lists = [GENERATORS[name].pairs(domain, seed, validate=False) for name in TABLE_GENERATORS]
    out: list[CandidatePair] = []
    seen: set[str] = set()
    for i in range(max(len(lst) for lst in lists)):
        for lst in lists:
            if i < len(lst) and lst[i].key not in seen:
                seen.add(lst[i].key)
                if database_key(lst[i].x) == database_key(lst[i].x_prime):
                    continue  # the same table twice (a move that changed nothing)
                out += valid_pairs(domain, [lst[i]])  # checked one by one: only up to the limit
        if len(out) >= limit:
            break
    return out[:limit]


def candidate_pairs(domain: InputDomain, limit: int = DEFAULT_LIMIT, seed: int = 0,
                    families: Iterable[str] = ("statdp", "edge", "halton")) -> list[CandidatePair]:
    """The candidates of the chosen families, at most ``limit``, each pair once: StatDP's patterns
    first, then edge cases and Halton neighbours interleaved, so that a small limit keeps some of
    each."""
    families = tuple(families)
    if domain.is_table:
        return table_pairs(domain, limit, seed)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"families: unknown {', '.join(map(repr, unknown))} (known: {', '.join(FAMILIES)})")
    chosen = {name for f in families for name in FAMILIES[f]}
    lists = [GENERATORS[name].pairs(domain, seed) for name in _LEADING if name in chosen]
    rest = [GENERATORS[name].pairs(domain, seed) for name in _INTERLEAVED if name in chosen]
    inter: list[CandidatePair] = []
    for i in range(max((len(r) for r in rest), default=0)):
        inter += [r[i] for r in rest if i < len(r)]
    out, seen = [], set()
    for p in [c for lst in lists for c in lst] + inter:
        if p.key not in seen:
            seen.add(p.key)
            out.append(p)
        if len(out) >= limit:
            break
    return out
