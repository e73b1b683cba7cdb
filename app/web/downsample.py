"""Thinning long series for charts: min and max per bucket, with the points that must stay.

A chart a few hundred pixels wide cannot show 10,000 periods one by one. Keeping, in each of
``buckets`` equal runs of consecutive points, the point where each series is smallest and the one
where it is largest draws the same envelope as the full series (the M4 idea of Jugel et al.,
VLDB 2014, without the first and last of each bucket). Points listed in ``keep`` (the alarm's
period) and the first and last point are always kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray


def minmax_indices(
    series: Sequence[Sequence[float | None] | NDArray[np.float64]],
    *,
    buckets: int,
    keep: Iterable[int] = (),
) -> NDArray[np.int64]:
    """Sorted indices of the points to draw.

    ``series`` are equally long; None or NaN values are ignored. When there are at most
    ``2 * buckets`` points, every index is returned. Otherwise each series contributes its
    argmin and argmax in each bucket, and ``keep`` plus the first and last index are added.
    """
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    arrays = [np.asarray([np.nan if v is None else v for v in s] if not isinstance(s, np.ndarray) else s,
                         dtype=np.float64) for s in series]
    if not arrays:
        return np.zeros(0, dtype=np.int64)
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError("all series must have the same length")
    kept = [i for i in keep if 0 <= i < n]
    if n <= 2 * buckets:
        return np.arange(n, dtype=np.int64)
    width = -(-n // buckets)  # ceil
    padded = buckets * width
    chosen: list[NDArray[np.int64]] = [np.array([0, n - 1], dtype=np.int64), np.asarray(kept, dtype=np.int64)]
    offsets = np.arange(buckets, dtype=np.int64) * width
    for values in arrays:
        finite = np.isfinite(values)
        if not finite.any():
            continue
        low = np.full(padded, np.inf)
        high = np.full(padded, -np.inf)
        low[:n] = np.where(finite, values, np.inf)
        high[:n] = np.where(finite, values, -np.inf)
        low_rows, high_rows = low.reshape(buckets, width), high.reshape(buckets, width)
        arg_low = offsets + low_rows.argmin(axis=1)
        arg_high = offsets + high_rows.argmax(axis=1)
        has_value = np.isfinite(low_rows.min(axis=1))
        chosen.append(arg_low[has_value])
        chosen.append(arg_high[has_value])
    out = np.unique(np.concatenate(chosen))
    return out[out < n]
