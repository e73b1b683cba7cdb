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
