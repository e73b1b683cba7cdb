"""Events of keyed outputs: exact membership, JSON round trips, renderings, validation; the
candidates the engine proposes for keyed outputs, and MPL on keyed outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from app.reference.keyed import LaplaceHistogram, LeakyHistogram, PartitionCounts
from app.stats.candidates import ProposalSettings, propose
from app.stats.claims import PureDP
from app.stats.events import (
    EventAdapter,
    KeyCount,
    KeyReleased,
    KeySet,
    KeySets,
    KeySum,
    KeyValue,
    count_in,
    event_contains,
    parse_event,
)
from app.stats.heldout import Counts
from app.stats.heldout import test_claim as held_out_test
from app.stats.keyed import keyed_from_rows
from app.stats.mpl import MPLParams, dpl_best_keyed, mpl_lower_bound
from app.stats.shapes import OutputShape, concat_outputs

ROWS = [{"b": 1, "a": 2.5}, {}, {"c": None}, {"a": 1}, {"a": 7, "b": 3, "c": 1}]
K = keyed_from_rows(ROWS, nullable=True, integer=False)

CASES = [
    ({"kind": "key", "key": "a"}, [1, 0, 0, 1, 1], "key 'a' released"),
    ({"kind": "key", "key": "a", "released": False}, [0, 1, 1, 0, 0], "key 'a' not released"),
    ({"kind": "key", "key": "zz"}, [0, 0, 0, 0, 0], "key 'zz' released"),
    ({"kind": "key", "key": "c"}, [0, 0, 1, 0, 1], "key 'c' released"),  # a null value is a release
    ({"kind": "key_value", "key": "a", "event": {"kind": "interval", "low": 1, "high": 5}}, [1, 0, 0, 1, 0],
     "value('a') ∈ [1, 5]"),
    ({"kind": "key_value", "key": "a", "event": {"kind": "interval", "low": 1, "high": 5}, "absent": True},
     [1, 1, 1, 1, 0], "value('a') ∈ [1, 5] or 'a' not released"),
    ({"kind": "key_value", "key": "c", "nulls": True}, [0, 0, 1, 0, 0], "value('c') is null"),
    ({"kind": "key_value", "key": "c", "event": {"kind": "set", "values": [1]}, "absent": True, "nulls": True},
     [1, 1, 1, 1, 1], "value('c') ∈ {1} or 'c' not released or null"),
    ({"kind": "key_count", "event": {"kind": "interval", "low": 2}}, [1, 0, 0, 0, 1], "|released keys| ∈ [2, inf)"),
    ({"kind": "key_count", "event": {"kind": "set", "values": [0, 3]}}, [0, 1, 0, 0, 1], "|released keys| ∈ {0, 3}"),
    ({"kind": "key_set", "relation": "contains", "keys": ["b", "a"]}, [1, 0, 0, 0, 1], "released keys ⊇ {'a', 'b'}"),
    ({"kind": "key_set", "relation": "outside", "keys": ["a", "b"]}, [0, 0, 1, 0, 1],
     "a key outside {'a', 'b'} released"),
    ({"kind": "key_set", "relation": "outside", "keys": []}, [1, 0, 1, 1, 1], "some key released"),
    ({"kind": "key_sets", "sets": [["b", "a"], []]}, [1, 1, 0, 0, 0], "released keys ∈ {{'a', 'b'}, ∅}"),
    ({"kind": "key_sets", "sets": [["a"], ["c"], ["q"]]}, [0, 0, 1, 1, 0], "released keys ∈ {{'a'}, {'c'}, {'q'}}"),
    # sums of a and b: 3.5, 0 (neither released), 0, 1, 10
    ({"kind": "key_sum", "keys": ["b", "a"], "event": {"kind": "interval", "low": 1, "high": 5}}, [1, 0, 0, 1, 0],
     "Σ_{k ∈ {'a', 'b'}} value(k) ∈ [1, 5] (a key not released counts 0)"),
    ({"kind": "key_sum", "keys": ["a", "b", "zz"], "event": {"kind": "set", "values": [0, 10]}}, [0, 1, 1, 0, 1],
     "Σ_{k ∈ {'a', 'b', 'zz'}} value(k) ∈ {0, 10} (a key not released counts 0)"),
    # sums of a and c: 2.5, 0, null (c released as null: no member), 1, 8
    ({"kind": "key_sum", "keys": ["a", "c"], "event": {"kind": "interval", "low": 0}}, [1, 1, 0, 1, 1],
     "Σ_{k ∈ {'a', 'c'}} value(k) ∈ [0, inf)"" (a key not released counts 0)"),
]


@pytest.mark.parametrize("spec, members, text", CASES)
def test_exact_membership_rendering_and_json_round_trip(spec, members, text):
    event = parse_event(spec)
    assert event_contains(event, K).astype(int).tolist() == members
    assert count_in(spec, K) == sum(members)
    assert event.describe() == text
    assert EventAdapter.validate_json(event.model_dump_json()) == event
    with pytest.raises(ValidationError):  # frozen
        event.kind = "other"
    with pytest.raises(ValidationError):  # unknown fields refused
        type(event).model_validate({**event.model_dump(), "unknown": 1})


def test_an_event_chosen_on_one_sample_applies_to_samples_with_other_keys():
    event = KeySet(relation="outside", keys=["a", "b", "c"])
    fresh = keyed_from_rows([{"new": 1.0}, {"a": 1.0}, {"z": 2.0, "a": 1.0}], nullable=False, integer=False)
    assert event.contains(fresh).tolist() == [True, False, True]
    assert KeyValue(key="new", event={"kind": "interval", "low": 0}).contains(fresh).tolist() == [True, False, False]
    both = concat_outputs([K, fresh])
    assert KeySets(sets=[["a"]]).contains(both).tolist() == [0, 0, 0, 1, 0, 0, 1, 0]


def test_validation_errors_name_the_problem():
    for bad, text in [
        ({"kind": "key_value", "key": "a"}, "needs an event"),
        ({"kind": "key_value", "key": "a", "event": {"kind": "set", "values": ["x"]}}, "numbers"),
        ({"kind": "key_set", "relation": "contains", "keys": []}, "at least one key"),
        ({"kind": "key_set", "relation": "contains", "keys": ["a", "a"]}, "repeats a key"),
        ({"kind": "key_set", "relation": "within", "keys": ["a"]}, "relation"),
        ({"kind": "key_sets", "sets": []}, "at least one set"),
        ({"kind": "key_sets", "sets": [["a"], ["a"]]}, "repeats a set"),
        ({"kind": "key_sum", "keys": [], "event": {"kind": "interval", "low": 0}}, "at least one key"),
        ({"kind": "key_sum", "keys": ["a", "a"], "event": {"kind": "interval", "low": 0}}, "repeats a key"),
        ({"kind": "key_sum", "keys": ["a"], "event": {"kind": "set", "values": ["x"]}}, "numbers"),
        ({"kind": "key_sum", "keys": ["a"]}, "event"),
        ({"kind": "key", "key": "x" * 1001}, "at most 1000"),
        ({"kind": "key", "key": 7}, "string"),
    ]:
        with pytest.raises(ValidationError) as info:
            parse_event(bad)
        assert text in str(info.value), (bad, str(info.value))


def test_key_sum_values_are_exact():
    assert KeySum(keys=["a", "b"], event={"kind": "interval"}).sums(K).tolist() == [3.5, 0.0, 0.0, 1.0, 10.0]
    sums = KeySum(keys=["c", "a"], event={"kind": "interval"}).sums(K)
    assert sums[[0, 1, 3, 4]].tolist() == [2.5, 0.0, 1.0, 8.0] and math.isnan(sums[2])
    empty = keyed_from_rows([{}, {}], nullable=False, integer=False)
    assert KeySum(keys=["a"], event={"kind": "set", "values": [0]}).contains(empty).tolist() == [True, True]


def test_key_sum_candidates_see_a_loss_spread_over_several_keys():
    # four keys each moved by one Laplace scale (a user in every group): each key alone has a ratio
    # of at most e¹, their sum's upper tail more; the family is chosen on these samples only
    rng = np.random.default_rng(5)
    keys, n = ["p", "q", "r", "s"], 20_000

    def draw(shift: float):
        v = shift + rng.laplace(0.0, 1.0, size=(n, 4))
        return keyed_from_rows([dict(zip(keys, row)) for row in v.tolist()], nullable=False, integer=False)

    x, y = draw(0.0), draw(1.0)
    shape = OutputShape(container="keyed")
    cands = propose(x, y, shape, ProposalSettings(n_test=20_000, level=0.05, learned=False))
    sums = [c for c in cands if isinstance(c.event, KeySum)]
    assert sums and sums[0].event.keys == keys
    best_value = max(c.predicted for c in cands if isinstance(c.event, KeyValue))
    assert sums[0].predicted > best_value, (sums[0].to_dict(), best_value)
    # on fresh samples, the sum's event separates more than e¹ (its true ratio at the chosen tail)
    fx, fy = draw(0.0), draw(1.0)
    a = count_in(sums[0].event, fy if not sums[0].x_first else fx)
    b = count_in(sums[0].event, fx if not sums[0].x_first else fy)
    assert a > math.e * b, (sums[0].to_dict(), a, b)


def test_keyed_events_refuse_other_outputs_and_other_events_refuse_keyed_ones():
    with pytest.raises(ValueError, match="keyed outputs"):
        KeyReleased(key="a").contains(np.zeros(3))
    with pytest.raises(ValueError):
        parse_event({"kind": "interval", "low": 0}).contains(K)


def test_counts_are_vectorised_and_exact_on_a_large_sample():
    rng = np.random.default_rng(5)
    mech = PartitionCounts(epsilon=1.0, delta=0.05)
    out = mech.sample(["a"] * 3 + ["b"], 200_000, rng)
    released = count_in(KeyReleased(key="b"), out)
    assert abs(released / 200_000 - mech.p_released(1)) < 4 * math.sqrt(0.05 * 0.95 / 200_000)
    value = KeyValue(key="a", event={"kind": "interval", "low": 5.0}).contains(out).mean()
    assert abs(value - mech.p_value_at_least(3, 5.0)) < 0.005
    count = KeyCount(event={"kind": "set", "values": [0]}).contains(out).mean()
    assert abs(count - (1 - mech.p_released(3)) * (1 - mech.p_released(1))) < 0.005


# ------------------------------------------------------------------------------------------ candidates


def _settings(target=None):
    return ProposalSettings(n_test=20_000, level=0.05 / 20, target=target, learned=False)


def test_candidates_cover_every_keyed_family_and_catch_a_key_set_from_the_data():
    rng = np.random.default_rng(11)
    leaky = LeakyHistogram(epsilon=1.0)
    x, xp = ["a"] * 10 + ["b"] * 4 + ["secret"], ["a"] * 10 + ["b"] * 4
    cands = propose(leaky.sample(x, 4000, rng), leaky.sample(xp, 4000, rng), OutputShape(container="keyed"),
                    _settings(target=1.0))
    families = {c.family for c in cands}
    assert {"key released", "key not released", "new key", "key sets", "set"} <= families
    assert any(c.statistic.startswith("value(") for c in cands) and any(c.statistic == "|released keys|" for c in cands)
    best = cands[0]
    # Tested on fresh samples (never on the ones that chose it), the best event refutes the claim.
    fx, fxp = leaky.sample(x, 20_000, rng), leaky.sample(xp, 20_000, rng)
    a, b = count_in(best.event, fx), count_in(best.event, fxp)
    counts = Counts(a, 20_000, b, 20_000) if best.x_first else Counts(b, 20_000, a, 20_000)
    assert held_out_test(PureDP(1.0), counts, 0.05 / 20).refutes, best.to_dict()
    # "a key x′'s sample never released" (here: 'secret') is likelier under x
    new_key = next(c for c in cands if c.family == "new key" and c.event.keys == ["a", "b"])
    assert new_key.event == KeySet(relation="outside", keys=["a", "b"]) and new_key.x_first
    assert new_key.q_hat == 0.0 and new_key.p_hat > 0.9
    for c in cands:  # never an event that holds no choosing output, or every one
        assert 0 < c.p_hat + c.q_hat < 2


def test_candidates_of_a_correct_histogram_predict_no_refutation():
    rng = np.random.default_rng(12)
    hist = LaplaceHistogram(epsilon=1.0, keys=("a", "b", "c"))
    x, xp = ["a"] * 10 + ["b"] * 4, ["a"] * 9 + ["b"] * 4
    cands = propose(hist.sample(x, 4000, rng), hist.sample(xp, 4000, rng), hist.shape, _settings(target=1.0))
    assert cands and all(c.family not in ("key released", "key not released", "new key") for c in cands)
    fx, fxp = hist.sample(x, 20_000, rng), hist.sample(xp, 20_000, rng)
    for c in cands[:5]:
        a, b = count_in(c.event, fx), count_in(c.event, fxp)
        counts = Counts(a, 20_000, b, 20_000) if c.x_first else Counts(b, 20_000, a, 20_000)
        assert not held_out_test(PureDP(1.0), counts, 0.05 / 20).refutes


def test_mpl_on_keyed_outputs_picks_a_statistic_and_bounds_it_on_other_samples():
    rng = np.random.default_rng(13)
    leaky = LeakyHistogram(epsilon=1.0)
    x, xp = ["a"] * 10 + ["b"] * 4 + ["secret"], ["a"] * 10 + ["b"] * 4
    stat, res = dpl_best_keyed(leaky.sample(x, 5000, rng), leaky.sample(xp, 5000, rng), MPLParams(n=5000, N=5000))
    assert stat.kind == "key_set" and res.epsilon_hat > 5
    bound = mpl_lower_bound(stat.apply(leaky.sample(x, 5000, rng)), stat.apply(leaky.sample(xp, 5000, rng)),
                            res.t_hat, stat.estimator, MPLParams(n=5000, N=5000))
    assert bound.lower_bound > 1.0
    event = parse_event(stat.event(res))
    assert event.kind == "key_sets" and "secret" in event.sets[0]
    hist = LaplaceHistogram(epsilon=1.0, keys=("a", "b"))
    stat, res = dpl_best_keyed(hist.sample(["a"] * 10, 5000, rng), hist.sample(["a"] * 9, 5000, rng),
                               MPLParams(n=5000, N=5000))
    assert stat.kind == "key" and stat.continuous and stat.key == "a"
    assert parse_event(stat.event(res)).kind == "key_value"
