"""The fixed-sample test on assert_dp's last batch (dpwatch_sdk.testing._final): its p-value is
valid at every n (checked exactly, by enumerating every count), near its level on the boundary
(a seeded simulation), and the test it completes spends α — neither more nor (much) less."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpwatch_sdk.testing import check_dp
from dpwatch_sdk.testing._final import SEQUENTIAL_SHARE, p_value
from scipy import stats

PAIR = [([0, 0, 0], [0, 0, 1])]


def laplace(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def slightly_under_noised(database, n, rng):
    """ε = 1.03 claimed as 1: too small for the sequential part at this budget, not for the final test."""
    return float(sum(database)) + rng.laplace(0.0, 1 / 1.03, n)


@pytest.mark.parametrize("m,q,s,c", [(16, 0.2, math.e, 0.0), (16, 0.05, 2.0, 0.1), (24, 0.5, 1.2, 0.05)])
def test_p_value_is_valid_at_every_level_by_exact_enumeration(m, q, s, c):
    """P(p-value ≤ u) ≤ u on the boundary p = s·q + c, summed exactly over all (A, B)."""
    p = min(1.0, s * q + c)
    counts = np.arange(m + 1)
    pa, pb = stats.binom.pmf(counts, m, p), stats.binom.pmf(counts, m, q)
    values = np.array([[p_value(a, b, m, s, c, 1e-3) for b in counts] for a in counts])
    joint = pa[:, None] * pb[None, :]
    for u in (0.01, 0.05, 0.1, 0.3):
        assert float(joint[values <= u].sum()) <= u + 1e-12


def test_p_value_is_small_far_from_the_claim_and_large_inside_it():
    assert p_value(400, 100, 1000, math.e, 0.0, 1e-4) < 1e-3       # p̂ = 0.4 against e·0.1 = 0.27 (γ = 10⁻⁴)
    assert p_value(150, 100, 1000, math.e, 0.0, 1e-4) > 0.5        # p̂ = 0.15 well inside


def test_p_value_rate_on_the_boundary_is_near_its_level():
    """A seeded simulation at m = 20,000 (the boundary of ε = 1 at q = 0.05): the test should
    reject about 5% at u = 0.05 (its size is not far below the level, unlike an e-value's)."""
    rng = np.random.default_rng(20261128)
    m, q, s = 20_000, 0.05, math.e
    a, b = rng.binomial(m, s * q, 400), rng.binomial(m, q, 400)
    rate = float(np.mean([p_value(int(x), int(y), m, s, 0.0, 1e-4) <= 0.05 for x, y in zip(a, b, strict=True)]))
    assert 0.02 <= rate <= 0.09


def test_the_final_test_catches_what_the_sequential_part_misses_and_says_so():
    result = check_dp(slightly_under_noised, epsilon=1.0, pairs=PAIR, budget=100_000, seed=1, alpha=0.01,
                      time_limit=None, coupled=False)
    seq = result.sequential
    assert seq is not None and seq.final
    assert result.violated and seq.rejected_by == "final"
    assert "final test" in result.report and "p-value" in result.report
    assert seq.final_p_adjusted <= 0.01 * (1 - SEQUENTIAL_SHARE)


def test_a_correct_mechanism_at_its_boundary_fails_at_about_its_level():
    """Calibration at α = 0.3 (so that 120 seeded runs can see it): the rate stays below α and is
    not far below it (the sequential part alone failed ~0.01 of runs at α = 0.3: docs/sdk.md)."""
    failed = [check_dp(laplace, epsilon=1.0, pairs=PAIR, budget=4_000, seed=seed, alpha=0.3, time_limit=None,
                       coupled=False).violated for seed in range(120)]
    rate = sum(failed) / len(failed)
    assert 0.1 <= rate <= 0.42
