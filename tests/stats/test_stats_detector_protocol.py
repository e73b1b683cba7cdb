"""The Detector protocol of app/stats/detector.py: every kind steps, stores and reloads its state
through one interface, and gives the numbers of the classes it adapts."""

import math

import numpy as np
import pytest

from app.monitors.detectors import initial_state
from app.stats.aggregator import WeightedAggregator, first_crossing, weighted_statistic_path
from app.stats.detector import (
    REGISTRY,
    AggregatorDetector,
    Detector,
    DetectorParams,
    EDetectorDetector,
    EProcessDetector,
    NaiveDetector,
    Observation,
    create,
    kind_of,
    load,
    needs_past,
    state_lag,
    state_t,
)
from app.stats.exact_naive import exact_naive_alarm_period, exact_naive_test
from app.stats.sequential import SERVICE_DESIGN, EDetector, EProcess, SupportingLine


def test_every_registered_kind_implements_the_protocol():
    assert set(REGISTRY) == {"aggregator", "naive", "e-process", "e-detector"}
    line = SupportingLine.pure(1.0)
    made = [AggregatorDetector(10, 0.25, 3.0), NaiveDetector(10, 0.05), EProcessDetector.create(0.05, line),
            EDetectorDetector.create(1000.0, line)]
    for det in made:
        assert isinstance(det, Detector)
        assert REGISTRY[det.kind] is type(det)
        assert kind_of(det.to_state()) == det.kind and det.t == 0 and det.lag is None


def test_aggregator_through_the_protocol_matches_eq_13_with_a_reload_every_period():
    rng = np.random.default_rng(3)
    z = rng.normal(0.4, 1.0, size=30)
    horizon, gamma, q = 30, 0.25, 3.5
    path = weighted_statistic_path(z, horizon, gamma)
    state = AggregatorDetector(horizon, gamma, q).to_state()
    prefix: list[float] = []
    alarm_t = 0
    for t, zt in enumerate(z, start=1):
        assert needs_past(state) == (t > 1)
        det = load(state, prefix)
        step = det.step(Observation(a=3, b=1, n=10, z=float(zt)))
        assert step.statistic == pytest.approx(path[t - 1], rel=1e-12)
        assert step.threshold == q and step.alarm == (path[t - 1] > q)
        if step.alarm and not alarm_t:
            alarm_t = t
        prefix.append(step.prefix_sum)
        state = step.state
        assert state_t(state) == t and state_lag(state) == step.lag == det.lag
    assert alarm_t == int(first_crossing(path, q))
    assert state["alarm_t"] == (alarm_t or None)


def test_aggregator_refuses_missing_prefix_sums_and_reads_version_1_states():
    det = AggregatorDetector(10, 0.25, 3.0)
    state = det.step(Observation(z=1.0)).state
    with pytest.raises(ValueError, match="prefix sums"):
        load(state, [])
    legacy = WeightedAggregator(10, 0.25, 3.0)
    for zt in (0.5, 1.0, -0.2):
        legacy.update(zt)
    old = legacy.to_state()
    assert "kind" not in old and not needs_past(old)
    det = load(old)
    assert isinstance(det, AggregatorDetector) and det.t == 3 and det.lag == legacy.current_lag()
    step = det.step(Observation(z=2.0))
    assert step.statistic == pytest.approx(legacy.update(2.0).statistic, rel=1e-12)
    assert step.state["version"] == 2 and step.state["t"] == 4


@pytest.mark.parametrize("kind", ["e-process", "e-detector"])
def test_e_values_through_the_protocol_match_their_classes(kind):
    line = SupportingLine.pure(0.5)
    if kind == "e-process":
        ref: EProcess | EDetector = EProcess.from_design(0.05, line, SERVICE_DESIGN)
        state = EProcessDetector.create(0.05, line).to_state()
    else:
        ref = EDetector(1000.0, line, faces="auto")
        state = EDetectorDetector.create(1000.0, line).to_state()
    rng = np.random.default_rng(5)
    for _ in range(12):
        a, b = int(rng.binomial(40, 0.5)), int(rng.binomial(40, 0.2))
        want = ref.update(a, b, 40)
        step = load(state).step(Observation(a=a, b=b, n=40, line=None))
        assert step.statistic == pytest.approx(want.statistic, rel=1e-12, abs=1e-12)
        assert step.threshold == want.threshold and step.alarm == want.alarm and step.lag >= 1
        state = step.state
    assert state["kind"] == kind and state_t(state) == 12


def test_naive_detector_alarms_where_the_vectorised_test_does():
    line, n, alpha, horizon = SupportingLine.pure(0.5), 60, 0.05, 20
    rng = np.random.default_rng(11)
    a = rng.binomial(n, 0.55, size=(40, horizon))
    b = rng.binomial(n, 0.25, size=(40, horizon))
    want = exact_naive_alarm_period(a, b, n, line, alpha, horizon, rng=np.random.default_rng(99))
    u = np.random.default_rng(99).random(size=(40, horizon))
    c = exact_naive_test(n, line, alpha / horizon).threshold
    for r in range(40):
        state = NaiveDetector(horizon, alpha).to_state()
        for t in range(horizon):
            step = load(state).step(Observation(a=int(a[r, t]), b=int(b[r, t]), n=n, line=line, u=float(u[r, t])))
            assert step.threshold == pytest.approx(c)
            state = step.state
        assert (state["alarm_t"] or 0) == want[r]
    assert (want > 0).sum() > 0  # a violation well past the claim: most runs alarm


def test_stored_states_keep_their_fields():
    claim = {"epsilon": 1.0}
    agg = initial_state("aggregator", horizon=50, gamma=0.25, threshold=3.0, level=None, claim=claim)
    assert agg == {"version": 2, "kind": "aggregator", "horizon": 50, "gamma": 0.25, "threshold": 3.0, "t": 0,
                   "s": 0.0, "alarm_t": None, "max_statistic": None, "lag": None, "sums": [0.0, 0.0, 0.0]}
    ep = initial_state("e-process", horizon=50, gamma=0.25, threshold=math.log(20), level=0.05, claim=claim)
    assert ep == {**EProcess.from_design(0.05, line := SupportingLine.pure(1.0), SERVICE_DESIGN).to_state(),
                  "log_threshold": math.log(20), "lag": None, "low_t": 0}
    ed = initial_state("e-detector", horizon=50, gamma=0.25, threshold=math.log(1000), level=0.05, claim=claim)
    assert ed == {**EDetector(1000.0, line, faces="auto").to_state(), "log_threshold": math.log(1000),
                  "lag": None, "low_t": 0}


def test_unknown_kinds_are_refused_by_name():
    with pytest.raises(ValueError, match="kind: unknown detector 'cusum'"):
        load({"kind": "cusum", "version": 1})
    with pytest.raises(ValueError, match="unknown detector"):
        initial_state("naive", horizon=10, gamma=0.25, threshold=3.0, level=0.05, claim={"epsilon": 1.0})


def test_every_kind_is_made_from_one_set_of_parameters():
    line = SupportingLine.pure(1.0)
    params = DetectorParams(horizon=200, gamma=0.25, threshold=None, level=0.01, line=line)
    ep, ed, nv = (create(k, params) for k in ("e-process", "e-detector", "naive"))
    assert ep.threshold == pytest.approx(math.log(100)) and ed.threshold == pytest.approx(math.log(200 / 0.01))
    assert isinstance(nv, NaiveDetector) and nv.horizon == 200 and nv.alpha == 0.01
    agg = create("aggregator", DetectorParams(horizon=200, threshold=3.0))
    assert agg.threshold == 3.0 and agg.to_state()["horizon"] == 200
    with pytest.raises(ValueError, match="threshold"):
        create("aggregator", DetectorParams(horizon=200))
    with pytest.raises(ValueError, match="level"):
        create("e-process", DetectorParams(horizon=200, line=line))


def test_an_aggregator_starts_without_a_claim():
    # rediscovery starts the aggregator of a new check with an empty claim: only the e-values read it
    state = initial_state("aggregator", horizon=40, gamma=0.25, threshold=3.0, level=0.05, claim={})
    assert state["kind"] == "aggregator" and state["horizon"] == 40 and state["t"] == 0
