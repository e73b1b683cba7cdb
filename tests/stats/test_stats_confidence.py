"""The anytime-valid lower bound and the fresh-sample confirmation (app/stats/confidence.py)."""

import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from app.stats.claims import ZCDP, ApproxDP, GaussianDP, PureDP, dp_claim
from app.stats.confidence import confidence_sequence, cs_claim_of, parameter_grid, predictable_orientation, zcdp_line
from app.stats.evidence import confirmation
from app.stats.heldout import Counts, test_claim
from app.stats.sequential import BOTH_FACES_DESIGN, SERVICE_DESIGN, EProcess, SupportingLine


def test_the_grid_starts_at_zero_and_holds_the_claim():
    g = parameter_grid(1.013)
    assert g[0] == 0.0 and 1.013 in g and np.all(np.diff(g) > 0) and g[-1] >= 1.013 + 3.0
    with pytest.raises(ValueError):
        parameter_grid(-1.0)


@pytest.mark.parametrize("design", [None, SERVICE_DESIGN, BOTH_FACES_DESIGN])
def test_the_bound_is_the_inverted_family_of_e_processes(design):
    # Eq. (CS) by hand with the service's EProcess (method.md §13.3c; or the design on both faces, §13.3b),
    # one per grid value, on one path.
    rng = np.random.default_rng(3)
    n, q, t_max = 300, 0.1, 25
    a = rng.binomial(n, math.exp(1.6) * q, t_max)
    b = rng.binomial(n, q, t_max)
    grid = np.array([0.0, 0.5, 1.0, 1.2, 1.4, 1.6, 2.0])
    cs = confidence_sequence(a, b, n, PureDP(1.0), 0.05, grid=grid, design=design)
    ever = np.zeros((grid.size, t_max), dtype=bool)
    for j, theta in enumerate(grid):
        det = EProcess.from_design(0.05, SupportingLine.pure(float(theta)), design or SERVICE_DESIGN)
        hit = False
        for t in range(t_max):
            hit = det.update(int(a[t]), int(b[t]), n).alarm or hit
            ever[j, t] = hit
    expected = np.full(t_max, -np.inf)
    for t in range(t_max):
        k = 0
        while k < grid.size and ever[k, t]:
            k += 1
        if k:
            expected[t] = grid[k - 1]
    np.testing.assert_array_equal(cs.lower[0], expected)
    assert np.all(np.diff(cs.lower[0][np.isfinite(cs.lower[0])]) >= 0)  # running max: never decreases
    assert cs.lower[0, -1] >= 1.0 and cs.claim_rejected[0, -1]


@pytest.mark.parametrize("theta", [1.0, 1.5])
def test_coverage_holds_at_every_time_at_once(theta):
    # P(∃t: LB_t ≥ θ*) ≤ α, seeded; θ* = the event's ln(p/q).
    rng = np.random.default_rng(int(theta * 10))
    runs, t_max, n, q = 600, 60, 200, 0.1
    a = rng.binomial(n, math.exp(theta) * q, size=(runs, t_max))
    b = rng.binomial(n, q, size=(runs, t_max))
    cs = confidence_sequence(a, b, n, PureDP(1.0), 0.05)
    ever = np.mean((cs.lower >= theta).any(axis=1))
    assert ever <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
    if theta > 1.0:  # and it has power: the claim ε = 1 is excluded in most runs by the end
        assert cs.claim_rejected[:, -1].mean() > 0.9


def test_gdp_coverage_and_power():
    rng = np.random.default_rng(9)
    runs, t_max, n, q = 400, 40, 500, 0.1
    for mu, check_power in ((1.0, False), (2.0, True)):
        p = float(ndtr(ndtri(q) + mu))
        a = rng.binomial(n, p, size=(runs, t_max))
        b = rng.binomial(n, q, size=(runs, t_max))
        cs = confidence_sequence(a, b, n, GaussianDP(1.0), 0.05)
        assert np.mean((cs.lower >= mu).any(axis=1)) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
        if check_power:
            assert cs.claim_rejected[:, -1].mean() > 0.9


def test_orientation_is_predictable():
    a = np.array([[5, 5, 5, 0, 0, 0]])
    b = np.array([[0, 0, 0, 9, 9, 9]])
    swap = predictable_orientation(a, b)
    assert not swap[0, 0]  # t = 1: x, a priori
    b2 = b.copy()
    b2[0, 2] = 100  # the counts of period 3 do not change period 3's orientation
    np.testing.assert_array_equal(predictable_orientation(a, b2)[0, :3], swap[0, :3])
    assert swap[0, -1]  # after three periods with more hits on x'


def test_confirmation_is_the_exact_test_on_fresh_counts():
    conf = confirmation(3000, 800, 20000, PureDP(1.0))
    ref = test_claim(PureDP(1.0), Counts(3000, 20000, 800, 20000), 0.05)
    assert conf["confirms"] == ref.refutes is True and conf["lower_bound"] == pytest.approx(ref.lower_bound)
    assert confirmation(2000, 800, 20000, PureDP(1.0))["confirms"] is False
    with pytest.raises(ValueError):
        confirmation(5, 1, 0, PureDP(1.0))


def test_cs_claims_of_each_kind():
    from app.stats.claims import parse_claim

    assert cs_claim_of(dp_claim(1.0, 1e-5)) == ApproxDP(1.0, 1e-5)
    assert cs_claim_of(parse_claim({"gdp_mu": 0.7})) == GaussianDP(0.7)
    assert cs_claim_of(parse_claim({"epsilon": 2.0})) == PureDP(2.0)
    assert cs_claim_of(parse_claim({"zcdp_rho": 0.1})) == ZCDP(0.1)
    assert ZCDP(0.1).parameter == "ρ" and GaussianDP(1.0).parameter == "μ"


# ----------------------------------------------------------------------------- ρ-zCDP


@pytest.mark.parametrize("rho", [0.5, 2.0])
def test_the_zcdp_line_is_the_tightest_dp_line_of_the_conversion(rho):
    """The supporting line at q is the tightest over ε of the (ε, δ(ε)) half-planes that the claims
    module builds from dp-accounting's curve (and their mirrors), so s·q + d = h_ρ(q) exactly."""
    from app.stats import accounting
    from app.stats.claims import ZCDP

    eps, delta = accounting.zcdp_delta_curve(rho)
    slopes = np.concatenate([np.exp(eps), np.exp(-eps), [0.0]])
    intercepts = np.concatenate([delta, 1.0 - (1.0 - delta) * np.exp(-eps), [1.0]])
    qs = np.array([0.003, 0.01, 0.05, 0.1, 0.3, 0.6])
    s, d = zcdp_line(rho, qs)
    for q, si, di in zip(qs, s, d):
        values = slopes * q + intercepts
        best = int(np.argmin(values))
        assert si * q + di == pytest.approx(values[best], rel=1e-12, abs=1e-15)
        assert si * q + di == pytest.approx(float(ZCDP(rho).upper(q)), rel=1e-12, abs=1e-15)
        if np.sum(values <= values[best] * (1 + 1e-12)) == 1:  # not at a vertex: the active line itself
            assert si == pytest.approx(slopes[best], rel=1e-12) and di == pytest.approx(intercepts[best], abs=1e-15)
        # supporting: every half-plane's point lies under it, h_ρ(q') ≤ s·q' + d for all q'
        grid = np.linspace(0.0, 1.0, 2001)
        assert np.all(ZCDP(rho).upper(grid) <= si * grid + di + 1e-12)
    # ρ = 0 is the region p = q
    s0, d0 = zcdp_line(0.0, qs)
    assert np.all(s0 == 1.0) and np.all(d0 == 0.0)


def test_the_zcdp_regions_grow_with_rho():
    """The CS argument needs a true null at every grid value above the truth: h_ρ(q) must not
    decrease in ρ on the grid the sequence uses (step 0.02), at any q."""
    from app.stats.claims import ZCDP

    qs = np.concatenate([np.geomspace(1e-5, 0.05, 200), np.linspace(0.05, 1.0, 400)])
    grid = parameter_grid(0.5)
    grid = grid[(grid > 0) & (grid <= 2.0)]
    h = np.array([ZCDP(float(r)).upper(qs) for r in grid])
    assert np.all(np.diff(h, axis=0) >= -1e-12)
    assert np.all(h[0] >= qs - 1e-12)  # and every region contains p = q, the ρ = 0 region


@pytest.mark.parametrize("rho1", [0.5, 1.0])
def test_zcdp_coverage_and_power(rho1):
    """Seeded: P(∃t: LB_t ≥ ρ₁) ≤ α when p sits on the ρ₁-zCDP region's boundary, and the claim
    ρ = 0.5 is excluded by the end in most runs when ρ₁ = 1."""
    from app.stats.claims import ZCDP

    rng = np.random.default_rng(int(rho1 * 100))
    runs, t_max, n, q = 300, 40, 500, 0.1
    p = float(ZCDP(rho1).upper(q))
    a = rng.binomial(n, p, size=(runs, t_max))
    b = rng.binomial(n, q, size=(runs, t_max))
    cs = confidence_sequence(a, b, n, ZCDP(0.5), 0.05)
    assert np.mean((cs.lower >= rho1).any(axis=1)) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
    if rho1 > 0.5:
        assert cs.claim_rejected[:, -1].mean() > 0.9


def test_the_complement_face_is_bet_on_for_curve_claims():
    """The curve claims' e-processes bet on both faces: the complement's components are the event's
    on the counts (n − b, n − a), with the line at the complement's own estimate; and an event that
    is nearly certain on x (its complement rare, where the tangent at q̃ is flat) is caught."""
    from app.stats.confidence import curve_increments
    from app.stats.sequential import bet_grid

    rng = np.random.default_rng(11)
    n, t_max, runs = 500, 30, 50
    q_c = 0.01  # P(not E | x); P(not E | x') on the 2-GDP curve
    p_c = float(ndtr(ndtri(q_c) + 2.0))
    a = rng.binomial(n, 1 - q_c, size=(runs, t_max)).astype(float)
    b = rng.binomial(n, 1 - p_c, size=(runs, t_max)).astype(float)
    nn = np.full(a.shape, float(n))
    k = bet_grid().size + 1
    for claim in (GaussianDP(1.0), ZCDP(0.5)):
        inc = curve_increments(a, b, nn, claim, claim.value)
        assert inc.shape == (runs, t_max, 2 * k)
        np.testing.assert_allclose(inc[..., k:], curve_increments(nn - b, nn - a, nn, claim, claim.value)[..., :k])
    cs = confidence_sequence(a, b, n, GaussianDP(1.0), 0.05)
    assert cs.claim_rejected[:, -1].mean() > 0.9 and np.mean((cs.lower >= 2.0).any(axis=1)) <= 0.1


def test_the_confirmation_tests_the_complement_face_too():
    """1-DP: p = 0.97, q = 0.90 keeps p ≤ e·q but breaks 1 − q ≤ e·(1 − p) (0.10 > 0.082): the
    fresh outputs confirm through the complement, on the same Clopper–Pearson box as the event."""
    conf = confirmation(24_250, 22_500, 25_000, PureDP(1.0))
    assert conf["confirms"] is True and conf["face"] == "complement"
    assert conf["faces"]["complement"]["confirms"] is True
    ref = test_claim(PureDP(1.0), Counts(25_000 - 22_500, 25_000, 25_000 - 24_250, 25_000), 0.05)
    assert conf["lower_bound"] == pytest.approx(ref.lower_bound) and ref.lower_bound > 1.0
    # the event's own line p ≤ e·q does not see it; the claim's region (both faces, one box) does
    own = test_claim(PureDP(1.0), Counts(24_250, 25_000, 22_500, 25_000), 0.05)
    assert own.p_lo <= math.e * own.q_hi and own.refutes is True
    # the alarm's orientation: with x and x' swapped the same counts are tested the other way round
    assert confirmation(22_500, 24_250, 25_000, PureDP(1.0), orientation="x_prime")["confirms"] is True
    assert confirmation(22_500, 24_250, 25_000, PureDP(1.0))["confirms"] is False
    with pytest.raises(ValueError):
        confirmation(1, 1, 10, PureDP(1.0), orientation="both")


@pytest.mark.parametrize("claim_kind", ["epsilon", "zcdp"])
def test_the_two_face_confirmation_keeps_its_level_on_the_boundary(claim_kind):
    """Seeded: at the vertex where both faces are tight (the hardest point for one test covering
    both), the fresh outputs contradict the claim in at most α of the runs."""
    from app.stats.claims import ZCDP, parse_claim

    rng = np.random.default_rng(20 if claim_kind == "epsilon" else 21)
    runs, n = 2000, 5000
    if claim_kind == "epsilon":
        claim, p, q = PureDP(1.0), math.e / (math.e + 1), 1 / (math.e + 1)  # p = e·q and 1 − q = e·(1 − p)
    else:
        from scipy.optimize import brentq

        from app.stats.claims import rho_lower_bound

        # a Bernoulli pair that is exactly 0.5-zCDP: sup_α D_α/α = 0.5 in the tighter direction (the
        # test refutes through the (ε, δ(ε)) polygon or this Rényi bound, on either face)
        claim, q = parse_claim({"zcdp_rho": 0.5}), 0.2
        p = brentq(lambda x: max(rho_lower_bound(x, q), rho_lower_bound(1 - q, 1 - x)) - 0.5, q + 1e-6, 0.99)
        assert p <= float(ZCDP(0.5).upper(q))
    a = rng.binomial(n, p, runs)
    b = rng.binomial(n, q, runs)
    rate = np.mean([confirmation(int(x), int(y), n, claim)["confirms"] for x, y in zip(a, b)])
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
