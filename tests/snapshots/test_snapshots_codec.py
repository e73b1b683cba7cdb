import numpy as np
import pytest

from app.monitors.output_codec import decode_outputs, encode_outputs


def test_real_outputs_round_trip_as_float32():
    x = np.random.default_rng(0).laplace(size=1000)
    enc, shape, data = encode_outputs(x)
    assert enc == "f4" and len(data) == 4000
    np.testing.assert_allclose(decode_outputs(enc, shape, data), x, rtol=1e-6)


@pytest.mark.parametrize("values,expected", [([0, 1, 2, 4], "i1z"), ([0, 40000], "i4z"), ([-1, 0, 1], "i1z")])
def test_integer_outputs_use_the_smallest_type(values, expected):
    x = np.array(values * 50)
    enc, shape, data = encode_outputs(x)
    assert enc == expected
    assert decode_outputs(enc, shape, data).tolist() == x.tolist()


def test_svt_rows_compress_and_round_trip():
    rows = np.random.default_rng(1).choice([-1, 0, 1], size=(1000, 7), p=[0.6, 0.3, 0.1]).astype(np.int8)
    enc, shape, data = encode_outputs(rows)
    assert shape == [1000, 7] and len(data) < 7000 / 2
    assert (decode_outputs(enc, shape, data) == rows).all()


def test_strings_round_trip():
    x = np.array(["a", "b", "a"], dtype=object)
    enc, shape, data = encode_outputs(x)
    assert enc == "jsonz" and decode_outputs(enc, shape, data).tolist() == ["a", "b", "a"]


def test_unknown_encoding_is_refused():
    with pytest.raises(ValueError, match="unknown"):
        decode_outputs("zz", [1], b"")


def test_variable_length_lists_round_trip():
    from app.stats.shapes import ListSamples

    values = np.array([[1.5, np.nan, np.nan], [2.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])
    lengths = np.array([1, 3, 0])
    encoding, shape, data = encode_outputs(ListSamples(values, lengths))
    back = decode_outputs(encoding, shape, data)
    assert encoding == "list" and shape == [3, 3]
    assert back.lengths.tolist() == [1, 3, 0] and back.tolist() == [[1.5], [2.0, None, 3.0], []]
