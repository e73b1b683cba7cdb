"""Checks that every input domain's values share (records and table columns alike)."""

from __future__ import annotations

import math

__all__ = ["INT64_MAX", "check_finite", "check_range"]

#: The largest integer a bound may take (JSON integers are read as 64-bit by most clients).
INT64_MAX = 2**63 - 1


def check_finite(value: float | None, name: str) -> None:
    """Refuse NaN and ±∞ in a field that must be a finite number (None: not given)."""
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be finite")


def check_range(low: float | None, high: float | None) -> None:
    """Refuse ``[low, high]`` unless each given side is finite and low < high when both are."""
    check_finite(low, "low")
    check_finite(high, "high")
    if low is not None and high is not None and not low < high:
        raise ValueError("low must be below high")
