"""Pure parts of the dashboard: thinning series, the claim's text and boundary, sparklines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.web.claims import claim_boundary, claim_epsilon, format_claim, monitor_claim
from app.web.downsample import minmax_indices
from app.web.svg import sparkline


def test_minmax_keeps_every_point_of_a_short_series() -> None:
    assert minmax_indices([[1.0, 2.0, 3.0]], buckets=5).tolist() == [0, 1, 2]


def test_minmax_keeps_each_buckets_extremes_and_the_alarm() -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(size=10_000)
    values[1234] = 50.0  # a spike
    values[8000] = -50.0
    idx = minmax_indices([values], buckets=100, keep=[4321])
    assert len(idx) <= 2 * 100 + 3
    assert {0, 1234, 4321, 8000, 9999} <= set(idx.tolist())
    assert np.all(np.diff(idx) > 0)
    # The envelope is exact: every bucket's max and min are among the kept points.
    width = 100
    for b in range(100):
        chunk = values[b * width:(b + 1) * width]
        kept = values[idx[(idx >= b * width) & (idx < (b + 1) * width)]]
        assert kept.max() == chunk.max() and kept.min() == chunk.min()


def test_minmax_unions_series_and_ignores_missing_values() -> None:
    a = np.arange(100, dtype=float)
    b = -np.arange(100, dtype=float)
    b[:50] = np.nan
    idx = minmax_indices([a, b.tolist()], buckets=10)
    assert 99 in idx and 0 in idx and 50 in idx
    with pytest.raises(ValueError):
        minmax_indices([a, a[:5]], buckets=10)
    with pytest.raises(ValueError):
        minmax_indices([a], buckets=0)


class _Monitor:
    epsilon = 0.5


def test_claims_are_formatted_and_bound_in_one_place() -> None:
    claim = monitor_claim(_Monitor())
    assert claim == {"epsilon": 0.5} and format_claim(claim) == "ε = 0.5"
    assert format_claim({"epsilon": 1.0, "delta": 1e-6}) == "(ε = 1, δ = 1.0e-06)"
    assert format_claim({"gdp_mu": 0.8}) == "μ = 0.8 (GDP)"
    assert format_claim({"zcdp_rho": 0.1}) == "ρ = 0.1 (zCDP)"
    assert claim_boundary({"epsilon": 1.0}, [0.1, None, 0.9]) == [pytest.approx(math.e * 0.1), None, 1.0]
    assert claim_boundary({"epsilon": 1.0, "delta": 0.01}, [0.1])[0] == pytest.approx(math.e * 0.1 + 0.01)
    assert claim_boundary({"gdp_mu": 1.0}, [0.1]) is None and claim_epsilon({"zcdp_rho": 0.2}) is None


def test_sparkline_marks_the_crossing_without_colour() -> None:
    svg = sparkline([0.1, 0.5, None, 2.0, 3.0], 2.5, alarm_index=4, label="m <x>")
    assert svg.startswith("<svg") and "m &lt;x&gt;" in svg
    assert svg.count("<rect") == 1 and 'width="6"' in svg  # the alarm's point, larger
    assert svg.count("<polyline") == 2  # a gap where a period is missing
    assert "spark-threshold" in svg
    assert "no periods yet" in sparkline([], 2.0)
