"""Sparse events are flagged, with the n that would give the test power (method.md §11.7)."""

import math

import numpy as np
import pytest

from app.stats.power import event_power_advice
from app.stats.sequential import SupportingLine, e_process_paths


def test_rare_event_is_flagged_with_a_suggested_n_that_is_not():
    line = SupportingLine.pure(1.0)
    adv = event_power_advice(100, 0.0027, 0.001, line)
    assert adv.sparse and adv.expected_hits < 1 and adv.p_empty_period > 0.5
    assert any("hits per period" in r for r in adv.reasons)
    assert adv.suggested_n is not None and adv.suggested_n > 100
    again = event_power_advice(adv.suggested_n, 0.0027, 0.001, line)
    assert not again.sparse and again.suggested_n == adv.suggested_n
    assert again.periods_to_detect <= 50 and again.expected_hits >= 5


def test_common_event_is_not_flagged_and_advice_is_plain_data():
    adv = event_power_advice(1000, 0.5, 0.18, SupportingLine.pure(1.0))
    assert not adv.sparse and adv.reasons == [] and adv.suggested_n == 1000
    assert adv.violation_p == pytest.approx(1.5 * math.e * 0.18)
    d = adv.to_dict()
    assert d["sparse"] is False and isinstance(d["periods_to_detect"], float)


def test_claims_that_allow_everything_and_bad_input():
    adv = event_power_advice(100, 0.5, 0.5, SupportingLine.pure(1.0))  # e·0.5 > 1
    assert adv.sparse and adv.periods_to_detect is None and adv.suggested_n is None
    for bad in [dict(n=0, p=0.1, q=0.1), dict(n=10, p=1.5, q=0.1), dict(n=10, p=0.1, q=-0.1)]:
        with pytest.raises(ValueError):
            event_power_advice(line=SupportingLine.pure(1.0), **bad)


def test_periods_to_detect_is_a_lower_bound_of_the_e_process_delay():
    # The advice's oracle count is optimistic; the shipped e-process needs a small multiple of it.
    line = SupportingLine.pure(1.0)
    n, q = 200, 0.05
    adv = event_power_advice(n, 0.0, q, line)
    rng = np.random.default_rng(3)
    a = rng.binomial(n, adv.violation_p, size=(200, 80))
    b = rng.binomial(n, q, size=(200, 80))
    log_w = e_process_paths(a, b, n, line)
    first = np.where((log_w >= math.log(20)).any(axis=1), (log_w >= math.log(20)).argmax(axis=1) + 1, 10**9)
    median = float(np.median(first))
    assert adv.periods_to_detect <= median <= 6 * adv.periods_to_detect


def test_detector_advice_follows_the_strength_of_one_period():
    """Pooling (the aggregator) wins when one period carries weak evidence; when one period
    is already strong the e-values win. Exact values of the formulas of method.md §13.9."""
    import math

    from scipy.stats import norm

    from app.stats.power import detector_advice
    from app.stats.thresholds import threshold_from_table

    q, s = 0.01, math.e
    weak_p, strong_p = math.exp(1.1) * q, math.exp(2.0) * q
    weak = detector_advice(200, weak_p - s * q, weak_p * (1 - weak_p) + s * s * q * (1 - q))
    strong = detector_advice(1000, strong_p - s * q, strong_p * (1 - strong_p) + s * s * q * (1 - q))
    assert weak.recommended == "aggregator" and weak.per_period_z < norm.isf(0.05 / 200)
    assert strong.recommended in ("e-process", "e-detector", "naive") and strong.periods["aggregator"] > 1.0
    # the aggregator's mean-path count, by hand
    qq = threshold_from_table(200, 0.25, 0.05).value
    z_bar = math.sqrt(200) * weak.gap / math.sqrt(weak_p * (1 - weak_p) + s * s * q * (1 - q))
    assert weak.periods["aggregator"] == pytest.approx((qq * 200 ** 0.25 / z_bar) ** (1 / 0.75))
    # the e-process's: (log(1/α) + log 16 + log(1/ω₁))/(n·G)
    g = strong.nats_per_period
    assert strong.periods["e-process"] == pytest.approx(
        max(1.0, (math.log(20) + math.log(16) + math.log(2.11 * 2 * math.log(2) ** 2)) / g))
    none = detector_advice(100, -0.01, 0.1)
    assert none.recommended is None and all(v is None for v in none.periods.values())
    with pytest.raises(ValueError):
        detector_advice(0, 0.1, 0.1)
