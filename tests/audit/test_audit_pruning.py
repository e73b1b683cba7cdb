"""Pruning the pairs: each pair is scored on outputs that did not choose its events
(app.audit.engine._held_apart_score)."""

import numpy as np

from app.audit.engine import _held_apart_score
from app.stats.candidates import ProposalSettings, propose
from app.stats.events import event_contains
from app.stats.shapes import OutputShape

SHAPE = OutputShape(container="scalar", values="real")
PROP = ProposalSettings(n_test=64_000, level=0.05 / 4, target=0.1, learned=False)


def test_a_difference_seen_only_by_the_choosing_half_does_not_rank_the_pair():
    # Even positions (the choosing half) differ completely, odd positions (the scoring half) not at all:
    # scored on the outputs that chose it the best event looks certain; scored apart it is worthless.
    rng = np.random.default_rng(3)
    n = 20_000
    x, y = rng.laplace(0.0, 1.0, n), rng.laplace(0.0, 1.0, n)
    x[0::2] = rng.uniform(10.0, 11.0, n // 2)
    y[0::2] = rng.uniform(-11.0, -10.0, n // 2)
    in_sample = propose(x[0::2], y[0::2], SHAPE, PROP)[0].predicted
    apart = _held_apart_score(x, y, SHAPE, PROP, 8, None)
    assert in_sample > 50
    assert apart < 0


def test_a_real_violation_outranks_pairs_without_one():
    rng = np.random.default_rng(4)
    n = 60_000
    nulls = [_held_apart_score(rng.laplace(0.0, 10.0, n), rng.laplace(0.0, 10.0, n), SHAPE, PROP, 8, None)
             for _ in range(3)]
    # Laplace(0, 1/ε) against Laplace(1, 1/ε) with ε = 0.5: the pair's loss is 0.5, the claim 0.1
    violating = _held_apart_score(rng.laplace(0.0, 2.0, n), rng.laplace(1.0, 2.0, n), SHAPE, PROP, 8, None)
    assert violating > max(nulls)
    assert violating > 0  # the held-out test is predicted to refute


# Late rounds: the candidates proposed on the choosing data are re-ranked on the outputs drawn
# before it (app.audit.engine._rescored), with the events the pair was tested on before.

def test_a_fluke_of_the_choosing_data_ranks_below_a_real_loss_on_older_outputs():
    from app.audit.engine import _rescored

    rng = np.random.default_rng(5)
    n = 20_000
    # the choosing data: x and y agree except for a fluke at [10, 11] that only the choosing data show
    cx, cy = rng.laplace(0.0, 2.0, n), rng.laplace(0.0, 2.0, n)
    cx[:2_000] = rng.uniform(10.0, 11.0, 2_000)
    cands = propose(cx, cy, SHAPE, PROP)
    assert cands[0].predicted > 10  # the fluke looks certain on the outputs that chose it
    # older outputs: the real mechanism, Laplace(−1, 2) against Laplace(0, 2) (loss 0.5 against the
    # claim 0.1), whose upper tail is likelier under y, not under x as the fluke says
    ox, oy = rng.laplace(-1.0, 2.0, 200_000), rng.laplace(0.0, 2.0, 200_000)
    real = propose(rng.laplace(-1.0, 2.0, n), rng.laplace(0.0, 2.0, n), SHAPE, PROP)[0]  # an earlier round's event
    # carried with its held-out counts (likelier side first), which are what rank it, not the older outputs
    hx, hy = rng.laplace(-1.0, 2.0, 100_000), rng.laplace(0.0, 2.0, 100_000)
    cx_, cy_ = (int(np.count_nonzero(event_contains(real.event, h))) for h in (hx, hy))
    held = (real, cx_, 100_000, cy_, 100_000) if real.x_first else (real, cy_, 100_000, cx_, 100_000)
    ranked = _rescored(cands, [held], [ox[:150_000], ox[150_000:]], [oy], PROP)  # in chunks
    fluke = [c for c in ranked if c.event == cands[0].event and c.x_first == cands[0].x_first]
    assert fluke and fluke[0].predicted < 0  # scored on outputs that did not choose it, it is worthless
    assert ranked[0].predicted > 0
    # the carried event is ranked on its held-out counts; it ranks above the fluke
    carried = [c for c in ranked if c.event == real.event and c.x_first == real.x_first]
    assert carried and carried[0].extra["ranked_on"] == 100_000 and carried[0].predicted > 0
    assert all(c.extra["ranked_on"] == 200_000 for c in ranked if c is not carried[0])
    assert ranked[0].predicted > fluke[0].predicted


def test_late_rounds_rank_on_older_outputs_and_prune_only_then(monkeypatch):
    import asyncio

    from app.audit import AuditSettings, engine, local_sampler, run_engine

    # the default sizes, scaled down 5× so that the test runs in seconds
    monkeypatch.setattr(engine, "MAX_CHOOSING", 20_000)
    monkeypatch.setattr(engine, "RESCORE_MIN", 20_000)
    monkeypatch.setattr(engine, "RESCORE_BYTES", 6 * 200_000 * 8)  # 200 000 floats for each of the 6 databases

    def laplace(db, n, rng):
        return rng.laplace(float(db[0]), 10.0, n)

    pairs = [([0], [k]) for k in (1, 2, 3, 4, 5)]
    settings = AuditSettings(budget=102_400, first_round=100, learned=False, seed=1)  # rounds 1..10; on by default
    res = asyncio.run(run_engine(local_sampler(laplace, seed=1), pairs, SHAPE, None, settings))
    assert [r["round"] for r in res.rounds] == list(range(1, 11))
    for rnd in res.rounds:
        seen = 100 * 2 ** (rnd["round"] - 1)  # per database, before the round's choice
        ranked_late = seen - 20_000 >= 20_000  # round 10 only
        tests = [t for t in res.tests if t["round"] == rnd["round"]]
        assert tests and all((t["ranked_on"] is not None) == ranked_late for t in tests)
        # the pairs leave play only once their candidates are ranked on outputs that did not choose them
        assert len(rnd["pairs"]) == (3 if ranked_late else 5)
    # ranked on the outputs drawn before the choosing data (or, for an event tested before, on its
    # held-out counts), never on the choosing data themselves
    for t in (t for t in res.tests if t["round"] == 10):
        earlier = [u for u in res.tests if u["round"] < 10 and u["pair"] == t["pair"] and u["event"] == t["event"]
                   and u["x_first"] == t["x_first"]]
        assert t["ranked_on"] == 51_200 - 20_000 or (
            earlier and t["ranked_on"] == sum(100 * 2 ** (u["round"] - 1) for u in earlier))
    assert res.settings["prune_on_store"] is True and res.settings["rescore_late"] is True
    # off (as in the search's certification, whose budget split assumes the old pruning)
    off = asyncio.run(run_engine(local_sampler(laplace, seed=1), pairs, SHAPE, None,
                                 AuditSettings(budget=102_400, first_round=100, learned=False, seed=1,
                                               rescore_late=False)))
    assert off.settings["prune_on_store"] is False and off.settings["rescore_late"] is False
    assert all(t["ranked_on"] is None for t in off.tests)
    assert all(len(r["pairs"]) == 5 for r in off.rounds)  # 20 000 choosing outputs never reach PRUNE_AFTER


def _laplace(db, n, rng):
    return rng.laplace(float(db[0]), 10.0, n)


def test_the_older_outputs_are_bounded_by_bytes_the_latest_kept(monkeypatch):
    import asyncio

    from app.audit import AuditSettings, engine, local_sampler, run_engine

    monkeypatch.setattr(engine, "MAX_CHOOSING", 20_000)
    monkeypatch.setattr(engine, "RESCORE_MIN", 20_000)
    # 25 000 floats for each of the 6 databases in play when round 9's outputs are pushed out
    monkeypatch.setattr(engine, "RESCORE_BYTES", 6 * 25_000 * 8)
    pairs = [([0], [k]) for k in (1, 2, 3, 4, 5)]
    settings = AuditSettings(budget=102_400, first_round=100, learned=False, seed=1, rescore_late=True)
    res = asyncio.run(run_engine(local_sampler(_laplace, seed=1), pairs, SHAPE, None, settings))
    late = [t for t in res.tests if t["round"] == 10]
    assert len(res.rounds) == 10 and late
    # the 31 200 outputs pushed out of the choosing data by round 10 no longer fit: the latest 25 000
    # rank the proposed candidates (an event tested before is ranked on its held-out counts instead)
    assert [r["older_outputs"] for r in res.rounds] == [None] * 9 + [25_000]
    for t in late:
        earlier = [u for u in res.tests if u["round"] < 10 and u["pair"] == t["pair"] and u["event"] == t["event"]
                   and u["x_first"] == t["x_first"]]
        assert t["ranked_on"] == 25_000 or (
            earlier and t["ranked_on"] == sum(100 * 2 ** (u["round"] - 1) for u in earlier))
    assert all(len(r["pairs"]) == (3 if r["round"] == 10 else 5) for r in res.rounds)
    assert res.settings["rescore_bytes"] == 6 * 25_000 * 8


def test_pairs_are_pruned_on_held_apart_halves_when_the_bytes_cannot_hold_enough_older_outputs(monkeypatch):
    import asyncio

    from app.audit import AuditSettings, engine, local_sampler, run_engine

    monkeypatch.setattr(engine, "MAX_CHOOSING", 20_000)
    monkeypatch.setattr(engine, "RESCORE_MIN", 20_000)
    monkeypatch.setattr(engine, "PRUNE_AFTER", 12_800)  # the choice of round 8
    # 18 000 floats per database while 6 are in play, less than RESCORE_MIN: the pairs do not wait
    monkeypatch.setattr(engine, "RESCORE_BYTES", 6 * 18_000 * 8)
    pairs = [([0], [k]) for k in (1, 2, 3, 4, 5)]
    settings = AuditSettings(budget=102_400, first_round=100, learned=False, seed=1, rescore_late=True)
    res = asyncio.run(run_engine(local_sampler(_laplace, seed=1), pairs, SHAPE, None, settings))
    assert [len(r["pairs"]) for r in res.rounds] == [5] * 7 + [3] * 3
    # pruned to 3 pairs (4 databases), each may hold 27 000 older outputs: re-ranked from round 10 on
    # (round 9's choice sees 25 600 − 20 000 = 5 600 of them, round 10's 27 000 of the 31 200)
    assert all((t["ranked_on"] is not None) == (t["round"] == 10) for t in res.tests)
    assert [r["older_outputs"] for r in res.rounds] == [None] * 9 + [27_000]


def test_the_store_keeps_the_latest_outputs_within_its_bytes():
    from app.audit.engine import _cap, _store
    from app.stats.shapes import ListSamples, outputs_nbytes

    chunks: list = []
    _store(chunks, np.arange(100.0), 400)
    assert np.concatenate(chunks).tolist() == list(np.arange(50.0, 100.0))
    _store(chunks, np.arange(100.0, 130.0), 400)
    assert np.concatenate(chunks).tolist() == list(np.arange(80.0, 130.0))
    assert sum(outputs_nbytes(c) for c in chunks) <= 400
    assert all(c.base is None for c in chunks)  # copies: the arrays they came from can be freed
    # the choosing data too: the capped outputs do not keep the whole concatenation alive
    assert _cap(np.arange(1000.0), 10).base is None
    lists = _cap(ListSamples(np.zeros((1000, 3)), np.full(1000, 3)), 10)
    assert lists.values.base is None and lists.lengths.base is None and len(lists) == 10


def test_late_reranking_is_on_by_default_and_off_in_the_searchs_certification():
    from app.audit import AuditSettings
    from app.search.certify import certification_settings

    assert AuditSettings().rescore_late is True
    assert certification_settings(1_000_000, 8, 0.05).rescore_late is False
