"""The horizon-free detectors (method.md §11): e-values, e-process, e-detector, their states."""

import json
import math

import numpy as np
import pytest
from scipy.stats import hypergeom

from app.stats.sequential import (
    EDetector,
    EProcess,
    SupportingLine,
    bet_grid,
    e_detector_paths,
    e_process_paths,
    edetector_threshold,
    gdp_supporting_line,
    log_period_evalues,
    start_weight,
)


def _exact_conditional_evalue(a, b, n, line, lam):
    """E[Π_i (1 + λ(X_i − sY_i − d)) | a, b]: the overlap K is hypergeometric (method.md §13.2)."""
    s, d = line.slope, line.intercept
    u, v, w, z = 1 + lam * (1 - d), 1 + lam * (1 - s - d), 1 - lam * (s + d), 1 - lam * d
    ks = np.arange(max(0, a + b - n), min(a, b) + 1)
    pmf = hypergeom(n, a, b).pmf(ks)
    return float(np.sum(pmf * u ** (a - ks) * v ** ks * w ** (b - ks) * z ** (n - a - b + ks)))


@pytest.mark.parametrize("line", [SupportingLine.pure(1.0), SupportingLine.approximate(0.5, 0.05)])
def test_closed_form_is_a_lower_bound_of_the_exact_conditional_evalue(line):
    grid = np.array([0.01, 0.2, 0.7])
    for a, b, n in [(3, 1, 10), (10, 0, 10), (0, 7, 10), (40, 25, 60), (1, 1, 1), (0, 0, 5)]:
        approx = log_period_evalues(a, b, n, line, grid, "per-sample-jensen")
        shipped = log_period_evalues(a, b, n, line, grid)  # the exact e-value (method.md §13.2, eq. (F))
        for j, c in enumerate(grid):
            exact = _exact_conditional_evalue(a, b, n, line, c / (line.slope + line.intercept))
            assert approx[j] <= math.log(exact) + 1e-12
            assert shipped[j] == pytest.approx(math.log(exact), abs=1e-10)
            if c <= 0.2:  # the Jensen gap is of order λ⁴·Var(K): small for moderate bets
                assert approx[j] == pytest.approx(math.log(exact), abs=0.01 * max(1, abs(math.log(exact))))
    # n = 1: the overlap is a·b exactly, so the bound is the product itself.
    for a in (0, 1):
        for b in (0, 1):
            got = log_period_evalues(a, b, 1, line, grid, "per-sample-jensen")
            want = [math.log(_exact_conditional_evalue(a, b, 1, line, c / (line.slope + line.intercept))) for c in grid]
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("payoff", ["per-sample", "per-sample-jensen", "per-period"])
def test_mean_of_the_evalue_is_at_most_one_on_the_boundary(payoff):
    # Exact expectation over the binomial counts, p = s q + d: E[F] ≤ 1 for every bet.
    from scipy.stats import binom

    for line, q, n in [(SupportingLine.pure(1.0), 0.2, 30), (SupportingLine.approximate(0.3, 0.02), 0.4, 12),
                       (SupportingLine.pure(0.1), 0.01, 50)]:
        p = line.slope * q + line.intercept
        a = np.arange(n + 1)[:, None]
        b = np.arange(n + 1)[None, :]
        w = binom.pmf(a, n, p) * binom.pmf(b, n, q)
        f = np.exp(log_period_evalues(a, b, n, line, bet_grid(), payoff))
        mean = np.einsum("ab,abk->k", w, f)
        assert np.all(mean <= 1 + 1e-9), mean.max()


def test_supporting_lines_and_gdp_tangent_majorise_the_boundary():
    assert SupportingLine.pure(1.0) == SupportingLine(math.e, 0.0)
    assert SupportingLine.approximate(1.0, 1e-5).intercept == 1e-5
    from scipy.stats import norm

    qs = np.linspace(1e-6, 1 - 1e-6, 2001)
    for mu in (0.5, 1.0, 2.0):
        h = norm.cdf(norm.ppf(qs) + mu)
        for q0 in (0.001, 0.05, 0.3, 0.8):
            line = gdp_supporting_line(mu, q0)
            assert line.intercept >= 0
            assert np.all(line.slope * qs + line.intercept >= h - 1e-9)
            assert line.slope * q0 + line.intercept == pytest.approx(norm.cdf(norm.ppf(q0) + mu), abs=1e-9)
    for bad in [(-1.0, 0.0), (math.inf, 0.0), (1.0, -0.1), (0.0, 0.0)]:
        with pytest.raises(ValueError):
            SupportingLine(*bad)


@pytest.mark.parametrize("starts", ["mixture", "first"])
def test_eprocess_matches_batch_and_round_trips_through_json(starts):
    rng = np.random.default_rng(1)
    line = SupportingLine.pure(1.0)
    n, horizon = 50, 40
    a = rng.binomial(n, 0.4, size=horizon)
    b = rng.binomial(n, 0.1, size=horizon)
    batch = e_process_paths(a[None], b[None], n, line, starts=starts, chunk=7)[0]
    det = EProcess(0.05, line, starts=starts)
    steps = []
    for t in range(horizon):
        if t == 17:  # the stored state carries on exactly
            det = EProcess.from_state(json.loads(json.dumps(det.to_state(), allow_nan=False)))
        steps.append(det.update(int(a[t]), int(b[t]), n))
    np.testing.assert_allclose([s.statistic for s in steps], batch, rtol=1e-10, atol=1e-10)
    assert steps[-1].t == horizon and steps[-1].threshold == pytest.approx(math.log(20))
    first = next(s.t for s in steps if s.alarm)
    assert det.alarm_t == first
    assert sum(s.log_e_value for s in steps) == pytest.approx(steps[-1].statistic)
    state = det.to_state()
    assert len(json.dumps(state)) < 2000  # O(K), not O(t)


@pytest.mark.parametrize("variant", ["sr", "cusum"])
def test_edetector_matches_batch_and_recursion(variant):
    rng = np.random.default_rng(2)
    line = SupportingLine.approximate(0.5, 0.01)
    n, horizon = 20, 30
    a = rng.binomial(n, 0.3, size=horizon)
    b = rng.binomial(n, 0.2, size=horizon)
    batch = e_detector_paths(a[None], b[None], n, line, variant, chunk=4)[0]
    det = EDetector(edetector_threshold(0.05, 100), line, variant)
    assert det.log_statistic == -math.inf
    stats = []
    for t in range(horizon):
        if t == 9:
            det = EDetector.from_state(json.loads(json.dumps(det.to_state(), allow_nan=False)))
        stats.append(det.update(int(a[t]), int(b[t]), n).statistic)
    np.testing.assert_allclose(stats, batch, rtol=1e-10, atol=1e-10)
    # By hand for one bet: SR sums the products of every suffix, CUSUM keeps the largest.
    inc = log_period_evalues(a, b, n, line, [0.3])[:, 0]
    suffix = [np.sum(inc[k:]) for k in range(horizon)]
    want = np.log(np.sum(np.exp(suffix))) if variant == "sr" else max(suffix)
    one = EDetector(2000.0, line, variant, grid_size=1, grid_high=0.3)
    for t in range(horizon):
        last = one.update(int(a[t]), int(b[t]), n)
    assert last.statistic == pytest.approx(want, rel=1e-10)


def test_sr_dominates_cusum_and_thresholds():
    rng = np.random.default_rng(3)
    a = rng.binomial(30, 0.5, size=(5, 60))
    b = rng.binomial(30, 0.2, size=(5, 60))
    line = SupportingLine.pure(1.0)
    assert np.all(e_detector_paths(a, b, 30, line, "sr") >= e_detector_paths(a, b, 30, line, "cusum") - 1e-12)
    assert edetector_threshold(0.05, 200) == pytest.approx(4000)
    with pytest.raises(ValueError):
        edetector_threshold(0.0, 10)
    with pytest.raises(ValueError):
        EDetector(1.0, line)


def test_detects_a_violation_and_not_the_boundary():
    rng = np.random.default_rng(4)
    line = SupportingLine.pure(1.0)
    n = 200
    # A violation p = 2e·q: found within a few periods.
    a = rng.binomial(n, 0.3, size=(200, 30))
    b = rng.binomial(n, 0.3 / (2 * math.e), size=(200, 30))
    assert np.mean(e_process_paths(a, b, n, line).max(axis=1) >= math.log(20)) > 0.95
    # Exactly on the boundary: the e-process stays below 1/α in at least 1 − α of runs.
    a = rng.binomial(n, 0.3, size=(2000, 100))
    b = rng.binomial(n, 0.3 / math.e, size=(2000, 100))
    far = np.mean(e_process_paths(a, b, n, line).max(axis=1) >= math.log(20))
    assert far <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)


def test_estimate_is_predictable_and_bad_input_is_refused():
    det = EProcess(0.05, SupportingLine.pure(1.0))
    assert det.estimate() == (0.5, 0.5)
    det.update(10, 2, 20)
    p, q = det.estimate()
    assert p == pytest.approx(10.5 / 21) and q == pytest.approx(2.5 / 21)
    for a, b, n in [(-1, 0, 5), (6, 0, 5), (1, 1, 0)]:
        with pytest.raises(ValueError):
            det.update(a, b, n)
    with pytest.raises(ValueError):
        EProcess(1.5, SupportingLine.pure(1.0))
    for version in (3, 4):  # version 3 (the horizon-tuned bet) without its fields; no version 4
        with pytest.raises(ValueError):
            EProcess.from_state({"version": version, "kind": "e-process"})
    state = det.to_state()
    state["log_r"] = state["log_r"][:-1]
    with pytest.raises(ValueError):
        EProcess.from_state(state)


def test_start_mixture_is_the_weighted_sum_over_start_periods():
    rng = np.random.default_rng(5)
    line = SupportingLine.pure(0.5)
    n, horizon = 40, 12
    a = rng.binomial(n, 0.5, size=horizon)
    b = rng.binomial(n, 0.3, size=horizon)
    inc = log_period_evalues(a, b, n, line, bet_grid())  # (T, K)
    det = EProcess(0.05, line)
    for t in range(horizon):
        got = det.update(int(a[t]), int(b[t]), n).statistic
        weights = np.array([start_weight(k) for k in range(1, t + 2)])
        by_start = [np.mean(np.exp(inc[k:t + 1].sum(axis=0))) for k in range(t + 1)]
        want = math.log(np.dot(weights, by_start) + 1 - weights.sum())
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert sum(start_weight(k) for k in range(1, 200_000)) < 1
    assert start_weight(1, "first") == 1 and start_weight(2, "first") == 0


def test_start_mixture_recovers_after_a_long_run_inside_the_null():
    # 300 periods well inside the null (D = −0.3), then a violation: the plain product has lost
    # too much to recover within 100 periods; the start mixture detects it.
    rng = np.random.default_rng(6)
    line = SupportingLine.pure(1.0)
    n = 200
    a = np.concatenate([rng.binomial(n, 0.2, size=(50, 300)), rng.binomial(n, 0.35, size=(50, 100))], axis=1)
    b = np.concatenate([rng.binomial(n, 0.18, size=(50, 300)), rng.binomial(n, 0.1, size=(50, 100))], axis=1)
    thr = math.log(20)
    mixed = e_process_paths(a, b, n, line)
    plain = e_process_paths(a, b, n, line, starts="first")
    assert np.mean(mixed[:, :300].max(axis=1) >= thr) <= 0.05
    assert np.mean(mixed[:, 300:].max(axis=1) >= thr) > 0.9
    assert np.mean(plain[:, 300:].max(axis=1) >= thr) < 0.2


def test_oriented_lines_from_a_claim_are_applied_to_the_right_side():
    class Line:  # the shape of app.stats.claims.Line: orientation, slope, intercept (0-d arrays)
        def __init__(self, orientation, slope, intercept):
            self.orientation = np.asarray(orientation)
            self.slope = np.asarray(slope)
            self.intercept = np.asarray(intercept)

    up = EProcess(0.05, SupportingLine.pure(1.0))
    down = EProcess(0.05, SupportingLine.pure(1.0))
    plain = EProcess(0.05, SupportingLine.pure(1.0))
    for a, b in [(30, 5), (28, 9), (31, 4)]:
        s1 = up.update(a, b, 50, line=Line("upper", math.e, 0.0))
        s2 = down.update(b, a, 50, line=Line("lower", math.e, 0.0))  # the same test, x and x' swapped
        s3 = plain.update(a, b, 50)
        assert s1.statistic == pytest.approx(s2.statistic) == pytest.approx(s3.statistic)
    assert up.anchor_counts() == pytest.approx((0.81 * 30 + 0.9 * 28 + 31, 0.81 * 5 + 0.9 * 9 + 4, 0.81 * 50 + 0.9 * 50 + 50))
    with pytest.raises(ValueError):
        up.update(1, 1, 5, line=Line("sideways", 1.0, 0.0))


def test_both_faces_and_agrapa_class_equals_batch_and_old_states_load():
    """The e-process on both faces with the aGRAPA bet (method.md §13.3b)."""
    from app.stats.sequential import e_process_paths_from_increments, face_increments

    rng = np.random.default_rng(2)
    n, line = 200, SupportingLine.pure(1.0)
    a = rng.binomial(n, 0.3, (1, 40))
    b = rng.binomial(n, 0.1, (1, 40))
    batch = e_process_paths_from_increments(face_increments(a, b, n, line, "both", True))[0]
    det = EProcess(0.05, line, faces="both", agrapa=True)
    got = []
    for t in range(40):
        got.append(det.update(int(a[0, t]), int(b[0, t]), n).statistic)
        det = EProcess.from_state(det.to_state())
    np.testing.assert_allclose(got, batch, rtol=0, atol=1e-10)
    assert det.components == 34 and len(det.to_state()["log_r"]) == 34
    # a state of the first design (16 bets, one face) still loads and runs as before
    old = EProcess(0.05, line)
    old.update(10, 3, 50)
    state = old.to_state()
    del state["faces"], state["agrapa"]
    again = EProcess.from_state(state)
    assert again.faces == "one" and again.components == 16
    with pytest.raises(ValueError):
        EProcess(0.05, line, faces="three")


def test_the_mirrored_face_is_tested_and_the_far_stays_below_alpha():
    from app.stats.sequential import e_process_paths_from_increments, face_increments

    rng = np.random.default_rng(7)
    n, line, runs, t_max = 200, SupportingLine.pure(1.0), 400, 60
    # p = 0.95 and 1 − q = e^1.5·(1 − p): only the complement face 1 − q ≤ e(1 − p) is violated
    p, q = 0.95, 1 - math.exp(1.5) * 0.05
    a = rng.binomial(n, p, (runs, t_max))
    b = rng.binomial(n, q, (runs, t_max))
    one = e_process_paths_from_increments(face_increments(a, b, n, line, "one", False))
    both = e_process_paths_from_increments(face_increments(a, b, n, line, "both", True))
    assert np.mean((one >= math.log(20)).any(axis=1)) < 0.05 < 0.9 < np.mean((both >= math.log(20)).any(axis=1))
    # at the vertex (both faces bind) the false-alarm rate stays ≤ α
    pv, qv = math.e / (1 + math.e), 1 / (1 + math.e)
    a = rng.binomial(n, pv, (1000, t_max))
    b = rng.binomial(n, qv, (1000, t_max))
    w = e_process_paths_from_increments(face_increments(a, b, n, line, "both", True))
    assert np.mean((w >= math.log(20)).any(axis=1)) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1000)


def test_agrapa_fraction_is_kellys_second_order_bet():
    from app.stats.sequential import agrapa_fraction

    # p̃ = 0.3005, q̃ = 0.1005 (½-smoothed 300 and 100 of 1000), s = e
    p, q, s = 300.5 / 1001, 100.5 / 1001, math.e
    mu, var = p - s * q, p * (1 - p) + s * s * q * (1 - q)
    assert float(agrapa_fraction(300, 100, 1000, s, 0.0)) == pytest.approx(min(0.8, mu / (var + mu * mu) * s))
    assert float(agrapa_fraction(100, 100, 1000, s, 0.0)) == 0.0  # no edge: no bet


def test_predictable_face_picks_the_face_with_the_larger_standardised_gap():
    """method.md §13.3c: z = μ̂/σ̂ of each face from the past counts (½-smoothed)."""
    from app.stats.sequential import predictable_face

    s = math.e
    # 300 and 100 of 1000 on the first face: p̃ = 300.5/1001, q̃ = 100.5/1001
    p, q = 300.5 / 1001, 100.5 / 1001
    z1 = (p - s * q) / math.sqrt(p * (1 - p) + s * s * q * (1 - q))
    z2 = ((1 - q) - s * (1 - p)) / math.sqrt(q * (1 - q) + s * s * p * (1 - p))
    assert bool(predictable_face(300, 100, 1000, s, 0.0)) == (z2 > z1) is False
    # p near 1: only the complement has room (1 − q vs e·(1 − p))
    assert bool(predictable_face(950, 800, 1000, s, 0.0))
    assert not bool(predictable_face(0, 0, 0, s, 0.0))  # no past: the first face


def test_component_prior_weights():
    from app.stats.sequential import component_log_prior

    eq = component_log_prior(16, "both", True)
    assert eq.shape == (34,) and np.allclose(np.exp(eq), 1 / 34)
    w = np.exp(component_log_prior(16, "auto", True, 0.8))
    assert w.shape == (17,) and w[-1] == pytest.approx(0.8) and np.allclose(w[:16], 0.2 / 16)
    w2 = np.exp(component_log_prior(8, "both", True, 0.5))
    assert w2.sum() == pytest.approx(1.0) and w2[8] == pytest.approx(0.25) == w2[17]
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError):
            component_log_prior(16, "auto", True, bad)
    with pytest.raises(ValueError):
        component_log_prior(16, "auto", False, 0.5)


def test_weighted_recursion_equals_the_equal_weight_kernel_and_the_sum_over_components():
    from app.stats.sequential import component_log_prior, e_process_paths_from_increments, face_increments

    rng = np.random.default_rng(11)
    n, line = 100, SupportingLine.pure(0.5)
    a = rng.binomial(n, 0.3, (3, 30))
    b = rng.binomial(n, 0.2, (3, 30))
    inc = face_increments(a, b, n, line, "both", True)
    eq = e_process_paths_from_increments(inc)
    np.testing.assert_allclose(e_process_paths_from_increments(inc, log_prior=component_log_prior(16, "both", True)),
                               eq, rtol=0, atol=1e-10)
    # with weights: W_t = Σ_j π_j R_t^j + cash_t, each R^j its own one-component e-process minus its cash
    lp = component_log_prior(16, "both", True, 0.8)
    mixed = e_process_paths_from_increments(inc, log_prior=lp)
    w = np.array([start_weight(t) for t in range(1, 31)])
    cash = 1 - np.cumsum(w)
    by_component = np.stack([np.exp(e_process_paths_from_increments(inc[:, :, j:j + 1])) - cash
                             for j in range(34)], axis=-1)
    np.testing.assert_allclose(np.exp(mixed), by_component @ np.exp(lp) + cash, rtol=1e-9)
    with pytest.raises(ValueError):
        e_process_paths_from_increments(inc, log_prior=lp[:-1])


@pytest.mark.parametrize("label", ["auto,agrapa=0.8,grid=16", "both,agrapa=0.5,grid=8", "auto,agrapa,grid=16"])
def test_designs_class_equals_batch_and_states_round_trip(label):
    """method.md §13.3c: the class (state saved and loaded every period) and the batch agree."""
    from app.stats.sequential import EProcessDesign

    design = EProcessDesign.parse(label)
    assert design.label == label
    rng = np.random.default_rng(3)
    n, line = 200, SupportingLine.pure(1.0)
    # the complement face is violated in the second half: the face choice has to switch
    a = np.concatenate([rng.binomial(n, 0.5, (1, 20)), rng.binomial(n, 0.97, (1, 20))], axis=1)
    b = np.concatenate([rng.binomial(n, 0.2, (1, 20)), rng.binomial(n, 0.8, (1, 20))], axis=1)
    batch = design.paths(a, b, n, line)[0]
    det = EProcess.from_design(0.05, line, design)
    got = []
    for t in range(40):
        got.append(det.update(int(a[0, t]), int(b[0, t]), n).statistic)
        state = json.loads(json.dumps(det.to_state(), allow_nan=False))
        assert state["version"] == (1 if design.agrapa_weight is None and design.faces != "auto" else 2)
        det = EProcess.from_state(state)
    np.testing.assert_allclose(got, batch, rtol=0, atol=1e-10)
    assert det.design == design and len(det.to_state()["log_r"]) == det.components
    assert batch[-1] > math.log(20)  # the complement's violation is found


def test_unknown_e_detector_states_are_refused():
    state = EDetector(100.0, SupportingLine.pure(1.0)).to_state()
    with pytest.raises(ValueError):
        EDetector.from_state({**state, "version": 3})
    with pytest.raises(ValueError):  # version 2 is the predictable face's; "both" is no e-detector design
        EDetector.from_state({**state, "version": 2, "faces": "both"})
    assert EDetector.from_state({**state, "version": 2, "faces": "auto"}).faces == "auto"


def test_the_service_design_stays_below_alpha_and_finds_a_late_change_sooner():
    """method.md §13.3c: seeded. On the boundary (vertex and edge) P(alarm within 100 periods) ≤ α;
    after 60 periods strictly inside the null and a change, it is faster than the both-faces design."""
    from app.stats.sequential import BOTH_FACES_DESIGN, SERVICE_DESIGN

    rng = np.random.default_rng(20)
    n, line, runs = 200, SupportingLine.pure(1.0), 1000
    for p, q in ((math.e / (1 + math.e), 1 / (1 + math.e)), (math.e * 0.1, 0.1)):
        a = rng.binomial(n, p, (runs, 100))
        b = rng.binomial(n, q, (runs, 100))
        far = np.mean((SERVICE_DESIGN.paths(a, b, n, line) >= math.log(20)).any(axis=1))
        assert far <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
    # SVT-like: p = 0.024, q = 0.0155 (inside), then p = 0.068, q = 0.0179 (scenario (f) of method.md §8)
    a = np.concatenate([rng.binomial(n, 0.024, (200, 60)), rng.binomial(n, 0.068, (200, 100))], axis=1)
    b = np.concatenate([rng.binomial(n, 0.0155, (200, 60)), rng.binomial(n, 0.0179, (200, 100))], axis=1)

    def median_delay(design):
        hit = design.paths(a, b, n, line) >= math.log(20)
        first = np.where(hit.any(axis=1), hit.argmax(axis=1), 10**6)
        return float(np.median(first)) - 60

    assert median_delay(SERVICE_DESIGN) + 5 <= median_delay(BOTH_FACES_DESIGN)


def test_service_design_with_oriented_lines_per_period_equals_the_batch():
    """The class with a line per period (orientation and intercept, as (ε, δ) and GDP checks get them,
    method.md §13.1) equals component_parts on the counts in each period's orientation."""
    from app.stats.sequential import SERVICE_DESIGN, _discounted_past, component_parts

    class Line:  # the shape of app.stats.claims.Line: orientation, slope, intercept (0-d arrays)
        def __init__(self, orientation, slope, intercept):
            self.orientation = np.asarray(orientation)
            self.slope = np.asarray(slope)
            self.intercept = np.asarray(intercept)

    rng = np.random.default_rng(9)
    n, t_max = 150, 30
    a = rng.binomial(n, 0.35, t_max).astype(float)
    b = rng.binomial(n, 0.15, t_max).astype(float)
    swap = rng.random(t_max) < 0.4
    s = np.exp(rng.uniform(0.5, 1.5, t_max))
    d = rng.uniform(0.0, 0.02, t_max)
    det = EProcess.from_design(0.05, SupportingLine.pure(1.0), SERVICE_DESIGN)
    got = []
    for t in range(t_max):
        line = Line("lower" if swap[t] else "upper", s[t], d[t])
        got.append(det.update(int(a[t]), int(b[t]), n, line=line).statistic)
        det = EProcess.from_state(det.to_state())
    r = det.ESTIMATE_DISCOUNT
    sa, sb, sn = _discounted_past(a, r), _discounted_past(b, r), _discounted_past(np.full(t_max, float(n)), r)
    ca, cb = np.where(swap, b, a), np.where(swap, a, b)
    pa, pb = np.where(swap, sb, sa), np.where(swap, sa, sb)
    inc = component_parts(ca, cb, np.full(t_max, float(n)), s, d, pa, pb, sn, "auto", True, SERVICE_DESIGN.grid)
    from app.stats.sequential import e_process_paths_from_increments

    batch = e_process_paths_from_increments(inc[None], log_prior=SERVICE_DESIGN.log_prior())[0]
    np.testing.assert_allclose(got, batch, rtol=0, atol=1e-10)


def test_the_e_detector_on_the_predictable_face_finds_the_complement_and_round_trips() -> None:
    """method.md §13.3c, §13.4: faces="auto" bets the same 16 bets on the face the past points to; the class
    equals the batch form, its state (version 2) round-trips, version-1 states still load as one face, and a
    violation of the complement face (1 − q > e^ε(1 − p)), which one face never sees, is detected."""
    from app.stats.sequential import EDetector, e_detector_paths_from_increments, face_increments

    line = SupportingLine.pure(1.0)
    rng = np.random.default_rng(8)
    n, horizon = 200, 60
    p = np.full(horizon, 0.95)
    q = np.r_[np.full(10, 1 - math.e * 0.05), np.full(horizon - 10, 1 - math.exp(1.5) * 0.05)]
    a, b = rng.binomial(n, p), rng.binomial(n, q)
    batch = e_detector_paths_from_increments(face_increments(a, b, n, line, "auto", False))[0]
    det, one = EDetector(edetector_threshold(0.05, 100), line, faces="auto"), EDetector(
        edetector_threshold(0.05, 100), line)
    stats, ones = [], []
    for t in range(horizon):
        step = det.update(int(a[t]), int(b[t]), n)
        stats.append(step.statistic)
        ones.append(one.update(int(a[t]), int(b[t]), n).statistic)
        det = EDetector.from_state(json.loads(json.dumps(det.to_state())))
    np.testing.assert_allclose(stats, batch, rtol=1e-9, atol=1e-9)
    assert det.to_state()["version"] == 2 and det.to_state()["faces"] == "auto"
    assert det.alarm_t is not None and det.alarm_t > 10  # found after the change
    assert max(ones) < math.log(edetector_threshold(0.05, 100))  # one face never sees it
    legacy = EDetector(100.0, line).to_state()
    assert legacy["version"] == 1 and "faces" not in legacy and EDetector.from_state(legacy).faces == "one"
    with pytest.raises(ValueError):
        EDetector(100.0, line, faces="both")  # type: ignore[arg-type]


def test_e_detector_paths_on_the_predictable_face_in_blocks_of_runs() -> None:
    from app.stats.sequential import e_detector_paths, e_detector_paths_from_increments, face_increments

    rng = np.random.default_rng(9)
    a, b = rng.binomial(100, 0.3, (7, 40)), rng.binomial(100, 0.12, (7, 40))
    line = SupportingLine.pure(1.0)
    whole = e_detector_paths_from_increments(face_increments(a, b, 100, line, "auto", False))
    np.testing.assert_allclose(e_detector_paths(a, b, 100, line, faces="auto", chunk=1), whole)  # 1 run a block
    np.testing.assert_allclose(e_detector_paths(a, b, 100, line, faces="auto"), whole)
    with pytest.raises(ValueError):
        e_detector_paths(a, b, 100, line, faces="both")  # type: ignore[arg-type]
