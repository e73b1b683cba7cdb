"""Pure parts of the dashboard: thinning series, the claim's text and boundary, sparklines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.stats.claims import ZCDP, ApproxDP, PureDP
from app.web.claims import as_claim, check_claim, claim_boundary, claim_epsilon, format_claim, monitor_claim
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
    assert claim == PureDP(0.5) and format_claim(claim) == "ε = 0.5" == format_claim({"epsilon": 0.5})
    assert format_claim({"epsilon": 1.0, "delta": 1e-6}) == "(ε = 1, δ = 1.0e-06)"
    assert format_claim({"gdp_mu": 0.8}) == "μ = 0.8 (GDP)"
    assert format_claim({"zcdp_rho": 0.1}) == "ρ = 0.1 (zCDP)"
    # p ≤ e^ε q, and from the complement 1 − q ≤ e^ε (1 − p): p ≤ 1 − e^−ε (1 − q).
    assert claim_boundary(as_claim({"epsilon": 1.0}), [0.1, None, 0.9]) == [
        pytest.approx(math.e * 0.1), None, pytest.approx(1 - 0.1 / math.e)]
    assert claim_boundary(as_claim({"epsilon": 1.0, "delta": 0.01}), [0.1])[0] == pytest.approx(math.e * 0.1 + 0.01)
    # μ-GDP: q ≤ Φ(Φ⁻¹(p) + μ) (Dong, Roth & Su), so the largest p for q = 0.1 at μ = 1 is Φ(Φ⁻¹(0.1) + 1).
    assert claim_boundary(as_claim({"gdp_mu": 1.0}), [0.1])[0] == pytest.approx(0.38909, abs=1e-4)
    zcdp = claim_boundary(as_claim({"zcdp_rho": 0.2}), [0.0, 0.1, 0.5])
    assert zcdp[0] > 0 and zcdp[0] < zcdp[1] < zcdp[2] <= 1.0  # δ(ε) > 0 at q = 0, increasing
    assert claim_boundary(as_claim({"bogus": 1.0}), [0.1]) is None and claim_epsilon(ZCDP(0.2)) is None


class _Check:
    claim = {"epsilon": 2.0, "delta": 1e-5}


def test_a_checks_own_claim_wins() -> None:
    assert check_claim(_Monitor(), _Check()) == ApproxDP(2.0, 1e-5)
    assert check_claim(_Monitor(), object()) == PureDP(0.5)


def test_sparkline_marks_the_crossing_without_colour() -> None:
    svg = sparkline([0.1, 0.5, None, 2.0, 3.0], 2.5, alarm_index=4, label="m <x>")
    assert svg.startswith("<svg") and "m &lt;x&gt;" in svg
    assert svg.count("<rect") == 1 and 'width="6"' in svg  # the alarm's point, larger
    assert svg.count("<polyline") == 2  # a gap where a period is missing
    assert "spark-threshold" in svg
    assert "no periods yet" in sparkline([], 2.0)


class _Snap:
    def __init__(self, pairs: list, when: int) -> None:
        import uuid as _uuid
        from datetime import UTC, datetime

        self.id = _uuid.uuid4()
        self.result = {"pairs": pairs}
        self.created_at = datetime(2026, 1, 1, when, tzinfo=UTC)


def test_snapshot_charts_align_the_previous_curves() -> None:
    from app.web.data import snapshot_charts

    real_now = {"check_id": "c1", "position": 0, "epsilon_hat": 1.5, "lower_bound": 1.2,
                "loss_curve": {"grid": [[0.0, 1.0, 2.0]], "loss": [0.1, 1.5, 0.2]},
                "privacy_profile": {"epsilons": [0.0, 1.0], "delta": [0.3, 0.1]}}
    real_before = {**real_now, "epsilon_hat": 0.9, "loss_curve": {"grid": [[0.5, 1.0]], "loss": [0.4, 0.9]}}
    discrete = {"check_id": "c2", "position": 1, "loss_curve": {"outcomes": [[0, 1], 2], "loss": [0.3, 0.7]}}
    discrete_before = {"check_id": "c2", "loss_curve": {"outcomes": [2, 5], "loss": [0.6, 0.1]}}
    out = snapshot_charts(_Snap([real_now, discrete], 2), _Snap([real_before, discrete_before], 1),
                          ApproxDP(1.0, 1e-6))
    assert out["claim"] == "(ε = 1, δ = 1.0e-06)" and out["claim_epsilon"] == 1.0 and out["claim_delta"] == 1e-6
    real, disc = out["pairs"]
    curve = real["curves"][0]
    assert curve["x"] == [0.0, 0.5, 1.0, 2.0]
    assert curve["loss"] == [0.1, None, 1.5, 0.2] and curve["previous_loss"] == [None, 0.4, 0.9, None]
    assert real["previous"]["epsilon_hat"] == 0.9
    labels = disc["curves"][0]["labels"]
    assert labels == ["(0, 1)", "2", "5"]
    assert disc["curves"][0]["loss"] == [0.3, 0.7, None] and disc["curves"][0]["previous_loss"] == [None, 0.6, 0.1]


def test_vector_loss_curves_become_one_profile_per_axis() -> None:
    from app.web.data import _profile_1d

    curves = _profile_1d({"grid": [[0.0, 1.0], [5.0, 6.0, 7.0]], "loss": [[0.1, 0.9, 0.2], [0.3, 0.4, 0.5]]})
    assert [c["loss"] for c in curves] == [[0.9, 0.5], [0.3, 0.9, 0.5]]
