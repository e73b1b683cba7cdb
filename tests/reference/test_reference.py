"""Reference mechanisms, their exact probabilities, and the scenarios (a)–(h) (app/reference)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from app.reference import (
    ABORTED,
    REFERENCE_MECHANISMS,
    SCENARIOS,
    SVT1,
    SVT2,
    SVT4,
    SVT5,
    SVT6,
    Laplace,
    LaplaceGaussian,
    LaplaceSmallerScale,
    ReferenceMechanism,
    ReportNoisyMax,
    RNMExponential,
    RNMReportValue,
    SwitchingMechanism,
    get_mechanism,
)
from app.reference.exact import exact_probability, svt_output_probability
from app.reference.scenario_table import estimate_check, exact_check, main
from app.stats.events import Box, DiscreteSet, Interval, IntervalUnion

SLUGS = ["laplace", "laplace-smaller-scale", "laplace-gaussian", "rnm", "rnm-value", "rnm-exponential",
         "svt1", "svt2", "svt4", "svt5", "svt6"]


def _db_for(mech) -> tuple[float, ...]:
    return (0.0, 0.5, 1.0) if mech.name.startswith("laplace") else (0.0, 1.0, 2.0, 1.0)


def _within(estimate: float, expected: float, n: int, k: float = 4.5) -> bool:
    """|estimate − expected| within k binomial standard errors (floored, for p near 0 or 1)."""
    se = math.sqrt(max(expected * (1 - expected), 1.0 / n) / n)
    return abs(estimate - expected) <= k * se


# ------------------------------------------------------------------------------------ registry


def test_registry_holds_every_slug_and_builds_with_defaults():
    assert sorted(REFERENCE_MECHANISMS) == sorted(SLUGS)
    for slug in SLUGS:
        mech = get_mechanism(slug)
        assert isinstance(mech, ReferenceMechanism)
        assert mech.name == slug
        assert mech.claimed_epsilon == 1.0


@pytest.mark.parametrize("slug", SLUGS)
def test_sample_shapes_and_dtypes(slug):
    mech = get_mechanism(slug, epsilon=0.7)
    db = _db_for(mech)
    out = mech.sample(db, 257, np.random.default_rng(0))
    if mech.output_kind == "real":
        assert out.shape == (257,) and out.dtype == np.float64 and np.all(np.isfinite(out))
    elif mech.output_kind == "discrete":
        assert out.shape == (257,) and out.dtype == np.int64
        assert set(np.unique(out)) <= set(range(len(db)))
    else:
        assert mech.output_kind == "vector"
        assert out.shape == (257, len(db)) and out.dtype == np.int8
        assert set(np.unique(out)) <= {ABORTED, 0, 1}


def test_same_seed_same_outputs():
    for slug in SLUGS:
        mech = get_mechanism(slug)
        a = mech.sample(_db_for(mech), 50, np.random.default_rng(5))
        b = mech.sample(_db_for(mech), 50, np.random.default_rng(5))
        assert np.array_equal(a, b)


def test_true_epsilons():
    assert Laplace(epsilon=0.5).true_epsilon == 0.5
    assert LaplaceSmallerScale(epsilon=1.0, scale_factor=0.8).true_epsilon == pytest.approx(1.25)
    assert LaplaceSmallerScale().true_epsilon == pytest.approx(1 / 0.9)
    assert LaplaceGaussian().true_epsilon == math.inf
    assert ReportNoisyMax(epsilon=2.0).true_epsilon == 2.0
    assert RNMExponential(epsilon=2.0).true_epsilon == 2.0
    assert RNMReportValue(epsilon=1.0).true_epsilon is None  # depends on k
    assert RNMReportValue(epsilon=1.0, num_queries=5).true_epsilon == 2.5
    assert SVT1(epsilon=0.5, cutoff=3).true_epsilon == 0.5
    assert SVT2(epsilon=0.5, cutoff=3).true_epsilon == 0.5
    assert SVT4(epsilon=1.0, cutoff=1).true_epsilon == pytest.approx(7 / 4)
    assert SVT4(epsilon=1.0, cutoff=2).true_epsilon == pytest.approx(13 / 4)
    assert SVT5().true_epsilon == math.inf and SVT6().true_epsilon == math.inf


def test_noise_scales_follow_the_method_table():
    """method.md §8, pinned here because app.reference.exact reads the same properties."""
    eps, c = 0.5, 3
    assert Laplace(epsilon=eps).noise_scale == pytest.approx(1 / eps)
    assert LaplaceSmallerScale(epsilon=eps, scale_factor=0.8).noise_scale == pytest.approx(0.8 / eps)
    assert LaplaceGaussian(epsilon=eps).noise_sd == pytest.approx(math.sqrt(2) / eps)
    for cls in (ReportNoisyMax, RNMReportValue, RNMExponential):
        assert cls(epsilon=eps).noise_scale == pytest.approx(2 / eps)
    scales = {
        SVT1(epsilon=eps, cutoff=c): (2 / eps, 4 * c / eps),
        SVT2(epsilon=eps, cutoff=c): (2 * c / eps, 4 * c / eps),
        SVT4(epsilon=eps, cutoff=c): (4 / eps, 4 / (3 * eps)),
        SVT5(epsilon=eps): (2 / eps, None),
        SVT6(epsilon=eps): (2 / eps, 2 / eps),
    }
    for mech, (rho, nu) in scales.items():
        assert mech.rho_scale == pytest.approx(rho)
        assert mech.nu_scale == (None if nu is None else pytest.approx(nu))
    assert [m.cutoff_value for m in scales] == [c, c, c, None, None]


def test_rnm_value_leaks_k_epsilon_over_two_in_the_left_tail():
    """The lower bound behind RNMReportValue.true_epsilon: shift all k queries by 1."""
    mech = RNMReportValue(epsilon=1.0, num_queries=4)
    p = exact_probability(mech, [0, 0, 0, 0], Interval(high=-0.5))
    q = exact_probability(mech, [1, 1, 1, 1], Interval(high=-0.5))
    assert math.log(p / q) == pytest.approx(mech.true_epsilon, rel=1e-9)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Laplace(epsilon=0), "epsilon must be a positive finite number"),
        (lambda: Laplace(epsilon=float("inf")), "epsilon must be a positive finite number"),
        (lambda: Laplace(epsilon=float("nan")), "epsilon must be a positive finite number"),
        (lambda: LaplaceSmallerScale(scale_factor=1.0), r"scale_factor must lie in \(0, 1\)"),
        (lambda: SVT2(cutoff=0), "cutoff"),
        (lambda: SVT4(threshold=float("nan")), "threshold must be a finite number"),
        (lambda: ReportNoisyMax(num_queries=0), "num_queries"),
        (lambda: Laplace().sample([0.2, 1.5], 10, np.random.default_rng(0)), r"must lie in \[0, 1\]"),
        (lambda: Laplace().sample([[0.2]], 10, np.random.default_rng(0)), "1-D sequence"),
        (lambda: Laplace().sample(["a"], 10, np.random.default_rng(0)), "1-D sequence of numbers"),
        (lambda: ReportNoisyMax().sample([], 10, np.random.default_rng(0)), "at least one query"),
        (lambda: ReportNoisyMax().sample([1, np.nan], 10, np.random.default_rng(0)), "finite numbers"),
        (lambda: ReportNoisyMax(num_queries=3).sample([1, 2], 10, np.random.default_rng(0)), "answers 3 queries"),
        (lambda: SVT2().sample([1, 2], 0, np.random.default_rng(0)), "n must be a positive integer"),
        (lambda: SVT2().sample([1, 2], 2.5, np.random.default_rng(0)), "n must be a positive integer"),
        (lambda: SVT2().sample([1, 2], 5, np.random.RandomState(0)), "numpy.random.Generator"),
        (lambda: get_mechanism("svt3"), "unknown reference mechanism 'svt3'"),
        (lambda: get_mechanism("laplace", scale_factor=0.5), "invalid parameters for 'laplace'"),
    ],
)
def test_invalid_inputs_raise_clear_value_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ------------------------------------------------------------------------------------ Laplace family

N_LAP = 200_000


@pytest.mark.parametrize(
    ("mech", "scale"),
    [(Laplace(epsilon=1.0), 1.0), (Laplace(epsilon=2.0), 0.5), (LaplaceSmallerScale(epsilon=1.0), 0.9)],
)
def test_laplace_mean_and_scale(mech, scale):
    x = [0.2, 0.7, 1.0, 0.0]  # sum 1.9
    out = mech.sample(x, N_LAP, np.random.default_rng(1))
    noise = out - 1.9
    # Laplace(b): mean 0, sd b√2; |noise| is Exponential(b): mean b, sd b.
    assert abs(noise.mean()) < 4.5 * scale * math.sqrt(2) / math.sqrt(N_LAP)
    assert abs(np.abs(noise).mean() - scale) < 4.5 * scale / math.sqrt(N_LAP)


def test_gaussian_change_keeps_the_variance_but_not_the_shape():
    lap = Laplace(epsilon=1.0).sample([0.0], N_LAP, np.random.default_rng(2))
    gauss = LaplaceGaussian(epsilon=1.0).sample([0.0], N_LAP, np.random.default_rng(3))
    assert lap.std() == pytest.approx(math.sqrt(2), rel=0.02)
    assert gauss.std() == pytest.approx(math.sqrt(2), rel=0.02)

    def excess_kurtosis(v):
        return float(np.mean((v - v.mean()) ** 4) / v.var() ** 2 - 3)

    assert excess_kurtosis(lap) == pytest.approx(3.0, abs=0.3)
    assert excess_kurtosis(gauss) == pytest.approx(0.0, abs=0.1)


def test_exact_probability_of_unions_and_unsupported_events():
    mech = Laplace(epsilon=1.0)
    union = IntervalUnion(intervals=[Interval(high=0.0), Interval(low=-0.5, high=1.0), Interval(low=2.0)])
    # overlapping pieces are merged: (-inf, 1] ∪ [2, inf)
    expected = 1.0 - (0.5 * math.exp(-1.0) - 0.5 * math.exp(-2.0))
    assert exact_probability(mech, [0.0], union) == pytest.approx(expected, abs=1e-12)
    out = mech.sample([0.0], 100_000, np.random.default_rng(13))
    assert _within(np.mean(union.contains(out)), expected, out.size)
    assert exact_probability(mech, [0.0], DiscreteSet(values=[0.0])) == 0.0
    with pytest.raises(ValueError, match="no exact formula for a Box"):
        exact_probability(mech, [0.0], Box(low=[0.0], high=[1.0]))
    with pytest.raises(ValueError, match="set of answer tuples"):
        exact_probability(SVT2(), [0.0, 1.0], Interval(high=0.0))


# ------------------------------------------------------------------------------------ Report Noisy Max


@pytest.mark.parametrize("cls", [ReportNoisyMax, RNMExponential])
def test_rnm_index_frequencies_match_the_exact_probabilities(cls):
    mech = cls(epsilon=1.0)
    q = [2.0, 0.0, 1.0, 0.0]
    n = 100_000
    out = mech.sample(q, n, np.random.default_rng(4))
    exact = [exact_probability(mech, q, DiscreteSet(values=[i])) for i in range(4)]
    assert sum(exact) == pytest.approx(1.0, abs=1e-9)
    for i in range(4):
        assert _within(np.mean(out == i), exact[i], n)
    # the two noises give visibly different index distributions on this input
    other = (RNMExponential if cls is ReportNoisyMax else ReportNoisyMax)(epsilon=1.0)
    assert abs(exact_probability(other, q, DiscreteSet(values=[0])) - exact[0]) > 0.02


def test_exponential_noise_is_exactly_on_the_boundary_for_one_below_rest_above():
    """Memorylessness: P(index 0 | (0,2,2,2,2)) = e^-ε · P(index 0 | (1,1,1,1,1)) = e^-ε / 5."""
    mech = RNMExponential(epsilon=1.0)
    assert exact_probability(mech, [1, 1, 1, 1, 1], DiscreteSet(values=[0])) == pytest.approx(0.2, abs=1e-9)
    assert exact_probability(mech, [0, 2, 2, 2, 2], DiscreteSet(values=[0])) == pytest.approx(0.2 / math.e, abs=1e-9)


def test_rnm_value_distribution_matches_the_product_of_laplace_cdfs():
    mech = RNMReportValue(epsilon=1.0)
    q = [0.0, 1.0, 3.0]
    n = 100_000
    out = mech.sample(q, n, np.random.default_rng(6))
    for c in (-1.0, 1.0, 3.0, 5.0):
        assert _within(np.mean(out <= c), exact_probability(mech, q, Interval(high=c)), n)


# ------------------------------------------------------------------------------------ SVT


@pytest.mark.parametrize("cls", [SVT1, SVT2, SVT4])
def test_svt_with_cutoff_stops_after_c_max_tops_and_marks_the_rest_aborted(cls):
    mech = cls(epsilon=1.0, threshold=1.0, cutoff=3)
    out = mech.sample([3.0] * 10, 20_000, np.random.default_rng(7))
    tops = np.cumsum(out == 1, axis=1)
    answered = out != ABORTED
    # A query is answered iff fewer than c_max ⊤ came before it.
    before = np.concatenate([np.zeros((out.shape[0], 1), dtype=tops.dtype), tops[:, :-1]], axis=1)
    assert np.array_equal(answered, before < 3)
    assert (out == 1).sum(axis=1).max() == 3
    stopped = (out[:, -1] == ABORTED).mean()
    assert 0.05 < stopped < 1.0  # both stopped and unstopped runs occurred


@pytest.mark.parametrize("cls", [SVT5, SVT6])
def test_svt5_and_svt6_have_no_cutoff(cls):
    out = cls(epsilon=1.0, threshold=1.0).sample([3.0] * 10, 20_000, np.random.default_rng(8))
    assert not np.any(out == ABORTED)
    assert (out == 1).sum(axis=1).max() == 10  # far beyond any cutoff


def test_svt5_answers_are_monotone_in_the_query_values():
    out = SVT5(epsilon=1.0).sample([-3.0, -1.0, 0.5, 1.0, 2.0, 4.0], 20_000, np.random.default_rng(9))
    assert np.all(np.diff(out.astype(int), axis=1) >= 0)
    assert len(np.unique(out, axis=0)) == 7  # every threshold position occurs


def test_svt2_redraws_the_threshold_after_a_top_and_svt1_does_not():
    """With queries (0, 0): SVT 2 draws a fresh ρ after ⊤, so P(2nd ⊤ | 1st ⊤) = P(1st ⊤);
    SVT 1 keeps ρ, so a ⊤ (a low ρ) makes the next ⊤ more likely."""
    n = 200_000
    for cls, redraws in ((SVT2, True), (SVT1, False)):
        out = cls(epsilon=1.0, threshold=0.0, cutoff=2).sample([0.0, 0.0], n, np.random.default_rng(10))
        first = out[:, 0] == 1
        p_first = first.mean()
        p_second_given_first = (out[first, 1] == 1).mean()
        se = math.sqrt(0.25 / first.sum() + 0.25 / n)
        if redraws:
            assert abs(p_second_given_first - p_first) < 4.5 * se
        else:
            assert p_second_given_first - p_first > 10 * se


@pytest.mark.parametrize(
    "mech",
    [SVT1(cutoff=2), SVT2(cutoff=2), SVT2(cutoff=1), SVT4(cutoff=2), SVT5(), SVT6(), SVT2(epsilon=0.5, threshold=0.0)],
    ids=lambda m: f"{m.name}-{m.epsilon}-{getattr(m, 'cutoff', None)}",
)
def test_svt_output_frequencies_match_the_exact_probabilities(mech):
    q = [0.0, 2.0, 1.0]
    n = 100_000
    out = mech.sample(q, n, np.random.default_rng(12))
    outputs = list(itertools.product([ABORTED, 0, 1], repeat=3))
    exact = {o: svt_output_probability(mech, q, o) for o in outputs}
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-7)
    rows, counts = np.unique(out, axis=0, return_counts=True)
    observed = {tuple(int(v) for v in r): c / n for r, c in zip(rows, counts)}
    assert set(observed) <= {o for o, p in exact.items() if p > 0}
    for o, p in exact.items():
        assert _within(observed.get(o, 0.0), p, n), (o, observed.get(o, 0.0), p)


# ------------------------------------------------------------------------------------ switching


def test_switching_mechanism_switches_at_the_change_period():
    before = ReportNoisyMax(epsilon=1.0, num_queries=3)
    after = RNMReportValue(epsilon=1.0, num_queries=3)
    sw = SwitchingMechanism(before=before, after=after, change_period=5)
    q = [0.0, 1.0, 0.5]
    for period in (0, 1, 4):
        assert sw.mechanism_at(period) is before
        assert sw.sample(q, 20, np.random.default_rng(1), period=period).dtype == np.int64
        assert sw.output_kind_at(period) == "discrete"
    for period in (5, 6, 100):
        assert sw.mechanism_at(period) is after
        assert sw.sample(q, 20, np.random.default_rng(1), period=period).dtype == np.float64
        assert sw.true_epsilon_at(period) == 1.5
    assert np.array_equal(sw.sample(q, 30, np.random.default_rng(3), period=4), before.sample(q, 30, np.random.default_rng(3)))
    assert np.array_equal(sw.sample(q, 30, np.random.default_rng(3), period=5), after.sample(q, 30, np.random.default_rng(3)))
    assert sw.output_kind == "mixed"
    assert sw.claimed_epsilon == 1.0
    assert sw.true_epsilon == 1.5
    assert sw.name == "rnm->rnm-value@5"


def test_switching_mechanism_metadata_and_validation():
    sw = SwitchingMechanism(Laplace(), LaplaceGaussian(), change_period=1)
    assert sw.output_kind == "real" and sw.true_epsilon == math.inf
    assert SwitchingMechanism(Laplace(), RNMReportValue(), 3).true_epsilon is None
    with pytest.raises(ValueError, match="same epsilon"):
        SwitchingMechanism(Laplace(epsilon=1.0), Laplace(epsilon=2.0), change_period=1)
    with pytest.raises(ValueError, match="change_period must be an integer"):
        SwitchingMechanism(Laplace(), Laplace(), change_period=1.5)
    with pytest.raises(ValueError, match="period must be an integer"):
        sw.sample([0.0], 3, np.random.default_rng(0), period="1")


# ------------------------------------------------------------------------------------ scenarios


def test_scenarios_are_the_papers_eight():
    assert list(SCENARIOS) == list("abcdefgh")
    assert [s.harmful for s in SCENARIOS.values()] == [True] * 6 + [False] * 2
    expected = {"a": ("laplace", "laplace-smaller-scale"), "b": ("laplace", "laplace-gaussian"),
                "c": ("rnm", "rnm-value"), "d": ("svt2", "svt4"), "e": ("svt2", "svt5"),
                "f": ("svt2", "svt6"), "g": ("rnm", "rnm-exponential"), "h": ("svt2", "svt1")}
    for key, s in SCENARIOS.items():
        assert (s.before, s.after) == expected[key]
        assert s.key == key and s.title and s.rationale and s.claimed_epsilon == s.epsilon > 0


def test_scenario_databases_are_neighbours():
    for s in SCENARIOS.values():
        x, xp = np.array(s.x), np.array(s.x_prime)
        assert x.shape == xp.shape
        if s.before.startswith("laplace"):
            assert np.count_nonzero(x != xp) == 1  # one record changes
        else:
            assert np.max(np.abs(x - xp)) <= 1  # every sensitivity-1 query moves by at most 1


def test_scenario_mechanisms_and_switching():
    s = SCENARIOS["d"]
    sw = s.switching(change_period=10)
    assert sw.mechanism_at(9) == SVT2(threshold=1.0, cutoff=2)
    assert sw.mechanism_at(10) == SVT4(threshold=1.0, cutoff=2)
    assert SCENARIOS["a"].after_mechanism() == LaplaceSmallerScale(scale_factor=0.9)
    assert SCENARIOS["c"].after_mechanism().true_epsilon == 2.5
    with pytest.raises(TypeError):
        s.before_params["cutoff"] = 5  # read-only


@pytest.mark.parametrize("key", list("abcdefgh"))
def test_scenario_exact_checks(key):
    """(1) DP-valid before the change; (2) D clearly > 0 after a harmful change; (3) D ≤ 0 after a benign one."""
    s = SCENARIOS[key]
    before, after = exact_check(s, "before"), exact_check(s, "after")
    assert before.d <= 1e-12
    if key in "ab":
        assert before.d == 0.0  # exactly on the boundary p = e^ε q
    if s.harmful:
        assert after.d > 0.015 and after.z_at(500) > 0.9
    else:
        assert after.d < -0.005


@pytest.mark.parametrize("key", list("abcdefgh"))
def test_scenario_checks_by_simulation(key):
    """The same three requirements measured on samples, and agreement with the exact values."""
    s = SCENARIOS[key]
    draws = 100_000
    for phase in ("before", "after"):
        est = estimate_check(s, phase, draws, seed=321, chunk=50_000)
        exact = exact_check(s, phase)
        assert abs(est.d - exact.d) < 4.5 * max(est.se, 1e-6), (phase, est.d, exact.d)
        if phase == "before" or not s.harmful:
            assert est.d < 4.5 * est.se  # no significant violation
        else:
            assert est.d > 8 * est.se  # a violation far beyond sampling noise


def test_scenario_table_main_prints_every_scenario(capsys):
    assert main(["--draws", "2000", "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    for key in "abcdefgh":
        assert f"| ({key}) " in printed
    assert printed.count("| before |") == 8 and printed.count("| after |") == 8
