"""The anytime-valid lower bound and the fresh-sample confirmation (app/stats/confidence.py, issue 20)."""

import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from app.stats.evidence import confirmation
from app.stats.confidence import (CSClaim, confidence_sequence, cs_claim_of, parameter_grid,
                                  predictable_orientation)
from app.stats.heldout import Counts, EpsilonDelta, test_claim
from app.stats.sequential import ISSUE20_DESIGN, SERVICE_DESIGN, EProcess, SupportingLine


def test_the_grid_starts_at_zero_and_holds_the_claim():
    g = parameter_grid(1.013)
    assert g[0] == 0.0 and 1.013 in g and np.all(np.diff(g) > 0) and g[-1] >= 1.013 + 3.0
    with pytest.raises(ValueError):
        parameter_grid(-1.0)


@pytest.mark.parametrize("design", [None, SERVICE_DESIGN, ISSUE20_DESIGN])
def test_the_bound_is_the_inverted_family_of_e_processes(design):
    # Eq. (CS) by hand with the service's EProcess (method.md §13.3c; or the design of issue 20, §13.3b),
    # one per grid value, on one path.
    rng = np.random.default_rng(3)
    n, q, t_max = 300, 0.1, 25
    a = rng.binomial(n, math.exp(1.6) * q, t_max)
    b = rng.binomial(n, q, t_max)
    grid = np.array([0.0, 0.5, 1.0, 1.2, 1.4, 1.6, 2.0])
    cs = confidence_sequence(a, b, n, CSClaim("dp", 1.0), 0.05, grid=grid, design=design)
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
    cs = confidence_sequence(a, b, n, CSClaim("dp", 1.0), 0.05)
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
        cs = confidence_sequence(a, b, n, CSClaim("gdp", 1.0), 0.05)
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
    conf = confirmation(3000, 800, 20000, EpsilonDelta(1.0))
    ref = test_claim(EpsilonDelta(1.0), Counts(3000, 20000, 800, 20000), 0.05)
    assert conf["confirms"] == ref.refutes is True and conf["lower_bound"] == pytest.approx(ref.lower_bound)
    assert confirmation(2000, 800, 20000, EpsilonDelta(1.0))["confirms"] is False
    with pytest.raises(ValueError):
        confirmation(5, 1, 0, EpsilonDelta(1.0))


def test_cs_claims_of_each_kind():
    from app.claims.heldout import HeldOutClaim

    assert cs_claim_of(EpsilonDelta(1.0, 1e-5)) == CSClaim("dp", 1.0, 1e-5)
    assert cs_claim_of(HeldOutClaim.of({"gdp_mu": 0.7})) == CSClaim("gdp", 0.7)
    assert cs_claim_of(HeldOutClaim.of({"epsilon": 2.0})) == CSClaim("dp", 2.0)
    assert cs_claim_of(HeldOutClaim.of({"zcdp_rho": 0.1})) is None
