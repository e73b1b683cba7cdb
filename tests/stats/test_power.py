"""The power a run that found nothing states (app/stats/heldout_power.py, app/audit/power.py)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from app.audit.engine import AuditSettings, local_sampler, run_engine
from app.audit.power import claim_family, power_rows, power_sentence
from app.audit.service import format_report, with_power
from app.reference.search_corpus import search_corpus
from app.search.domain import InputDomain
from app.search.draws import function_sampler
from app.search.run import SearchSettings, run_search
from app.search.service import make_claim
from app.stats.claims import PureDP
from app.stats.heldout import Counts, test_claim
from app.stats.heldout_power import POWER_LEVEL, POWER_MASSES, held_out_power, smallest_detected
from app.stats.shapes import OutputShape


def _simulated_power(claim, p, q, n, level, runs, seed):
    rng = np.random.default_rng(seed)
    a = rng.binomial(n, p, runs)
    b = rng.binomial(n, q, runs)
    return float(np.mean([test_claim(claim, Counts(int(ai), n, int(bi), n), level).refutes for ai, bi in zip(a, b, strict=True)]))


@pytest.mark.parametrize("spec", [{"epsilon": 1.0}, {"epsilon": 0.5, "delta": 1e-3}, {"gdp_mu": 1.0}])
def test_the_power_formula_matches_the_held_out_test_it_describes(spec):
    claim = make_claim(spec)
    refuted_by, boundary, theta0, _ = claim_family(claim)
    n, level = 20_000, 0.01
    for q in (0.1, 0.01):
        top = math.log(1 / q) if "epsilon" in spec else 40 * theta0
        d = smallest_detected(refuted_by, boundary, theta0, q, n, n, level, theta_max=top)
        assert d.theta is not None and d.theta > theta0
        at = held_out_power(refuted_by, boundary(d.theta, q), q, n, n, level)
        below = held_out_power(refuted_by, boundary(theta0 + 0.9 * (d.theta - theta0), q), q, n, n, level)
        assert at >= POWER_LEVEL > below
        # eq. POW is a lower bound on the power of the very test (simulated with test_claim)
        sim = _simulated_power(claim, boundary(d.theta, q), q, n, level, 1_500, seed=int(q * 1e4))
        assert sim >= at - 3 * math.sqrt(at * (1 - at) / 1_500)
        assert sim <= at + 0.06


def test_no_violation_within_reach_is_stated_as_none():
    # 50 outputs per side: even p = 1 against q = 1e-4 gives at most ln(p_lo/q_hi) ≈ ln 9 < 5
    claim = PureDP(5.0)
    refuted_by, boundary, theta0, _ = claim_family(claim)
    d = smallest_detected(refuted_by, boundary, theta0, 1e-4, 50, 50, 0.01, theta_max=math.log(1e4))
    assert d.theta is None
    text = power_sentence([{"x": [1], "x_prime": [], "family": "tail", "n_per_side": 50, "level": 0.01,
                            "parameter": "ε", "claimed": 5.0, "detected": [d.to_dict()]}])
    assert "rules out nothing" in text


def test_the_statement_uses_the_same_level_and_masses_as_assert_dp():
    from dpwatch_sdk.testing import _sequential

    assert POWER_LEVEL == _sequential.POWER_LEVEL
    assert POWER_MASSES == _sequential.POWER_MASSES


def test_rows_keep_the_largest_test_per_pair_and_family():
    tests = [{"x": [1], "x_prime": [], "family": "tail", "held_out": {"n_x": 1_000, "n_xp": 1_000, "alpha": 0.01}},
             {"x": [1], "x_prime": [], "family": "tail", "held_out": {"n_x": 8_000, "n_xp": 8_000, "alpha": 0.01}},
             {"x": [], "x_prime": [1], "family": "tail", "held_out": {"n_x": 2_000, "n_xp": 2_000, "alpha": 0.01}},
             {"x": [1], "x_prime": [], "family": "interval", "held_out": {"n_x": 4_000, "n_xp": 4_000, "alpha": 0.01}}]
    rows = power_rows(tests, PureDP(1.0), masses=(0.1,))
    assert [(r["family"], r["n_per_side"]) for r in rows] == [("tail", 8_000), ("interval", 4_000)]
    assert rows[0]["detected"][0]["theta"] < rows[1]["detected"][0]["theta"]


def test_a_search_that_finds_nothing_states_its_power_without_clearing_the_mechanism():
    e = search_corpus()["laplace-sum"]
    res = asyncio.run(run_search(function_sampler(e.sample, e.shape, 5), InputDomain.model_validate(e.domain),
                                 make_claim(e.claim), e.shape, SearchSettings(budget=300_000, seed=5)))
    assert not res.certified and res.power
    assert "Power: had one of the events this run tested been a violation" in res.statement
    assert "says nothing about other pairs, other events, or smaller violations" in res.statement
    best = min(d["theta"] for r in res.power for d in r["detected"] if d["theta"] is not None)
    assert 1.0 < best < 3.0


def test_an_audit_that_does_not_refute_states_its_power():
    def laplace(db, n, rng):
        return float(sum(db)) + rng.laplace(0, 1.0, n)

    claim = PureDP(1.0)
    result = asyncio.run(run_engine(local_sampler(laplace, 1), [([1.0], [])], OutputShape(), claim,
                                    AuditSettings(budget=16_000, first_round=1_000, seed=1)))
    assert not result.refuted
    result = asyncio.run(with_power(result, claim))
    assert result.power and result.power[0]["n_per_side"] == 8_000
    report = format_report(result)
    assert "Power: had one of the events" in report and "does not show that the claim holds" in report
