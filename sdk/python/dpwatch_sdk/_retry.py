"""When to retry an API call, and after how long (the client's ``Retry-After`` handling)."""

from __future__ import annotations

import email.utils
import random
import time

RETRY_STATUSES = frozenset({429, 503})


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None if absent
    or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def retry_delay(retry_after: str | None, attempt: int) -> float:
    """The wait before retry ``attempt`` (1, 2, …): the server's ``Retry-After`` when it sent one,
    else 0.5·2^(attempt−1) s (at most 8 s) with ±25% jitter."""
    told = retry_after_seconds(retry_after)
    if told is not None:
        return told
    base = min(8.0, 0.5 * 2 ** (attempt - 1))
    return base * random.uniform(0.75, 1.25)
