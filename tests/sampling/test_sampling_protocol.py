"""Wire format: request encoding, signing, strict answer validation."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from dpwatch_sdk.protocol import BadRequest, parse_request
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.reference.server import sdk_answer
from app.sampling.protocol import (
    ACCEPT_BINARY,
    BINARY_MEDIA_TYPE,
    SAMPLING_REASONS,
    SamplingError,
    encode_request,
    generate_secret,
    parse_dim_header,
    parse_samples,
    sign_headers,
    validate_secret,
)

JSON = "application/json"


def body(samples) -> bytes:
    return json.dumps({"samples": samples}).encode()


def reason_of(excinfo) -> str:
    return excinfo.value.reason


# --------------------------------------------------------------------------- request


def test_request_body_is_compact_json_that_validates():
    raw = encode_request({"rows": [1, 2], "name": "é"}, 7, "abc-0", "mon-1", 3)
    assert raw == '{"database":{"rows":[1,2],"name":"é"},"n":7,"request_id":"abc-0","monitor_id":"mon-1","period":3}'.encode()
    req = parse_request(raw, max_n=7)  # the SDK's parser, the endpoint's side
    assert (req.database, req.n, req.request_id, req.monitor_id, req.period) == (
        {"rows": [1, 2], "name": "é"}, 7, "abc-0", "mon-1", 3,
    )


def test_request_database_must_be_strict_json():
    with pytest.raises(ValueError, match="not valid JSON"):
        encode_request([1.0, float("nan")], 1, "r", "m", 0)
    with pytest.raises(ValueError, match="not valid JSON"):
        encode_request({1, 2}, 1, "r", "m", 0)


@pytest.mark.parametrize(
    "doc",
    [
        {"database": None, "n": "5", "request_id": "r", "monitor_id": "m", "period": 0},
        {"database": None, "n": 0, "request_id": "r", "monitor_id": "m", "period": 0},
        {"database": None, "n": True, "request_id": "r", "monitor_id": "m", "period": 0},
        {"database": None, "n": 1, "request_id": 5, "monitor_id": "m", "period": 0},
        {"database": None, "n": 1, "request_id": "r", "monitor_id": "m", "period": -1},
    ],
)
def test_request_parser_is_strict(doc):
    with pytest.raises(BadRequest) as info:
        parse_request(json.dumps(doc).encode(), max_n=10)
    assert info.value.status == 422


def test_request_parser_accepts_null_database_and_ignores_unknown_fields():
    req = parse_request(b'{"database":null,"n":2,"request_id":"r","monitor_id":"m","period":0,"future":1}', max_n=10)
    assert req.database is None and req.n == 2


# --------------------------------------------------------------------------- secrets & signing


def test_generated_secret_is_valid_and_signature_verifies_with_the_library():
    secret = generate_secret()
    validate_secret(secret)
    payload = encode_request([1, 2, 3], 10, "p-0", "m", 0)
    headers = sign_headers(secret, "p-0", payload)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-signature"].startswith("v1,")
    Webhook(secret).verify(payload, headers)  # raises if wrong
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(payload, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(payload.replace(b'"n":10', b'"n":11'), headers)


@pytest.mark.parametrize(
    "secret", ["", "abc", "whsec_", "whsec_!!!notbase64!!!", "whsec_" + "QUJD", 123]
)
def test_invalid_secrets_are_rejected_without_echoing_them(secret):
    with pytest.raises(ValueError) as info:
        validate_secret(secret)
    if isinstance(secret, str) and len(secret) > 6:
        assert secret[6:] not in str(info.value)


# --------------------------------------------------------------------------- JSON answers


def test_real_json():
    out = parse_samples(body([1, 2.5, -3e-300]), JSON, 3, "real")
    assert out.dtype == np.float64 and out.shape == (3,)
    assert out.tolist() == [1.0, 2.5, -3e-300]


def test_content_type_parameters_and_missing_type_are_tolerated_for_json():
    assert parse_samples(body([1.0]), "application/json; charset=utf-8", 1, "real").tolist() == [1.0]
    assert parse_samples(body([1.0]), None, 1, "real").tolist() == [1.0]


def test_discrete_ints_and_strings():
    ints = parse_samples(body([0, 5, -2, 2**62]), JSON, 4, "discrete")
    assert ints.dtype == np.int64 and ints.tolist() == [0, 5, -2, 2**62]
    strs = parse_samples(body(["yes", "no", "yes"]), JSON, 3, "discrete")
    assert strs.dtype == object and strs.tolist() == ["yes", "no", "yes"]


def test_vector_json():
    out = parse_samples(body([[1, 2, 3], [4.5, 5, 6]]), JSON, 2, "vector")
    assert out.dtype == np.float64 and out.shape == (2, 3)
    assert parse_samples(body([[1, 2]]), JSON, 1, "vector", dim=2).shape == (1, 2)


@pytest.mark.parametrize(
    ("raw", "kind", "reason", "fragment"),
    [
        (b"not json", "real", "invalid_json", "not valid JSON"),
        (b"\xff\xfe", "real", "invalid_json", "not UTF-8"),
        (b"[1, 2]", "real", "invalid_json", "'samples' array"),
        (b'{"data": [1, 2]}', "real", "invalid_json", "'samples' array"),
        (b'{"samples": {"a": 1}}', "real", "invalid_json", "must be an array"),
        (b'{"samples": [1, 2]} trailing', "real", "invalid_json", "Extra data"),
        (b'{"samples": ["\\ud800", "a"]}', "discrete", "invalid_json", "not valid JSON"),
        (b"[" * 100_000, "real", "invalid_json", "nested too deeply"),
        (b'{"samples": [1, 2, 3]}', "real", "wrong_count", "expected 2 samples, got 3"),
        (b'{"samples": [1]}', "discrete", "wrong_count", "expected 2 samples, got 1"),
        (b'{"samples": [1, NaN]}', "real", "non_finite", "NaN"),
        (b'{"samples": [Infinity, 1]}', "real", "non_finite", "Infinity"),
        (b'{"samples": [1e999, 1]}', "real", "non_finite", "non-finite"),
        (b'{"samples": [[1, 2], [1e999, 0]]}', "vector", "non_finite", "(1, 0)"),
        (b'{"samples": ["1.5", 2]}', "real", "wrong_type", "sample 0 is a string"),
        (b'{"samples": [true, 2]}', "real", "wrong_type", "boolean"),
        (b'{"samples": [1, null]}', "real", "wrong_type", "sample 1 is null"),
        (b'{"samples": [1, [2]]}', "real", "wrong_type", "an array"),
        (b'{"samples": [1, 2.5]}', "discrete", "wrong_type", "non-integer number"),
        (b'{"samples": [true, false]}', "discrete", "wrong_type", "booleans are not accepted"),
        (b'{"samples": [1, "a"]}', "discrete", "wrong_type", "not a mix"),
        (b'{"samples": [1, 99999999999999999999]}', "discrete", "wrong_type", "64-bit"),
        (b'{"samples": [[1, 2], [3]]}', "vector", "wrong_type", "same length"),
        (b'{"samples": [[], []]}', "vector", "wrong_type", "must not be empty"),
        (b'{"samples": [1, 2]}', "vector", "wrong_type", "arrays of numbers"),
        (b'{"samples": [[1, "x"], [2, 3]]}', "vector", "wrong_type", "sample 0[1] is a string"),
        (b'{"samples": [[true, 1], [2, 3]]}', "vector", "wrong_type", "boolean"),
    ],
)
def test_json_failures(raw, kind, reason, fragment):
    with pytest.raises(SamplingError) as info:
        parse_samples(raw, JSON, 2, kind)
    assert info.value.reason == reason
    assert fragment in info.value.detail


def test_vector_length_must_match_expected_dim():
    with pytest.raises(SamplingError) as info:
        parse_samples(body([[1, 2], [3, 4]]), JSON, 2, "vector", dim=3)
    assert info.value.reason == "wrong_type" and "expected 3" in info.value.detail


def test_huge_integer_literal_is_invalid_json_not_a_crash():
    raw = b'{"samples": [' + b"9" * 5000 + b"]}"
    with pytest.raises(SamplingError) as info:
        parse_samples(raw, JSON, 1, "real")
    assert info.value.reason == "invalid_json"


# --------------------------------------------------------------------------- binary answers


def test_binary_real_and_vector_roundtrip_exactly():
    rng = np.random.default_rng(1)
    x = rng.standard_cauchy(1000)
    assert np.array_equal(parse_samples(sdk_answer(x, "real", binary=True)[0], BINARY_MEDIA_TYPE, 1000, "real"), x)
    v = rng.normal(size=(50, 4))
    body, _, headers = sdk_answer(v, "vector", binary=True)
    assert headers == {"x-dpwatch-dim": "4"}
    out = parse_samples(body, BINARY_MEDIA_TYPE, 50, "vector", dim=4)
    assert out.shape == (50, 4) and np.array_equal(out, v)
    assert out.flags.writeable  # a copy, not a view of the response bytes


def test_binary_is_little_endian():
    raw = np.array([1.5, -2.0], dtype=">f8").tobytes()  # big-endian: wrong on purpose
    out = parse_samples(raw, BINARY_MEDIA_TYPE, 2, "real")
    assert out.tolist() != [1.5, -2.0]
    assert parse_samples(np.array([1.5, -2.0], "<f8").tobytes(), BINARY_MEDIA_TYPE, 2, "real").tolist() == [1.5, -2.0]


@pytest.mark.parametrize(
    ("raw", "kind", "dim", "reason", "fragment"),
    [
        (b"\x00" * 12, "real", None, "invalid_binary", "whole number of 8-byte rows"),
        (b"\x00" * 24, "real", None, "wrong_count", "expected 2 samples, got 3"),
        (b"\x00" * 16, "discrete", None, "invalid_binary", "only allowed for real and vector"),
        (b"\x00" * 32, "vector", None, "invalid_binary", "x-dpwatch-dim"),
        (b"\x00" * 40, "vector", 2, "invalid_binary", "16-byte rows"),
        (b"\x00" * 48, "vector", 2, "wrong_count", "got 3"),
        (b"\x00" * 32, "real", 2, "invalid_binary", "must not declare"),
        (np.array([1.0, np.nan]).tobytes(), "real", None, "non_finite", "NaN"),
        (np.array([1.0, -np.inf]).tobytes(), "real", None, "non_finite", "inf"),
    ],
)
def test_binary_failures(raw, kind, dim, reason, fragment):
    with pytest.raises(SamplingError) as info:
        parse_samples(raw, BINARY_MEDIA_TYPE, 2, kind, dim)
    assert info.value.reason == reason
    assert fragment in info.value.detail


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", ""])
def test_dim_header_must_be_a_positive_integer(value):
    with pytest.raises(SamplingError) as info:
        parse_dim_header(value)
    assert info.value.reason == "invalid_binary"


def test_dim_header_parsing():
    assert parse_dim_header(None) is None
    assert parse_dim_header(" 3 ") == 3


# --------------------------------------------------------------------------- errors


def test_error_reasons_retryability_and_pickling():
    assert "refused_address" in SAMPLING_REASONS and "redirect" in SAMPLING_REASONS
    assert SamplingError("timeout", "x").retryable
    assert SamplingError("connection_error", "x").retryable
    assert SamplingError("http_status", "x", status_code=503).retryable
    assert SamplingError("http_status", "x", status_code=429).retryable
    assert not SamplingError("http_status", "x", status_code=404).retryable
    assert not SamplingError("wrong_count", "x").retryable
    with pytest.raises(ValueError):
        SamplingError("nope", "x")  # type: ignore[arg-type]
    err = pickle.loads(pickle.dumps(SamplingError("http_status", "d", status_code=503, retry_after=2.0)))
    assert (err.reason, err.detail, err.status_code, err.retry_after) == ("http_status", "d", 503, 2.0)


def test_accept_header_constant():
    assert ACCEPT_BINARY == "application/x-dpwatch-float64, application/json;q=0.5"
