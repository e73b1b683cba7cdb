"""The statistic of one check in one period.

Implements seed 002 (Askin, Kutta, Dette, *Monitoring Violations of Differential Privacy over
Time*), eqs. (7)-(12) and (16), as written out in ``shared/docs/method.md`` §1:

    D̂_t = p̂_t − e^ε·q̂_t                       (eq. 7)
    z_t = √n · D̂_t / σ̂_t                       (eq. 12)

with two estimators of σ̂:

``wald``
    the paper's eq. (8), stabilised by eq. (16): σ̂² = max(p̂(1−p̂) + c²q̂(1−q̂), κ).
``score`` (default)
    the Farrington–Manning (1990) restricted maximum-likelihood variance, evaluated at the null
    boundary p = c·q. It replaces the plug-in estimate by the variance the counts would have if
    the check sat exactly on the boundary, which keeps the false-alarm rate near α for small
    probabilities where ``wald`` is badly anti-conservative (method.md §1).

All functions are vectorised: ``a`` and ``b`` may be arrays of any (broadcastable) shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

Variance = Literal["score", "wald"]

#: Default floor κ of the variance (eq. 16). It only matters in degenerate periods (all counts
#: 0 or n), where it keeps z finite; with non-degenerate counts σ̂² ≫ κ.
DEFAULT_KAPPA = 1e-6


@dataclass(frozen=True)
class PeriodStatistic:
    """The per-period numbers of one check (arrays, or 0-d arrays for scalar input)."""

    p_hat: NDArray[np.float64]
    q_hat: NDArray[np.float64]
    d_hat: NDArray[np.float64]
    sigma_hat: NDArray[np.float64]
    z: NDArray[np.float64]


def restricted_mle_q(a: ArrayLike, b: ArrayLike, n: ArrayLike, epsilon: float) -> NDArray[np.float64]:
    """Maximum-likelihood estimate of q under the boundary null p = e^ε·q.

    Maximises a·ln(cq) + (n−a)·ln(1−cq) + b·ln q + (n−b)·ln(1−q) over q ∈ [0, 1/c]. Setting the
    derivative to zero gives 2nc·q² − B·q + (a+b) = 0 with B = n + a + c(n + b); the root in
    [0, 1/c] is the smaller one (method.md §1). It is computed as 2(a+b)/(B + √Δ), which is the
    same root without the cancellation of (B − √Δ)/(4nc) when a + b is small.
    """
    c = float(np.exp(epsilon))
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    big_b = n + a + c * (n + b)
    disc = np.maximum(big_b * big_b - 8.0 * n * c * (a + b), 0.0)
    return 2.0 * (a + b) / (big_b + np.sqrt(disc))


def checked_counts(a: ArrayLike, b: ArrayLike, n: ArrayLike,
                   kappa: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(a, b, n)`` as float arrays, refused unless ``n ≥ 1``, ``0 ≤ a, b ≤ n`` and ``kappa > 0``
    (the counts of one check's period: ``a`` of ``n`` outputs of A(x) in the event, ``b`` of A(x'))."""
    if not kappa > 0:
        raise ValueError(f"kappa must be > 0, got {kappa!r}")
    a_arr = np.asarray(a, dtype=np.float64)
    b_arr = np.asarray(b, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    if np.any(n_arr < 1):
        raise ValueError("n must be >= 1")
    if np.any((a_arr < 0) | (a_arr > n_arr) | (b_arr < 0) | (b_arr > n_arr)):
        raise ValueError("counts a and b must lie in [0, n]")
    return a_arr, b_arr, n_arr


def period_statistic(
    a: ArrayLike,
    b: ArrayLike,
    n: ArrayLike,
    epsilon: float,
    variance: Variance = "score",
    kappa: float = DEFAULT_KAPPA,
) -> PeriodStatistic:
    """D̂, σ̂ and z of one or many periods (seed 002, eqs. 7, 8, 12, 16; method.md §1).

    ``a`` and ``b`` are the numbers of outputs of A(x) and A(x') in the event, out of ``n``
    each. ``kappa`` (> 0) floors the variance. Degenerate counts are handled without warnings:
    ``a = b = 0`` gives D̂ = 0 and z = 0; ``a = n, b = 0`` gives a large but finite z (the
    variance is at least κ); ``z = 0`` whenever D̂ = 0.
    """
    if not np.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if variance not in ("score", "wald"):
        raise ValueError(f"variance must be 'score' or 'wald', got {variance!r}")
    a_arr, b_arr, n_arr = checked_counts(a, b, n, kappa)

    c = float(np.exp(epsilon))
    p_hat = a_arr / n_arr
    q_hat = b_arr / n_arr
    d_hat = p_hat - c * q_hat
    if variance == "wald":
        var = p_hat * (1.0 - p_hat) + c * c * q_hat * (1.0 - q_hat)
    else:
        q_t = restricted_mle_q(a_arr, b_arr, n_arr, epsilon)
        p_t = c * q_t
        var = p_t * (1.0 - p_t) + c * c * q_t * (1.0 - q_t)
    sigma = np.sqrt(np.maximum(var, kappa))
    z = np.sqrt(n_arr) * d_hat / sigma
    z = np.where(d_hat == 0.0, 0.0, z)
    return PeriodStatistic(p_hat=p_hat, q_hat=q_hat, d_hat=d_hat, sigma_hat=sigma, z=z)
