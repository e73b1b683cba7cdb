"""Checks that every input domain's values share (records and table columns alike)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["INT64_MAX", "check_finite", "check_range", "number_problem"]

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


def number_problem(value: Any, low: Any, high: Any, *, integer: bool) -> str | None:
    """Why ``value`` is not a number of the domain (an integer when ``integer``, finite, within
    ``[low, high]`` where given), or None when it is one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if integer and not isinstance(value, int):
        return f"{value!r} is not an integer"
    if integer and abs(value) > INT64_MAX:
        return f"{value} is outside the signed 64-bit range"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not finite"
    if low is not None and value < low:
        return f"{value!r} is below low = {low!r}"
    if high is not None and value > high:
        return f"{value!r} is above high = {high!r}"
    return None
