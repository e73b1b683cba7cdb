"""The weighted Brownian-motion aggregator.

Seed 002, eqs. (13)-(15); method.md §2. With S_t = z_1 + … + z_t and horizon T,

    M_t = max_{1≤k≤t} (S_t − S_{t−k}) / (√T · (k/T)^γ)                    (eq. 13)

and the detector alarms at the first t with M_t > q_{1−α}(T, γ) (eq. 15, Algorithm 1).
For k = 1 the term is T^{γ−1/2}·z_t, the naive statistic rescaled (eq. 14).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray


class HorizonExceeded(ValueError):
    """Raised when a detector is asked to take a period past its horizon T."""


def validate_design(horizon: int, gamma: float) -> None:
    """Check T ≥ 1 and γ ∈ [0, 1/2) (the range for which seed 002's Theorem 1 holds)."""
    if not isinstance(horizon, (int, np.integer)) or isinstance(horizon, bool) or horizon < 1:
        raise ValueError(f"horizon must be an integer >= 1, got {horizon!r}")
    if not (0.0 <= gamma < 0.5):
        raise ValueError(f"gamma must lie in [0, 1/2), got {gamma!r}")


@functools.lru_cache(maxsize=64)
def lag_weights(horizon: int, gamma: float) -> NDArray[np.float64]:
    """w_k = √T·(k/T)^γ for k = 0..T (w_0 is unused and set to +inf). Cached, since a monitor's
    period rebuilds its aggregator from the stored state with the same (T, γ); read-only."""
    k = np.arange(horizon + 1, dtype=np.float64)
    w = math.sqrt(horizon) * np.power(k / horizon, gamma, where=k > 0, out=np.full(horizon + 1, np.inf))
    w[0] = np.inf
    w.flags.writeable = False
    return w


def weighted_statistic_path(z: ArrayLike, horizon: int, gamma: float) -> NDArray[np.float64]:
    """M_1..M_t of eq. (13) for a whole path at once (batch form, for simulations and tests).

    ``z`` has shape (t,) or (R, t) with t ≤ horizon; the result has the same shape. Cost is
    O(R·t²) arithmetic, vectorised over replications.
    """
    validate_design(horizon, gamma)
    z_arr = np.asarray(z, dtype=np.float64)
    squeeze = z_arr.ndim == 1
    z2 = np.atleast_2d(z_arr)
    r, t = z2.shape
    if t > horizon:
        raise HorizonExceeded(f"{t} periods given but the horizon is {horizon}")
    w = lag_weights(horizon, gamma)
    s = np.zeros((r, t + 1))
    np.cumsum(z2, axis=1, out=s[:, 1:])
    m = np.full((r, t), -np.inf)
    for k in range(1, t + 1):
        inc = (s[:, k:] - s[:, :-k]) / w[k]  # increments of lag k ending at t = k..t
        np.maximum(m[:, k - 1 :], inc, out=m[:, k - 1 :])
    return m[0] if squeeze else m


def first_crossing(statistic: NDArray[np.float64], threshold: float | NDArray[np.float64]) -> NDArray[np.int64]:
    """The first 1-based period whose statistic exceeds ``threshold`` along the last axis, 0 if none."""
    above = np.asarray(statistic) > threshold
    hit = above.any(axis=-1)
    first = above.argmax(axis=-1) + 1
    return np.where(hit, first, 0)


@dataclass(frozen=True)
class AggregatorStep:
    """What one period adds to a detector: the fields a user plots."""

    t: int
    z: float
    statistic: float
    threshold: float
    alarm: bool
    lag: int  # the k that attains the maximum in eq. (13)


class WeightedAggregator:
    """Incremental form of eq. (13): one ``update(z)`` per period, O(t) time, O(T) state.

    The state (prefix sums S_0..S_t, horizon, γ, threshold, first alarm) serialises to JSON with
    :meth:`to_state` and back with :meth:`from_state`; the service stores it after every period.
    ``update`` gives exactly the values of :func:`weighted_statistic_path`.
    """

    __slots__ = ("horizon", "gamma", "threshold", "_prefix", "_weights", "alarm_t", "max_statistic")

    def __init__(self, horizon: int, gamma: float = 0.25, threshold: float = math.inf) -> None:
        validate_design(horizon, gamma)
        if math.isnan(threshold):
            raise ValueError("threshold must not be NaN")
        self.horizon = int(horizon)
        self.gamma = float(gamma)
        self.threshold = float(threshold)
        self._prefix: list[float] = [0.0]
        self._weights = lag_weights(self.horizon, self.gamma)
        self.alarm_t: int | None = None
        self.max_statistic: float = -math.inf

    @property
    def t(self) -> int:
        """Number of periods taken so far."""
        return len(self._prefix) - 1

    @property
    def done(self) -> bool:
        return self.t >= self.horizon

    def update(self, z: float) -> AggregatorStep:
        """Take period t+1's z and return M_{t+1} compared with the threshold."""
        z = float(z)
        if not math.isfinite(z):
            raise ValueError(f"z must be finite, got {z!r}")
        if self.done:
            raise HorizonExceeded(
                f"the detector has taken all {self.horizon} periods of its horizon; start a new horizon"
            )
        self._prefix.append(self._prefix[-1] + z)
        t = self.t
        ratios = self._ratios()
        k = int(np.argmax(ratios))
        statistic = float(ratios[k])
        alarm = statistic > self.threshold
        if alarm and self.alarm_t is None:
            self.alarm_t = t
        self.max_statistic = max(self.max_statistic, statistic)
        return AggregatorStep(t=t, z=z, statistic=statistic, threshold=self.threshold, alarm=alarm, lag=k + 1)

    def _ratios(self) -> np.ndarray:
        """(S_t − S_{t−k}) / w_k for k = 1..t at the current t (the terms of eq. 13)."""
        t = self.t
        prev = np.asarray(self._prefix[-2::-1])  # S_{t-1}, ..., S_0, i.e. S_{t-k} for k = 1..t
        return (self._prefix[-1] - prev) / self._weights[1 : t + 1]

    def current_lag(self) -> int:
        """The k attaining M_t at the current t: how many recent periods the evidence pools.

        After an alarm, the last k periods are the detector's own estimate of how long the
        mechanism has been in violation (the MPL snapshot of an alarm chooses t̂ on them).
        """
        if self.t == 0:
            raise ValueError("no period taken yet")
        return int(np.argmax(self._ratios())) + 1

    def to_state(self) -> dict[str, Any]:
        return {
            "version": 1,
            "horizon": self.horizon,
            "gamma": self.gamma,
            "threshold": self.threshold if math.isfinite(self.threshold) else None,
            "prefix_sums": list(self._prefix),
            "alarm_t": self.alarm_t,
            "max_statistic": self.max_statistic if math.isfinite(self.max_statistic) else None,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WeightedAggregator:
        if state.get("version") != 1:
            raise ValueError(f"unknown aggregator state version {state.get('version')!r}")
        threshold = state["threshold"]
        agg = cls(state["horizon"], state["gamma"], math.inf if threshold is None else threshold)
        prefix = [float(v) for v in state["prefix_sums"]]
        if not prefix or prefix[0] != 0.0 or len(prefix) - 1 > agg.horizon:
            raise ValueError("invalid aggregator state: prefix sums must start at 0 and fit the horizon")
        agg._prefix = prefix
        agg.alarm_t = state.get("alarm_t")
        ms = state.get("max_statistic")
        agg.max_statistic = -math.inf if ms is None else float(ms)
        return agg


@numba.njit(cache=True, nogil=True, inline="always")
def push_right_to_left_minimum(s: np.ndarray, stack: np.ndarray, top: int, t: int) -> int:  # pragma: no cover - compiled
    """Push start t − 1 on the stack of right-to-left minima of S_0..S_{t−1} (its entries' S rise
    towards the top): pop the entries with S ≥ S_{t−1}, push t − 1; returns the new height. Only
    these starts can attain the largest positive (S_t − S_s)/w_{t−s} (see
    app/stats/thresholds.py ``_max_weighted_increment_stack``, which uses the same stack)."""
    v = s[t - 1]
    while top > 0 and s[stack[top - 1]] >= v:
        top -= 1
    stack[top] = t - 1
    return top + 1


@numba.njit(cache=True, nogil=True)
def _first_alarm_renewed(z: np.ndarray, horizon: int, inv_w: np.ndarray, thresholds: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """First 1-based period with M_t > q_j, the detector renewed every ``horizon`` periods.

    Horizon j (0-based) covers periods j·T + 1 .. (j+1)·T and restarts the prefix sums. At each
    t the lags are scanned over the right-to-left minima of S_0..S_{t−1} only (a larger ratio
    than a positive q is always attained at one of them; see thresholds.py), from the nearest
    one outwards, and the scan stops once (S_t − min S)/w_k ≤ q bounds every remaining lag.
    """
    n_rows, length = z.shape
    out = np.zeros(n_rows, dtype=np.int64)
    s = np.empty(horizon + 1)
    stack = np.empty(horizon + 1, dtype=np.int64)
    n_horizons = (length + horizon - 1) // horizon
    for r in range(n_rows):
        found = False
        for j in range(n_horizons):
            q = thresholds[j]
            s[0] = 0.0
            top = 0
            span = min(horizon, length - j * horizon)
            for t in range(1, span + 1):
                s[t] = s[t - 1] + z[r, j * horizon + t - 1]
                top = push_right_to_left_minimum(s, stack, top, t)
                st = s[t]
                smin = s[stack[0]]
                i = top - 1
                while i >= 0:
                    k = t - stack[i]
                    if (st - smin) * inv_w[k] <= q:
                        break
                    if (st - s[stack[i]]) * inv_w[k] > q:
                        found = True
                        break
                    i -= 1
                if found:
                    out[r] = j * horizon + t
                    break
            if found:
                break
    return out


def first_alarm_renewed(z: ArrayLike, horizon: int, gamma: float, thresholds: ArrayLike) -> NDArray[np.int64]:
    """First alarm period of the aggregator (eq. 13) over a run longer than its horizon.

    ``z`` has shape (R, L). The detector runs horizon after horizon of ``horizon`` periods, as a
    monitor with ``renew`` does (architecture.md), horizon j against ``thresholds[j]`` (for
    instance q_{1−α_j}(T, γ) with α_j = 6α/(π² j²), method.md §4). Returns 0 where no alarm.
    Equal to :func:`first_crossing` of :func:`weighted_statistic_path` horizon by horizon.
    """
    validate_design(horizon, gamma)
    z_arr = np.ascontiguousarray(np.atleast_2d(np.asarray(z, dtype=np.float64)))
    q = np.asarray(thresholds, dtype=np.float64)
    needed = -(-z_arr.shape[1] // horizon)
    if q.ndim != 1 or q.size < needed:
        raise ValueError(f"need one threshold per horizon: {needed}, got {q.size}")
    if np.any(q <= 0) or not np.all(np.isfinite(q)):
        raise ValueError("thresholds must be finite and > 0")
    return _first_alarm_renewed(z_arr, int(horizon), 1.0 / lag_weights(horizon, gamma), q)
