"""How reports write numbers and databases: one place for the search's, the audit's and the JUnit
report's text."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["number", "shorten"]


def number(x: float | None, digits: int = 4, *, infinity: str = "∞") -> str:
    """``x`` to ``digits`` significant digits; "n/a" for None, ``infinity`` for an infinite bound."""
    if x is None:
        return "n/a"
    if isinstance(x, float) and math.isinf(x):
        return infinity
    return f"{x:.{digits}g}"


def shorten(value: Any, limit: int = 100) -> str:
    """``value`` as JSON, cut to ``limit`` characters with an ellipsis."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
