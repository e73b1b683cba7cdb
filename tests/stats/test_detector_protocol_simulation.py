"""The simulation's vectorised detectors (app/simulation.py ``alarm_periods``) and the Detector
protocol of app/stats/detector.py, stepped one period at a time with a state reload every period,
alarm at the same periods on the same counts: one family, two implementations that agree."""

import numpy as np
import pytest

from app.simulation import SimulationConfig, alarm_periods
from app.stats.detector import DetectorParams, Observation, create, load, needs_past
from app.stats.period import period_statistic
from app.stats.sequential import SupportingLine


def _stepped(kind: str, a, b, n: int, eps: float, cfg: SimulationConfig, threshold: float) -> np.ndarray:
    horizon = a.shape[1]
    line = SupportingLine.pure(eps)
    z = period_statistic(a, b, n, eps, variance="score").z
    u = np.random.default_rng([cfg.seed, 7919, n, horizon]).random(a.shape)  # the simulation's naive uniforms
    level = cfg.alpha
    # the simulation's e-process is a check's with a horizon of T periods (method.md §13.3d)
    params = DetectorParams(horizon=horizon, gamma=cfg.gamma, level=level, line=line,
                            threshold=threshold if kind == "aggregator" else None,
                            design_horizon=horizon if kind == "e-process" else None)
    first = np.zeros(a.shape[0], dtype=np.int64)
    for r in range(a.shape[0]):
        state, prefix = create(kind, params).to_state(), []
        for t in range(horizon):
            det = load(state, prefix if needs_past(state) else None)
            step = det.step(Observation(a=int(a[r, t]), b=int(b[r, t]), n=n, z=float(z[r, t]), line=line,
                                        u=float(u[r, t])))
            if step.prefix_sum is not None:
                prefix.append(step.prefix_sum)
            state = step.state
            if step.alarm:
                first[r] = t + 1
                break
    return first


@pytest.mark.parametrize("kind", ["aggregator", "naive", "e-process", "e-detector"])
def test_the_protocol_alarms_where_the_simulation_does(kind):
    cfg = SimulationConfig(replications=30, horizon=20, samples_per_period=80, change_at=8, alpha=0.05)
    rng = np.random.default_rng([5, len(kind)])
    n, eps = cfg.samples_per_period, 0.5
    # a violation from period 8 on: p = 0.5 against q = 0.2 (ε = 0.5 allows p ≤ 0.33)
    p = np.where(np.arange(cfg.horizon) >= cfg.change_at - 1, 0.5, 0.25)
    a = rng.binomial(n, np.broadcast_to(p, (cfg.replications, cfg.horizon)))
    b = rng.binomial(n, 0.2, size=(cfg.replications, cfg.horizon))
    want, threshold = alarm_periods(kind, a, b, n, eps, cfg)
    got = _stepped(kind, a, b, n, eps, cfg, threshold)
    np.testing.assert_array_equal(got, want)
    assert (want > 0).sum() >= cfg.replications // 2  # the violation is found: the comparison is not vacuous
