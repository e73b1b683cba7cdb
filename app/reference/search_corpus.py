"""Mechanisms whose bugs depend on the input, with their exact privacy parameter, and their correct
counterparts: the corpus of the search (docs/search.md §4; docs/reference_mechanisms.md §8).

Each entry declares the input domain its claim covers. A violating entry's bug shows only on some
inputs of that domain (values outside a forgotten clamp, a replaced record with asymmetric bounds,
the empty database, sizes above 50, all answers moved together, …), so a user who audits the
pair they thought of would miss it. ``true_value`` is the exact supremum of the claim's parameter
(ε, μ or ρ) over the declared domain, or the claimed δ's counterpart for the (ε, δ) entry;
``math.inf`` when unbounded. Served by ``dpwatch serve-reference`` at
``/reference/search/<slug>`` (app.reference.server).

Conventions: ε = 1 (μ = 1, ρ = 0.5); Laplace noise ``Lap(b)`` has density ``e^{−|t|/b}/(2b)``, so a
sum of sensitivity Δ with ``Lap(Δ/ε)`` is exactly ε-DP and the ratio ``e^{Δ'/b}`` of its tail
events is attained for any shift Δ' (Dwork & Roth 2014, Thm. 3.6); the Gaussian mechanism with
``N(0, σ²)`` and sensitivity Δ is exactly ``Δ/σ``-GDP (Dong, Roth & Su 2022, Thm. 2.7) and
``Δ²/(2σ²)``-zCDP (Bun & Steinke 2016, Prop. 1.6).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.stats.claims import parse_claim
from app.stats.shapes import OutputShape

__all__ = ["SEARCH_CORPUS", "SearchCorpusEntry", "search_corpus"]

EPSILON = 1.0
MU = 1.0
RHO = 0.5
APPROX_DELTA = 1e-3

Sampler = Callable[[Any, int, np.random.Generator], Any]


@dataclass(frozen=True)
class SearchCorpusEntry:
    slug: str
    description: str
    bug: str  # what is wrong, or "" for a correct mechanism
    domain: dict[str, Any]
    claim: dict[str, float]
    true_value: float  # the exact supremum of the claim's parameter over the domain
    shape: OutputShape
    sample: Sampler = field(repr=False, compare=False)
    where: str = ""  # the inputs on which the bug shows
    counterpart: str | None = None

    @property
    def violates(self) -> bool:
        """Whether the claim is broken somewhere in the domain."""
        return bool(self.bug)

    @property
    def parameter(self) -> str:
        return parse_claim(self.claim).parameter

    @property
    def claimed(self) -> float:
        return parse_claim(self.claim).value

    def to_row(self) -> dict[str, Any]:
        return {"slug": self.slug, "description": self.description, "bug": self.bug or None, "where": self.where,
                "domain": self.domain, "claim": self.claim, "parameter": self.parameter,
                "true_value": "unbounded" if math.isinf(self.true_value) else self.true_value,
                "violates": self.violates, "shape": self.shape.describe(), "counterpart": self.counterpart}


def _values(db: Any) -> np.ndarray:
    if not isinstance(db, list):
        raise ValueError("the database must be a JSON list of records")
    arr = np.asarray(db, dtype=np.float64).reshape(len(db), -1) if db else np.zeros((0, 1))
    if not np.all(np.isfinite(arr)):
        raise ValueError("records must be finite numbers")
    return arr


def _sum(db: Any, low: float | None = None, high: float | None = None) -> float:
    arr = _values(db)
    if low is not None or high is not None:
        arr = np.clip(arr, low, high)
    with np.errstate(over="ignore"):
        total = float(arr.sum())
    if not math.isfinite(total):
        raise OverflowError("the sum overflows")
    return total


def _laplace(centre: float | np.ndarray, scale: float, n: int, rng: np.random.Generator) -> np.ndarray:
    centre = np.asarray(centre, dtype=np.float64)
    return centre + rng.laplace(0.0, scale, size=(n,) + centre.shape)


def _counts(db: Any, categories: list[str]) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    out = np.zeros(len(categories))
    for rec in db:
        if rec not in index:
            raise ValueError(f"unknown category {rec!r}")
        out[index[rec]] += 1
    return out


def _answers(db: Any, k: int) -> np.ndarray:
    arr = _values(db).reshape(-1)
    if arr.size != k:
        raise ValueError(f"this mechanism answers {k} queries; got {arr.size}")
    return arr


# --------------------------------------------------------------------------------------------
# samplers (ε = 1 unless said otherwise)


def _clamp_forgotten(db, n, rng):
    return _laplace(_sum(db), 1.0 / EPSILON, n, rng)


def _clamp_correct(db, n, rng):
    return _laplace(_sum(db, 0.0, 1.0), 1.0 / EPSILON, n, rng)


def _clamp_sum_not_records(db, n, rng):
    return _laplace(min(10.0, max(0.0, _sum(db))), 1.0 / EPSILON, n, rng)


def _sum_maxabs(db, n, rng):
    return _laplace(_sum(db, -1.0, 3.0), 3.0 / EPSILON, n, rng)


def _sum_range(db, n, rng):
    return _laplace(_sum(db, -1.0, 3.0), 4.0 / EPSILON, n, rng)


def _mean_scaled_by_n(db, n, rng):
    k = len(db)
    if k == 0:
        raise ValueError("the mean of an empty database is undefined")
    return _laplace(_sum(db, 0.0, 1.0) / k, 1.0 / (k * EPSILON), n, rng)


def _hist(scale: float) -> Sampler:
    def sample(db, n, rng):
        return _laplace(_counts(db, CATEGORIES), scale, n, rng)
    return sample


def _empty_returns_zero(db, n, rng):
    if not db:
        return np.zeros(n)
    return _laplace(_sum(db, 0.0, 1.0), 1.0 / EPSILON, n, rng)


def _laplace_sum(db, n, rng):
    return _laplace(_sum(db, 0.0, 1.0), 1.0 / EPSILON, n, rng)


def _noise_halved_above_50(db, n, rng):
    scale = 1.0 / EPSILON if len(db) <= 50 else 0.5 / EPSILON
    return _laplace(_sum(db, 0.0, 1.0), scale, n, rng)


def _vector_hist(scale: float, k: int) -> Sampler:
    def sample(db, n, rng):
        return _laplace(_answers(db, k), scale, n, rng)
    return sample


def _vector_records_sum(scale: float) -> Sampler:
    def sample(db, n, rng):
        arr = np.clip(_values(db), -1.0, 1.0) if db else np.zeros((0, 2))
        if arr.shape[1] != 2:
            raise ValueError("records are vectors of 2 numbers")
        return _laplace(arr.sum(axis=0), scale, n, rng)
    return sample


def _int_sum(clamp: bool) -> Sampler:
    def sample(db, n, rng):
        if any(not isinstance(v, int) or isinstance(v, bool) for v in db):
            raise ValueError("records must be integers")
        vals = [min(100, max(0, v)) for v in db] if clamp else db
        total = float(sum(vals))
        return _laplace(total, 100.0 / EPSILON, n, rng)
    return sample


def _gaussian(sigma: float, low: float, high: float) -> Sampler:
    def sample(db, n, rng):
        return _sum(db, low, high) + rng.normal(0.0, sigma, size=n)
    return sample


CATEGORIES = ["a", "b", "c", "d"]
VECTOR_K = 5
SVT_K = 10


def _analytic_delta(epsilon: float, sigma: float, sensitivity: float) -> float:
    """δ(ε) of the Gaussian mechanism (Balle & Wang, ICML 2018, Thm. 8)."""
    from scipy.special import ndtr

    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon) * ndtr(-a - b))


def search_corpus() -> dict[str, SearchCorpusEntry]:
    """Every entry by slug (module docstring)."""
    from app.reference.corpus import corpus

    c = corpus(EPSILON)
    eps = {"epsilon": EPSILON}
    unbounded = {"records": {"type": "real"}, "size": {"min": 0, "max": 10}, "neighbours": ["add_remove"]}
    unit = {"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 0, "max": 10},
            "neighbours": ["add_remove"]}
    asym = {"records": {"type": "real", "low": -1, "high": 3}, "size": {"min": 1, "max": 10},
            "neighbours": ["replace_one"]}
    cat = {"records": {"type": "category", "values": CATEGORIES}, "size": {"min": 1, "max": 10},
           "neighbours": ["replace_one"]}
    linf5 = {"records": {"type": "real"}, "size": {"min": VECTOR_K, "max": VECTOR_K}, "neighbours": ["linf"],
             "sensitivity": 1}
    l1_5 = {**linf5, "neighbours": ["l1"]}
    linf10 = {"records": {"type": "real"}, "size": {"min": SVT_K, "max": SVT_K}, "neighbours": ["linf"],
              "sensitivity": 1}
    vec = {"records": {"type": "vector", "dim": 2, "low": -1, "high": 1}, "size": {"min": 0, "max": 8},
           "neighbours": ["add_remove"]}
    ints = {"records": {"type": "integer"}, "size": {"min": 0, "max": 10}, "neighbours": ["add_remove"]}
    real = OutputShape()
    approx_sigma = 1.0
    entries = [
        # ----- violations
        SearchCorpusEntry("clamp-forgotten", "sum + Lap(1/ε); promises to clamp records to [0, 1], forgets",
                          "no clamp: the sensitivity is unbounded", unbounded, eps, math.inf, real, _clamp_forgotten,
                          "a record far outside [0, 1], added or removed", "clamp-correct"),
        SearchCorpusEntry("clamp-sum-not-records", "clamp(sum, 0, 10) + Lap(1/ε): the sum is clamped, not each record",
                          "a large negative record cancels the others: Δ = 10", unbounded, eps, 10 * EPSILON, real,
                          _clamp_sum_not_records, "x = [−10, 10] against x′ = [10]", "clamp-correct"),
        SearchCorpusEntry("sum-maxabs-sensitivity", "clamp to [−1, 3], sum + Lap(3/ε)",
                          "sensitivity taken as max|bound| = 3; a replaced record moves the sum by high − low = 4",
                          asym, eps, 4 * EPSILON / 3, real, _sum_maxabs, "a record −1 replaced by 3",
                          "sum-range-sensitivity"),
        SearchCorpusEntry("mean-n-from-data", "clamp to [0, 1], mean + Lap(1/(nε)) with n the database's size",
                          "the noise scale depends on n, which add/remove changes", unit | {"size": {"min": 1, "max": 10}},
                          eps, math.inf, real, _mean_scaled_by_n, "any add/remove pair: the scales differ",
                          "mean-public-n"),
        SearchCorpusEntry("hist-replace-counts-twice", "category counts + Lap(1/ε) per bin",
                          "calibrated for add/remove; a replaced record moves two bins (ℓ1 sensitivity 2)", cat, eps,
                          2 * EPSILON, OutputShape(container="vector", length=len(CATEGORIES)), _hist(1.0 / EPSILON),
                          "any replacement", "hist-replace-correct"),
        SearchCorpusEntry("empty-returns-zero", "sum + Lap(1/ε), but the empty database answers 0 without noise",
                          "size 0 is answered exactly", unit, eps, math.inf, real, _empty_returns_zero,
                          "the empty database against one record", "laplace-sum"),
        SearchCorpusEntry("noise-halved-above-50", "sum + Lap(1/ε), Lap(1/(2ε)) for more than 50 records",
                          "a cheaper noise above 50 records", unit | {"size": {"min": 0, "max": 100}}, eps, math.inf,
                          real, _noise_halved_above_50, "sizes 50/51 (unbounded), above 51 (2ε)", "laplace-sum"),
        SearchCorpusEntry("rnm-value", "report noisy max returning the noisy value, Lap(2/ε), 5 answers",
                          "the value is kε/2-DP", linf5, eps, VECTOR_K * EPSILON / 2, real,
                          c["rnm-laplace-value"].sample, "all answers moved up together (StatDP's all above)",
                          "rnm-index"),
        SearchCorpusEntry("svt-no-query-noise", "sparse vector without query noise (Lyu et al. Alg. 5), 10 answers",
                          "no noise on the answers", linf10, eps, math.inf, c["svt5-vector"].shape,
                          c["svt5-vector"].sample, "answers on both sides of the threshold", "svt1"),
        SearchCorpusEntry("hist-linf", "answers + Lap(1/ε) each, 5 answers, for linf neighbours",
                          "calibrated for l1; linf moves every answer", linf5, eps, VECTOR_K * EPSILON,
                          OutputShape(container="vector", length=VECTOR_K), _vector_hist(1.0 / EPSILON, VECTOR_K),
                          "all answers moved together", "hist-linf-correct"),
        SearchCorpusEntry("vector-sum-linf-scale", "sum of 2-vectors in [−1, 1]² + Lap(1/ε) per coordinate",
                          "scale from the ℓ∞ norm 1; an added record moves the sum by ℓ1 up to 2", vec, eps,
                          2 * EPSILON, OutputShape(container="vector", length=2), _vector_records_sum(1.0 / EPSILON),
                          "a corner record (±1, ±1) added", "vector-sum-correct"),
        SearchCorpusEntry("int-clamp-forgotten", "sum of integers + Lap(100/ε); promises to clamp to [0, 100], forgets",
                          "no clamp", ints, eps, math.inf, real, _int_sum(False), "a record above 100 or below 0",
                          "int-clamp-correct"),
        SearchCorpusEntry("gaussian-maxabs", "clamp to [−1, 3], sum + N(0, σ²), σ = 3/μ",
                          "sensitivity taken as max|bound| = 3 instead of 4", asym, {"gdp_mu": MU}, 4 * MU / 3, real,
                          _gaussian(3.0 / MU, -1.0, 3.0), "a record −1 replaced by 3", "gaussian-range"),
        # ----- correct counterparts
        SearchCorpusEntry("clamp-correct", "clamp to [0, 1], sum + Lap(1/ε)", "", unbounded, eps, EPSILON, real,
                          _clamp_correct),
        SearchCorpusEntry("laplace-sum", "sum of records in [0, 1] + Lap(1/ε)", "", unit, eps, EPSILON, real,
                          _laplace_sum),
        SearchCorpusEntry("sum-range-sensitivity", "clamp to [−1, 3], sum + Lap(4/ε)", "", asym, eps, EPSILON, real,
                          _sum_range),
        SearchCorpusEntry("mean-public-n", "clamp to [0, 1], mean + Lap(1/(nε)), replace-one (n is public)", "",
                          unit | {"size": {"min": 1, "max": 10}, "neighbours": ["replace_one"]}, eps, EPSILON, real,
                          _mean_scaled_by_n),
        SearchCorpusEntry("hist-replace-correct", "category counts + Lap(2/ε) per bin", "", cat, eps, EPSILON,
                          OutputShape(container="vector", length=len(CATEGORIES)), _hist(2.0 / EPSILON)),
        SearchCorpusEntry("hist-l1", "answers + Lap(1/ε) each, 5 answers, l1 neighbours", "", l1_5, eps, EPSILON,
                          OutputShape(container="vector", length=VECTOR_K), _vector_hist(1.0 / EPSILON, VECTOR_K)),
        SearchCorpusEntry("hist-linf-correct", "answers + Lap(k/ε) each, 5 answers, linf neighbours", "", linf5, eps,
                          EPSILON, OutputShape(container="vector", length=VECTOR_K),
                          _vector_hist(VECTOR_K / EPSILON, VECTOR_K)),
        SearchCorpusEntry("rnm-index", "report noisy max (the index), Lap(2/ε), 5 answers", "", linf5, eps, EPSILON,
                          c["rnm-laplace"].shape, c["rnm-laplace"].sample),
        SearchCorpusEntry("svt1", "sparse vector (Lyu et al. Alg. 1), cutoff 1, 10 answers", "", linf10, eps, EPSILON,
                          c["svt1-vector"].shape, c["svt1-vector"].sample),
        SearchCorpusEntry("vector-sum-correct", "sum of 2-vectors in [−1, 1]² + Lap(2/ε) per coordinate", "", vec, eps,
                          EPSILON, OutputShape(container="vector", length=2), _vector_records_sum(2.0 / EPSILON)),
        SearchCorpusEntry("int-clamp-correct", "integers clamped to [0, 100], sum + Lap(100/ε)", "", ints, eps, EPSILON,
                          real, _int_sum(True)),
        SearchCorpusEntry("gaussian-range", "clamp to [−1, 3], sum + N(0, σ²), σ = 4/μ", "", asym, {"gdp_mu": MU}, MU,
                          real, _gaussian(4.0 / MU, -1.0, 3.0)),
        SearchCorpusEntry("gaussian-zcdp", "records in [0, 1], sum + N(0, 1): ρ = 1/2", "", unit, {"zcdp_rho": RHO},
                          RHO, real, _gaussian(1.0, 0.0, 1.0)),
        SearchCorpusEntry("gaussian-approx", "records in [0, 1], sum + N(0, 1), (1, δ(1))-DP exactly (analytic)", "",
                          unit, {"epsilon": EPSILON, "delta": _analytic_delta(EPSILON, approx_sigma, 1.0)}, EPSILON,
                          real, _gaussian(approx_sigma, 0.0, 1.0)),
    ]
    from app.reference.severity_corpus import severity_entries

    entries += severity_entries(SearchCorpusEntry, EPSILON)
    return {e.slug: e for e in entries}


SEARCH_CORPUS = tuple(search_corpus())
