"""Thresholds q_{1−α}(T, γ) of the weighted aggregator.

Seed 002, eq. (15) and Lemma 1; method.md §3. Under the boundary null the z_j are approximately
iid N(0, 1), and the detector's false alarm over the horizon is the event

    M* = max_{0≤s<t≤T} (S_t − S_s) / (√T·((t − s)/T)^γ) > q,     S from iid N(0, 1).

``q_{1−α}(T, γ)`` is the upper α-quantile of M*, computed here by Monte Carlo on the finite-T
statistic (exact for that T, unlike the Brownian limit). A table for common (T, γ, α) ships as
package data (``data/thresholds.json``, made by ``bench/make_threshold_table.py``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import numba
import numpy as np
from numpy.typing import NDArray

from app.stats.aggregator import lag_weights, push_right_to_left_minimum, validate_design

DEFAULT_REPLICATIONS = 100_000
DEFAULT_SEED = 20_240_601
TABLE_RESOURCE = "data/thresholds.json"


@dataclass(frozen=True)
class ThresholdEstimate:
    """A threshold with its Monte-Carlo standard error and where it came from."""

    horizon: int
    gamma: float
    alpha: float
    value: float
    std_error: float
    replications: int
    seed: int
    source: Literal["table", "monte_carlo"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@numba.njit(cache=True, nogil=True)
def _max_weighted_increment(prefix: np.ndarray, inv_w: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """M* for each row of ``prefix`` (shape (R, T+1), S_0 = 0); ``inv_w[k] = 1/w_k``.

    Exact maximum over all pairs s < t, with a pruning that never skips the maximiser: for fixed
    t and lags ≥ k, (S_t − S_s)/w_{t−s} ≤ (S_t − min_{j≤t−k} S_j)/w_k, and this bound only falls
    as k grows (the prefix minimum rises, the weight grows), so the scan over k stops once the
    bound is below the best value found.
    """
    n_rows, t1 = prefix.shape
    horizon = t1 - 1
    out = np.empty(n_rows)
    prefix_min = np.empty(t1)
    for r in range(n_rows):
        s = prefix[r]
        m = s[0]
        for j in range(t1):
            if s[j] < m:
                m = s[j]
            prefix_min[j] = m
        # Seed with two lower bounds: the lag-1 terms and the largest draw-up divided by w_T.
        best = -np.inf
        drawup = -np.inf
        for t in range(1, t1):
            v = (s[t] - s[t - 1]) * inv_w[1]
            if v > best:
                best = v
            d = s[t] - prefix_min[t - 1]
            if d > drawup:
                drawup = d
        if drawup * inv_w[horizon] > best:
            best = drawup * inv_w[horizon]
        for t in range(1, t1):
            st = s[t]
            for k in range(1, t + 1):
                if (st - prefix_min[t - k]) * inv_w[k] <= best:
                    break
                v = (st - s[t - k]) * inv_w[k]
                if v > best:
                    best = v
        out[r] = best
    return out


@numba.njit(cache=True, nogil=True)
def _max_weighted_increment_stack(prefix: np.ndarray, inv_w: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """M* for each row of ``prefix`` like :func:`_max_weighted_increment`, faster when γ > 0.

    For a fixed end t, only starts s that are *right-to-left minima* of S_0..S_{t−1} (S_s < S_j
    for every s < j < t) can attain the maximum of a positive ratio: if some j in between had
    S_j ≤ S_s, then S_t − S_j ≥ S_t − S_s > 0 over a weight w_{t−j} ≤ w_{t−s}, so j does at least
    as well. Those starts form a stack whose S values increase towards its top (the nearest
    start); pushing S_{t−1} pops the entries with S ≥ S_{t−1}. A random walk has O(√t) of them.
    The scan goes from the top (lag 1) down, with the same pruning bound as the other kernel:
    every deeper entry has S ≥ S_bottom (the prefix minimum) and a larger lag. If a path's best
    ratio is ≤ 0 (the argument above needs a positive increment), the row is redone by the
    exhaustive kernel, so the result is the exact maximum in every case.
    """
    n_rows, t1 = prefix.shape
    out = np.empty(n_rows)
    stack = np.empty(t1, dtype=np.int64)
    for r in range(n_rows):
        s = prefix[r]
        # Lower bounds first: the lag-1 terms and the pair of the largest draw-up.
        best = -np.inf
        m_idx = 0
        dbest = -np.inf
        for t in range(1, t1):
            v = (s[t] - s[t - 1]) * inv_w[1]
            if v > best:
                best = v
            if s[t - 1] < s[m_idx]:
                m_idx = t - 1
            d = s[t] - s[m_idx]
            if d > dbest:
                dbest = d
                v = d * inv_w[t - m_idx]
                if v > best:
                    best = v
        if best <= 0.0:
            out[r] = _max_weighted_increment(prefix[r : r + 1], inv_w)[0]
            continue
        top = 0
        for t in range(1, t1):
            top = push_right_to_left_minimum(s, stack, top, t)
            st = s[t]
            smin = s[stack[0]]
            i = top - 1
            while i >= 0:
                j = stack[i]
                k = t - j
                if (st - smin) * inv_w[k] <= best:
                    break
                v = (st - s[j]) * inv_w[k]
                if v > best:
                    best = v
                i -= 1
        out[r] = best
    return out


def max_weighted_increment(prefix: NDArray[np.float64], horizon: int, gamma: float) -> NDArray[np.float64]:
    """M* = max over all 0 ≤ s < t ≤ T of the weighted increments of each row of ``prefix``.

    Exact (the tests compare it with a brute-force maximum). With γ = 0 every lag has the same
    weight and the pruned scan of :func:`_max_weighted_increment` stops at once; with γ > 0 the
    stack of right-to-left minima (:func:`_max_weighted_increment_stack`) is about 7 times faster
    at T = 10⁴.
    """
    validate_design(horizon, gamma)
    prefix = np.ascontiguousarray(prefix, dtype=np.float64)
    if prefix.ndim != 2 or prefix.shape[1] != horizon + 1:
        raise ValueError(f"prefix must have shape (R, {horizon + 1})")
    inv_w = 1.0 / lag_weights(horizon, gamma)
    if gamma == 0.0:
        return _max_weighted_increment(prefix, inv_w)
    return _max_weighted_increment_stack(prefix, inv_w)


def simulate_max_statistic(
    horizon: int,
    gamma: float,
    replications: int = DEFAULT_REPLICATIONS,
    seed: int = DEFAULT_SEED,
    progress: Callable[[int, int], None] | None = None,
) -> NDArray[np.float64]:
    """Draw ``replications`` copies of M* (eq. 15 at finite T). Reproducible for a seed.

    Works in chunks of about 10⁷ numbers, so memory stays below ~100 MB for any T.
    ``progress(done, total)`` is called after each chunk.
    """
    validate_design(horizon, gamma)
    if replications < 1:
        raise ValueError("replications must be >= 1")
    rng = np.random.default_rng(seed)
    chunk = max(1, min(replications, 10_000_000 // horizon))
    out = np.empty(replications)
    done = 0
    while done < replications:
        m = min(chunk, replications - done)
        prefix = np.zeros((m, horizon + 1))
        np.cumsum(rng.standard_normal((m, horizon)), axis=1, out=prefix[:, 1:])
        out[done : done + m] = max_weighted_increment(prefix, horizon, gamma)
        done += m
        if progress is not None:
            progress(done, replications)
    return out


def quantile_with_error(sample: NDArray[np.float64], alpha: float) -> tuple[float, float]:
    """Upper α-quantile of ``sample`` and its Monte-Carlo standard error.

    The error comes from the order statistics: the rank of the (1−α)-quantile has binomial
    standard deviation √(Rα(1−α)), so half the gap between the order statistics one such
    deviation either side estimates the quantile's standard error without a density estimate.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    x = np.sort(np.asarray(sample, dtype=np.float64))
    r = x.size
    value = float(np.quantile(x, 1.0 - alpha))
    sd_rank = math.sqrt(r * alpha * (1.0 - alpha))
    lo = int(max(0, math.floor(r * (1.0 - alpha) - sd_rank)))
    hi = int(min(r - 1, math.ceil(r * (1.0 - alpha) + sd_rank)))
    return value, float((x[hi] - x[lo]) / 2.0)


def threshold_quantile(
    horizon: int,
    gamma: float,
    alpha: float,
    replications: int = DEFAULT_REPLICATIONS,
    seed: int = DEFAULT_SEED,
    progress: Callable[[int, int], None] | None = None,
) -> ThresholdEstimate:
    """q_{1−α}(T, γ) by Monte Carlo (eq. 15), with its standard error. Reproducible for a seed."""
    sample = simulate_max_statistic(horizon, gamma, replications, seed, progress)
    value, se = quantile_with_error(sample, alpha)
    return ThresholdEstimate(
        horizon=horizon, gamma=float(gamma), alpha=float(alpha), value=value, std_error=se,
        replications=replications, seed=seed, source="monte_carlo",
    )


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    try:
        text = resources.files("app.stats").joinpath(TABLE_RESOURCE).read_text()
    except FileNotFoundError:
        return {"entries": []}
    return json.loads(text)


def table_entries() -> list[ThresholdEstimate]:
    """Every threshold of the shipped table."""
    t = _table()
    return [
        ThresholdEstimate(
            horizon=e["horizon"], gamma=e["gamma"], alpha=e["alpha"], value=e["value"],
            std_error=e["std_error"], replications=e["replications"], seed=e["seed"], source="table",
        )
        for e in t["entries"]
    ]


@lru_cache(maxsize=1)
def _table_index() -> dict[tuple[int, float, float], ThresholdEstimate]:
    return {(e.horizon, round(e.gamma, 9), round(e.alpha, 12)): e for e in table_entries()}


def threshold_from_table(horizon: int, gamma: float, alpha: float) -> ThresholdEstimate | None:
    """The shipped threshold for (T, γ, α), or None when the request is off the grid."""
    return _table_index().get((int(horizon), round(float(gamma), 9), round(float(alpha), 12)))


def threshold_for(
    horizon: int,
    gamma: float,
    alpha: float,
    replications: int = DEFAULT_REPLICATIONS,
    seed: int = DEFAULT_SEED,
    progress: Callable[[int, int], None] | None = None,
) -> ThresholdEstimate:
    """The table's value when (T, γ, α) is on the grid, else a Monte-Carlo estimate."""
    hit = threshold_from_table(horizon, gamma, alpha)
    if hit is not None:
        return hit
    return threshold_quantile(horizon, gamma, alpha, replications, seed, progress)


def table_grid() -> tuple[Sequence[int], Sequence[float], Sequence[float]]:
    """The (horizons, gammas, alphas) of the shipped table.

    The α list holds the common levels and their Bonferroni shares α/m for monitors with up to
    eight checks (method.md §4), so that most monitors start without calibrating.
    """
    horizons = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
    gammas = (0.0, 0.1, 0.25, 0.4)
    base = (0.1, 0.05, 0.01)
    alphas = sorted({round(a / m, 12) for a in base for m in range(1, 9)} | {0.025, 0.001}, reverse=True)
    return horizons, gammas, tuple(alphas)
