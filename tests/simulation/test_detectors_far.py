"""Every detector's false-alarm rate on the boundary p = e^ε·q (bench/detector_far.py)."""

import math

import pytest

from app.simulation import SimulationConfig, boundary_false_alarms


def test_far_of_every_detector_fast():
    cfg = SimulationConfig(replications=300, horizon=100, change_at=100, seed=21)
    for n, p, eps in [(50, 0.5, 1.0), (200, 0.05, 0.1)]:
        rates = boundary_false_alarms(n, p, eps, cfg)
        assert set(rates) == {"aggregator", "naive", "e-process", "e-detector"}
        for name, (rate, lo, hi) in rates.items():
            assert lo <= rate <= hi
            assert rate <= 0.05 + 0.01 + 3 * math.sqrt(0.06 * 0.94 / 300), (n, p, eps, name, rate)


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 50, 200, 1000])
@pytest.mark.parametrize("eps", [0.1, 1.0, 2.0])
def test_far_of_every_detector_study_grid(n, eps):
    cfg = SimulationConfig(replications=2000, horizon=200, change_at=200, seed=12)
    for p in (0.5, 0.1, 0.01, 0.001):
        for name, (rate, _, _) in boundary_false_alarms(n, p, eps, cfg).items():
            assert rate <= 0.06, (n, p, eps, name, rate)
