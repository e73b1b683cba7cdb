"""Static charts as inline SVG (no script): the monitor list's sparklines."""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape


def sparkline(
    values: Sequence[float | None],
    threshold: float | None,
    *,
    width: int = 160,
    height: int = 36,
    alarm_index: int | None = None,
    label: str = "",
) -> Markup:
    """M_t over the last periods (a polyline, gaps for missing periods) against the threshold
    (a dashed line). Points above the threshold are drawn as squares, the alarm's as a larger
    one, so that the crossing reads without colour too."""
    pad = 3
    finite = [v for v in values if v is not None and math.isfinite(v)]
    title = escape(label)
    if not finite:
        return Markup(
            f'<svg class="spark" role="img" aria-label="{title}: no periods yet" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><title>{title}: no periods yet</title>'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" class="spark-axis"/></svg>'
        )
    top = max(finite + ([threshold * 1.15] if threshold is not None else []))
    bottom = min(finite + [0.0])
    span = (top - bottom) or 1.0
    n = len(values)

    def sx(i: int) -> float:
        return pad + (width - 2 * pad) * (i / max(1, n - 1))

    def sy(v: float) -> float:
        return height - pad - (height - 2 * pad) * ((v - bottom) / span)

    parts = [
        f'<svg class="spark" role="img" aria-label="{title}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><title>{title}</title>'
    ]
    if threshold is not None:
        y = sy(threshold)
        parts.append(f'<line x1="{pad}" y1="{y:.1f}" x2="{width - pad}" y2="{y:.1f}" class="spark-threshold"/>')
    segment: list[str] = []
    segments: list[list[str]] = []
    for i, v in enumerate(values):
        if v is None or not math.isfinite(v):
            if segment:
                segments.append(segment)
            segment = []
            continue
        segment.append(f"{sx(i):.1f},{sy(v):.1f}")
    if segment:
        segments.append(segment)
    for seg in segments:
        if len(seg) == 1:
            x, y = seg[0].split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="1.5" class="spark-line-dot"/>')
        else:
            parts.append(f'<polyline points="{" ".join(seg)}" class="spark-line"/>')
    if threshold is not None:
        for i, v in enumerate(values):
            if v is not None and math.isfinite(v) and v > threshold:
                size = 6 if i == alarm_index else 3
                parts.append(f'<rect x="{sx(i) - size / 2:.1f}" y="{sy(v) - size / 2:.1f}" width="{size}" '
                             f'height="{size}" class="spark-over"/>')
    parts.append("</svg>")
    return Markup("".join(parts))
