"""How reports write numbers and databases: one place for the search's, the audit's and the JUnit
report's text."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["database", "number", "shorten"]


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


def database(value: Any, limit: int = 100) -> str:
    """A database as JSON cut to ``limit`` characters; when cut, its size first (``31 rows: [{…``), since
    the tables a search tries often share their first rows and differ only in length, and a cut
    list's prefix alone cannot tell them apart."""
    text = shorten(value, limit)
    if not isinstance(value, list) or not text.endswith("…"):
        return text
    rows = all(isinstance(v, dict) for v in value)
    return f"{len(value):,} {'rows' if rows else 'records'}: {text}"
