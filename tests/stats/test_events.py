"""Events (app/stats/events.py): validation of user-sent events and vectorised membership."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError

from app.stats.events import (
    Box,
    DiscreteSet,
    EventAdapter,
    Interval,
    IntervalUnion,
    count_in,
    event_contains,
    parse_event,
)


def _error(obj) -> str:
    with pytest.raises(ValidationError) as info:
        parse_event(obj)
    return str(info.value)


# ------------------------------------------------------------------------------------ Interval


def test_interval_defaults_to_the_whole_line_with_open_infinite_ends():
    whole = Interval()
    assert (whole.low, whole.high, whole.closed_low, whole.closed_high) == (None, None, False, False)
    assert whole.describe() == "(-inf, inf)"


def test_infinite_endpoints_are_forced_open_even_when_sent_closed():
    event = parse_event({"kind": "interval", "low": None, "high": 0, "closed_low": True, "closed_high": True})
    assert event.closed_low is False and event.closed_high is True
    assert event.describe() == "(-inf, 0]"
    assert Interval(low=1.5, closed_high=True).describe() == "[1.5, inf)"


def test_infinite_float_endpoints_are_stored_as_none():
    event = parse_event({"kind": "interval", "low": float("-inf"), "high": float("inf")})
    assert event.low is None and event.high is None and not event.closed_low and not event.closed_high
    from_json = parse_event('{"kind": "interval", "low": -Infinity, "high": 2, "closed_high": false}')
    assert from_json == Interval(high=2, closed_high=False)
    assert from_json.describe() == "(-inf, 2)"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "interval", "low": 1, "high": 0}, "low (1) must be <= high (0)"),
        ({"kind": "interval", "low": 2, "high": 2, "closed_low": False}, "must be closed on both sides"),
        ({"kind": "interval", "low": 2, "high": 2, "closed_high": False}, "must be closed on both sides"),
        ({"kind": "interval", "low": float("nan")}, "low must not be NaN"),
        ({"kind": "interval", "high": float("nan")}, "high must not be NaN"),
        ({"kind": "interval", "low": float("inf")}, "low must not be +inf"),
        ({"kind": "interval", "high": float("-inf")}, "high must not be -inf"),
        ({"kind": "interval", "low": 0, "upper": 1}, "Extra inputs are not permitted"),
        ({"kind": "interval", "low": "zero"}, "low"),
    ],
)
def test_interval_validation_errors(obj, message):
    assert message in _error(obj)


def test_degenerate_closed_interval_is_a_point():
    point = Interval(low=2, high=2)
    assert point.describe() == "[2, 2]"
    assert point.contains(np.array([1.999, 2.0, 2.001])).tolist() == [False, True, False]


@pytest.mark.parametrize(
    ("closed_low", "closed_high", "expected"),
    [
        (True, True, [False, True, True, True, False]),
        (False, True, [False, False, True, True, False]),
        (True, False, [False, True, True, False, False]),
        (False, False, [False, False, True, False, False]),
    ],
)
def test_interval_endpoints_open_or_closed(closed_low, closed_high, expected):
    event = Interval(low=0, high=1, closed_low=closed_low, closed_high=closed_high)
    outputs = np.array([-1e-12, 0.0, 0.5, 1.0, 1.0 + 1e-12])
    assert event.contains(outputs).tolist() == expected


def test_nan_and_infinite_outputs_are_never_members():
    outputs = np.array([np.nan, -np.inf, np.inf, 0.0])
    assert Interval().contains(outputs).tolist() == [False, False, False, True]
    assert Interval(high=0).contains(outputs).tolist() == [False, False, False, True]
    assert Interval(low=0).contains(outputs).tolist() == [False, False, False, True]


def test_interval_on_integer_and_object_outputs():
    event = Interval(high=1.5)
    assert event.contains(np.array([0, 1, 2, 3])).tolist() == [True, True, False, False]
    assert event.contains(np.array([0.5, 2], dtype=object)).tolist() == [True, False]
    # numpy turns None into NaN: a missing output is never a member
    assert event.contains(np.array([0.5, None], dtype=object)).tolist() == [True, False]
    assert event.contains([1.0, 1.6]).tolist() == [True, False]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (np.zeros((4, 2)), "scalar outputs of shape (n,)"),
        (np.array(["a", "b"]), "got strings"),
        (np.array([True, False]), "got booleans"),
        (np.array([1.0, "x"], dtype=object), "non-numbers"),
        (np.float64(1.0), "got a scalar"),
        (np.zeros((2, 2, 2)), "shape (2, 2, 2)"),
    ],
)
def test_interval_rejects_outputs_that_do_not_fit(outputs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Interval(high=0).contains(outputs)


# ------------------------------------------------------------------------------------ union


def test_union_membership_is_the_or_of_its_intervals():
    union = IntervalUnion(intervals=[Interval(high=0), Interval(low=1, high=2, closed_high=False), Interval(low=1.5, high=1.8)])
    outputs = np.array([-5.0, 0.0, 0.5, 1.0, 1.7, 2.0, np.nan])
    assert union.contains(outputs).tolist() == [True, True, False, True, True, False, False]
    assert union.describe() == "(-inf, 0] ∪ [1, 2) ∪ [1.5, 1.8]"


def test_empty_union_is_rejected():
    assert "at least one interval" in _error({"kind": "union", "intervals": []})


def test_union_reports_the_bad_interval():
    message = _error({"kind": "union", "intervals": [{"high": 0}, {"low": 3, "high": 1}]})
    assert "union.intervals.1" in message and "must be <= high" in message


# ------------------------------------------------------------------------------------ DiscreteSet


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([], "at least one value"),
        ([1, [1, 2]], "mix of numbers and tuples"),
        ([1, "a"], "mix of numbers and strings"),
        ([[0, 1], [0, 1, 1]], "same length; got lengths [2, 3]"),
        ([[]], "must not be empty"),
        ([float("nan")], "must not be NaN"),
        ([[0, float("nan")]], "must not contain NaN"),
        ([True, 0], "boolean values are not allowed"),
        ([[1, False]], "boolean values are not allowed"),
    ],
)
def test_discrete_set_validation_errors(values, message):
    assert message in _error({"kind": "set", "values": values})


def test_set_of_numbers_on_integer_and_float_outputs():
    event = DiscreteSet(values=[0, 2.5])
    assert event.contains(np.array([0, 1, 2, 3])).tolist() == [True, False, False, False]
    assert event.contains(np.array([0.0, 2.5, np.nan, -0.0])).tolist() == [True, True, False, True]
    assert event.describe() == "{0, 2.5}"


def test_set_of_strings_on_str_and_object_outputs():
    event = DiscreteSet(values=["yes", "maybe"])
    assert event.contains(np.array(["yes", "no", "maybe"])).tolist() == [True, False, True]
    mixed = np.array(["yes", 1, None, "maybe"], dtype=object)
    assert event.contains(mixed).tolist() == [True, False, False, True]
    assert event.describe() == "{'yes', 'maybe'}"
    with pytest.raises(ValueError, match="needs string outputs"):
        event.contains(np.array([1, 2]))


def test_set_of_numbers_rejects_string_outputs_and_vectors():
    with pytest.raises(ValueError, match="got strings"):
        DiscreteSet(values=[1]).contains(np.array(["1"]))
    with pytest.raises(ValueError, match=r"scalar outputs of shape \(n,\)"):
        DiscreteSet(values=[1]).contains(np.zeros((3, 2)))


def test_set_of_tuples_matches_whole_rows():
    event = DiscreteSet(values=[[0, 0, 1, -1], [1, -1, -1, -1]])
    outputs = np.array(
        [[0, 0, 1, -1], [0, 0, 1, 0], [1, -1, -1, -1], [0, 0, 0, 0], [-1, 1, 0, 0]], dtype=np.int8
    )
    assert event.contains(outputs).tolist() == [True, False, True, False, False]
    assert event.describe() == "{(0,0,1,-1), (1,-1,-1,-1)}"
    assert event.dimension == 4 and event.value_kind == "tuples"


def test_set_of_tuples_on_float_rows_treats_minus_zero_as_zero_and_nan_as_no_match():
    event = DiscreteSet(values=[[0.0, 1.5]])
    outputs = np.array([[-0.0, 1.5], [0.0, 1.5], [np.nan, 1.5], [0.0, 1.5000001]])
    assert event.contains(outputs).tolist() == [True, True, False, False]


def test_set_of_tuples_agrees_with_a_brute_force_comparison():
    rng = np.random.default_rng(11)
    outputs = rng.integers(-1, 2, size=(5000, 4))
    values = rng.integers(-1, 2, size=(12, 4)).tolist()
    expected = np.array([any(list(row) == v for v in values) for row in outputs.tolist()])
    assert np.array_equal(DiscreteSet(values=values).contains(outputs), expected)
    assert 0 < expected.sum() < expected.size  # both members and non-members were tested


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (np.array([0, 1, 0]), "applies to vector outputs of shape (n, 3); got scalar outputs"),
        (np.zeros((5, 2)), "dimension 3 does not fit outputs of dimension 2"),
        (np.array([["a", "b", "c"]]), "got strings"),
    ],
)
def test_set_of_tuples_rejects_outputs_of_the_wrong_shape(outputs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        DiscreteSet(values=[[0, 0, 1]]).contains(outputs)


# ------------------------------------------------------------------------------------ Box


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "box", "low": [0], "high": [1, 2]}, "same length; got 1 and 2"),
        ({"kind": "box", "low": [], "high": []}, "at least one dimension"),
        ({"kind": "box", "low": [0, 3], "high": [1, 2]}, "low[1] (3) must be <= high[1] (2)"),
        ({"kind": "box", "low": [float("nan")], "high": [1]}, "low[0] must not be NaN"),
        ({"kind": "box", "low": [0], "high": [float("-inf")]}, "high[0] must not be -inf"),
    ],
)
def test_box_validation_errors(obj, message):
    assert message in _error(obj)


def test_box_membership_with_closed_and_unbounded_sides():
    box = Box(low=[0, None, float("-inf")], high=[1, 2, None])
    assert box.low == [0.0, None, None] and box.high == [1.0, 2.0, None]
    outputs = np.array(
        [
            [0.0, -1e9, 5.0],  # on the closed lower face
            [1.0, 2.0, 0.0],  # on the closed upper faces
            [1.0001, 0.0, 0.0],
            [0.5, 2.0001, 0.0],
            [0.5, -np.inf, 0.0],  # infinite coordinates are outside the open unbounded sides
            [0.5, 0.0, np.inf],
            [np.nan, 0.0, 0.0],
        ]
    )
    assert box.contains(outputs).tolist() == [True, True, False, False, False, False, False]
    assert box.describe() == "[0, 1] × (-inf, 2] × (-inf, inf)"


def test_box_rejects_outputs_of_the_wrong_shape():
    with pytest.raises(ValueError, match="dimension 3 applies to vector outputs"):
        Box(low=[0, 0, 0], high=[1, 1, 1]).contains(np.zeros(10))
    with pytest.raises(ValueError, match="dimension 3 does not fit outputs of dimension 2"):
        Box(low=[0, 0, 0], high=[1, 1, 1]).contains(np.zeros((10, 2)))


# ------------------------------------------------------------------------------------ parsing


def test_parse_event_accepts_dicts_json_and_models_and_round_trips():
    events = [
        Interval(high=0),
        IntervalUnion(intervals=[Interval(high=-1), Interval(low=1, closed_low=False)]),
        DiscreteSet(values=[[0, 0, 0, 0, 0, 0, 1]]),
        DiscreteSet(values=["a"]),
        Box(low=[0, None], high=[1, 1]),
    ]
    for event in events:
        assert parse_event(event) is event
        assert parse_event(event.model_dump()) == event
        assert parse_event(event.model_dump_json()) == event
        assert EventAdapter.validate_json(json.dumps(event.model_dump())) == event


def test_parse_event_rejects_unknown_or_missing_kind():
    assert "does not match any of the expected tags" in _error({"kind": "ball", "centre": 0})
    assert "Unable to extract tag using discriminator 'kind'" in _error({"low": 0})


def test_events_are_frozen():
    event = Interval(low=0, high=1)
    with pytest.raises(ValidationError):
        event.low = -1  # type: ignore[misc]


def test_event_contains_and_count_in_take_models_or_dicts():
    outputs = np.linspace(-2, 2, 401)  # 201 of them are <= 0
    assert count_in(Interval(high=0), outputs) == 201
    assert count_in({"kind": "interval", "high": 0, "closed_high": False}, outputs) == 200
    mask = event_contains({"kind": "set", "values": [2]}, outputs)
    assert mask.dtype == bool and mask.shape == (401,) and mask.sum() == 1
    assert count_in(DiscreteSet(values=[[1, 0]]), np.array([[1, 0]] * 7 + [[0, 1]] * 3)) == 7
    assert isinstance(count_in(Interval(), outputs), int)
    assert math.isclose(count_in(Interval(low=-1, high=1), outputs) / outputs.size, 201 / 401)
