"""The audit engine, the held-out test, candidate events and discovery (in process, no HTTP)."""

import asyncio
import json
import math

import numpy as np
import pytest
from scipy.stats import beta

from app.audit import AuditCancelled, AuditSettings, local_sampler, round_schedule, run_engine
from app.audit.discovery import discover_checks
from app.reference.corpus import corpus
from app.stats.candidates import ProposalSettings, propose
from app.stats.claims import PureDP, dp_claim
from app.stats.events import Projected, Projection, event_contains, parse_event
from app.stats.heldout import Counts, clopper_pearson_lower, clopper_pearson_upper, test_claim
from app.stats.shapes import Lattice, ListSamples, OutputShape

C = corpus()


def _audit(slug, claim, budget=32_000, seed=1, pairs=None, **kw):
    m = C[slug]
    settings = AuditSettings(budget=budget, **kw)
    return asyncio.run(run_engine(local_sampler(m.sample, seed=seed), pairs or m.pairs, m.shape,
                                  None if claim is None else PureDP(claim), settings))


# ---------------------------------------------------------------------------------- held-out test


def test_clopper_pearson_matches_the_beta_quantiles():
    for k, n in [(0, 10), (3, 10), (10, 10), (250, 1000)]:
        lo = clopper_pearson_lower(k, n, 0.025)
        hi = clopper_pearson_upper(k, n, 0.025)
        assert lo == pytest.approx(0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1))
        assert hi == pytest.approx(1.0 if k == n else beta.ppf(0.975, k + 1, n - k))


def test_held_out_test_bound_and_delta():
    res = test_claim(PureDP(0.5), Counts(600, 1000, 100, 1000), 0.05)
    assert res.refutes and res.lower_bound == pytest.approx(math.log(res.p_lo / res.q_hi))
    with_delta = test_claim(dp_claim(0.5, 0.3), Counts(600, 1000, 100, 1000), 0.05)
    assert with_delta.lower_bound == pytest.approx(math.log((res.p_lo - 0.3) / res.q_hi))
    assert not test_claim(PureDP(1.0), Counts(100, 1000, 100, 1000), 0.05).refutes


def test_held_out_test_false_refutations_stay_below_alpha_on_the_boundary():
    """p = e^ε q exactly, small and large n, rare and common events: rate ≤ α (95% CI upper end)."""
    rng = np.random.default_rng(5)
    eps, alpha, reps = 1.0, 0.05, 4000
    for q, n in [(0.001, 500), (0.01, 2000), (0.2, 100), (0.3, 20000)]:
        p = math.e * q
        a = rng.binomial(n, p, reps)
        b = rng.binomial(n, q, reps)
        lo = clopper_pearson_lower(a, n, alpha / 2)
        hi = clopper_pearson_upper(b, n, alpha / 2)
        rate = float(np.mean(lo > math.exp(eps) * hi))
        assert rate + 1.96 * math.sqrt(max(rate, 1e-3) / reps) <= alpha + 0.01, (q, n, rate)


# ---------------------------------------------------------------------------------- rounds


def test_round_schedule_spends_alpha_exactly_and_within_budget():
    sched = round_schedule(AuditSettings(budget=64_000, first_round=2_000))
    assert [n for n, _ in sched] == [2_000, 4_000, 8_000, 16_000, 32_000]
    assert sum(a for _, a in sched) == pytest.approx(0.05)
    assert 2_000 + sum(n for n, _ in sched) <= 64_000


def test_engine_refutes_flagrant_violations_in_every_shape_at_once():
    for slug in ("noisy-hist-wrong-scale", "svt5-list", "laplace-lattice-noise", "laplace-coarse-uniform"):
        res = _audit(slug, 0.1, budget=8_000, pairs=C[slug].pairs[:2])
        assert res.refuted and res.lower_bound > 0.1 and len(res.rounds) <= 2, slug
        assert res.best["held_out"]["refutes"] and res.stopped == "refuted", slug


def test_engine_does_not_refute_correct_mechanisms_at_their_claim():
    for slug in ("laplace-rounded", "truncated-geometric", "rnm-laplace-label", "noisy-hist"):
        res = _audit(slug, C[slug].true_epsilon, budget=8_000, pairs=C[slug].pairs[:1])
        assert not res.refuted, (slug, res.lower_bound)
        assert res.lower_bound is None or res.lower_bound <= C[slug].true_epsilon


def test_lattice_outputs_go_through_the_discrete_estimator():
    res = _audit("laplace-rounded", 0.1, budget=64_000)
    assert res.mpl["kind"] == "discrete" and res.epsilon_hat < 0.6  # not the ε̂ ≈ 1.5 of reading it as continuous


def test_engine_without_claim_spends_its_budget_and_reports():
    res = _audit("laplace", None, budget=8_000)
    assert res.claimed_epsilon is None and not res.refuted and res.stopped == "budget"
    assert res.samples_used == 2 * 8_000 and len(res.rounds) == 2
    json.dumps(res.to_dict(), default=str)


def test_progress_cancellation_and_quiet(capsys):
    m = C["laplace"]
    seen = []
    asyncio.run(run_engine(local_sampler(m.sample, seed=2), m.pairs, m.shape, PureDP(0.1),
                           AuditSettings(budget=8_000), progress=seen.append))
    assert seen and seen[-1].samples_used == 16_000
    assert [p.samples_used for p in seen] == sorted(p.samples_used for p in seen)
    flag = {"n": 0}

    def cancel():
        flag["n"] += 1
        return flag["n"] > 3

    with pytest.raises(AuditCancelled):
        asyncio.run(run_engine(local_sampler(m.sample, seed=2), m.pairs, m.shape, PureDP(0.1),
                               AuditSettings(budget=64_000), cancel=cancel))
    assert capsys.readouterr().out == ""


def test_http_audit_prints_nothing_to_stdout(capfd):
    from fastapi import FastAPI

    from app.audit.service import audit_endpoint
    from app.reference.server import endpoint_router
    from app.sampling.client import MechanismEndpoint
    from app.sampling.protocol import generate_secret
    from app.sampling.safe_http import SafeHttpConfig
    from tests.support.sampling_server import serve_app

    secret = generate_secret()
    api = FastAPI()
    api.include_router(endpoint_router({"/lap": (C["laplace"].sample, C["laplace"].shape)}, secret=secret))
    with serve_app(api) as base:
        capfd.readouterr()
        endpoint = MechanismEndpoint(sampling_url=f"{base}/lap", secret=secret, shape=OutputShape())
        res = asyncio.run(audit_endpoint(endpoint, [([0], [1])], PureDP(0.1), AuditSettings(budget=8_000),
                                         http_config=SafeHttpConfig(allow_networks=("127.0.0.0/8",))))
        out = capfd.readouterr().out
    assert res.samples_used == 16_000
    assert out == ""


# ---------------------------------------------------------------------------------- discovery


def test_discovery_ranks_informative_candidates_first_and_flags_the_rest():
    m = C["noisy-hist-wrong-scale"]
    found = asyncio.run(discover_checks(local_sampler(m.sample, seed=4), m.pairs, m.shape, epsilon=0.1,
                                        settings=AuditSettings(budget=16_000)))
    best = found["candidates"][0]
    assert best["informative"] and best["lower_bound"] > 0.1 and best["exceeds_claim"]
    event = parse_event(best["event"])  # JSON, evaluable on fresh outputs
    rng = np.random.default_rng(9)
    px = event_contains(event, m.sample(best["x"], 5000, rng)).mean()
    pxp = event_contains(event, m.sample(best["x_prime"], 5000, rng)).mean()
    assert px > pxp  # oriented: likelier under the check's x
    m = C["laplace"]
    found = asyncio.run(discover_checks(local_sampler(m.sample, seed=4), m.pairs, m.shape,
                                        settings=AuditSettings(budget=4_000)))
    for c in found["candidates"]:
        assert c["informative"] == (c["lower_bound"] is not None and c["lower_bound"] > 0)
        if not c["informative"]:
            assert c["reason"]


# ---------------------------------------------------------------------------------- candidates


def test_candidates_never_empty_or_everything_and_lattice_sets_hold_points():
    rng = np.random.default_rng(3)
    m = C["laplace-rounded"]
    x, y = m.sample([0], 4000, rng), m.sample([1], 4000, rng)
    settings = ProposalSettings(n_test=4000, level=0.01)
    for c in propose(x, y, m.shape, settings):
        inside = event_contains(c.event, np.concatenate([x, y]))
        assert 0 < inside.sum() < inside.size
        if c.event.kind == "lattice":
            assert all(Lattice(step=0.25).on_lattice([0.25 * k for k in c.event.points]))


def test_learned_event_is_json_and_evaluates_the_same_after_a_round_trip():
    rng = np.random.default_rng(3)
    m = C["noisy-hist-wrong-scale"]
    x, y = m.sample(m.pairs[0][0], 3000, rng), m.sample(m.pairs[0][1], 3000, rng)
    cands = propose(x, y, m.shape, ProposalSettings(n_test=3000, level=0.01))
    learned = [c for c in cands if c.statistic == "learned score"]
    assert learned, [c.statistic for c in cands]
    event = learned[0].event
    again = parse_event(json.loads(event.model_dump_json()))
    fresh = m.sample(m.pairs[0][0], 1000, rng)
    assert np.array_equal(event.contains(fresh), again.contains(fresh))
    assert "pickle" not in event.model_dump_json()


def test_projection_events_on_lists_with_nulls():
    lists = ListSamples(np.array([[1.0, np.nan, 3.0], [0.0, np.nan, np.nan], [np.nan, np.nan, np.nan]]),
                        np.array([3, 1, 2]))
    assert Projection(kind="count_null").apply(lists).tolist() == [1.0, 0.0, 2.0]
    assert Projection(kind="first_value").apply(lists)[:2].tolist() == [1.0, 0.0]
    e = Projected(projection=Projection(kind="length"), event={"kind": "set", "values": [1]})
    assert e.contains(lists).tolist() == [False, True, False]
    rows = parse_event({"kind": "rows", "values": [[0], [None, None]]})
    assert rows.contains(lists).tolist() == [False, True, True]
    with pytest.raises(ValueError):
        Projected(projection=Projection(kind="max"))


def test_mpl_snapshot_reads_vectors_of_reals_per_coordinate_not_as_rows():
    from app.snapshots.compute import PairSamples, compute_snapshot

    m = C["noisy-hist-wrong-scale"]  # true ε = 10; as table rows ε̂ was 0
    rng = np.random.default_rng(0)
    x, xp = m.pairs[0]
    pair = PairSamples({"x": x, "x_prime": xp}, *(m.sample(db, 4000, rng) for db in (x, xp, x, xp)))
    result = compute_snapshot([pair], "vector", alpha=0.05, epsilon=0.1)
    assert result["epsilon_hat"] > 3 and result["lower_bound"] > 0.1 and result["exceeds_claim"]
    event = parse_event(result["pairs"][0]["suggested_event"])
    assert event.kind == "projection" and event.projection.index == 0


def test_mpl_neighbourhood_is_a_candidate_for_real_scalars():
    from app.audit.engine import _mpl_neighbourhood

    rng = np.random.default_rng(6)
    m = C["laplace"]
    x, y = m.sample([0], 5000, rng), m.sample([1], 5000, rng)
    event = _mpl_neighbourhood(x, y, m.shape, None)
    assert event is not None and event.kind == "interval" and event.low < event.high
    families = {c.family for c in propose(x, y, m.shape, ProposalSettings(n_test=5000, level=0.01), mpl_event=event)}
    assert "mpl t̂ ± h" in families
    assert _mpl_neighbourhood(x, y, C["laplace-rounded"].shape, None) is None  # lattices: point sets instead


def _rare_key(p: float):  # noqa: ANN202
    """A keyed release that leaks the key "z" with probability ``p`` on a database holding a row and
    never on the empty one (outputs otherwise empty): partition selection without a threshold, rare."""
    from app.stats.keyed import KeyedSamples

    def sample(database, n, rng):  # noqa: ANN001, ANN202
        hits = rng.random(n) < p if database else np.zeros(n, dtype=bool)
        indptr = np.concatenate([[0], np.cumsum(hits)]).astype(np.int64)
        nnz = int(indptr[-1])
        return KeyedSamples(("z",), indptr, np.zeros(nnz, dtype=np.int64), np.ones(nnz))

    return sample


def test_a_rare_leak_unseen_by_the_pilot_is_still_tested_and_refuted():
    """The pilot's outputs are all empty (a key leaked once in 1 000 outputs, 200 drawn): nothing
    varies, so no event can be chosen. The engine used to stop there ("no candidate event"), with
    most of its budget unspent; it draws on as choosing data until an event shows, then tests it on
    fresh outputs."""
    settings = AuditSettings(budget=120_000, first_round=200, seed=0)
    pairs = [([{"user": 1}], [])]
    res = asyncio.run(run_engine(local_sampler(_rare_key(1e-3), seed=3), pairs, OutputShape(container="keyed"),
                                 PureDP(1.0), settings))
    assert res.refuted, (res.stopped, res.lower_bound)
    assert res.best["x"] == [{"user": 1}] and "z" in json.dumps(res.best["event"]), res.best
    # nothing to find on the correct side: the budget is spent and the stop says how much was looked at
    none = asyncio.run(run_engine(local_sampler(_rare_key(0.0), seed=3), pairs, OutputShape(container="keyed"),
                                  PureDP(1.0), settings))
    assert not none.refuted and none.stopped.startswith("no candidate event (the outputs did not vary in "), none.stopped
