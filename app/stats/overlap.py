"""log E[r^K] for the hypergeometric overlap K of two count vectors (method.md §13.2, eq. (E)).

In a period of n independent pairs (X_i, Y_i), given a = ΣX_i and b = ΣY_i, the positions of the
X-ones and of the Y-ones are independent uniform subsets of sizes a and b, so the overlap
K = #{i: X_i = Y_i = 1} is hypergeometric exactly: P(K = k) = C(a, k)·C(n − a, b − k)/C(n, b) on
max(0, a + b − n) ≤ k ≤ min(a, b). The exact period e-value of §13.2 needs

    log E[r^K] = log Σ_k P(K = k)·r^k                                                       (E)

for one r = v·z/(u·w) > 0 per period and bet. The summand f(k) = P(K = k)·r^k is, up to a
constant, Fisher's noncentral hypergeometric distribution: log-concave in k, with term ratio

    f(k + 1)/f(k) = r·(a − k)(b − k) / ((k + 1)(n − a − b + k + 1)),

decreasing in k. The kernel finds the mode k₀ (where the ratio crosses 1), takes log f(k₀) from
log-factorials, and adds the terms outward from k₀ by the ratio until the rest of the geometric
tail bound falls below 10⁻¹⁵ of the sum (or the support ends). Every term is ≤ f(k₀), so nothing
overflows; the sum is exact to floating point for any support size, and it only ever *drops*
terms, which can only lower E[r^K]: the computed value is never above the exact one, so the
e-value built from it stays an e-value (its mean under the null stays ≤ 1).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln

#: Largest n for which the kernel reads log-factorials from a table (8 bytes per entry); above it,
#: ``math.lgamma`` per period.
LOG_FACTORIAL_TABLE_MAX = 1 << 22
#: The walk from the mode stops when the geometric bound on the remaining terms is below this
#: fraction of the sum.
TAIL_TOLERANCE = 1e-15


@numba.njit(cache=True, nogil=True, inline="always")
def _log_factorial(x: int, table: np.ndarray) -> float:  # pragma: no cover - compiled
    if x < table.size:
        return table[x]
    return math.lgamma(x + 1.0)


@numba.njit(cache=True, nogil=True)
def _log_overlap_mgf_flat(a: np.ndarray, b: np.ndarray, n: np.ndarray, log_r: np.ndarray, table: np.ndarray,
                          out: np.ndarray) -> None:  # pragma: no cover - compiled
    """out[i] = log Σ_k P(K = k)·r_i^k for K ~ Hypergeometric(n_i, a_i, b_i) (eq. (E))."""
    for i in range(a.size):
        ai, bi, ni = a[i], b[i], n[i]
        lr = log_r[i]
        lo = max(0, ai + bi - ni)
        hi = min(ai, bi)
        if lo == hi:
            out[i] = lo * lr  # K is determined by (a, b): P(K = lo) = 1
            continue
        m = ni - ai - bi
        r = math.exp(lr)
        # The mode: the smallest k with f(k+1)/f(k) < 1. Start from the root of
        # r(a − k)(b − k) = (k + 1)(m + k + 1) in [lo − 1, hi], then correct by single steps.
        qa = r - 1.0
        qb = -(r * (ai + bi) + m + 2.0)
        qc = r * ai * bi - (m + 1.0)
        if abs(qa) < 1e-12:
            root = -qc / qb
        else:
            disc = math.sqrt(max(qb * qb - 4.0 * qa * qc, 0.0))
            # the two roots, computed without cancellation
            q = -0.5 * (qb - disc) if qb < 0 else -0.5 * (qb + disc)
            r1 = q / qa
            r2 = qc / q if q != 0.0 else r1
            root = r1 if (lo - 1.0 <= r1 <= hi) else r2
        if not math.isfinite(root):
            root = 0.5 * (lo + hi)
        k0 = int(math.floor(root)) + 1
        k0 = min(max(k0, lo), hi)
        while k0 > lo and r * (ai - k0 + 1.0) * (bi - k0 + 1.0) < k0 * (m + k0 + 0.0):  # f(k0−1) > f(k0)
            k0 -= 1
        while k0 < hi and r * (ai - k0 + 0.0) * (bi - k0 + 0.0) >= (k0 + 1.0) * (m + k0 + 1.0):  # f(k0+1) ≥ f(k0)
            k0 += 1
        total = 1.0
        term = 1.0
        k = k0
        while k < hi:  # upward: f(k+1) = f(k)·ratio(k)
            ratio = r * (ai - k + 0.0) * (bi - k + 0.0) / ((k + 1.0) * (m + k + 1.0))
            term *= ratio
            total += term
            k += 1
            if term < TAIL_TOLERANCE * total and term * ratio < TAIL_TOLERANCE * total * (1.0 - ratio):
                break
        term = 1.0
        k = k0
        while k > lo:  # downward: f(k−1) = f(k)·k(m + k)/(r(a − k + 1)(b − k + 1))
            ratio = k * (m + k + 0.0) / (r * (ai - k + 1.0) * (bi - k + 1.0))
            term *= ratio
            total += term
            k -= 1
            if term < TAIL_TOLERANCE * total and term * ratio < TAIL_TOLERANCE * total * (1.0 - ratio):
                break
        log_pmf = (_log_factorial(ai, table) + _log_factorial(ni - ai, table) + _log_factorial(bi, table)
                   + _log_factorial(ni - bi, table) - _log_factorial(ni, table) - _log_factorial(k0, table)
                   - _log_factorial(ai - k0, table) - _log_factorial(bi - k0, table)
                   - _log_factorial(m + k0, table))
        out[i] = log_pmf + k0 * lr + math.log(total)


_TABLE_CACHE: dict[int, NDArray[np.float64]] = {}


def _table(n_max: int) -> NDArray[np.float64]:
    size = 1
    while size <= n_max:
        size *= 2
    size = min(size, LOG_FACTORIAL_TABLE_MAX + 1)
    if size not in _TABLE_CACHE:
        _TABLE_CACHE.clear()
        _TABLE_CACHE[size] = gammaln(np.arange(size, dtype=np.float64) + 1.0)
    return _TABLE_CACHE[size]


def _as_counts(x: ArrayLike, what: str) -> NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
        raise ValueError(f"{what} must be whole numbers (counts)")
    return arr


def log_overlap_mgf(a: ArrayLike, b: ArrayLike, n: ArrayLike, log_r: ArrayLike) -> NDArray[np.float64]:
    """log E[r^K], K ~ Hypergeometric(population n, a successes, b draws), eq. (E) of method.md §13.2.

    ``a``, ``b``, ``n`` (whole numbers, 0 ≤ a, b ≤ n, n ≥ 1) and ``log_r`` (finite) broadcast together;
    the result has their broadcast shape. Never above the exact value (see the module docstring), and
    equal to it to floating point.
    """
    a_arr, b_arr, n_arr = _as_counts(a, "a"), _as_counts(b, "b"), _as_counts(n, "n")
    lr = np.asarray(log_r, dtype=np.float64)
    a_arr, b_arr, n_arr, lr = np.broadcast_arrays(a_arr, b_arr, n_arr, lr)
    if a_arr.size == 0:
        return np.zeros(a_arr.shape)
    if np.any(n_arr < 1) or np.any((a_arr < 0) | (a_arr > n_arr) | (b_arr < 0) | (b_arr > n_arr)):
        raise ValueError("need n >= 1 and counts a, b in [0, n]")
    if not np.all(np.isfinite(lr)):
        raise ValueError("log r must be finite")
    ai = np.ascontiguousarray(a_arr, dtype=np.int64).ravel()
    bi = np.ascontiguousarray(b_arr, dtype=np.int64).ravel()
    ni = np.ascontiguousarray(n_arr, dtype=np.int64).ravel()
    lri = np.ascontiguousarray(lr, dtype=np.float64).ravel()
    out = np.empty(ai.size)
    _log_overlap_mgf_flat(ai, bi, ni, lri, _table(int(ni.max())), out)
    return out.reshape(a_arr.shape)
