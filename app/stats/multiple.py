"""Levels for several checks, open-ended monitoring, and the naive baseline.

- Bonferroni over the m checks of one monitor: seed 002 §4.3; method.md §4.
- The naive auditor repeated every period with Bonferroni over the horizon: seed 002 eq. (11);
  method.md §5.
- Renewed horizons: horizon j runs at α_j = 6α/(π² j²), so Σ_j α_j = α (Σ 1/j² = π²/6).
- Re-discovered checks (method.md §12): within a horizon at level α_j, the checks present at
  its start share α_j/2 (Bonferroni), and the r-th check added by re-discovery runs at
  α_j·2^−(r+1), so that Σ_r α_j·2^−(r+1) = α_j/2 and the union bound over all checks stays ≤ α_j.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from app.stats.aggregator import first_crossing


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")


def bonferroni_alpha(alpha: float, m: int) -> float:
    """Per-check level α/m so that a monitor with m checks alarms falsely with probability ≤ α."""
    _check_alpha(alpha)
    if m < 1:
        raise ValueError(f"a monitor needs at least one check, got m={m!r}")
    return alpha / m


def renewal_alpha(alpha: float, j: int) -> float:
    """Level of the j-th horizon (j ≥ 1) of an open-ended monitor: 6α/(π² j²); the sum over j is α."""
    _check_alpha(alpha)
    if j < 1:
        raise ValueError(f"horizon index j must be >= 1, got {j!r}")
    return 6.0 * alpha / (math.pi**2 * j * j)


def naive_threshold(alpha: float, horizon: int) -> float:
    """z-threshold Φ⁻¹(1 − α/T) of the naive auditor run every period (seed 002, eq. 11)."""
    _check_alpha(alpha)
    if horizon < 1:
        raise ValueError("horizon must be >= 1")
    return float(norm.isf(alpha / horizon))


def naive_alarm_period(z: ArrayLike, alpha: float, horizon: int) -> NDArray[np.int64]:
    """First 1-based period with z_t > Φ⁻¹(1 − α/T) along the last axis, 0 if none (eq. 11)."""
    return first_crossing(np.asarray(z, dtype=np.float64), naive_threshold(alpha, horizon))


def initial_check_alpha(alpha: float, m: int, rediscovery: bool) -> float:
    """Level of each of the m checks present when a horizon at level ``alpha`` starts: α/m, or
    α/(2m) when re-discovery may add checks later (method.md §12; Bonferroni, seed 002 §4.3)."""
    return bonferroni_alpha(alpha, m) / (2.0 if rediscovery else 1.0)


def rediscovery_alpha(alpha: float, r: int) -> float:
    """Level α·2^−(r+1) of the r-th check (r ≥ 1) that re-discovery adds in a horizon at level α.

    With the initial checks at α/2 in total, Σ_{r≥1} α·2^−(r+1) = α/2, so the horizon's
    false-alarm probability stays ≤ α by the union bound, however many checks are added
    (method.md §12). Each added check is chosen on fresh draws, independent of the periods its
    detector then sees, so its own level holds conditionally on its event."""
    _check_alpha(alpha)
    if r < 1:
        raise ValueError(f"re-discovery index r must be >= 1, got {r!r}")
    return alpha * 2.0 ** -(r + 1)
