"""Thresholds by Monte Carlo (method.md §3; seed 002 eq. 15) and multiple checks (§4, §5)."""

import math

import numpy as np
import pytest

from app.stats.aggregator import weighted_statistic_path
from app.stats.multiple import bonferroni_alpha, naive_alarm_period, naive_threshold, renewal_alpha
from app.stats.thresholds import (
    max_weighted_increment,
    simulate_max_statistic,
    table_entries,
    threshold_for,
    threshold_from_table,
    threshold_quantile,
)


@pytest.mark.parametrize("gamma", [0.0, 0.25, 0.45])
def test_pruned_kernel_equals_brute_force(gamma):
    rng = np.random.default_rng(11)
    horizon = 40
    z = rng.normal(size=(300, horizon))
    prefix = np.concatenate([np.zeros((300, 1)), np.cumsum(z, axis=1)], axis=1)
    brute = weighted_statistic_path(z, horizon, gamma).max(axis=1)
    np.testing.assert_allclose(max_weighted_increment(prefix, horizon, gamma), brute, rtol=1e-12)


def test_reproducible_for_a_seed_and_different_across_seeds():
    a = threshold_quantile(50, 0.25, 0.05, replications=5000, seed=1)
    b = threshold_quantile(50, 0.25, 0.05, replications=5000, seed=1)
    c = threshold_quantile(50, 0.25, 0.05, replications=5000, seed=2)
    assert a == b
    assert a.value != c.value
    assert abs(a.value - c.value) < 5 * math.hypot(a.std_error, c.std_error)


def test_threshold_increases_as_alpha_falls():
    sample = simulate_max_statistic(100, 0.25, 20_000, seed=5)
    from app.stats.thresholds import quantile_with_error
    values = [quantile_with_error(sample, a)[0] for a in (0.2, 0.1, 0.05, 0.01, 0.001)]
    assert all(x < y for x, y in zip(values, values[1:]))


def test_known_values_from_method_md():
    # method.md §3: about 2.36 (T=50), 2.43 (T=100), 2.45 (T=200) for gamma=1/4, alpha=0.05.
    for horizon, expected in [(50, 2.36), (100, 2.43), (200, 2.45)]:
        est = threshold_quantile(horizon, 0.25, 0.05, replications=20_000, seed=9)
        assert est.value == pytest.approx(expected, abs=0.05)
        assert 0 < est.std_error < 0.03


def test_false_alarm_rate_of_the_threshold_is_alpha():
    # Fresh N(0,1) paths against a threshold from another seed: the alarm rate is about alpha.
    q = threshold_quantile(100, 0.25, 0.05, replications=20_000, seed=1).value
    m = simulate_max_statistic(100, 0.25, 20_000, seed=123)
    rate = float(np.mean(m > q))
    assert abs(rate - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 20_000) + 0.004


def test_table_is_shipped_and_consistent():
    entries = table_entries()
    assert len(entries) > 100
    hit = threshold_from_table(200, 0.25, 0.05)
    assert hit is not None and hit.source == "table"
    assert hit.value == pytest.approx(2.45, abs=0.03)
    assert threshold_from_table(200, 0.25, 0.0123456) is None
    assert threshold_for(200, 0.25, 0.05) == hit
    # monotone in alpha within each (T, gamma)
    by_design = {}
    for e in entries:
        by_design.setdefault((e.horizon, e.gamma), []).append((e.alpha, e.value))
    for rows in by_design.values():
        rows.sort()
        vals = [v for _, v in rows]
        assert all(x >= y for x, y in zip(vals, vals[1:]))


def test_threshold_for_off_grid_computes():
    est = threshold_for(37, 0.25, 0.05, replications=2000, seed=3)
    assert est.source == "monte_carlo"


def test_bonferroni_and_renewal_levels():
    assert bonferroni_alpha(0.05, 4) == pytest.approx(0.0125)
    total = sum(renewal_alpha(0.05, j) for j in range(1, 100_000))
    assert total == pytest.approx(0.05, rel=1e-4)
    assert renewal_alpha(0.05, 1) == pytest.approx(6 * 0.05 / math.pi**2)
    with pytest.raises(ValueError):
        bonferroni_alpha(0.05, 0)
    with pytest.raises(ValueError):
        renewal_alpha(1.5, 1)


def test_naive_baseline():
    assert naive_threshold(0.05, 1) == pytest.approx(1.6448536, abs=1e-6)
    z = np.array([[0.0, 5.0, 0.0], [0.0, 1.0, 2.0]])
    assert naive_alarm_period(z, 0.05, 100).tolist() == [2, 0]


@pytest.mark.parametrize("gamma", [0.1, 0.25, 0.4])
def test_stack_kernel_equals_exhaustive_kernel_on_long_and_negative_paths(gamma):
    from app.stats.aggregator import lag_weights
    from app.stats.thresholds import _max_weighted_increment, _max_weighted_increment_stack

    rng = np.random.default_rng(5)
    horizon = 500
    z = rng.normal(size=(60, horizon))
    z[:3] = -np.abs(z[:3]) - 0.1  # every increment negative: the exhaustive fallback
    prefix = np.concatenate([np.zeros((60, 1)), np.cumsum(z, axis=1)], axis=1)
    inv_w = 1.0 / lag_weights(horizon, gamma)
    np.testing.assert_array_equal(_max_weighted_increment_stack(prefix, inv_w), _max_weighted_increment(prefix, inv_w))
    short = np.array([[0.0, -1.0]])  # T = 1
    np.testing.assert_array_equal(_max_weighted_increment_stack(short, 1.0 / lag_weights(1, gamma)), [-1.0])


def test_table_ships_a_million_paths_or_an_upper_confidence_limit():
    import json
    from importlib import resources

    raw = json.loads(resources.files("app.stats").joinpath("data/thresholds.json").read_text())["entries"]
    alphas = {round(e["alpha"], 12) for e in raw}
    for base in (0.1, 0.05, 0.01):  # the Bonferroni shares α/m for m ≤ 8
        assert {round(base / m, 12) for m in range(1, 9)} <= alphas
    for e in raw:
        large = e["horizon"] > 2000 and e["gamma"] > 0
        assert e["replications"] == (200_000 if large else 1_000_000)
        assert e["shipped"] == ("upper_95" if large else "estimate")
        assert e["value"] == e[e["shipped"]]
        assert e["upper_95"] >= e["estimate"]
