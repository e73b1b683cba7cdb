"""The client's side of the dpwatch sampling protocol: the request it sends, and strict validation
of the answers it gets. See docs/protocol.md for the specification. The constants and the signing
are the SDK's (``dpwatch_sdk.protocol``, the endpoint's side), re-exported here."""

from __future__ import annotations

import json
import typing
from collections.abc import Callable

import numpy as np
import pydantic_core
from dpwatch_sdk.protocol import (
    ACCEPT_BINARY,
    BINARY_MEDIA_TYPE,
    DIM_HEADER,
    JSON_MEDIA_TYPE,
    SECRET_MIN_LENGTH,
    SECRET_PATTERN,
    Signer,
    generate_secret,
    sign_headers,
    validate_secret,
)

from app.stats.shapes import (
    Breach,
    KeyedSamples,
    ListSamples,
    OutputShape,
    ShapeBreach,
    to_canonical,
)

__all__ = [
    "ACCEPT_BINARY",
    "ACCEPT_JSON",
    "BINARY_MEDIA_TYPE",
    "DIM_HEADER",
    "JSON_MEDIA_TYPE",
    "OUTPUT_KINDS",
    "RETRYABLE_REASONS",
    "SAMPLING_REASONS",
    "SECRET_MIN_LENGTH",
    "SECRET_PATTERN",
    "OutputKind",
    "OutputShape",
    "SamplingError",
    "SamplingReason",
    "Signer",
    "coerce_samples",
    "encode_database",
    "encode_request",
    "generate_secret",
    "media_type",
    "parse_dim_header",
    "parse_samples",
    "shape_of",
    "sign_headers",
    "validate_secret",
]

OutputKind = typing.Literal["real", "discrete", "vector", "keyed"]
#: The output kinds whose canonical form is one numpy array (keyed outputs are KeyedSamples).
ArrayKind = typing.Literal["real", "discrete", "vector"]
OUTPUT_KINDS: tuple[str, ...] = typing.get_args(OutputKind)

#: Accept header of a client that asks for JSON only (the SDK's ACCEPT_BINARY prefers the binary format).
ACCEPT_JSON = JSON_MEDIA_TYPE

SamplingReason = typing.Literal[
    "timeout",
    "connection_error",
    "http_status",
    "invalid_json",
    "wrong_count",
    "non_finite",
    "wrong_type",
    "oversized",
    "invalid_binary",
    "refused_address",
    "redirect",
    "invalid_url",
    "content_encoding_refused",
]
SAMPLING_REASONS: tuple[str, ...] = typing.get_args(SamplingReason)
#: Reasons that may succeed when retried (``http_status`` only for 5xx and 429).
RETRYABLE_REASONS = frozenset({"timeout", "connection_error"})

_MAX_DETAIL = 300


class SamplingError(Exception):
    """A sampling call failed.

    ``reason`` is one of :data:`SAMPLING_REASONS` (machine readable, stable:
    store it, count it); ``detail`` explains it for humans and never contains
    a secret.  ``status_code`` is set for ``http_status``; ``retry_after`` is
    the server's ``Retry-After`` in seconds when it sent one.
    """

    def __init__(
        self,
        reason: SamplingReason,
        detail: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        breach: Breach | None = None,
    ) -> None:
        if reason not in SAMPLING_REASONS:
            raise ValueError(f"unknown sampling error reason {reason!r}")
        super().__init__(f"{reason}: {detail}")
        self.reason: SamplingReason = reason
        self.detail = detail
        self.status_code = status_code
        self.retry_after = retry_after
        #: For answers that break the declared output shape (reason ``wrong_type``): what broke
        #: (type, length, support) and an offending sample (app.stats.shapes.Breach).
        self.breach = breach

    @property
    def retryable(self) -> bool:
        if self.reason in RETRYABLE_REASONS:
            return True
        if self.reason == "http_status" and self.status_code is not None:
            return self.status_code == 429 or self.status_code >= 500
        return False

    def __reduce__(self) -> tuple[Callable[..., SamplingError], tuple[typing.Any, ...]]:  # picklable across processes
        return (
            _rebuild_error,
            (self.reason, self.detail, self.status_code, self.retry_after,
             None if self.breach is None else self.breach.model_dump()),
        )


def _rebuild_error(
    reason: SamplingReason, detail: str, status_code: int | None, retry_after: float | None,
    breach: dict | None = None,
) -> SamplingError:
    return SamplingError(reason, detail, status_code=status_code, retry_after=retry_after,
                         breach=None if breach is None else Breach.model_validate(breach))


# --------------------------------------------------------------------------- wire models


def database_key(database: typing.Any) -> str:
    """The canonical JSON of a database (sorted keys, no spaces): equal databases have one key, so
    that the checks of a monitor and the pairs of a search that share a database share its samples
    (and its stored outputs, app/monitors/outputs.py)."""
    return json.dumps(database, sort_keys=True, separators=(",", ":"))


def encode_database(database: typing.Any) -> str:
    """The database as compact strict JSON.  Raises ValueError if it is not
    strict JSON (NaN/inf, non-string keys, non-JSON types)."""
    try:
        return json.dumps(database, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the database is not valid JSON data: {exc}") from None


def encode_request(
    database: typing.Any,
    n: int,
    request_id: str,
    monitor_id: str,
    period: int,
    *,
    database_json: str | None = None,
) -> bytes:
    """Canonical request body (compact JSON, UTF-8), exactly the bytes that are
    signed and sent.  Pass ``database_json`` (from :func:`encode_database`) to
    avoid re-encoding a large database for every batch."""
    db = encode_database(database) if database_json is None else database_json
    dumps = json.dumps
    text = (
        f'{{"database":{db},"n":{int(n)},"request_id":{dumps(request_id)},'
        f'"monitor_id":{dumps(monitor_id)},"period":{int(period)}}}'
    )
    return text.encode("utf-8")


# --------------------------------------------------------------------------- secrets & signing
# The secret's form, its generation and the Standard Webhooks signature are the SDK's
# (dpwatch_sdk.protocol: generate_secret, validate_secret, SECRET_PATTERN, SECRET_MIN_LENGTH,
# Signer, sign_headers), imported above: they exist once, on the endpoint's side of the protocol.


def media_type(content_type: str | None) -> str:
    """``"Application/JSON; charset=utf-8"`` -> ``"application/json"``."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def _excerpt(data: bytes | str, limit: int = 120) -> str:
    text = data if isinstance(data, str) else data[: limit * 4].decode("utf-8", "replace")
    text = text.replace("\n", "\\n")
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _type_name(value: object) -> str:
    """JSON type of a decoded value, with an article ("a string", "an array")."""
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a non-integer number",
        str: "a string",
        list: "an array",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _show(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def _first_bad(values: typing.Sequence[object], ok: tuple[type, ...]) -> tuple[int, object]:
    for i, v in enumerate(values):
        if type(v) not in ok:
            return i, v
    raise AssertionError("no offending value")  # pragma: no cover - callers checked


def _fail_non_finite(arr: np.ndarray) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = np.argwhere(bad)[0]
        where = int(idx[0]) if arr.ndim == 1 else (int(idx[0]), int(idx[1]))
        raise SamplingError(
            "non_finite",
            f"{int(bad.sum())} non-finite value(s) (NaN or infinity); first at {where}: {arr[tuple(idx)]}",
        )


def _coerce_real(samples: list) -> np.ndarray:
    kinds = set(map(type, samples))
    if not kinds <= {int, float}:
        i, v = _first_bad(samples, (int, float))
        raise SamplingError(
            "wrong_type", f"real outputs must be numbers; sample {i} is {_type_name(v)}: {_show(v)}"
        )
    try:
        arr = np.array(samples, dtype=np.float64)
    except OverflowError:
        raise SamplingError("non_finite", "an integer sample is too large for float64") from None
    _fail_non_finite(arr)
    return arr


def _coerce_discrete(samples: list) -> np.ndarray:
    kinds = set(map(type, samples))
    if kinds == {float} or kinds == {int, float}:
        # float-valued integers such as 16.0 are integers (a JSON encoder may write them so)
        arr = np.array(samples, dtype=np.float64)
        bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) > 2.0**53)
        if not bad.any():
            return arr.astype(np.int64)
        i = int(np.flatnonzero(bad)[0])
        raise SamplingError(
            "wrong_type",
            f"discrete outputs must be integers (16.0 counts as 16) or strings; sample {i} is "
            f"{_type_name(samples[i])}: {_show(samples[i])}",
        )
    if kinds == {int}:
        try:
            return np.array(samples, dtype=np.int64)
        except OverflowError:
            raise SamplingError(
                "wrong_type", "discrete integer outputs must fit in a signed 64-bit integer"
            ) from None
    if kinds == {str}:
        arr = np.empty(len(samples), dtype=object)
        arr[:] = samples
        return arr
    if kinds == {int, str}:
        raise SamplingError(
            "wrong_type",
            "discrete outputs must be all integers or all strings, not a mix of both",
        )
    i, v = _first_bad(samples, (int, str))
    hint = " (booleans are not accepted: encode them as 0/1 or strings)" if type(v) is bool else ""
    raise SamplingError(
        "wrong_type",
        f"discrete outputs must be integers or strings; sample {i} is {_type_name(v)}: "
        f"{_show(v)}{hint}",
    )


def _coerce_vector(samples: list, dim: int | None) -> np.ndarray:
    for i, row in enumerate(samples):
        if type(row) is not list:
            raise SamplingError(
                "wrong_type", f"vector outputs must be arrays of numbers; sample {i} is {_type_name(row)}"
            )
    lengths = set(map(len, samples))
    if len(lengths) != 1:
        raise SamplingError(
            "wrong_type",
            f"all vector outputs must have the same length; got lengths {sorted(lengths)[:5]}",
        )
    d = lengths.pop()
    if d == 0:
        raise SamplingError("wrong_type", "vector outputs must not be empty arrays")
    if dim is not None and d != dim:
        raise SamplingError("wrong_type", f"vector outputs have length {d}, expected {dim}")
    kinds: set[type] = set()
    for row in samples:
        kinds.update(map(type, row))
    if not kinds <= {int, float}:
        for i, row in enumerate(samples):
            for j, v in enumerate(row):
                if type(v) not in (int, float):
                    raise SamplingError(
                        "wrong_type",
                        f"vector outputs must contain numbers; sample {i}[{j}] is {_type_name(v)}: {_show(v)}",
                    )
    try:
        arr = np.array(samples, dtype=np.float64)
    except OverflowError:
        raise SamplingError("non_finite", "an integer component is too large for float64") from None
    _fail_non_finite(arr)
    return arr


def shape_of(output_kind: OutputKind | None, dim: int | None = None,
             shape: OutputShape | None = None) -> OutputShape:
    """The shape to validate against: ``shape`` when given, else the legacy kind's."""
    if shape is not None:
        return shape
    if output_kind is None:
        raise ValueError("give an output_kind or a shape")
    if output_kind == "vector" and dim is None:
        raise ValueError("a vector output kind needs its dim to make a shape")
    return OutputShape.from_output_kind(output_kind, dim)


def _coerce_shaped(samples: list, shape: OutputShape) -> np.ndarray | ListSamples | KeyedSamples:
    try:
        return to_canonical(shape, samples)
    except ShapeBreach as exc:
        raise SamplingError("wrong_type", exc.breach.detail, breach=exc.breach) from None


@typing.overload
def coerce_samples(
    samples: typing.Any, n: int, output_kind: ArrayKind, dim: int | None = None, *, shape: None = None,
) -> np.ndarray: ...


@typing.overload
def coerce_samples(
    samples: typing.Any, n: int, output_kind: OutputKind | None, dim: int | None = None,
    *, shape: OutputShape | None = None,
) -> np.ndarray | ListSamples | KeyedSamples: ...


def coerce_samples(
    samples: typing.Any, n: int, output_kind: OutputKind | None, dim: int | None = None,
    *, shape: OutputShape | None = None,
) -> np.ndarray | ListSamples | KeyedSamples:
    """Validate decoded JSON samples (a list) and convert them to the canonical
    array: real -> float64 (n,), discrete -> int64 (n,) or object array of str
    (n,), vector -> float64 (n, d); with a ``shape``, its canonical form
    (app/stats/shapes.py; lists are :class:`ListSamples`).  Raises
    :class:`SamplingError`; a shape breach carries ``.breach``."""
    if shape is None and output_kind not in OUTPUT_KINDS:
        raise ValueError(f"unknown output kind {output_kind!r}")
    if shape is None and output_kind == "keyed":
        shape = OutputShape.from_output_kind("keyed")
    if not isinstance(samples, list):
        raise SamplingError("invalid_json", f"'samples' must be an array, got {_type_name(samples)}")
    if len(samples) != n:
        raise SamplingError("wrong_count", f"expected {n} samples, got {len(samples)}")
    if shape is not None:
        return _coerce_shaped(samples, shape)
    if output_kind == "real":
        return _coerce_real(samples)
    if output_kind == "discrete":
        return _coerce_discrete(samples)
    return _coerce_vector(samples, dim)


def _reject_constant(name: str) -> float:
    # Python's json accepts NaN/Infinity; the protocol is strict JSON.
    raise SamplingError(
        "non_finite", f"the JSON contains {name}, which is not valid JSON (non-finite values are refused)"
    )


def _binary_rows(body: bytes, n: int, d: int) -> np.ndarray:
    """The n rows of d little-endian float64 in a binary answer, flat (a copy, so writable);
    ``invalid_binary`` unless the body holds whole rows, ``wrong_count`` unless it holds n."""
    row_bytes = 8 * d
    if len(body) % row_bytes:
        raise SamplingError(
            "invalid_binary",
            f"binary body of {len(body)} bytes is not a whole number of {row_bytes}-byte rows "
            f"(little-endian float64 x {d})",
        )
    rows = len(body) // row_bytes
    if rows != n:
        raise SamplingError("wrong_count", f"expected {n} samples, got {rows} (binary body of {len(body)} bytes)")
    return np.frombuffer(body, dtype="<f8").astype(np.float64, copy=True)


def _parse_binary(body: bytes, n: int, output_kind: OutputKind, dim: int | None) -> np.ndarray:
    if output_kind in ("discrete", "keyed"):
        raise SamplingError(
            "invalid_binary", f"{BINARY_MEDIA_TYPE} answers are only allowed for real and vector outputs"
        )
    if output_kind == "vector":
        if dim is None:
            raise SamplingError(
                "invalid_binary", f"a binary vector answer needs an {DIM_HEADER} header"
            )
        d = dim
    else:
        if dim not in (None, 1):
            raise SamplingError(
                "invalid_binary", f"a binary answer for real outputs must not declare {DIM_HEADER}={dim}"
            )
        d = 1
    if d < 1:
        raise SamplingError("invalid_binary", f"{DIM_HEADER} must be a positive integer, got {d}")
    arr = _binary_rows(body, n, d)
    if output_kind == "vector":
        arr = arr.reshape(n, d)
    _fail_non_finite(arr)
    return arr


def _explain_bad_json(text: str, shown_type: str, fast_error: str) -> typing.NoReturn:
    """Slow path once the fast parser refused the answer: name the problem."""
    try:
        json.loads(text, parse_constant=_reject_constant)  # raises non_finite for NaN/Infinity
    except json.JSONDecodeError as exc:
        raise SamplingError(
            "invalid_json",
            f"the answer ({shown_type}) is not valid JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno}): {_excerpt(text)}",
        ) from None
    except RecursionError:
        raise SamplingError("invalid_json", "the answer is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal with more than 4300 digits
        raise SamplingError("invalid_json", f"the answer ({shown_type}) cannot be decoded: {exc}") from None
    # Python's parser is laxer (e.g. lone surrogates); the protocol is strict JSON.
    raise SamplingError("invalid_json", f"the answer ({shown_type}) is not valid JSON ({fast_error})")


def parse_dim_header(value: str | None) -> int | None:
    """Parse ``x-dpwatch-dim``; raises ``SamplingError("invalid_binary")``."""
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or int(text) < 1:
        raise SamplingError("invalid_binary", f"{DIM_HEADER} must be a positive integer, got {_excerpt(text)}")
    return int(text)


def _shape_error(detail: str, kind: str = "type", index: int | None = None, sample: typing.Any = None) -> SamplingError:
    breach = Breach(kind=kind, detail=detail, index=index, sample=sample)  # type: ignore[arg-type]
    return SamplingError("wrong_type", detail, breach=breach)


def _parse_binary_shaped(body: bytes, n: int, shape: OutputShape, dim: int | None) -> np.ndarray | ListSamples:
    """The binary format for a shape (docs/protocol.md §4): NaN is null (nullable shapes only);
    a list row is ``[length, v_1, …, v_L]`` padded with NaN, ``x-dpwatch-dim = 1 + L``."""
    if not shape.binary_capable:
        raise SamplingError("invalid_binary", f"{BINARY_MEDIA_TYPE} answers cannot carry {shape.describe()} outputs")
    if shape.container == "scalar":
        if dim not in (None, 1):
            raise SamplingError("invalid_binary", f"a binary answer for scalar outputs must not declare {DIM_HEADER}={dim}")
        d = 1
    else:
        if dim is None:
            raise SamplingError("invalid_binary", f"a binary vector or list answer needs an {DIM_HEADER} header")
        d = dim
        if shape.container == "vector" and d != shape.length:
            raise _shape_error(f"vector outputs have length {d}, expected {shape.length}", "length")
    arr = _binary_rows(body, n, d).reshape(n, d)
    if np.isinf(arr).any():
        raise SamplingError("non_finite", "the binary answer holds an infinity")
    if shape.container == "list":
        lengths_f = arr[:, 0]
        if not (np.isfinite(lengths_f).all() and (lengths_f == np.round(lengths_f)).all()
                and (lengths_f >= 0).all() and (lengths_f <= d - 1).all()):
            raise SamplingError("invalid_binary", f"each binary list row must start with its length, an integer in [0, {d - 1}]")
        lengths = lengths_f.astype(np.int64)
        values = arr[:, 1:] if d > 1 else np.full((n, 1), np.nan)
        padding = np.arange(values.shape[1])[None, :] >= lengths[:, None]
        if not np.isnan(values[padding]).all():
            raise SamplingError("invalid_binary", "binary list rows must be padded with NaN after their length")
        out: np.ndarray | ListSamples = ListSamples(values, lengths)
        if shape.max_length is not None and n and lengths.max() > shape.max_length:
            i = int(np.argmax(lengths > shape.max_length))
            raise _shape_error(f"list outputs may hold at most {shape.max_length} entries; output {i} has {lengths[i]}",
                               "length", i)
        present = values[~padding]
    else:
        out = arr[:, 0] if shape.container == "scalar" else arr
        present = arr.reshape(-1)
    nulls = np.isnan(present)
    if nulls.any() and not shape.nullable:
        raise SamplingError("non_finite", f"{int(nulls.sum())} NaN value(s), and the shape allows no null")
    if shape.values == "integer":
        vals = present[~nulls]
        bad = (vals != np.round(vals)) | (np.abs(vals) > 2.0**53)
        if bad.any():
            raise _shape_error(f"integer outputs must be integers; got {float(vals[bad][0])!r}", "type",
                               None, float(vals[bad][0]))
        if shape.container == "scalar" and not shape.nullable:
            out = np.asarray(out).astype(np.int64)
    return out


def _no_duplicate_keys(pairs: list[tuple[str, typing.Any]]) -> dict[str, typing.Any]:
    """``object_pairs_hook`` of keyed answers: JSON lets an object repeat a key (RFC 8259 §4 leaves
    its meaning open, and most parsers keep the last); a keyed output releases each key once, so
    a repeated key is refused rather than one of its values silently dropped."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        repeated = ""
        for k, _ in pairs:  # the first key met a second time
            if k in seen:
                repeated = k
                break
            seen.add(k)
        raise SamplingError("invalid_json", f"an object of the answer holds the key {repeated!r} twice; a keyed "
                            "output releases each key once")
    return out


def _parse_keyed_json(text: str, shown_type: str) -> typing.Any:
    """A keyed answer, parsed with duplicate keys refused (pydantic-core's parser keeps the last)."""
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise SamplingError(
            "invalid_json",
            f"the answer ({shown_type}) is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
            f"{_excerpt(text)}",
        ) from None
    except RecursionError:
        raise SamplingError("invalid_json", "the answer is nested too deeply") from None
    except SamplingError:
        raise
    except ValueError as exc:
        raise SamplingError("invalid_json", f"the answer ({shown_type}) cannot be decoded: {exc}") from None


def parse_samples(
    body_bytes: bytes,
    content_type: str | None,
    n: int,
    output_kind: OutputKind | None,
    dim: int | None = None,
    *,
    shape: OutputShape | None = None,
) -> np.ndarray | ListSamples | KeyedSamples:
    """Strictly validate a ``200`` answer body and return the samples.

    ``content_type``: the answer's Content-Type; ``application/x-dpwatch-float64``
    selects the binary format, anything else is parsed as JSON.
    ``dim``: for binary vector answers, the value of the ``x-dpwatch-dim``
    header (required); for JSON vector answers, the expected length of each
    output if known (else any common length is accepted).

    Returns real -> float64 (n,); discrete -> int64 (n,) if all outputs are
    integers, else an object array of str (n,); vector -> float64 (n, d).
    With ``shape`` (app.stats.shapes.OutputShape), ``output_kind`` is ignored
    and the answer is validated against the shape and returned in its
    canonical form (lists as :class:`ListSamples`); a breach of the shape is a
    ``wrong_type`` error whose ``.breach`` says what broke.
    Raises :class:`SamplingError` with reason ``invalid_json``,
    ``invalid_binary``, ``wrong_count``, ``wrong_type`` or ``non_finite``.
    """
    if shape is None and output_kind not in OUTPUT_KINDS:
        raise ValueError(f"unknown output kind {output_kind!r}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError("n must be a positive integer")
    if media_type(content_type) == BINARY_MEDIA_TYPE:
        if shape is not None:
            return _parse_binary_shaped(body_bytes, n, shape, dim)
        return _parse_binary(body_bytes, n, output_kind, dim)  # type: ignore[arg-type]
    shown_type = media_type(content_type) or "no content type"
    try:
        text = body_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise SamplingError(
            "invalid_json", f"the answer ({shown_type}) is not UTF-8 text: {_excerpt(body_bytes)}"
        ) from None
    keyed = (shape.container == "keyed") if shape is not None else output_kind == "keyed"
    if keyed:
        doc = _parse_keyed_json(text, shown_type)
    else:
        try:
            # jiter (pydantic-core) is ~5x faster than json.loads on large answers.
            doc = pydantic_core.from_json(body_bytes, allow_inf_nan=False)
        except ValueError as fast_error:
            doc = _explain_bad_json(text, shown_type, str(fast_error))
    if not isinstance(doc, dict) or "samples" not in doc:
        raise SamplingError(
            "invalid_json",
            f"the answer must be a JSON object with a 'samples' array; got {_excerpt(text)}",
        )
    return coerce_samples(doc["samples"], n, output_kind, dim, shape=shape)
