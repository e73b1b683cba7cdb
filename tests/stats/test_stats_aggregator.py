"""Weighted aggregator (method.md §2; seed 002 eq. 13)."""

import json
import math

import numpy as np
import pytest

from app.stats.aggregator import HorizonExceeded, WeightedAggregator, first_crossing, weighted_statistic_path


def brute_force(z, horizon, gamma):
    out = []
    for t in range(1, len(z) + 1):
        best = -math.inf
        for k in range(1, t + 1):
            inc = sum(z[t - k:t])
            best = max(best, inc / (math.sqrt(horizon) * (k / horizon) ** gamma))
        out.append(best)
    return np.array(out)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gamma", [0.0, 0.25, 0.49])
def test_incremental_equals_brute_force(seed, gamma):
    rng = np.random.default_rng(seed)
    horizon = int(rng.integers(1, 60))
    t = int(rng.integers(1, horizon + 1))
    z = rng.normal(size=t) * rng.uniform(0.1, 3)
    agg = WeightedAggregator(horizon, gamma, threshold=2.4)
    inc = np.array([agg.update(v).statistic for v in z])
    np.testing.assert_allclose(inc, brute_force(list(z), horizon, gamma), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weighted_statistic_path(z, horizon, gamma), inc, rtol=1e-12, atol=1e-12)


def test_k1_is_rescaled_naive_statistic():
    agg = WeightedAggregator(100, 0.25)
    step = agg.update(3.0)
    assert step.statistic == pytest.approx(100 ** (0.25 - 0.5) * 3.0)
    assert step.lag == 1


def test_state_round_trips_through_json_and_continues_identically():
    rng = np.random.default_rng(3)
    z = rng.normal(size=30)
    a = WeightedAggregator(30, 0.25, threshold=2.0)
    for v in z[:17]:
        a.update(v)
    b = WeightedAggregator.from_state(json.loads(json.dumps(a.to_state())))
    for v in z[17:]:
        sa, sb = a.update(v), b.update(v)
        assert sa == sb
    assert a.to_state() == b.to_state()


def test_refuses_updates_past_the_horizon():
    agg = WeightedAggregator(3, 0.25)
    for v in (0.1, 0.2, 0.3):
        agg.update(v)
    with pytest.raises(HorizonExceeded, match="all 3 periods"):
        agg.update(0.0)


def test_alarm_flag_and_first_alarm_period():
    agg = WeightedAggregator(10, 0.25, threshold=1.0)
    steps = [agg.update(v) for v in (0.0, 0.0, 5.0, 0.0)]
    assert [s.alarm for s in steps] == [False, False, True, steps[3].statistic > 1.0]
    assert agg.alarm_t == 3


@pytest.mark.parametrize("bad", [dict(horizon=0, gamma=0.25), dict(horizon=10, gamma=0.5), dict(horizon=10, gamma=-0.1)])
def test_bad_design_is_refused(bad):
    with pytest.raises(ValueError):
        WeightedAggregator(**bad)


def test_non_finite_z_refused():
    with pytest.raises(ValueError, match="finite"):
        WeightedAggregator(10).update(float("nan"))


def test_first_crossing():
    m = np.array([[0.0, 3.0, 1.0], [0.0, 0.0, 0.0]])
    assert first_crossing(m, 2.0).tolist() == [2, 0]


def test_current_lag_is_the_maximising_k():
    agg = WeightedAggregator(50, 0.25)
    steps = [agg.update(v) for v in [0.0] * 10 + [3.0] * 5]
    assert agg.current_lag() == steps[-1].lag == 5
    with pytest.raises(ValueError):
        WeightedAggregator(5).current_lag()


@pytest.mark.parametrize("gamma", [0.0, 0.25, 0.4])
def test_first_alarm_renewed_equals_the_batch_path_horizon_by_horizon(gamma):
    from app.stats.aggregator import first_alarm_renewed, first_crossing, weighted_statistic_path

    rng = np.random.default_rng(7)
    horizon, n_h = 30, 4
    z = rng.normal(0.3, 1.0, size=(300, horizon * n_h - 7))  # the last horizon is cut short
    q = np.array([2.6, 2.8, 3.0, 3.1])
    got = first_alarm_renewed(z, horizon, gamma, q)
    want = np.zeros(300, dtype=np.int64)
    for j in range(n_h):
        part = z[:, j * horizon:(j + 1) * horizon]
        m = weighted_statistic_path(part, horizon, gamma)
        first = first_crossing(m, q[j])
        todo = (want == 0) & (first > 0)
        want[todo] = j * horizon + first[todo]
    np.testing.assert_array_equal(got, want)
    assert (got > 0).mean() > 0.3
    with pytest.raises(ValueError):
        first_alarm_renewed(z, horizon, gamma, q[:2])
