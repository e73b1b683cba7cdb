"""The fair naive baseline: one period's exact unconditional test, Bonferroni over T (method.md §11.5)."""

import math

import numpy as np
import pytest
from scipy.stats import binom, norm

from app.stats.exact_naive import exact_naive_alarm_period, exact_naive_test, naive_statistic, null_q_max
from app.stats.period import period_statistic
from app.stats.sequential import SupportingLine


def _brute_size(test, line, qs):
    n = test.n
    a = np.arange(n + 1)[:, None]
    b = np.arange(n + 1)[None, :]
    rej = test.rejects(np.broadcast_to(a, (n + 1, n + 1)), np.broadcast_to(b, (n + 1, n + 1)))
    out = []
    for q in qs:
        p = min(1.0, line.slope * q + line.intercept)
        out.append(float(np.sum(binom.pmf(a, n, p) * binom.pmf(b, n, q) * rej)))
    return np.array(out)


@pytest.mark.parametrize("n,line,level", [
    (30, SupportingLine.pure(1.0), 0.01), (60, SupportingLine.pure(0.1), 0.05),
    (25, SupportingLine.approximate(0.5, 0.05), 0.01), (40, SupportingLine(0.6, 0.1), 0.02),
])
def test_size_never_exceeds_the_level_and_the_critical_value_is_the_smallest(n, line, level):
    test = exact_naive_test(n, line, level)
    q_max = null_q_max(line)
    qs = np.linspace(1e-4, q_max, 600)
    sizes = _brute_size(test, line, qs)
    assert sizes.max() <= level + 1e-9
    assert test.size <= level and test.size >= sizes.max() - 1e-6
    # Inside the null (p below the line) the size is smaller still.
    a = np.arange(n + 1)[:, None]
    b = np.arange(n + 1)[None, :]
    rej = test.rejects(np.broadcast_to(a, (n + 1, n + 1)), np.broadcast_to(b, (n + 1, n + 1)))
    q = 0.5 * q_max
    p_in = 0.5 * (line.slope * q + line.intercept)
    assert np.sum(binom.pmf(a, n, p_in) * binom.pmf(b, n, q) * rej) <= level
    # One step lower on the statistic's values, the size is above the level.
    from app.stats.exact_naive import _monotone_table, _q_grid, _sup_size
    table = _monotone_table(n, line.slope, line.intercept)
    lower = table[table < test.threshold].max()
    assert _sup_size(table, float(lower), n, line, _q_grid(q_max))[0] > level


def test_score_statistic_matches_the_aggregators_and_is_monotone():
    n, eps = 50, 1.0
    a = np.arange(n + 1)[:, None]
    b = np.arange(n + 1)[None, :]
    z = naive_statistic(a, b, n, SupportingLine.pure(eps))
    np.testing.assert_allclose(z, period_statistic(a, b, n, eps).z, rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(z, axis=0) >= 0) and np.all(np.diff(z, axis=1) <= 0)


def test_exact_threshold_is_below_the_normal_quantile_and_alarms_more():
    # The score z has a light right tail on the boundary, so its exact critical value at
    # α/T is below Φ⁻¹(1 − α/T) (method.md §11.5): the fair baseline is more powerful.
    test = exact_naive_test(200, SupportingLine.pure(1.0), 0.05 / 200)
    assert test.threshold < norm.isf(0.05 / 200)
    rng = np.random.default_rng(0)
    a = rng.binomial(200, 0.5, size=(300, 50))
    b = rng.binomial(200, 0.5 / math.e, size=(300, 50))
    first = exact_naive_alarm_period(a, b, 200, SupportingLine.pure(1.0), 0.05, 50)
    assert first.shape == (300,)
    assert np.mean(first > 0) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)
    a = rng.binomial(200, 0.7, size=(100, 50))
    assert np.mean(exact_naive_alarm_period(a, b[:100], 200, SupportingLine.pure(1.0), 0.05, 50) > 0) > 0.9


def test_tiny_n_can_make_the_test_powerless_and_bad_input_is_refused():
    test = exact_naive_test(2, SupportingLine.pure(1.0), 1e-4)
    assert test.threshold == math.inf and not test.rejects(2, 0)
    with pytest.raises(ValueError):
        exact_naive_test(0, SupportingLine.pure(1.0), 0.05)
    with pytest.raises(ValueError):
        exact_naive_test(10, SupportingLine.pure(1.0), 1.5)


def _brute_randomized_size(test, line, qs):
    n = test.n
    a = np.broadcast_to(np.arange(n + 1)[:, None], (n + 1, n + 1))
    b = np.broadcast_to(np.arange(n + 1)[None, :], (n + 1, n + 1))
    prob = test.rejects(a, b).astype(float) + test.gamma * (
        ~test.rejects(a, b) & test.rejects(a, b, np.zeros((n + 1, n + 1))))
    out = []
    for q in qs:
        p = min(1.0, line.slope * q + line.intercept)
        out.append(float(np.sum(binom.pmf(a, n, p) * binom.pmf(b, n, q) * prob)))
    return np.array(out)


def test_the_null_ends_at_the_claims_vertex():
    # Pure ε: q* = 1/(1 + e^ε), where p = e^ε q meets 1 − q = e^ε (1 − p) (method.md §13.5, eq. V).
    assert null_q_max(SupportingLine.pure(1.0)) == pytest.approx(1 / (1 + math.e))
    assert null_q_max(SupportingLine.approximate(1.0, 0.01)) == pytest.approx(0.99 / (1 + math.e))
    s, d = math.e, 0.01
    q = 0.99 / (1 + math.e)
    assert 1 - q == pytest.approx(s * (1 - (s * q + d)) + d)  # both faces bind at the vertex
    # A tangent with s < 1 keeps the whole line (a superset of the null: conservative).
    assert null_q_max(SupportingLine(0.6, 0.1)) == 1.0


def test_critical_value_over_the_null_not_the_whole_line_at_n200_eps01():
    # The whole line gave 3.607 at n = 200, ε = 0.1, α/T = 0.05/100; the null gives 3.280.
    test = exact_naive_test(200, SupportingLine.pure(0.1), 0.05 / 100)
    assert test.threshold == pytest.approx(3.280, abs=5e-4)
    assert 0.9 * test.level <= test.size <= test.level


@pytest.mark.parametrize("n,line,level", [
    (30, SupportingLine.pure(1.0), 0.01), (60, SupportingLine.pure(0.1), 0.05 / 100),
    (50, SupportingLine.approximate(1.0, 1e-5), 0.05 / 100), (40, SupportingLine.approximate(1.0, 0.01), 0.05 / 50),
    (12, SupportingLine.pure(3.0), 0.05 / 100),
])
def test_the_randomized_test_has_size_exactly_the_level(n, line, level):
    test = exact_naive_test(n, line, level)
    sizes = _brute_randomized_size(test, line, np.linspace(1e-5, null_q_max(line), 800))
    assert sizes.max() <= level * (1 + 1e-6)
    assert sizes.max() >= 0.9 * level  # within [0.9 α/T, α/T]
    assert test.randomized_size == pytest.approx(level, rel=1e-4)


def test_randomized_naive_far_at_the_vertex_is_alpha():
    # Seeded: at the pure-ε vertex, P(FA by T) = 1 − (1 − α/T)^T ≈ 0.0488 for the randomised test.
    n, eps, horizon, runs = 200, 0.1, 100, 20000
    line = SupportingLine.pure(eps)
    q = null_q_max(line)
    rng = np.random.default_rng(20)
    a = rng.binomial(n, min(1.0, math.exp(eps) * q), size=(runs, horizon))
    b = rng.binomial(n, q, size=(runs, horizon))
    far = np.mean(exact_naive_alarm_period(a, b, n, line, 0.05, horizon, rng=rng) > 0)
    expected = 1 - (1 - 0.05 / horizon) ** horizon
    assert abs(far - expected) < 4 * math.sqrt(expected * (1 - expected) / runs)
