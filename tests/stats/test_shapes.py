"""Output shapes: detection, conformance, canonical arrays and the protocol for every shape."""

import json
import pickle

import numpy as np
import pytest
from fastapi import FastAPI

from app.reference.server import endpoint_router, sdk_answer
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.sampling.protocol import (
    BINARY_MEDIA_TYPE,
    SamplingError,
    coerce_samples,
    generate_secret,
    parse_samples,
)
from app.sampling.safe_http import SafeHttpConfig
from app.stats.shapes import (
    Lattice,
    ListSamples,
    OutputShape,
    ShapeBreach,
    concat_outputs,
    conformance,
    detect_lattice,
    detect_shape,
    take_outputs,
    to_canonical,
)
from tests.support.sampling_server import serve_app

RNG = np.random.default_rng(7)


# ---------------------------------------------------------------------------------- detection


@pytest.mark.parametrize("step,offset", [(0.01, 0.0), (0.25, 0.1), (3.0, 0.5), (1e-3, 0.0005)])
def test_lattice_found_with_its_step_and_offset(step, offset):
    x = np.round(RNG.laplace(0, 5, 2000) / step) * step + offset
    lat = detect_lattice(x)
    assert lat is not None
    assert lat.step == pytest.approx(step, rel=1e-9)
    assert lat.on_lattice(x).all()
    assert not lat.on_lattice(x + step / 3).any()
    shape = detect_shape(list(x)).shape
    assert shape.lattice is not None and shape.values == "real" and shape.discrete


def test_continuous_reals_are_no_lattice():
    for scale in (1e-3, 1.0, 1e6):
        assert detect_lattice(RNG.laplace(0, scale, 5000)) is None
    assert detect_shape(list(RNG.normal(size=500))).shape == OutputShape()
    assert detect_lattice([0.1, 0.7, 1.3]) is None  # too few distinct values to tell


def test_float_valued_integers_are_integers():
    det = detect_shape([16.0, 3, 2.0, -1])
    assert det.shape == OutputShape(values="integer") and det.evidence["integral"] is True
    assert to_canonical(OutputShape(values="integer"), [16.0, 3]).dtype == np.int64
    assert to_canonical(OutputShape(values="discrete"), [16.0, 3]).tolist() == [16, 3]


def test_vectors_lists_nulls_and_labels_detected():
    det = detect_shape([[1.5, None, 2.25], [0.1, 2.0, 3.0]])
    assert det.shape.container == "vector" and det.shape.length == 3 and det.shape.nullable
    assert det.evidence["null_fraction"] == pytest.approx(1 / 6, abs=1e-3)
    det = detect_shape([[1, 0], [0, 0, 1], []])
    assert det.shape.container == "list" and det.shape.values == "integer"
    assert det.evidence["lengths"] == [0, 2, 3] and det.evidence["max_length"] == 3
    det = detect_shape(["yes", None, "no"])
    assert det.shape == OutputShape(values="label", nullable=True)
    with pytest.raises(ValueError):
        detect_shape([True, False])
    with pytest.raises(ValueError):
        detect_shape([1, [1]])


def test_detection_on_canonical_arrays():
    assert detect_shape(np.array([[1.0, np.nan], [2.0, 3.0]])).shape.nullable
    lists = ListSamples(np.array([[1.0, np.nan], [2.0, 3.0]]), np.array([1, 2]))
    assert detect_shape(lists).shape.container == "list"


# ---------------------------------------------------------------------------------- model


def test_shape_model_validation_and_json_round_trip():
    shape = OutputShape(container="list", values="real", lattice=Lattice(step=0.5, offset=2.25), nullable=True,
                        max_length=5)
    assert shape.lattice.offset == 0.25
    assert OutputShape.model_validate_json(shape.model_dump_json()) == shape
    for bad in ({"container": "vector"}, {"container": "list", "length": 3}, {"container": "vector", "length": 2,
                "values": "label"}, {"values": "integer", "lattice": {"step": 1}}, {"bounds": [2, 1]}):
        with pytest.raises(ValueError):
            OutputShape.model_validate(bad)


def test_legacy_output_kinds_map_onto_shapes():
    assert OutputShape.from_output_kind("real") == OutputShape()
    assert OutputShape.from_output_kind("discrete").output_kind == "discrete"
    vec = OutputShape.from_output_kind("vector", 4)
    assert vec.container == "vector" and vec.length == 4 and vec.output_kind == "vector"
    with pytest.raises(ValueError):
        OutputShape.from_output_kind("vector")


# ---------------------------------------------------------------------------------- conformance


def test_conformance_names_type_length_and_support_with_a_sample():
    integer = OutputShape(values="integer")
    b = conformance(integer, [1, 2, 3.5])
    assert b.kind == "type" and b.index == 2 and b.sample == 3.5
    b = conformance(OutputShape(container="vector", length=2), [[1, 2], [1]])
    assert b.kind == "length" and b.index == 1 and b.sample == [1]
    b = conformance(OutputShape(lattice=Lattice(step=0.5)), np.array([1.0, 2.5, 2.25]))
    assert b.kind == "support" and b.index == 2 and "lattice" in b.detail
    b = conformance(OutputShape(values="label", labels=["a", "b"]), ["a", "c"])
    assert b.kind == "support" and b.sample == "c"
    b = conformance(OutputShape(values="integer", bounds=(0, 4)), [0, 4, 5])
    assert b.kind == "support" and b.index == 2
    b = conformance(OutputShape(), [1.0, None])
    assert b.kind == "type" and "null" in b.detail
    b = conformance(OutputShape(container="list", max_length=2), [[1.0], [1.0, 2.0, 3.0]])
    assert b.kind == "length" and b.index == 1
    # an index turning into a value: the shape breaks
    assert conformance(integer, np.array([0.0, 3.7])).kind == "type"
    assert conformance(integer, np.array([[1, 2]])).kind == "type"
    assert conformance(OutputShape(values="integer", nullable=True), [1, None, 2]) is None
    assert conformance(OutputShape(container="list", values="integer", nullable=True), [[1, None], []]) is None


def test_canonical_forms():
    lists = to_canonical(OutputShape(container="list", nullable=True), [[1.5, None], [], [2.0, 3.0, 4.0]])
    assert isinstance(lists, ListSamples)
    assert lists.lengths.tolist() == [2, 0, 3] and lists.width == 3
    assert lists.tolist() == [[1.5, None], [], [2.0, 3.0, 4.0]]
    both = concat_outputs([lists, to_canonical(OutputShape(container="list"), [[1.0] * 5])])
    assert both.width == 5 and len(both) == 4 and both.row(3) == [1.0] * 5
    assert take_outputs(both, np.array([0, 3])).lengths.tolist() == [2, 5]
    nullable_int = to_canonical(OutputShape(values="integer", nullable=True), [1, None])
    assert nullable_int.dtype == np.float64 and np.isnan(nullable_int[1])
    with pytest.raises(ShapeBreach) as info:
        to_canonical(OutputShape(container="list", values="integer"), [[1, 2], [3, 4.5]])
    assert info.value.breach.index == 1 and info.value.breach.sample == [3, 4.5]


# ---------------------------------------------------------------------------------- protocol

SHAPES_AND_OUTPUTS = [
    (OutputShape(), [0.5, -1.25, 3.0]),
    (OutputShape(nullable=True), [0.5, None, 3.0]),
    (OutputShape(values="integer"), [1, 16.0, -3]),
    (OutputShape(values="integer", nullable=True), [1, None, -3]),
    (OutputShape(values="label"), ["a", "b", "a"]),
    (OutputShape(lattice=Lattice(step=0.25)), [0.25, 0.5, -1.0]),
    (OutputShape(container="vector", length=2), [[0.5, 1.0], [2.0, 3.0], [0.0, 0.0]]),
    (OutputShape(container="vector", length=2, values="integer", nullable=True), [[1, None], [0, 1], [None, None]]),
    (OutputShape(container="list", nullable=True), [[0.5, None], [], [1.0, 2.0, 3.0]]),
    (OutputShape(container="list", values="integer", max_length=3), [[1, 0], [0, 0, 1], []]),
]


def _as_json_outputs(shape, canonical):
    return json.loads(sdk_answer(canonical, shape)[0])["samples"]


@pytest.mark.parametrize("shape,outputs", SHAPES_AND_OUTPUTS)
def test_json_and_binary_parse_every_shape(shape, outputs):
    body = json.dumps({"samples": outputs}).encode()
    canonical = parse_samples(body, "application/json", len(outputs), None, shape=shape)
    assert conformance(shape, canonical) is None
    expected = [[None if v is None else float(v) for v in row] if isinstance(row, list) else
                (row if row is None or isinstance(row, str) else float(row)) for row in outputs]
    back = _as_json_outputs(shape, canonical)
    assert [[None if v is None else float(v) for v in r] if isinstance(r, list) else
            (r if r is None or isinstance(r, str) else float(r)) for r in back] == expected
    if shape.binary_capable:
        raw, _, headers = sdk_answer(canonical, shape, binary=True)
        dim = int(headers.get("x-dpwatch-dim", 1))
        again = parse_samples(raw, BINARY_MEDIA_TYPE, len(outputs), None, None if shape.container == "scalar" else dim,
                              shape=shape)
        assert _as_json_outputs(shape, again) == back


def test_protocol_reports_breaches_with_the_offending_sample():
    body = json.dumps({"samples": [[1.0, 2.0], [1.0]]}).encode()
    with pytest.raises(SamplingError) as info:
        parse_samples(body, "application/json", 2, None, shape=OutputShape(container="vector", length=2))
    err = info.value
    assert err.reason == "wrong_type" and err.breach.kind == "length" and err.breach.sample == [1.0]
    clone = pickle.loads(pickle.dumps(err))
    assert clone.breach == err.breach
    with pytest.raises(SamplingError) as info:
        coerce_samples([0, 2.5], 2, None, shape=OutputShape(values="integer"))
    assert info.value.breach.kind == "type" and info.value.breach.sample == 2.5
    # legacy discrete accepts float-valued integers, still refuses 2.5
    assert coerce_samples([16.0, 2], 2, "discrete").tolist() == [16, 2]
    with pytest.raises(SamplingError):
        coerce_samples([2.5, 2], 2, "discrete")
    # binary: NaN only where null is allowed, lists start with their length
    with pytest.raises(SamplingError) as info:
        parse_samples(np.array([1.0, np.nan]).tobytes(), BINARY_MEDIA_TYPE, 2, None, shape=OutputShape())
    assert info.value.reason == "non_finite"
    with pytest.raises(SamplingError) as info:
        parse_samples(np.array([[3.0, 1.0, 2.0]]).tobytes(), BINARY_MEDIA_TYPE, 1, None, 3,
                      shape=OutputShape(container="list"))
    assert info.value.reason == "invalid_binary"
    with pytest.raises(SamplingError) as info:
        parse_samples(np.array([[1.0, 1.0, 2.0]]).tobytes(), BINARY_MEDIA_TYPE, 1, None, 3,
                      shape=OutputShape(container="list"))
    assert info.value.reason == "invalid_binary" and "padded" in info.value.detail


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_client_and_endpoint_carry_lists_in_batches():
    secret = generate_secret()
    shape = OutputShape(container="list", values="integer", nullable=True)

    def svt_like(database, n, rng):
        lengths = rng.integers(0, 4, size=n)
        return [[int(v) if v < 2 else None for v in rng.integers(0, 3, size=k)] for k in lengths]

    api = FastAPI()
    api.include_router(endpoint_router({"/svt": (svt_like, shape)}, secret=secret, seed=1))
    with serve_app(api) as base:
        for binary in (False, True):
            endpoint = MechanismEndpoint(sampling_url=f"{base}/svt", secret=secret, shape=shape, max_batch=70,
                                         prefer_binary=binary)
            async with SamplingClient(http_config=SafeHttpConfig(allow_networks=("127.0.0.0/8",))) as client:
                out = await client.sample(endpoint, [1, 2], 200, monitor_id="m", period=0)
            assert isinstance(out, ListSamples) and len(out) == 200
            assert conformance(shape, out) is None
            assert set(out.lengths.tolist()) <= {0, 1, 2, 3}


def test_outputs_nbytes_and_own_outputs_for_every_container():
    from app.stats.keyed import keyed_from_rows
    from app.stats.shapes import ListSamples, outputs_nbytes, own_outputs, take_outputs

    scalars = np.arange(1000.0)
    lists = ListSamples(np.zeros((1000, 4)), np.full(1000, 4))
    keyed = keyed_from_rows([{"a": 1.0, "b": 2.0}] * 1000, nullable=False, integer=False)
    labels = np.array(["yes", "no"] * 500, dtype=object)
    assert outputs_nbytes(scalars) == 8_000
    assert outputs_nbytes(lists) == 1000 * 4 * 8 + lists.lengths.nbytes
    assert outputs_nbytes(keyed) == keyed.indptr.nbytes + keyed.key_index.nbytes + keyed.values.nbytes
    assert 8_000 < outputs_nbytes(labels) < 8_000 + 200  # pointers, and each distinct label once
    for outputs in (scalars, lists, keyed, labels):
        part = take_outputs(outputs, slice(990, 1000))
        own = own_outputs(part)
        arrays = [own] if isinstance(own, np.ndarray) else [v for v in vars(own).values() if isinstance(v, np.ndarray)]
        assert arrays and all(a.base is None for a in arrays)  # nothing of the 1000 outputs is kept alive
        assert outputs_nbytes(own) <= outputs_nbytes(outputs) / 50 + 200  # (+ the distinct labels)
