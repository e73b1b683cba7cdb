"""Search-corpus entries whose certified bound understates the bug (docs/search.md §3.5): the
severity phase must report a bound a user can act on. Each true value is from the analysis in
its description; they join app.reference.search_corpus.

- ``ten-div-n``: ``10 // n + Lap(3/ε)`` for n ≥ 1 records. 10 // n over n = 1, 2, 3, … is 10, 5,
  3, 2, 2, 1, …, 1, 0: the largest move under add/remove is |10 − 5| = 5 (n = 1 ↔ 2), not the 3
  the scale assumes, so the mechanism is exactly 5ε/3-DP (a Laplace shift of 5 at scale 3; Dwork &
  Roth 2014, Thm. 3.6, its tail events attain the ratio e^{5/3}).
- ``composition-forgotten``: a noisy sum and a noisy count of records in [0, 1], each with
  Lap(1/ε), released together under the claim ε: adding a record v moves them by (v, 1), so the
  pair is exactly (1 + v)ε ≤ 2ε-DP (basic composition is tight for Laplace; sup at v = 1).
- ``median-local-sensitivity``: the median plus Lap(LS(x)/ε) with LS(x) the larger gap from the
  median to its neighbouring order statistics (the domain's bounds 0 and 1 at the ends; the local
  sensitivity, not the smooth one). On x = [v, v, v] the gaps are 0 and the median v is released
  exactly; removing one record (x′ = [v, v], v > 0) leaves the gap v below the median, so x′'s
  output is continuous: the atom at v has probability 1 under x and 0 under x′, ε = ∞.
- the mean divided by the true count is ``mean-n-from-data`` (already in the corpus, ε = ∞).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["severity_entries"]


def _records(db: Any, low: float, high: float) -> np.ndarray:
    if not isinstance(db, list):
        raise ValueError("the database must be a JSON list of records")
    arr = np.asarray(db, dtype=np.float64).reshape(-1)
    if arr.size and not (np.all(np.isfinite(arr)) and arr.min() >= low and arr.max() <= high):
        raise ValueError(f"records must be numbers in [{low:g}, {high:g}]")
    return arr


def _ten_div_n(db, n, rng):
    k = len(_records(db, -math.inf, math.inf))
    if k == 0:
        raise ValueError("10 // n needs at least one record")
    return 10 // k + rng.laplace(0.0, 3.0, size=n)


def _composition_forgotten(db, n, rng):
    arr = _records(db, 0.0, 1.0)
    centre = np.array([arr.sum(), float(arr.size)])
    return centre + rng.laplace(0.0, 1.0, size=(n, 2))


def _median_local_sensitivity(db, n, rng):
    arr = np.sort(_records(db, 0.0, 1.0))
    if arr.size == 0:
        raise ValueError("the median of an empty database is undefined")
    m = (arr.size - 1) // 2
    below = arr[m] - (arr[m - 1] if m >= 1 else 0.0)
    above = (arr[m + 1] if m + 1 < arr.size else 1.0) - arr[m]
    scale = max(below, above)  # the local sensitivity, claimed as if it were global
    if scale == 0:
        return np.full(n, arr[m])
    return arr[m] + rng.laplace(0.0, scale, size=n)


def severity_entries(entry_type: Any, epsilon: float) -> list[Any]:
    """The entries above as ``entry_type`` (app.reference.search_corpus.SearchCorpusEntry)."""
    from app.stats.shapes import OutputShape

    eps = {"epsilon": epsilon}
    unit = {"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 1, "max": 10},
            "neighbours": ["add_remove"]}
    real = OutputShape()
    return [
        entry_type("ten-div-n", "10 // n + Lap(3/ε), n = the number of records",
                   "the sensitivity of 10 // n is 5 (n = 1 ↔ 2), the scale assumes 3", unit | {"size": {"min": 1, "max": 20}},
                   eps, 5 * epsilon / 3, real, _ten_div_n, "one record against two", None),
        entry_type("composition-forgotten", "a noisy sum and a noisy count, Lap(1/ε) each, released together",
                   "two ε-DP releases composed: 2ε", unit | {"size": {"min": 0, "max": 10}}, eps, 2 * epsilon,
                   OutputShape(container="vector", length=2), _composition_forgotten, "a record 1 added", None),
        entry_type("median-local-sensitivity", "median + Lap(LS(x)/ε), LS the local sensitivity of the median",
                   "local sensitivity: 0 on equal records, so the median is released exactly", unit, eps, math.inf,
                   real, _median_local_sensitivity, "three equal records v > 0 against two", None),
    ]
