"""False-alarm rate of the default detector at the null boundary p = e^ε q (method.md §1-§3)."""

import pytest

from app.simulation import SimulationConfig, boundary_false_alarm_rate


@pytest.mark.parametrize("n,p", [(100, 0.5), (300, 0.01), (1000, 0.05)])
def test_score_far_is_at_most_alpha_fast(n, p):
    cfg = SimulationConfig(replications=800, horizon=200, change_at=200, seed=5)
    rate, se = boundary_false_alarm_rate(n, p, 1.0, cfg, "score")
    assert rate <= 0.05 + 0.02, (rate, se)  # α + 0.01 + about 1 s.e. at R=800


def test_wald_is_anti_conservative_for_rare_events():
    cfg = SimulationConfig(replications=400, horizon=200, change_at=200, seed=5)
    rate, _ = boundary_false_alarm_rate(300, 0.01, 1.0, cfg, "wald")
    assert rate > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("n", [100, 300, 1000])
@pytest.mark.parametrize("p", [0.5, 0.05, 0.01])
def test_score_far_full_study(n, p):
    cfg = SimulationConfig(replications=2000, horizon=200, change_at=200, seed=11)
    rate, _ = boundary_false_alarm_rate(n, p, 1.0, cfg, "score")
    assert rate <= 0.06
