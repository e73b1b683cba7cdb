"""The exact period e-value of method.md §13.2, eq. (F): log E_hyp[r^K] and the e-value built on it."""

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom, hypergeom

from app.stats.overlap import log_overlap_mgf
from app.stats.sequential import (
    EProcess,
    EProcessDesign,
    SupportingLine,
    bet_grid,
    component_parts,
    log_evalues_sd,
    log_period_evalues,
)

LINES = [SupportingLine.pure(1.0), SupportingLine.approximate(0.5, 0.05), SupportingLine(0.4, 0.1)]


def _uvwz(line, lam):
    s, d = line.slope, line.intercept
    return 1 + lam * (1 - d), 1 + lam * (1 - s - d), 1 - lam * (s + d), 1 - lam * d


def _brute_force_conditional_evalue(a, b, n, line, lam):
    """E[Π_i (1 + λ(X_i − sY_i − d)) | ΣX = a, ΣY = b] by enumerating every placement of the ones: given
    the counts, X's ones and Y's ones are independent uniform subsets, all C(n, a)·C(n, b) pairs equally likely."""
    s, d = line.slope, line.intercept
    total, count = 0.0, 0
    for xs in itertools.combinations(range(n), a):
        x = np.zeros(n)
        x[list(xs)] = 1
        for ys in itertools.combinations(range(n), b):
            y = np.zeros(n)
            y[list(ys)] = 1
            total += float(np.prod(1 + lam * (x - s * y - d)))
            count += 1
    return total / count


def test_log_overlap_mgf_against_the_hypergeometric_sum():
    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(1, 400))
        a, b = (int(v) for v in rng.integers(0, n + 1, size=2))
        lr = float(rng.normal(0, 3))
        ks = np.arange(max(0, a + b - n), min(a, b) + 1)
        want = float(np.logaddexp.reduce(hypergeom.logpmf(ks, n, a, b) + ks * lr))
        assert float(log_overlap_mgf(a, b, n, lr)) == pytest.approx(want, abs=1e-9 * max(1.0, abs(want)))
    # r = 1: E[1] = 1; a degenerate support (a = n): K = b exactly
    assert float(log_overlap_mgf(30, 40, 100, 0.0)) == pytest.approx(0.0, abs=1e-12)
    assert float(log_overlap_mgf(100, 37, 100, 0.3)) == pytest.approx(37 * 0.3, abs=1e-12)


def test_log_overlap_mgf_on_huge_supports_is_finite_and_matches_the_scipy_sum():
    # n = 10⁶, a = b = 5·10⁵: support of 5·10⁵ values, the walk sums a window around the mode.
    for a, b, n, lr in [(500_000, 500_000, 1_000_000, 0.4), (300_000, 700_000, 1_000_000, -2.0),
                        (5_000_000, 3_000_000, 9_000_000, 0.05)]:
        ks = np.arange(max(0, a + b - n), min(a, b) + 1)  # the whole support
        want = float(np.logaddexp.reduce(hypergeom.logpmf(ks, n, a, b) + ks * lr))
        got = float(log_overlap_mgf(a, b, n, lr))
        assert math.isfinite(got)
        assert got == pytest.approx(want, rel=1e-9)


def test_log_overlap_mgf_broadcasts_and_rejects_bad_counts():
    out = log_overlap_mgf(np.array([[3], [4]]), np.array([1, 2, 5]), 10, np.array([0.1, 0.2, 0.3]))
    assert out.shape == (2, 3)
    assert out[1, 2] == pytest.approx(float(log_overlap_mgf(4, 5, 10, 0.3)))
    for bad in [(3.5, 1, 10, 0.1), (11, 1, 10, 0.1), (1, 1, 0, 0.1), (1, 1, 10, math.inf)]:
        with pytest.raises(ValueError):
            log_overlap_mgf(*bad)


@pytest.mark.parametrize("line", LINES)
def test_exact_evalue_equals_the_brute_force_over_every_placement(line):
    grid = np.array([0.05, 0.4, 0.8, 0.95])
    for n in (1, 3, 5):
        for a in range(n + 1):
            for b in range(n + 1):
                got = log_period_evalues(a, b, n, line, grid)
                jensen = log_period_evalues(a, b, n, line, grid, "per-sample-jensen")
                for j, c in enumerate(grid):
                    want = math.log(_brute_force_conditional_evalue(a, b, n, line, c / (line.slope + line.intercept)))
                    assert got[j] == pytest.approx(want, abs=1e-10)
                    assert jensen[j] <= want + 1e-10  # Jensen's bound is below


@pytest.mark.parametrize("line", LINES)
def test_mean_of_the_exact_evalue_is_the_product_mean_and_jensen_is_below(line):
    """E[F(λ)] = (1 + λ(p − sq − d))^n over the binomial counts, exactly (eq. (F)): on the boundary it is 1,
    for every bet; the Jensen bound's mean is ≤ it, and visibly below for the large bets."""
    s, d = line.slope, line.intercept
    grid = bet_grid()
    lam = grid / (s + d)
    for n, q, shift in [(30, 0.2, 0.0), (12, 0.4, 0.0), (50, 0.01, 0.0), (20, 0.3, 0.05), (25, 0.1, -0.03)]:
        p = min(max(s * q + d + shift, 0.0), 1.0)
        a = np.arange(n + 1)[:, None]
        b = np.arange(n + 1)[None, :]
        w = binom.pmf(a, n, p) * binom.pmf(b, n, q)
        exact = np.einsum("ab,abk->k", w, np.exp(log_period_evalues(a, b, n, line, grid)))
        jensen = np.einsum("ab,abk->k", w, np.exp(log_period_evalues(a, b, n, line, grid, "per-sample-jensen")))
        want = (1 + lam * (p - s * q - d)) ** n
        np.testing.assert_allclose(exact, want, rtol=1e-9)
        assert np.all(jensen <= exact + 1e-12)
        if shift == 0.0 and n >= 20 and q >= 0.2:
            assert jensen[-1] < 0.99 * exact[-1]  # the largest bet: the price of the Jensen bound


def test_exact_evalue_is_never_below_jensen():
    rng = np.random.default_rng(11)
    n = rng.integers(1, 2000, size=3000)
    a = rng.integers(0, n + 1)
    b = rng.integers(0, n + 1)
    s = rng.uniform(0.5, 20, size=n.size)
    d = rng.uniform(0, 0.2, size=n.size)
    grid = bet_grid()
    exact = log_evalues_sd(a, b, n, s, d, grid)
    jensen = log_evalues_sd(a, b, n, s, d, grid, "per-sample-jensen")
    assert np.all(np.isfinite(exact))
    assert np.all(exact >= jensen - 1e-9 * np.maximum(1, np.abs(jensen)))


def test_repeated_periods_are_computed_once_with_the_same_values():
    rng = np.random.default_rng(3)
    a = rng.binomial(200, 0.27, size=(40, 200))
    b = rng.binomial(200, 0.1, size=(40, 200))
    many = log_evalues_sd(a, b, 200, math.e, 0.0, bet_grid())  # 8,000 periods, few distinct (a, b)
    few = log_evalues_sd(a[:5, :10], b[:5, :10], 200, math.e, 0.0, bet_grid())  # 50: one by one
    np.testing.assert_array_equal(many[:5, :10], few)


def test_seeded_simulation_of_the_pairs_agrees_with_the_counts():
    """Draw the pairs themselves: the mean of the product over the pairs and the mean of F from the counts
    are both (1 + λ·gap)^n (on the boundary and off it), within the simulation's error."""
    rng = np.random.default_rng(2026)
    line = SupportingLine.pure(1.0)
    n, periods = 40, 40_000
    c = np.array([0.2, 0.57, 0.8])
    lam = c / line.slope
    for q, p in [(0.2, math.e * 0.2), (0.1, math.e * 0.1 + 0.05)]:
        x = rng.random((periods, n)) < p
        y = rng.random((periods, n)) < q
        pay = x[..., None] - line.slope * y[..., None]  # (periods, n, 1)
        product = np.exp(np.sum(np.log1p(lam * pay), axis=1))  # (periods, K)
        f = np.exp(log_period_evalues(x.sum(1), y.sum(1), n, line, c))
        fj = np.exp(log_period_evalues(x.sum(1), y.sum(1), n, line, c, "per-sample-jensen"))
        want = (1 + lam * (p - line.slope * q)) ** n
        for k in range(c.size):
            se = product[:, k].std() / math.sqrt(periods)
            assert abs(product[:, k].mean() - want[k]) < 5 * se + 1e-3 * want[k]
            se_f = f[:, k].std() / math.sqrt(periods)
            assert abs(f[:, k].mean() - want[k]) < 5 * se_f + 1e-3 * want[k]
        if p == math.e * q:  # on the boundary the Jensen bound's mean at c = 0.8 is clearly below 1
            assert fj[:, -1].mean() < want[-1] - 4 * fj[:, -1].std() / math.sqrt(periods)


def test_jensen_design_label_round_trip_and_the_exact_design_dominates():
    jensen = EProcessDesign.parse("auto,agrapa=0.8,grid=16,jensen")
    assert jensen.payoff == "per-sample-jensen" and jensen.label == "auto,agrapa=0.8,grid=16,jensen"
    exact = EProcessDesign.parse("auto,agrapa=0.8,grid=16")
    assert exact.payoff == "per-sample" and exact.label == "auto,agrapa=0.8,grid=16"
    with pytest.raises(ValueError):
        EProcessDesign("auto", True, 0.8, 16, "per-period")  # type: ignore[arg-type]
    rng = np.random.default_rng(5)
    a = rng.binomial(200, 0.7311, size=(30, 100))
    b = rng.binomial(200, 0.2689, size=(30, 100))
    line = SupportingLine.pure(1.0)
    # Every component's exact e-value is ≥ its Jensen one, so the wealth is too, period by period.
    assert np.all(exact.paths(a, b, 200, line) >= jensen.paths(a, b, 200, line) - 1e-9)


def test_components_use_the_exact_evalue_and_the_class_matches_the_batch():
    line = SupportingLine.approximate(1.0, 0.01)
    rng = np.random.default_rng(9)
    a = rng.binomial(100, 0.3, size=25)
    b = rng.binomial(100, 0.1, size=25)
    ep = EProcess.from_design(0.05, line, EProcessDesign("auto", True, 0.8))
    jp = EProcess.from_design(0.05, line, EProcessDesign("auto", True, 0.8, payoff="per-sample-jensen"))
    steps = [ep.update(int(x), int(y), 100).statistic for x, y in zip(a, b)]
    jsteps = [jp.update(int(x), int(y), 100).statistic for x, y in zip(a, b)]
    batch = EProcessDesign("auto", True, 0.8).paths(a[None], b[None], 100, line)[0]
    np.testing.assert_allclose(steps, batch, rtol=1e-10, atol=1e-10)
    assert all(x >= y - 1e-12 for x, y in zip(steps, jsteps))
    # a stored state of the first design ("per-sample") loads and now runs the exact e-value
    state = ep.to_state()
    assert state["payoff"] == "per-sample"
    again = EProcess.from_state(state)
    assert again.design == EProcessDesign("auto", True, 0.8)
    # component_parts refuses the per-period payoff (its components bet per sample)
    with pytest.raises(ValueError):
        component_parts(a, b, 100, line.slope, line.intercept, a * 0.0, b * 0.0, a * 0.0, "one", False, bet_grid(),
                        "per-period")  # type: ignore[arg-type]
