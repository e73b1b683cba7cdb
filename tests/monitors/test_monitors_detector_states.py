"""The stored detector states of app/monitors/detectors.py: every kind and version reads back."""

import math

import numpy as np
import pytest

from app.monitors.detectors import initial_state, sequential_step, state_lag, state_t
from app.stats.aggregator import WeightedAggregator
from app.stats.sequential import SERVICE_DESIGN, EProcess, SupportingLine, design_of_state


def _steps(state, periods):
    for a, b, n in periods:
        state = sequential_step(state, a, b, n, None).state
    return state


def test_new_e_process_checks_run_the_service_design_and_report_t_and_lag():
    s = initial_state("e-process", horizon=100, gamma=0.25, threshold=math.log(20), level=0.05, claim={"epsilon": 1.0})
    assert s["version"] == 2 and design_of_state(s) == SERVICE_DESIGN
    s = _steps(s, [(10, 3, 50), (30, 3, 50), (30, 3, 50)])
    assert state_t(s) == 3 and state_lag(s) == s["lag"] >= 1


def test_version_1_states_of_every_kind_read_back():
    line = SupportingLine.pure(1.0)
    # an e-process check of the both-faces design (equal weights: version 1) keeps its design
    old = EProcess(0.05, line, faces="both", agrapa=True).to_state()
    assert old["version"] == 1
    old.update({"lag": None, "low_t": 0})
    s = _steps(old, [(10, 3, 50), (12, 3, 50)])
    assert s["version"] == 1 and s["faces"] == "both" and len(s["log_r"]) == 34
    assert state_t(s) == 2 and state_lag(s) == s["lag"]
    # the e-detector's state is version 1 and has no prefix sums: not read as an aggregator's
    d = initial_state("e-detector", horizon=100, gamma=0.25, threshold=math.log(2000), level=0.05,
                      claim={"epsilon": 1.0})
    d = _steps(d, [(10, 3, 50)] * 4)
    assert state_t(d) == 4 and state_lag(d) == d["lag"]
    # a version-1 aggregator state (before migration 0004s) still reads as one
    agg = WeightedAggregator(10, 0.25, 3.0)
    for z in (0.5, 1.0, -0.2):
        agg.update(z)
    legacy = agg.to_state()
    assert state_t(legacy) == 3 and state_lag(legacy) == agg.current_lag()


@pytest.mark.parametrize("claim", [{"epsilon": 1.0}, {"gdp_mu": 1.0}, {"zcdp_rho": 0.5}, {"epsilon": 1.0, "delta": 0.01}])
def test_sequential_lines_are_the_lines_a_check_steps_on(claim):
    """app.stats.claim_period.sequential_lines (the simulations' batch form) gives, run by run and period by
    period, the paths of the service's own detectors stepped one period at a time on ``sequential_line``:
    the e-process with a horizon's design and the e-detector, with lines of both orientations."""
    from app.monitors.detectors import initial_state, sequential_line, sequential_step
    from app.stats.claim_period import sequential_lines
    from app.stats.claims import parse_claim
    from app.stats.sequential import (
        bet_grid,
        component_parts,
        e_detector_paths_from_increments,
        edetector_threshold,
        service_design,
    )

    rng = np.random.default_rng(11)
    runs, periods, n, alpha, horizon = 4, 40, 200, 0.05, 100
    p = np.array([[0.5], [0.1], [0.3], [0.02]])
    q = np.array([[0.2], [0.35], [0.3], [0.01]])  # x' likelier in run 2: "lower" lines
    a = rng.binomial(n, np.broadcast_to(p, (runs, periods)))
    b = rng.binomial(n, np.broadcast_to(q, (runs, periods)))
    lines = sequential_lines(parse_claim(claim), a, b, n)
    nn = np.full(a.shape, float(n))
    design = service_design(horizon)
    log_w = design.paths_from_increments(component_parts(
        lines.a, lines.b, nn, lines.slope, lines.intercept, lines.past_a, lines.past_b, lines.past_n,
        design.faces, design.agrapa, design.grid, design.payoff, design.tuned_rate(alpha)))
    log_m = e_detector_paths_from_increments(component_parts(
        lines.a, lines.b, nn, lines.slope, lines.intercept, lines.past_a, lines.past_b, lines.past_n,
        "auto", False, bet_grid()))
    if "epsilon" in claim and "delta" not in claim:
        assert not np.any(lines.a != a)
    else:
        assert np.any(lines.a != a), "no period with a lower line: the orientation is not exercised"
    kw = {"horizon": horizon, "gamma": 0.25, "level": alpha, "claim": claim}
    for r in range(runs):
        states = {"e-process": initial_state("e-process", **kw, threshold=math.log(1 / alpha), design_horizon=horizon),
                  "e-detector": initial_state("e-detector", **kw,
                                              threshold=math.log(edetector_threshold(alpha, horizon)))}
        for t in range(periods):
            for kind, paths in (("e-process", log_w), ("e-detector", log_m)):
                step = sequential_step(states[kind], int(a[r, t]), int(b[r, t]), n,
                                       sequential_line(states[kind], claim))
                states[kind] = step.state
                assert step.statistic == pytest.approx(paths[r, t], abs=1e-9), (kind, r, t)
