"""MPL: TDDE, TKDE, DPL, the lower bound LB and Table I (method.md §6; seed 003 §IV, Algs. 1–4)."""

import json
import math
from collections import Counter

import numpy as np
import pytest
from KDEpy import FFTKDE
from scipy import integrate

from app.reference import get_mechanism
from app.stats.kde import (
    gaussian_kernel_l2,
    kde_at,
    kde_on_grid,
    silverman_bandwidth,
    undersmoothed_bandwidth,
    undersmoothing_gamma_bound,
)
from app.stats.mpl import (
    PAPER_SVT_N,
    PAPER_SVT_N_FRESH,
    PAPER_SVT_TAU,
    MPLParams,
    discrete_frequencies,
    dpl,
    kind_for_output,
    mpl,
    mpl_lower_bound,
    table1_pairs,
    tdde,
    tkde,
)

Z95 = 1.6448536269514722  # Φ⁻¹(0.95)


# ------------------------------------------------------------------------------------------
# TDDE (Algorithm 2) and the outcome table


def test_tdde_hand_made_sample():
    x = np.array([0, 0, 1, 2, 2, 2])
    np.testing.assert_allclose(tdde(x, [0, 1, 2, 3], 0.01), [2 / 6, 1 / 6, 3 / 6, 0.01])
    # the floor acts as a maximum, not an addition
    np.testing.assert_allclose(tdde(x, [0, 1, 2, 3], 0.4), [0.4, 0.4, 0.5, 0.4])


def test_tdde_rows_are_outcomes():
    x = np.array([[1, 0, -1], [1, 0, -1], [0, 1, -1], [0, 0, 0]], dtype=np.int8)
    np.testing.assert_allclose(tdde(x, [(1, 0, -1), (0, 0, 0), (1, 1, 1)], 1e-3), [0.5, 0.25, 1e-3])


def test_tdde_strings_and_floats():
    np.testing.assert_allclose(tdde(np.array(["a", "b", "a", "a"]), ["a", "c"], 0.01), [0.75, 0.01])
    np.testing.assert_allclose(tdde(np.array([0.5, 1.5, 0.5]), [0.5, 2.0], 0.01), [2 / 3, 0.01])


def test_discrete_frequencies_hand_made():
    outcomes, fx, fy = discrete_frequencies([1, 1, 2], [2, 3])
    np.testing.assert_array_equal(outcomes, [1, 2, 3])
    np.testing.assert_allclose(fx, [2 / 3, 1 / 3, 0])
    np.testing.assert_allclose(fy, [0, 0.5, 0.5])


def _reference_counts(rows):
    return Counter(tuple(r) if np.ndim(r) else r for r in np.asarray(rows).tolist())


@pytest.mark.parametrize(
    "low, high, k",
    [
        (-1, 2, 10),  # SVT answers: dense mixed-radix codes, bincount path
        (0, 10**9, 1),  # sparse codes: one 1-D sort
        (0, 10**12, 8),  # codes overflow int64: row-wise np.unique
    ],
)
def test_discrete_frequencies_match_a_counter(low, high, k):
    rng = np.random.default_rng(3)
    pool = rng.integers(low, high, size=(25, k))
    x = pool[rng.integers(0, 25, size=400)]
    y = pool[rng.integers(0, 20, size=300)]
    if k == 1:
        x, y = x[:, 0], y[:, 0]
    outcomes, fx, fy = discrete_frequencies(x, y)
    cx, cy = _reference_counts(x), _reference_counts(y)
    keys = [tuple(o) if np.ndim(o) else o for o in outcomes.tolist()]
    assert keys == sorted(set(cx) | set(cy))  # lexicographic order, every outcome once
    np.testing.assert_allclose(fx, [cx.get(key, 0) / 400 for key in keys])
    np.testing.assert_allclose(fy, [cy.get(key, 0) / 300 for key in keys])


# ------------------------------------------------------------------------------------------
# KDE (eq. 8) and bandwidths


def test_silverman_bandwidth_is_r_bw_nrd0():
    # R: bw.nrd0(1:10) = 0.9 * min(sd, IQR/1.34) * 10^(-1/5); sd = 3.02765, IQR = 4.5
    x = np.arange(1, 11, dtype=float)
    expected = 0.9 * min(np.std(x, ddof=1), 4.5 / 1.34) * 10 ** (-0.2)
    assert silverman_bandwidth(x) == pytest.approx(expected)
    assert silverman_bandwidth(x) == pytest.approx(1.719, abs=5e-4)


def test_gaussian_kernel_l2():
    assert gaussian_kernel_l2(1) == pytest.approx(1 / (2 * math.sqrt(math.pi)))
    one_d, _ = integrate.quad(lambda u: (math.exp(-u * u / 2) / math.sqrt(2 * math.pi)) ** 2, -np.inf, np.inf)
    assert gaussian_kernel_l2(1) == pytest.approx(one_d)
    assert gaussian_kernel_l2(3) == pytest.approx(one_d**3)
    with pytest.raises(ValueError, match="1..3"):
        gaussian_kernel_l2(4)


@pytest.mark.parametrize("d, points, tol", [(1, 301, 1e-4), (2, 61, 1e-3), (3, 21, 3e-3)])
def test_binned_kde_matches_exact_sum(d, points, tol):
    rng = np.random.default_rng(d)
    x = rng.laplace(size=(4000, d))
    h = silverman_bandwidth(x)
    axes = [np.linspace(-1.5, 1.5, points)] * d
    grid = kde_on_grid(x, axes, h)
    assert grid.shape == (points,) * d
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
    pick = rng.choice(mesh.shape[0], size=60, replace=False)
    exact = kde_at(x, mesh[pick], h)
    np.testing.assert_allclose(grid.reshape(-1)[pick], exact, rtol=tol)


def test_binned_kde_matches_kdepy_and_direct_formula():
    rng = np.random.default_rng(11)
    x = rng.normal(size=3000)
    h = 0.2
    gx, gy = FFTKDE(kernel="gaussian", bw=h).fit(x).evaluate(2**14)
    t = np.linspace(-2, 2, 9)
    mine = kde_on_grid(x, [t], h)
    np.testing.assert_allclose(mine, np.interp(t, gx, gy), rtol=2e-3)
    direct = np.exp(-0.5 * ((t[:, None] - x[None, :]) / h) ** 2).sum(axis=1) / (len(x) * h * math.sqrt(2 * math.pi))
    np.testing.assert_allclose(kde_at(x, t, h), direct, rtol=1e-12)
    np.testing.assert_allclose(tkde(x, [10.0], h, 1e-3), [1e-3])  # the floor of Algorithm 1


def test_binned_kde_counts_far_samples_in_n():
    # half of the sample is far from the grid: the density there halves, it is not renormalised
    rng = np.random.default_rng(5)
    near = rng.normal(size=2000)
    far = near + 1000.0
    h = 0.3
    t = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(kde_on_grid(np.concatenate([near, far]), [t], h), 0.5 * kde_at(near, t, h), rtol=1e-3)


def test_undersmoothed_bandwidth_rule():
    rng = np.random.default_rng(2)
    x = rng.laplace(size=50_000)
    y = rng.laplace(size=50_000) + 1
    h = undersmoothed_bandwidth(x, y, n=20_000, beta=1.0, gamma=0.05)
    spread = 0.5 * (min(x.std(ddof=1), np.subtract(*np.percentile(x, [75, 25])) / 1.34)
                    + min(y.std(ddof=1), np.subtract(*np.percentile(y, [75, 25])) / 1.34))
    assert h == pytest.approx(0.9 * spread * 50_000 ** (-1 / 3 - 0.05))
    # (C4): nu = ln(N)/ln(n) - 1, gamma > nu / (6 (1 + nu))
    nu = math.log(50_000) / math.log(20_000) - 1
    assert undersmoothing_gamma_bound(20_000, 50_000) == pytest.approx(nu / (6 * (1 + nu)))
    with pytest.raises(ValueError, match=r"condition \(C4\)"):
        undersmoothed_bandwidth(x, y, n=20_000, gamma=0.01)


# ------------------------------------------------------------------------------------------
# DPL (Algorithm 3)


def test_dpl_discrete_hand_made():
    x = np.array([0] * 6 + [1] * 4)  # f_x = (0.6, 0.4)
    y = np.array([0] * 3 + [1] * 7)  # f_x' = (0.3, 0.7)
    r = dpl(x, y, "discrete", MPLParams(tau=0.01))
    np.testing.assert_allclose(r.loss, [math.log(2), abs(math.log(0.4 / 0.7))])
    assert r.t_hat == 0 and isinstance(r.t_hat, int)
    assert r.epsilon_hat == pytest.approx(math.log(2))
    assert (r.n_x, r.n_xp) == (10, 10)


def test_dpl_discrete_floor_and_region():
    x = np.array([0] * 5 + [1] * 5)
    y = np.array([0] * 5 + [1] * 4 + [2])  # outcome 2 never seen under x: f̂_x(2) = τ
    r = dpl(x, y, "discrete", MPLParams(tau=0.01))
    assert r.t_hat == 2
    assert r.epsilon_hat == pytest.approx(math.log(0.1 / 0.01))
    # C restricted to {0, 1}: the maximum moves to outcome 1
    r2 = dpl(x, y, "discrete", MPLParams(tau=0.01, outcomes=[0, 1]))
    assert r2.t_hat == 1 and r2.epsilon_hat == pytest.approx(math.log(0.5 / 0.4))
    assert r2.loss.shape == (2,)


def test_dpl_discrete_ties_prefer_the_outcome_with_more_mass():
    x = np.array([0] * 2 + [1] * 4 + [2] * 4)  # (0.2, 0.4, 0.4)
    y = np.array([0] * 1 + [1] * 2 + [2] * 7)  # (0.1, 0.2, 0.7): ℓ(0) = ℓ(1) = ln 2
    r = dpl(x, y, "discrete", MPLParams(tau=0.01))
    assert r.epsilon_hat == pytest.approx(math.log(2))
    assert r.t_hat == 1


def test_dpl_vector_outcomes_give_tuples():
    rng = np.random.default_rng(0)
    m = get_mechanism("svt5", epsilon=1.0)
    q, qp = table1_pairs(4)[0].x, table1_pairs(4)[0].xp
    r = dpl(m.sample(q, 5000, rng), m.sample(qp, 5000, rng), "discrete", MPLParams(tau=1e-3))
    assert isinstance(r.t_hat, tuple) and len(r.t_hat) == 4
    assert r.outcomes.shape[1] == 4 and r.loss.shape == (r.outcomes.shape[0],)
    json.dumps(r.to_dict())


def test_dpl_laplace_estimates_epsilon_for_large_n():
    rng = np.random.default_rng(7)
    eps = 1.0
    m = get_mechanism("laplace", epsilon=eps)
    r = dpl(m.sample([0.0], 200_000, rng), m.sample([1.0], 200_000, rng), "continuous", MPLParams(region=(-1, 1)))
    assert r.epsilon_hat == pytest.approx(eps, abs=0.08)
    # the true loss of Laplace(0) vs Laplace(1) is ε for t ≤ 0, ε|2t − 1| on [0, 1]
    assert eps * (1 if r.t_hat <= 0 else abs(2 * r.t_hat - 1)) > 0.9 * eps
    assert r.loss.shape == (1001,) and r.grid[0][0] == -1 and r.grid[0][-1] == 1
    assert r.region == ((-1.0, 1.0),)


def test_dpl_continuous_in_two_dimensions():
    rng = np.random.default_rng(8)
    lam = 1.0
    x = rng.laplace(scale=1 / lam, size=(40_000, 2))
    y = rng.laplace(scale=1 / lam, size=(40_000, 2)) + np.array([1.0, 0.0])
    r = dpl(x, y, "continuous", MPLParams(region=((-1, 2), (-1, 1)), grid_points=41))
    assert r.loss.shape == (41, 41) and len(r.t_hat) == 2
    assert r.epsilon_hat == pytest.approx(lam, abs=0.2)


def test_dpl_default_region_is_the_central_overlap():
    rng = np.random.default_rng(9)
    x = rng.normal(size=10_000)
    y = rng.normal(size=10_000) + 1
    r = dpl(x, y, "continuous", MPLParams(region_quantile=0.05))
    lo = max(np.quantile(x, 0.05), np.quantile(y, 0.05))
    hi = min(np.quantile(x, 0.95), np.quantile(y, 0.95))
    assert len(r.region) == 1
    assert r.region[0] == pytest.approx((lo, hi))


# ------------------------------------------------------------------------------------------
# LB (eq. 26)


def test_lower_bound_discrete_by_hand():
    fresh_x = np.array([0] * 30 + [1] * 70)  # f̂*_x(0) = 0.3
    fresh_y = np.array([0] * 10 + [1] * 90)  # f̂*_x'(0) = 0.1
    lb = mpl_lower_bound(fresh_x, fresh_y, 0, "discrete", MPLParams(n=50, N=100, tau=1e-3, alpha=0.05))
    sigma = math.sqrt(1 / 0.3 + 1 / 0.1 - 2)  # 3.3665
    expected = math.log(3) - Z95 * sigma / 10  # 1.0986 - 0.5537 = 0.5449
    assert lb.lower_bound == pytest.approx(expected)
    assert lb.lower_bound == pytest.approx(0.5449, abs=1e-4)
    assert (lb.loss_star, lb.sigma_hat, lb.c_n, lb.z) == pytest.approx((math.log(3), sigma, 10.0, Z95))
    assert lb.exceeds(0.5) and not lb.exceeds(0.6)
    json.dumps(lb.to_dict())


def test_lower_bound_discrete_tuple_and_floor():
    fresh_x = np.array([[1, 0]] * 40 + [[0, 1]] * 60)
    fresh_y = np.array([[0, 1]] * 100)
    lb = mpl_lower_bound(fresh_x, fresh_y, (1, 0), "discrete", MPLParams(n=50, N=100, tau=0.01, alpha=0.1))
    z90 = 1.2815515655446004
    assert (lb.f_x_star, lb.f_xp_star) == (0.4, 0.01)
    assert lb.lower_bound == pytest.approx(math.log(40) - z90 * math.sqrt(1 / 0.4 + 1 / 0.01 - 2) / 10)
    assert lb.t_hat == (1, 0)


@pytest.mark.parametrize("d", [1, 2])
def test_lower_bound_continuous_by_hand(d):
    rng = np.random.default_rng(4)
    n_fresh, h = 5000, 0.2
    x = rng.normal(size=(n_fresh, d))
    y = rng.normal(size=(n_fresh, d)) + 0.5
    t = np.zeros(d)
    lb = mpl_lower_bound(x, y, t if d > 1 else 0.0, "continuous", MPLParams(n=2000, N=n_fresh, h_max=h, tau=1e-3))

    def kde(s):
        sq = ((s - t) ** 2).sum(axis=1)
        return np.exp(-sq / (2 * h * h)).sum() / (n_fresh * (h * math.sqrt(2 * math.pi)) ** d)

    fx, fy = kde(x), kde(y)
    sigma = math.sqrt((4 * math.pi) ** (-d / 2) * (1 / fx + 1 / fy))
    c_n = math.sqrt(n_fresh * h**d)
    assert lb.lower_bound == pytest.approx(abs(math.log(fx / fy)) - Z95 * sigma / c_n)
    assert (lb.h_max, lb.c_n, lb.kernel_l2) == pytest.approx((h, c_n, (4 * math.pi) ** (-d / 2)))


def test_lower_bound_continuous_default_bandwidth_is_the_c4_rule():
    rng = np.random.default_rng(6)
    x, y = rng.laplace(size=50_000), rng.laplace(size=50_000) + 1
    params = MPLParams()
    lb = mpl_lower_bound(x, y, -0.5, "continuous", params)
    assert lb.h_max == pytest.approx(undersmoothed_bandwidth(x, y, n=params.n, gamma=params.gamma))


# ------------------------------------------------------------------------------------------
# MPL (Algorithm 4)


def _laplace_pairs(b_max=10):
    return [([0.0], [b / 10]) for b in range(1, b_max + 1)]


def test_mpl_laplace_end_to_end():
    m = get_mechanism("laplace", epsilon=1.0)
    params = MPLParams(n=5000, N=20_000, region=(-1, 1))
    res = mpl(m.sample, _laplace_pairs(4), "continuous", params, np.random.default_rng(1))
    assert res.B == 4 and len(res.pairs) == 4
    assert res.chosen == int(np.argmax([r.epsilon_hat for r in res.pairs]))
    assert res.t_hat == res.pairs[res.chosen].t_hat == res.lower_bound.t_hat
    assert res.lower_bound.N == 20_000
    assert 0.0 < res.lower_bound.lower_bound < 1.0
    again = mpl(m.sample, _laplace_pairs(4), "continuous", params, np.random.default_rng(1))
    assert again.lower_bound.lower_bound == res.lower_bound.lower_bound  # reproducible with a seed
    doc = json.loads(json.dumps(res.to_dict()))
    assert doc["params"]["N"] == 20_000 and doc["B"] == 4 and doc["pairs"][0]["xp"] == [0.1]
    assert len(doc["pairs"][2]["loss"]) == 1001
    assert "loss" not in res.to_dict(include_curves=False)["pairs"][0]


def test_mpl_lower_bound_is_independent_of_the_dpl_samples():
    # the fresh draw is the last use of rng: the same DPL stage with other fresh samples only
    # changes LB, not the choice of pair or t̂
    m = get_mechanism("rnm", epsilon=1.0)
    params = MPLParams(n=3000, N=6000)
    pairs = table1_pairs(4)[:3]
    calls = []

    def sample(db, n, rng):
        calls.append((tuple(db), n))
        return m.sample(db, n, rng)

    res = mpl(sample, pairs, "discrete", params, np.random.default_rng(2))
    assert [c[1] for c in calls] == [3000] * 6 + [6000] * 2
    chosen = pairs[res.chosen]
    assert calls[-2][0] == tuple(float(v) for v in chosen.x) and calls[-1][0] == tuple(float(v) for v in chosen.xp)


def test_mpl_report_noisy_max_lower_bound_at_paper_sizes():
    eps = 1.0
    m = get_mechanism("rnm", epsilon=eps)
    res = mpl(m.sample, table1_pairs(6), "discrete", MPLParams(), np.random.default_rng(12))
    assert 0.5 * eps < res.lower_bound.lower_bound <= eps
    assert isinstance(res.t_hat, int)


def test_mpl_detects_svt5():
    eps = 0.5
    m = get_mechanism("svt5", epsilon=eps)
    res = mpl(m.sample, table1_pairs(10), "discrete", MPLParams(n=20_000, N=50_000), np.random.default_rng(13))
    assert res.lower_bound.exceeds(eps)
    assert len(res.t_hat) == 10


# ------------------------------------------------------------------------------------------
# Table I


def test_table1_pairs_for_six_queries():
    pairs = {p.name: (p.x, p.xp) for p in table1_pairs(6)}
    ones = (1,) * 6
    assert pairs == {
        "one_above": ((2, 1, 1, 1, 1, 1), ones),
        "one_below": ((0, 1, 1, 1, 1, 1), ones),
        "one_above_rest_below": ((2, 0, 0, 0, 0, 0), ones),
        "one_below_rest_above": ((0, 2, 2, 2, 2, 2), ones),
        "half_half": ((2, 2, 2, 0, 0, 0), ones),
        "all_above": ((2,) * 6, ones),
        "all_below": ((0,) * 6, ones),
        "x_shape": ((1, 1, 1, 0, 0, 0), (0, 0, 0, 1, 1, 1)),
    }


@pytest.mark.parametrize("k", [2, 5, 10])
def test_table1_pairs_are_neighbours(k):
    pairs = table1_pairs(k)
    assert len(pairs) == 8
    for p in pairs:
        assert len(p.x) == len(p.xp) == k
        assert max(abs(a - b) for a, b in zip(p.x, p.xp)) == 1
    json.dumps([p.to_dict() for p in pairs])


# ------------------------------------------------------------------------------------------
# parameters and validation


def test_params_for_output_kind():
    svt = MPLParams.for_output_kind("vector")
    assert (svt.n, svt.N, svt.tau) == (PAPER_SVT_N, PAPER_SVT_N_FRESH, PAPER_SVT_TAU) == (100_000, 500_000, 1e-4)
    real = MPLParams.for_output_kind("real", alpha=0.1)
    assert (real.n, real.N, real.tau, real.alpha) == (20_000, 50_000, 1e-3, 0.1)
    assert kind_for_output("real") == "continuous" and kind_for_output("vector") == "discrete"
    with pytest.raises(ValueError, match="output_kind"):
        MPLParams.for_output_kind("mixed")
    assert MPLParams(region=(0, 1)).region == ((0.0, 1.0),)
    assert MPLParams(outcomes=[[1, 0], (0, 1)]).outcomes == ((1, 0), (0, 1))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tau": 0}, "tau"),
        ({"tau": 1.5}, "tau"),
        ({"alpha": 1.0}, "alpha"),
        ({"n": 1}, "n must be"),
        ({"N": 2.5}, "N must be"),
        ({"region": (1, 0)}, "lo < hi"),
        ({"region": (0, math.inf)}, "lo < hi"),
        ({"region": [(0, 1)] * 4}, "1 to 3"),
        ({"region": "ab"}, "region"),
        ({"outcomes": []}, "must not be empty"),
        ({"bandwidth": -1.0}, "bandwidth"),
        ({"h_max": 0.0}, "h_max"),
        ({"beta": 1.5}, "beta"),
        ({"gamma": 0.0}, "gamma"),
        ({"grid_points": 1}, "grid_points"),
        ({"region_quantile": 0.5}, "region_quantile"),
    ],
)
def test_params_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MPLParams(**kwargs)


def test_call_validation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=100)
    with pytest.raises(ValueError, match="kind"):
        dpl(x, x, "real")
    with pytest.raises(ValueError, match="finite"):
        dpl(np.array([0.0, np.nan, 1.0]), x, "continuous", MPLParams(region=(-1, 1)))
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        dpl(rng.normal(size=(100, 4)), rng.normal(size=(100, 4)), "continuous")
    with pytest.raises(ValueError, match="different dimensions"):
        dpl(rng.normal(size=(100, 2)), x, "continuous", MPLParams(region=(-1, 1)))
    with pytest.raises(ValueError, match="region has 1 dimensions"):
        dpl(rng.normal(size=(100, 2)), rng.normal(size=(100, 2)), "continuous", MPLParams(region=(-1, 1)))
    with pytest.raises(ValueError, match="constant"):
        dpl(np.zeros(100), x, "continuous", MPLParams(region=(-1, 1)))
    apart = dpl(x, x + 100, "continuous")  # central ranges apart: C is their union
    assert apart.region[0][0] < x.max() and apart.region[0][1] > 100 and apart.epsilon_hat > 3
    with pytest.raises(ValueError, match="same size N"):
        mpl_lower_bound(x, x[:50], 0.0, "continuous", MPLParams(n=50, N=100, h_max=0.1))
    with pytest.raises(ValueError, match="dimension 1"):
        mpl_lower_bound(x, x, (0.0, 1.0), "continuous", MPLParams(n=50, N=100, h_max=0.1))
    with pytest.raises(ValueError, match="continuous C"):
        dpl([0, 1, 1], [1, 0, 0], "discrete", MPLParams(region=(0, 1)))
    with pytest.raises(ValueError, match="discrete C"):
        dpl(x, x, "continuous", MPLParams(outcomes=[0, 1]))
    with pytest.raises(ValueError, match="MPLParams"):
        dpl(x, x, "continuous", {"n": 10})
    with pytest.raises(ValueError, match=r"condition \(C4\)"):  # checked where h_max is computed
        mpl_lower_bound(x, x + 1, 0.0, "continuous", MPLParams(n=50, N=100, gamma=0.001))
    assert MPLParams(n=100, N=10**6, gamma=0.001).gamma == 0.001  # irrelevant for discrete outputs
    with pytest.raises(ValueError, match="not integers"):
        dpl([0, 1, 1], [1, 0, 0], "discrete", MPLParams(outcomes=[0.5]))
    with pytest.raises(ValueError, match="length 3"):
        tdde(np.zeros((5, 3), dtype=int), [(0, 0)], 0.01)
    with pytest.raises(ValueError, match="vector outcomes"):
        discrete_frequencies(np.zeros((4, 2), dtype=int), np.zeros((4, 3), dtype=int))
    m = get_mechanism("laplace", epsilon=1.0)
    with pytest.raises(ValueError, match="rng"):
        mpl(m.sample, _laplace_pairs(1), "continuous", MPLParams(), rng=None)
    with pytest.raises(ValueError, match="at least one pair"):
        mpl(m.sample, [], "continuous", MPLParams(), rng)
    with pytest.raises(ValueError, match="expected 100"):
        mpl(lambda db, n, r: np.zeros(3), _laplace_pairs(1), "continuous", MPLParams(n=100, N=200), rng)
    with pytest.raises(ValueError, match="grid would need"):
        kde_on_grid(rng.normal(size=(100, 3)), [np.linspace(-1, 1, 50)] * 3, 1e-3)


# ------------------------------------------------------------------------------------------
# a short study (the full one is bench/mpl_coverage.py)


@pytest.mark.slow
def test_mpl_coverage_and_power_short_study():
    runs = 100
    seeds = np.random.SeedSequence(2024).spawn(runs)
    lap = get_mechanism("laplace", epsilon=0.7)
    lbs = [mpl(lap.sample, _laplace_pairs(), "continuous", MPLParams(region=(-1, 1)), np.random.default_rng(s))
           .lower_bound.lower_bound for s in seeds]
    assert np.mean(np.asarray(lbs) <= 0.7) >= 0.9
    value = get_mechanism("rnm-value", epsilon=0.7)  # true ε = 6·0.7/2 = 2.1
    lbs = [mpl(value.sample, table1_pairs(6), "continuous", MPLParams(region=(-1, 3)), np.random.default_rng(s))
           .lower_bound.lower_bound for s in seeds[:40]]
    assert np.mean(np.asarray(lbs) > 0.7) >= 0.9
