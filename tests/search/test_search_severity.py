"""Severity: sharpening the bound on a certified pair (app/stats/severity.py, app/search/severity.py)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from app.reference.search_corpus import search_corpus
from app.search.domain import InputDomain
from app.search.draws import SearchDraws, function_sampler
from app.search.run import SearchSettings, run_search
from app.search.service import make_claim
from app.search.severity import SeveritySettings, severity_statement, sharpen
from app.stats.claims import PureDP
from app.stats.events import DiscreteSet, Interval
from app.stats.heldout import clopper_pearson_upper
from app.stats.severity import never_seen_upper, predicted_bound, severity_candidates
from app.stats.shapes import OutputShape


def test_never_seen_upper_is_the_exact_clopper_pearson_bound_for_zero_events():
    for n in (1, 10, 1_000, 1_000_000):
        for level in (0.025, 0.001):
            q = never_seen_upper(n, level)
            assert (1 - q) ** n == pytest.approx(level, rel=1e-6)
            assert q == pytest.approx(float(clopper_pearson_upper(0, n, level)), rel=1e-6)
    with pytest.raises(ValueError):
        never_seen_upper(0, 0.05)


def test_predicted_bound_grows_with_the_sample_when_the_other_side_never_holds_the_event():
    claim = PureDP(1.0)
    b1 = predicted_bound(claim, 0.5, 0.0, 10_000, 0.01)
    b2 = predicted_bound(claim, 0.5, 0.0, 1_000_000, 0.01)
    assert b2 > b1 > 1
    assert b2 - b1 == pytest.approx(math.log(100), abs=0.05)  # ln N growth: limited by the draws
    assert predicted_bound(claim, 0.0, 0.0, 1_000, 0.01) == -math.inf


def test_candidates_put_an_atom_first_when_one_side_releases_a_value_exactly():
    rng = np.random.default_rng(1)
    x = np.full(5_000, 0.25)
    y = 0.25 + rng.laplace(0, 0.5, 5_000)
    cands = severity_candidates(x, y, PureDP(1.0), 1_000_000, 0.01)
    assert isinstance(cands[0].event, DiscreteSet) and cands[0].event.values == [0.25] and cands[0].x_first
    assert cands[0].predicted > 10


def test_candidates_place_tails_beyond_the_choosing_data_for_unequal_scales():
    rng = np.random.default_rng(2)
    x = rng.laplace(0, 1.0, 50_000)
    y = rng.laplace(0, 0.5, 50_000)
    cands = severity_candidates(x, y, PureDP(1.0), 2_000_000, 0.01)
    best = cands[0]
    assert best.x_first and "tail" in best.family and best.predicted > 3


def _sharpen_once(sample, x, xp, event, n_out, seed):
    draws = SearchDraws(function_sampler(sample, OutputShape(), seed))
    finding = {"x": x, "x_prime": xp, "event": event.model_dump(mode="json")}
    return asyncio.run(sharpen(draws, finding, OutputShape(), PureDP(1.0), outputs=n_out, alpha=0.05,
                               settings=SeveritySettings(choosing=2_000), seed=seed)), draws


def test_sharpened_bounds_cover_the_truth_on_a_correct_mechanism():
    # Laplace sum at scale 1 on x = [1], x′ = [] is exactly 1-DP: a 95% bound lies above 1 in ≤ 5% of runs
    def sample(db, n, rng):
        return float(sum(db)) + rng.laplace(0, 1.0, n)

    above, bounds = 0, []
    for seed in range(30):
        sev, draws = _sharpen_once(sample, [1.0], [], Interval(low=0.5), 60_000, seed)
        lb = sev["lower_bound"]
        bounds.append(lb)
        above += lb is not None and lb > 1.0
        # choosing and test outputs are separate draws: 2 × choosing + 2 × tested per side
        assert draws.used["severity"] == 2 * sev["choosing_per_side"] + 2 * sev["n_per_side"]
    assert above <= 4, bounds  # P(Bin(30, 0.05) ≥ 5) < 0.02
    assert np.median([b for b in bounds if b is not None]) > 0.6  # and they are informative


def test_a_search_on_a_median_with_local_sensitivity_reports_the_atom_and_an_actionable_bound():
    e = search_corpus()["median-local-sensitivity"]
    res = asyncio.run(run_search(function_sampler(e.sample, e.shape, 3), InputDomain.model_validate(e.domain),
                                 make_claim(e.claim), e.shape, SearchSettings(budget=600_000, seed=3)))
    assert res.certified
    sev = res.severity
    assert sev is not None and sev["never_seen"] and sev["event"]["kind"] == "set"
    # the severity bound is actionable (≥ 5ε) and well above the finding's own bound (which, tested
    # on the claim's region, the event and its complement, lies near 5ε on this atom: 4.96–5.01)
    assert sev["lower_bound"] >= 5 * e.claimed and sev["lower_bound"] > 1.5 * res.finding["lower_bound"]
    assert "x′ never produced this output" in res.statement
    assert res.samples["total"] <= 600_000
    assert "never produced" in severity_statement(sev, "ε", 1.0)


def test_severity_can_be_turned_off_and_stays_within_its_share():
    e = search_corpus()["ten-div-n"]
    settings = SearchSettings(budget=400_000, seed=4, severity=False)
    res = asyncio.run(run_search(function_sampler(e.sample, e.shape, 4), InputDomain.model_validate(e.domain),
                                 make_claim(e.claim), e.shape, settings))
    assert res.certified and res.severity is None and "severity" not in res.samples
    res = asyncio.run(run_search(function_sampler(e.sample, e.shape, 4), InputDomain.model_validate(e.domain),
                                 make_claim(e.claim), e.shape, SearchSettings(budget=400_000, seed=4,
                                                                              severity_share=0.25)))
    assert res.severity is not None and res.samples["severity"] <= 100_000
