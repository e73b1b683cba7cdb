"""The stored detector states of app/monitors/detectors.py: every kind and version reads back."""

import math

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
