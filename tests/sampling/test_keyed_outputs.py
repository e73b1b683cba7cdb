"""Keyed outputs (a set of keys with values, keys possibly absent): the shape, the canonical form,
parsing (duplicate keys refused, in both parsers), conformance, detection, storage and the SDK."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from app.monitors.output_codec import decode_outputs, encode_outputs
from app.reference.server import sdk_answer
from app.sampling.answers import SMALL_JSON_BYTES, answer_reader
from app.sampling.protocol import (
    SamplingError,
    coerce_samples,
    parse_samples,
)
from app.stats.keyed import (
    KeyedSamples,
    concat_keyed,
    keyed_from_dense,
    keyed_from_rows,
    set_code,
)
from app.stats.shapes import (
    OutputShape,
    ShapeBreach,
    concat_outputs,
    conformance,
    detect_shape,
    n_outputs,
    take_outputs,
    to_canonical,
)

OPEN = OutputShape(container="keyed")
NULLABLE = OutputShape(container="keyed", nullable=True)
ROWS = [{"b": 1, "a": 2.5}, {}, {"c": None}, {"a": 1}, {"a": 7, "b": 3, "c": 1}]


def keyed(rows=ROWS, nullable=True):
    return keyed_from_rows(rows, nullable=nullable, integer=False)


# ------------------------------------------------------------------------------------------ shape


def test_shape_fields_validation_and_json_round_trip():
    shape = OutputShape(container="keyed", values="integer", keys=["a", "b"], max_keys=2, nullable=True,
                        bounds=(0, 100))
    assert OutputShape.model_validate_json(shape.model_dump_json()) == shape
    assert shape.output_kind == "keyed" and not shape.binary_capable
    assert shape.describe() == "keyed integer (keys in {'a', 'b'}, ≤ 2 per output), null allowed"
    assert OPEN.describe() == "keyed real (open keys)"
    for bad in ({"container": "keyed", "keys": []}, {"container": "keyed", "keys": ["a", "a"]},
                {"container": "keyed", "values": "label"}, {"container": "keyed", "max_keys": 0},
                {"container": "vector", "length": 2, "keys": ["a"]}, {"keys": ["a"]}, {"max_keys": 3},
                {"container": "keyed", "length": 3}):
        with pytest.raises(ValidationError):
            OutputShape.model_validate(bad)


def test_output_kinds_name_containers_and_read_nulls():
    assert OutputShape.from_output_kind("keyed") == NULLABLE
    assert OutputShape.from_output_kind("vector", 5) == OutputShape(container="vector", length=5, nullable=True)
    with pytest.raises(ValueError, match="no dim"):
        OutputShape.from_output_kind("keyed", 3)


# ------------------------------------------------------------------------------------------ canonical form


def test_csr_form_keeps_absent_and_null_apart():
    k = keyed()
    assert k.keys == ("a", "b", "c") and len(k) == n_outputs(k) == 5 and k.nnz == 7
    assert k.indptr.tolist() == [0, 2, 2, 3, 4, 7] and k.counts().tolist() == [2, 0, 1, 1, 3]
    assert k.tolist() == [{"a": 2.5, "b": 1.0}, {}, {"c": None}, {"a": 1.0}, {"a": 7.0, "b": 3.0, "c": 1.0}]
    released, value = k.column("c")
    assert released.tolist() == [False, False, True, False, True]  # released as null is released
    assert np.isnan(value[[0, 1, 2, 3]]).all() and value[4] == 1.0
    released, value = k.column("never-seen")
    assert not released.any() and np.isnan(value).all()


def test_slicing_and_concatenation_over_the_union_of_keys():
    k = keyed()
    assert take_outputs(k, slice(1, 3)).tolist() == [{}, {"c": None}]
    assert take_outputs(k, np.array([4, 0])).tolist() == [ROWS_AS_FLOATS[4], ROWS_AS_FLOATS[0]]
    assert k[np.array([True, False, False, True, False])].tolist() == [ROWS_AS_FLOATS[0], ROWS_AS_FLOATS[3]]
    assert k[-1].tolist() == [ROWS_AS_FLOATS[4]] and k[::2].tolist() == ROWS_AS_FLOATS[::2]
    other = keyed([{"z": 1}, {"a": 3}, {}], nullable=False)
    both = concat_outputs([k, other])
    assert both.keys == ("a", "b", "c", "z") and len(both) == 8
    assert both.tolist() == ROWS_AS_FLOATS + [{"z": 1.0}, {"a": 3.0}, {}]
    assert concat_keyed([both[:3], both[3:]]).tolist() == both.tolist()
    with pytest.raises(ValueError):
        concat_outputs([k, np.zeros(3)])


ROWS_AS_FLOATS = [{"a": 2.5, "b": 1.0}, {}, {"c": None}, {"a": 1.0}, {"a": 7.0, "b": 3.0, "c": 1.0}]


def test_key_sets_codes_labels_and_exact_membership():
    k = keyed()
    codes = k.key_set_codes()
    assert codes[1] == 0 and codes[0] == set_code(["a", "b"]) and codes[3] == set_code(["a"])
    assert k.key_set_labels().tolist() == ['["a","b"]', "[]", '["c"]', '["a"]', '["a","b","c"]']
    assert k.key_set_in([["a", "b"], []]).tolist() == [True, True, False, False, False]
    assert k.key_set_in([["a"], ["q"], ["c"]]).tolist() == [False, False, True, True, False]
    assert k.count_among(["a", "zz"]).tolist() == [1, 0, 0, 1, 1]


def test_from_dense_matches_from_rows():
    released = np.array([[True, False], [False, False], [True, True]])
    values = np.array([[1.0, 9.0], [2.0, 3.0], [np.nan, 4.0]])
    k = keyed_from_dense(["y", "x"], released, values)
    assert k.keys == ("x", "y") and k.tolist() == [{"y": 1.0}, {}, {"x": 4.0, "y": None}]


# ------------------------------------------------------------------------------------------ parsing


def test_to_canonical_refuses_what_is_not_a_keyed_output():
    cases = [
        (OPEN, [{"a": 1}, [1.0]], "type", "must be objects"),
        (OPEN, [{"a": None}], "type", "allows no null"),
        (OPEN, [{"a": "1"}], "type", "values must be numbers"),
        (OPEN, [{"a": True}], "type", "booleans"),
        (OPEN, [{"a": float("inf")}], "type", "non-finite"),
        (OPEN, [{"a": float("nan")}], "type", "non-finite"),
        (OPEN, [{1: 1.0}], "type", "keys must be strings"),
        (OPEN, [{("a",): 1.0}], "type", "keys must be strings"),
        (OutputShape(container="keyed", values="integer"), [{"a": 1.5}], "type", "must be integers"),
        (OutputShape(container="keyed", max_keys=1), [{}, {"a": 1, "b": 2}], "length", "at most 1 keys"),
    ]
    for shape, rows, kind, text in cases:
        with pytest.raises(ShapeBreach) as info:
            to_canonical(shape, rows)
        assert info.value.breach.kind == kind and text in info.value.breach.detail, (rows, info.value.breach)
    assert to_canonical(NULLABLE, [{"a": float("nan")}]).tolist() == [{"a": None}]  # NaN is null when allowed
    assert to_canonical(OutputShape(container="keyed", values="integer"), [{"a": 16.0}]).tolist() == [{"a": 16.0}]


def test_json_answers_refuse_duplicate_keys_small_and_streamed():
    body = b'{"samples":[{"a":1,"a":2},{}]}'
    with pytest.raises(SamplingError) as info:
        parse_samples(body, "application/json", 2, None, shape=OPEN)
    assert info.value.reason == "invalid_json" and "'a' twice" in info.value.detail
    big = [{f"k{i % 7}": i, "z": None} if i % 3 else {} for i in range(30_000)]
    streamed = json.dumps({"samples": big}).encode()
    assert len(streamed) > SMALL_JSON_BYTES

    def stream(raw: bytes, n: int, shape: OutputShape | None, kind=None) -> object:
        reader = answer_reader({"content-type": "application/json"}, n, kind, shape=shape, max_bytes=10**8)
        for lo in range(0, len(raw), 50_000):
            reader.feed(raw[lo:lo + 50_000])
        return reader.finish()

    out = stream(streamed, len(big), NULLABLE)
    assert isinstance(out, KeyedSamples) and out.tolist()[:3] == [{}, {"k1": 1.0, "z": None}, {"k2": 2.0, "z": None}]
    assert stream(streamed, len(big), None, "keyed").tolist() == out.tolist()  # output_kind "keyed" alone
    duplicate = streamed[:-2] + b',{"q":1,"q":1}]}'
    with pytest.raises(SamplingError) as info:
        stream(duplicate, len(big) + 1, NULLABLE)
    assert info.value.reason == "invalid_json" and "'q' twice" in info.value.detail
    for raw, reason, text in [
        (b'{"samples":[{"a":[1]},{}]}', "wrong_type", "holds an array"),
        (b'{"samples":[{},3]}', "wrong_type", "output 1 is an integer"),
        (b'{"samples":[{"a":1,"b":2,"c":3}]}', "wrong_type", "more than 2 keys"),
    ]:
        with pytest.raises(SamplingError) as info:
            stream(raw, 2, OutputShape(container="keyed", max_keys=2))
        assert info.value.reason == reason and text in info.value.detail, info.value.detail


def test_keyed_answers_have_no_binary_form():
    with pytest.raises(SamplingError) as info:
        parse_samples(b"\x00" * 16, "application/x-dpwatch-float64", 2, None, shape=OPEN)
    assert info.value.reason == "invalid_binary"
    out = coerce_samples([{"a": 1}, {}], 2, "keyed")
    assert isinstance(out, KeyedSamples)
    body, media_type, _ = sdk_answer(out, NULLABLE, binary=True)  # the SDK answers keyed outputs in JSON
    assert media_type == "application/json" and json.loads(body) == {"samples": [{"a": 1.0}, {}]}
    body, _, _ = sdk_answer(out, OutputShape(container="keyed", values="integer"))
    assert json.dumps(json.loads(body)) == json.dumps({"samples": [{"a": 1}, {}]})


# ------------------------------------------------------------------------------------------ conformance


def test_conformance_names_key_universe_type_and_count_breaches_with_a_sample():
    shape = OutputShape(container="keyed", keys=["a", "b"], max_keys=2, bounds=(0, 10))
    assert conformance(shape, [{"a": 1.5}, {}]) is None
    universe = conformance(shape, [{"a": 1.5}, {"7": 2}])
    assert universe.kind == "support" and universe.index == 1 and universe.sample == {"7": 2.0}
    assert "'7', which is not a declared key" in universe.detail
    bounds = conformance(shape, [{"a": 1.5}, {"b": 12}])
    assert bounds.kind == "support" and bounds.index == 1 and "outside the declared range" in bounds.detail
    assert conformance(shape, [{"a": 1, "b": 1, "c": 1}]).kind == "length"
    assert conformance(shape, [{"a": None}]).kind == "type"
    assert conformance(shape, [[1.0, 2.0]]).kind == "type"
    assert conformance(shape, np.array([1.0, 2.0])).kind == "type"  # arrays where objects are due
    assert conformance(OutputShape(), keyed()).kind == "type"  # objects where scalars are due
    canonical = to_canonical(OPEN, [{"a": 1.0}, {"7": 2.0}])
    assert conformance(shape, canonical).index == 1  # the same on the canonical form


def test_detection_reads_objects_as_keyed_with_open_keys():
    found = detect_shape([{"a": 1}, {"b": 3, "c": None}, {}])
    assert found.shape == OutputShape(container="keyed", values="integer", nullable=True)
    assert found.evidence["distinct_keys"] == 3 and found.evidence["keys_per_output"] == [0, 2]
    assert detect_shape(keyed(nullable=True)).shape.container == "keyed"
    with pytest.raises(ValueError):
        detect_shape([{"a": "x"}])
    with pytest.raises(ValueError):
        detect_shape([{"a": 1}, 2.0])


def test_stored_outputs_round_trip():
    k = concat_outputs([keyed(), keyed([{"z": 1}], nullable=False)])
    encoding, shape, data = encode_outputs(k)
    back = decode_outputs(encoding, shape, data)
    assert encoding == "keyed" and back.keys == k.keys and back.tolist() == k.tolist()
    empty = KeyedSamples.empty(3)
    assert decode_outputs(*encode_outputs(empty)).tolist() == [{}, {}, {}]
