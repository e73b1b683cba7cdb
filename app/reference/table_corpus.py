"""Tabular pipelines in plain numpy, correct and misconfigured, with their exact privacy parameter
and the domain a user would honestly declare (docs/search.md §8.4).

A pipeline reads a table (a JSON list of row objects, app.search.table_domain) of people (the
privacy unit ``user``) who own rows (a ``city`` and an amount ``spend``), and releases keyed
outputs: ``{city: value}`` with keys possibly absent (app.stats.keyed). These are the mistakes
people make with the DP libraries' group-by aggregations (contribution bounds not enforced, the
key set taken from the data and claimed public, rows counted where the claim is about people,
partition selection claimed as pure ε, clipping after the noise, deterministic suppression of small
cells, a mean published as 0 below t records, counts under t published as 0), each next to a
correct counterpart.

Conventions. ε = 1. ``Lap(b)`` has density ``e^{−|t|/b}/(2b)``; a vector of answers of ℓ1
sensitivity Δ with ``Lap(Δ/ε)`` on each entry is ε-DP, and the ratio of tail events is attained at
``e^{Δ'/b}`` for a shift Δ' (Dwork & Roth 2014, Thm. 3.6). Contribution bounding keeps, for each
user, the first ``L`` rows in a canonical order (sorted by city, then spend): deterministic and
independent of the order in which rows arrive, as the multiset semantics of the domain requires
(a bound that keeps "the first rows received" depends on the order and breaks the claim on a pair
at distance 0). Laplace partition selection (Korolova et al. 2009; Google's and PipelineDP's
``LAPLACE_THRESHOLDING`` with one partition per user): a key whose bounded count c gets
``c + Lap(1/ε)`` and is released when that exceeds ``τ = 1 + ln(1/(2δ))/ε``; a key with one user
against none is released with probability ``½·e^{−ε(τ−1)} = δ`` exactly, and the released values
are ε-DP, so the pipeline is (ε, δ)-DP and tight at δ.

``true_value`` is the exact supremum of ε over the declared domain for the claimed δ (``math.inf``:
unbounded). Served by ``dpwatch serve-reference`` at ``/reference/tables/<slug>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.stats.keyed import KeyedSamples, keyed_from_dense
from app.stats.shapes import OutputShape

__all__ = ["CITIES", "TABLE_CORPUS", "TableCorpusEntry", "mean_zero_below", "records_mean_zero_below", "table_corpus",
           "counts_zero_below"]

EPSILON = 1.0
#: δ of the correct partition selection (tight) and of the misconfigured one claimed as pure ε.
TIGHT_DELTA = 1e-6
LOOSE_DELTA = 1e-2
CITIES = ["a", "b", "c", "d"]
SPEND_HIGH = 100.0

Sampler = Callable[[Any, int, np.random.Generator], Any]


@dataclass(frozen=True)
class TableCorpusEntry:
    slug: str
    description: str
    bug: str  # what is wrong, or "" for a correct pipeline
    domain: dict[str, Any]
    claim: dict[str, float]
    true_value: float  # exact supremum of ε over the domain at the claimed δ
    shape: OutputShape
    sample: Sampler = field(repr=False, compare=False)
    where: str = ""  # the inputs on which the bug shows

    @property
    def violates(self) -> bool:
        return bool(self.bug)


# ------------------------------------------------------------------------------------------ domains


def _domain(*, rows_max: int | None, spend_bounded: bool = True, neighbours: tuple[str, ...] = ("add_remove_unit",),
            size_max: int = 200, unit: bool = True) -> dict[str, Any]:
    spend: dict[str, Any] = {"type": "real", "low": 0, "high": SPEND_HIGH} if spend_bounded else {"type": "real"}
    columns: dict[str, Any] = {"city": {"type": "category", "values": list(CITIES)}, "spend": spend}
    table: dict[str, Any] = {"columns": columns}
    if unit:
        table = {"columns": {"user": {"type": "id"}, **columns}, "privacy_unit": "user",
                 "rows_per_unit": {"min": 1} if rows_max is None else {"min": 1, "max": rows_max}}
    return {"table": table, "size": {"min": 0, "max": size_max}, "neighbours": list(neighbours)}


KEYED = OutputShape(container="keyed")
SCALAR = OutputShape()


# ------------------------------------------------------------------------------------------ helpers


def _rows_by_user(db: list[dict[str, Any]]) -> list[list[tuple[str, float]]]:
    """Each unit's rows as (city, spend), in canonical order (sorted); rows without a user column
    are each their own unit."""
    by: dict[Any, list[tuple[str, float]]] = {}
    for i, r in enumerate(db):
        uid = ("u", r["user"]) if "user" in r else ("row", i)
        by.setdefault(uid, []).append((r["city"], float(r["spend"])))
    return [sorted(v) for v in by.values()]


def _bounded(db: list[dict[str, Any]], per_user: int | None) -> list[tuple[str, float]]:
    """The rows kept after contribution bounding: the first ``per_user`` rows of each user in
    canonical order (all rows when None)."""
    out: list[tuple[str, float]] = []
    for rows in _rows_by_user(db):
        out += rows if per_user is None else rows[:per_user]
    return out


def _per_key_distinct(db: list[dict[str, Any]], keys_per_user: int | None) -> list[tuple[str, float]]:
    """One row per (user, city), and at most ``keys_per_user`` cities per user (canonical order)."""
    out: list[tuple[str, float]] = []
    for rows in _rows_by_user(db):
        seen: dict[str, float] = {}
        for c, s in rows:
            seen.setdefault(c, s)
        items = sorted(seen.items())
        out += items if keys_per_user is None else items[:keys_per_user]
    return out


def _counts(rows: list[tuple[str, float]], keys: list[str]) -> np.ndarray:
    pos = {k: i for i, k in enumerate(keys)}
    c = np.zeros(len(keys))
    for city, _ in rows:
        if city in pos:
            c[pos[city]] += 1
    return c


def _sums(rows: list[tuple[str, float]], keys: list[str], low: float | None, high: float | None) -> np.ndarray:
    pos = {k: i for i, k in enumerate(keys)}
    s = np.zeros(len(keys))
    for city, v in rows:
        if city in pos:
            s[pos[city]] += float(np.clip(v, low, high)) if low is not None else v
    return s


def _keyed(keys: list[str], released: np.ndarray, values: np.ndarray, n: int) -> KeyedSamples:
    if not keys:
        return KeyedSamples.empty(n)
    return keyed_from_dense(keys, released, values)


def _laplace_keyed(true: np.ndarray, keys: list[str], scale: float, n: int, rng: np.random.Generator) -> KeyedSamples:
    values = true[None, :] + rng.laplace(0.0, scale, size=(n, len(keys)))
    return _keyed(keys, np.ones((n, len(keys)), dtype=bool), values, n)


def _tau(epsilon: float, delta: float) -> float:
    return 1.0 + math.log(1.0 / (2.0 * delta)) / epsilon


# ------------------------------------------------------------------------------------------ pipelines


def _count_bounded(per_user: int | None, scale: float) -> Sampler:
    """Counts per public city of the bounded rows, Lap(scale) each."""
    def sample(db, n, rng):
        return _laplace_keyed(_counts(_bounded(db, per_user), CITIES), CITIES, scale, n, rng)
    return sample


def _count_per_key_only(db, n, rng):
    """One row per (user, city) but no bound on the number of cities per user: Lap(1/ε) each."""
    return _laplace_keyed(_counts(_per_key_distinct(db, None), CITIES), CITIES, 1.0 / EPSILON, n, rng)


def _count_keys_bounded(keys_per_user: int, scale: float) -> Sampler:
    def sample(db, n, rng):
        return _laplace_keyed(_counts(_per_key_distinct(db, keys_per_user), CITIES), CITIES, scale, n, rng)
    return sample


def _keys_from_data(db, n, rng):
    """Bounded counts (1 row per user) with Lap(1/ε), released for the cities present in the data."""
    rows = _bounded(db, 1)
    keys = sorted({c for c, _ in rows})
    return _laplace_keyed(_counts(rows, keys), keys, 1.0 / EPSILON, n, rng)


def _partition_selection(epsilon: float, delta: float) -> Sampler:
    """Laplace partition selection with 1 row per user: keys from the data, c + Lap(1/ε) released
    above τ = 1 + ln(1/(2δ))/ε (module docstring)."""
    tau = _tau(epsilon, delta)

    def sample(db, n, rng):
        rows = _bounded(db, 1)
        keys = sorted({c for c, _ in rows})
        if not keys:
            return KeyedSamples.empty(n)
        noisy = _counts(rows, keys)[None, :] + rng.laplace(0.0, 1.0 / epsilon, size=(n, len(keys)))
        return _keyed(keys, noisy > tau, noisy, n)
    return sample


def _sum_clip_after_noise(db, n, rng):
    """Per-city sums of the raw spend (1 row per user), Lap(100/ε), then the noisy sum clipped to
    [0, 100·count]: the clamp meant for the rows is applied to the result."""
    rows = _bounded(db, 1)
    sums = _sums(rows, CITIES, None, None)
    counts = _counts(rows, CITIES)
    noisy = sums[None, :] + rng.laplace(0.0, SPEND_HIGH / EPSILON, size=(n, len(CITIES)))
    return _keyed(CITIES, np.ones((n, len(CITIES)), dtype=bool), np.clip(noisy, 0.0, SPEND_HIGH * counts[None, :]), n)


def _sum_clamped(db, n, rng):
    """Per-city sums of spend clamped to [0, 100] (1 row per user), Lap(100/ε)."""
    rows = _bounded(db, 1)
    return _laplace_keyed(_sums(rows, CITIES, 0.0, SPEND_HIGH), CITIES, SPEND_HIGH / EPSILON, n, rng)


def _suppress_small(t: int) -> Sampler:
    """Bounded counts with Lap(1/ε); a city whose true count is below t is dropped (deterministic
    suppression of small cells)."""
    def sample(db, n, rng):
        rows = _bounded(db, 1)
        true = _counts(rows, CITIES)
        noisy = true[None, :] + rng.laplace(0.0, 1.0 / EPSILON, size=(n, len(CITIES)))
        return _keyed(CITIES, np.repeat((true >= t)[None, :], n, axis=0), noisy, n)
    return sample


def counts_zero_below(t: int) -> Sampler:
    """Bounded counts with Lap(1/ε); a city whose true count is below t is published as 0."""
    def sample(db, n, rng):
        rows = _bounded(db, 1)
        true = _counts(rows, CITIES)
        noisy = true[None, :] + rng.laplace(0.0, 1.0 / EPSILON, size=(n, len(CITIES)))
        noisy[:, true < t] = 0.0
        return _keyed(CITIES, np.ones((n, len(CITIES)), dtype=bool), noisy, n)
    return sample


def _noisy_mean(rows: list[tuple[str, float]], n: int, rng: np.random.Generator, high: float) -> np.ndarray:
    """(Σ clamp(v) + Lap(2·high/ε)) / max(1, count + Lap(2/ε)): ε/2 for each part."""
    s = sum(min(max(v, 0.0), high) for _, v in rows)
    c = len(rows)
    ns = s + rng.laplace(0.0, 2.0 * high / EPSILON, size=n)
    nc = c + rng.laplace(0.0, 2.0 / EPSILON, size=n)
    return ns / np.maximum(1.0, nc)


def _mean(db, n, rng):
    return _noisy_mean(_bounded(db, 1), n, rng, SPEND_HIGH)


def mean_zero_below(t: int) -> Sampler:
    """The noisy mean of spend (1 row per user), published as 0 when fewer than t users."""
    def sample(db, n, rng):
        rows = _bounded(db, 1)
        if len(rows) < t:
            return np.zeros(n)
        return _noisy_mean(rows, n, rng, SPEND_HIGH)
    return sample


def records_mean_zero_below(t: int) -> Sampler:
    """A list-of-records domain: the noisy mean of reals in [0, 1], published as 0 below t records."""
    def sample(db, n, rng):
        if len(db) < t:
            return np.zeros(n)
        rows = [("", float(v)) for v in db]
        return _noisy_mean(rows, n, rng, 1.0)
    return sample


def records_mean(db, n, rng):
    return _noisy_mean([("", float(v)) for v in db], n, rng, 1.0)


RECORDS_DOMAIN = {"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 0, "max": 200},
                  "neighbours": ["add_remove"]}


def table_corpus(threshold: int = 10) -> dict[str, TableCorpusEntry]:
    """The corpus; ``threshold`` is the t of the threshold rules."""
    eps = {"epsilon": EPSILON}
    t = threshold
    entries = [
        # ----------------------------------------------------------------------- violations
        TableCorpusEntry(
            "count-bounds-not-enforced", "counts per city, Lap(1/ε), configured to keep 1 row per user",
            "the bound of 1 row per user is configured but never applied: a user with r rows in one city moves "
            "that count by r", _domain(rows_max=None), eps, math.inf, KEYED, _count_bounded(None, 1.0 / EPSILON),
            "a unit with many rows in one city"),
        TableCorpusEntry(
            "count-rows-not-people", "counts per city, Lap(1/ε), user-level claim, at most 5 rows per user",
            "counts rows where the claim is about people: a user with 5 rows in one city moves it by 5",
            _domain(rows_max=5), eps, 5.0, KEYED, _count_bounded(None, 1.0 / EPSILON),
            "a unit with 5 rows in one city"),
        TableCorpusEntry(
            "count-keys-per-user-unbounded", "counts of users per city (one row per user and city), Lap(1/ε)",
            "bounds each user's rows per city but not the number of cities: a user in all 4 cities moves 4 counts",
            _domain(rows_max=5), eps, 4.0, KEYED, _count_per_key_only, "a unit with a row in every city"),
        TableCorpusEntry(
            "keys-from-data", "counts per city (1 row per user), Lap(1/ε), key set claimed public",
            "releases the cities present in the data: a user alone in a city makes its key appear",
            _domain(rows_max=5), eps, math.inf, KEYED, _keys_from_data, "a unit bringing a city nobody else has"),
        TableCorpusEntry(
            "partition-selection-as-pure", f"Laplace partition selection at (ε = 1, δ = {LOOSE_DELTA:g}), "
            "claimed as pure ε = 1",
            f"a key with one user against none is released with probability δ = {LOOSE_DELTA:g} against 0: no "
            "pure ε holds", _domain(rows_max=5), eps, math.inf, KEYED, _partition_selection(EPSILON, LOOSE_DELTA),
            "a unit bringing a city nobody else has"),
        TableCorpusEntry(
            "sum-clip-after-noise", "sums of spend per city (1 row per user), Lap(100/ε), promises to clamp to "
            "[0, 100]", "clamps the noisy sum instead of each row: a row far above 100 moves the sum without "
            "bound", _domain(rows_max=5, spend_bounded=False), eps, math.inf, KEYED, _sum_clip_after_noise,
            "a unit with a far value"),
        TableCorpusEntry(
            "small-cells-suppressed", f"counts per city (1 row per user), Lap(1/ε), cells under {t} users dropped",
            f"the suppression looks at the true count: a city is absent at {t - 1} users and present at {t}",
            _domain(rows_max=5), eps, math.inf, KEYED, _suppress_small(t), f"{t - 1} against {t} users in a city"),
        TableCorpusEntry(
            "counts-zero-below-t", f"counts per city (1 row per user), Lap(1/ε), counts under {t} published as 0",
            f"a city with fewer than {t} users is published as exactly 0", _domain(rows_max=5), eps, math.inf,
            KEYED, counts_zero_below(t), f"{t - 1} against {t} users in a city"),
        TableCorpusEntry(
            "mean-zero-below-t", f"the mean spend (1 row per user, ε/2 on the sum and the count), 0 below {t} users",
            f"below {t} users the mean is published as exactly 0", _domain(rows_max=5), eps, math.inf, SCALAR,
            mean_zero_below(t), f"{t - 1} against {t} users"),
        TableCorpusEntry(
            "records-mean-zero-below-t", f"the mean of reals in [0, 1] (ε/2 on the sum and the count), 0 below {t} "
            "records", f"below {t} records the mean is published as exactly 0", RECORDS_DOMAIN, eps, math.inf,
            SCALAR, records_mean_zero_below(t), f"{t - 1} against {t} records"),
        # ----------------------------------------------------------------------- correct
        TableCorpusEntry(
            "count-bounded", "counts per city, 1 row per user enforced, Lap(1/ε)", "", _domain(rows_max=None), eps,
            1.0, KEYED, _count_bounded(1, 1.0 / EPSILON)),
        TableCorpusEntry(
            "count-two-keys", "counts of users per city, at most 2 cities per user, Lap(2/ε)", "",
            _domain(rows_max=None), eps, 1.0, KEYED, _count_keys_bounded(2, 2.0 / EPSILON)),
        TableCorpusEntry(
            "partition-selection", f"Laplace partition selection at (ε = 1, δ = {TIGHT_DELTA:g}), tight", "",
            _domain(rows_max=None), {"epsilon": EPSILON, "delta": TIGHT_DELTA}, 1.0, KEYED,
            _partition_selection(EPSILON, TIGHT_DELTA)),
        TableCorpusEntry(
            "sum-clamped", "sums of spend per city clamped to [0, 100] (1 row per user), Lap(100/ε)", "",
            _domain(rows_max=None, spend_bounded=False), eps, 1.0, KEYED, _sum_clamped),
        TableCorpusEntry(
            "mean", "the mean spend (1 row per user, ε/2 on the clamped sum and the count)", "",
            _domain(rows_max=None, spend_bounded=False), eps, 1.0, SCALAR, _mean),
        TableCorpusEntry(
            "row-count-replace", "counts of rows per city, no privacy unit, add/remove or replace a row, Lap(2/ε)",
            "", _domain(rows_max=None, unit=False, neighbours=("add_remove_row", "replace_row")), eps, 1.0, KEYED,
            _count_bounded(None, 2.0 / EPSILON)),
        TableCorpusEntry(
            "records-mean", "the mean of reals in [0, 1] (ε/2 on the sum and the count)", "", RECORDS_DOMAIN, eps,
            1.0, SCALAR, records_mean),
    ]
    return {e.slug: e for e in entries}


TABLE_CORPUS = tuple(table_corpus())
