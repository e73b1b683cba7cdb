"""Serve Python functions ``f(database, n, rng) -> array-like`` as compliant
sampling endpoints (see docs/protocol.md).

    app = make_endpoint_app(laplace, secret="whsec_...", output_kind="real")
    router = make_endpoint_router({"/reference/laplace": (laplace, "real")}, secret=...)

Each request: the body is read (at most ``max_body_bytes``, else 413), the
Standard Webhooks signature is verified when a secret is configured (401),
the body is validated (422), ``f`` runs in a worker thread with a fresh
``numpy.random.Generator``, its output is checked (500 if it is not ``n``
valid outputs) and returned as JSON, or as little-endian float64 when the
client prefers ``application/x-dpwatch-float64`` and the output is real or
vector.
"""

from __future__ import annotations

import inspect
import threading
import typing
from collections.abc import Callable, Mapping

import numpy as np
import structlog
from dpwatch_sdk.protocol import Verifier, negotiate_binary
from fastapi import APIRouter, FastAPI
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from app.stats.shapes import KeyedSamples, ListSamples, OutputShape, ShapeBreach, conformance, n_outputs, to_canonical

from .protocol import (
    BINARY_MEDIA_TYPE,
    DIM_HEADER,
    JSON_MEDIA_TYPE,
    OUTPUT_KINDS,
    ArrayKind,
    OutputKind,
    SampleRequest,
    SamplingError,
    coerce_samples,
    encode_binary,
    encode_json,
    encode_shaped_binary,
    encode_shaped_json,
    validate_secret,
)

__all__ = [
    "MechanismFunction",
    "make_endpoint_app",
    "make_endpoint_router",
    "make_multi_endpoint_app",
    "negotiate_binary",
    "to_samples",
    "to_shaped_samples",
]

log = structlog.get_logger("dpwatch.endpoint")

MechanismFunction = Callable[[typing.Any, int, np.random.Generator], typing.Any]

DEFAULT_MAX_N = 1_000_000
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


# --------------------------------------------------------------------------- helpers


def to_samples(output: typing.Any, n: int, output_kind: ArrayKind) -> np.ndarray:
    """Check and convert a mechanism function's output to the canonical array
    (as :func:`~app.sampling.protocol.parse_samples` would return it).

    Accepted: real -> any numeric (non-bool) sequence/array of length n;
    discrete -> integers, integral floats (converted to int64) or strings;
    vector -> a numeric (n, d) array-like.  Raises :class:`SamplingError`.
    """
    try:
        arr = np.asarray(output)
    except (ValueError, TypeError) as exc:  # e.g. ragged nested lists
        if isinstance(output, (list, tuple)):
            return coerce_samples(list(output), n, output_kind)
        raise SamplingError("wrong_type", f"the output is not array-like: {exc}") from None
    kind = arr.dtype.kind
    if output_kind == "vector":
        if arr.ndim != 2:
            if arr.ndim == 1 and len(arr) == n and kind == "O":
                return coerce_samples(arr.tolist(), n, "vector")
            raise SamplingError("wrong_type", f"vector outputs must form an (n, d) array, got shape {arr.shape}")
        if arr.shape[0] != n:
            raise SamplingError("wrong_count", f"expected {n} samples, got {arr.shape[0]}")
        if kind not in "iuf" or arr.shape[1] < 1:
            raise SamplingError("wrong_type", f"vector outputs must be numeric, got dtype {arr.dtype}")
        out = arr.astype(np.float64)
        if not np.isfinite(out).all():
            raise SamplingError("non_finite", "the outputs contain NaN or infinity")
        return out
    if arr.ndim != 1:
        raise SamplingError("wrong_type", f"{output_kind} outputs must form a 1-d array, got shape {arr.shape}")
    if len(arr) != n:
        raise SamplingError("wrong_count", f"expected {n} samples, got {len(arr)}")
    if kind == "O":
        return coerce_samples(arr.tolist(), n, output_kind)
    if output_kind == "real":
        if kind not in "iuf":
            raise SamplingError("wrong_type", f"real outputs must be numeric, got dtype {arr.dtype}")
        out = arr.astype(np.float64)
        if not np.isfinite(out).all():
            raise SamplingError("non_finite", "the outputs contain NaN or infinity")
        return out
    # discrete
    if kind == "U":
        return arr.astype(object)
    if kind in "iu":
        if kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise SamplingError("wrong_type", "discrete integer outputs must fit in int64")
        return arr.astype(np.int64)
    if kind == "f":
        if not np.isfinite(arr).all():
            raise SamplingError("non_finite", "the outputs contain NaN or infinity")
        if not (np.abs(arr) < 2.0**63).all() or not (arr == np.round(arr)).all():
            raise SamplingError("wrong_type", "discrete outputs must be integers or strings, got non-integral numbers")
        return arr.astype(np.int64)
    raise SamplingError("wrong_type", f"discrete outputs must be integers or strings, got dtype {arr.dtype}")


def to_shaped_samples(output: typing.Any, n: int, shape: OutputShape) -> np.ndarray | ListSamples | KeyedSamples:
    """A mechanism function's output as the canonical outputs of ``shape``: a
    :class:`ListSamples` or :class:`KeyedSamples`, a numeric array (NaN for null)
    or a list of JSON-like outputs (``None`` for null; dicts with string keys for
    keyed outputs).  Raises :class:`SamplingError` (with ``.breach``)."""
    if isinstance(output, (ListSamples, KeyedSamples)):
        out: typing.Any = output
    elif isinstance(output, np.ndarray) and output.dtype.kind in "iuf":
        out = output.astype(np.float64) if output.dtype.kind != "f" else output
        if shape.values == "integer" and not shape.nullable and out.ndim == 1:
            if np.isfinite(out).all() and (out == np.round(out)).all():
                out = out.astype(np.int64)
    else:
        items = output.tolist() if isinstance(output, np.ndarray) else list(output)
        try:
            out = to_canonical(shape, items)
        except ShapeBreach as exc:
            raise SamplingError("wrong_type", exc.breach.detail, breach=exc.breach) from None
    count = n_outputs(out) if isinstance(out, (ListSamples, KeyedSamples)) or np.ndim(out) else 0
    if count != n:
        raise SamplingError("wrong_count", f"expected {n} samples, got {count}")
    breach = conformance(shape, out)
    if breach is not None:
        raise SamplingError("wrong_type", breach.detail, breach=breach)
    return out


class _RngFactory:
    """Fresh Generator per request: OS entropy, or children of SeedSequence(seed)."""

    def __init__(self, seed: int | None) -> None:
        self._seq = None if seed is None else np.random.SeedSequence(seed)
        self._lock = threading.Lock()

    def __call__(self) -> np.random.Generator:
        if self._seq is None:
            return np.random.default_rng()
        with self._lock:
            (child,) = self._seq.spawn(1)
        return np.random.default_rng(child)


def _error(status: int, detail: typing.Any) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers={"cache-control": "no-store"})


class _BodyTooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    announced = request.headers.get("content-length")
    if announced is not None and announced.isdigit() and int(announced) > limit:
        raise _BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _is_array_kind(kind: object) -> typing.TypeGuard[ArrayKind]:
    return kind in typing.get_args(ArrayKind)


def _make_handler(
    f: MechanismFunction,
    output_kind: OutputKind | OutputShape,
    webhook: Verifier | None,
    max_n: int,
    max_body_bytes: int,
    rng_factory: _RngFactory,
    name: str,
) -> Callable[[Request], typing.Awaitable[Response]]:
    shape = output_kind if isinstance(output_kind, OutputShape) else (
        OutputShape.from_output_kind("keyed") if output_kind == "keyed" else None)
    if shape is None and output_kind not in OUTPUT_KINDS:
        raise ValueError(f"output_kind must be one of {OUTPUT_KINDS} or an OutputShape, got {output_kind!r}")
    if not callable(f):
        raise TypeError(f"mechanism {name!r} is not callable")
    array_kind = output_kind if shape is None and _is_array_kind(output_kind) else None
    binary_capable = shape.binary_capable if shape is not None else output_kind in ("real", "vector")
    # A function that takes ``period`` is told which period of the monitor asks, e.g. to model
    # a deployment change at a given period (the reference scenarios do).
    try:
        takes_period = "period" in inspect.signature(f).parameters
    except (TypeError, ValueError):
        takes_period = False

    async def sample_endpoint(request: Request) -> Response:
        try:
            body = await _read_body(request, max_body_bytes)
        except _BodyTooLarge:
            return _error(413, f"the request body exceeds {max_body_bytes} bytes")
        except ClientDisconnect:
            return Response(status_code=400)
        if webhook is not None:
            error = webhook.problem(body, request.headers)
            if error is not None:
                log.info("endpoint.bad_signature", mechanism=name, error=error)
                return _error(401, f"invalid or missing webhook signature: {error}")
        try:
            req = SampleRequest.model_validate_json(body)
        except ValidationError as exc:
            return _error(422, exc.errors(include_url=False, include_input=False, include_context=False))
        if req.n > max_n:
            return _error(
                422,
                [{"loc": ["n"], "msg": f"n={req.n} exceeds this endpoint's max_n={max_n}", "type": "too_large"}],
            )
        rng = rng_factory()
        try:
            if takes_period:
                # f's signature was inspected above: it takes ``period``
                with_period = typing.cast(Callable[..., typing.Any], f)
                output = await run_in_threadpool(with_period, req.database, req.n, rng, period=req.period)
            else:
                output = await run_in_threadpool(f, req.database, req.n, rng)
        except Exception as exc:  # noqa: BLE001 - report the mechanism's failure as a 500
            log.exception("endpoint.mechanism_failed", mechanism=name, request_id=req.request_id)
            return _error(500, f"the mechanism function raised {type(exc).__name__}: {str(exc)[:200]}")
        shaped: np.ndarray | ListSamples | KeyedSamples | None = None
        samples: np.ndarray | None = None
        try:
            if shape is not None:
                shaped = to_shaped_samples(output, req.n, shape)
            else:
                assert array_kind is not None  # shape is None only for the array kinds (checked above)
                samples = to_samples(output, req.n, array_kind)
        except SamplingError as exc:
            log.error(
                "endpoint.invalid_output", mechanism=name, reason=exc.reason, detail=exc.detail
            )
            return _error(500, f"the mechanism function returned invalid output ({exc.reason}): {exc.detail}")
        headers = {"cache-control": "no-store", "vary": "accept"}
        if shaped is not None:
            assert shape is not None
            # binary_capable is False for keyed shapes: the binary format never carries KeyedSamples
            if binary_capable and not isinstance(shaped, KeyedSamples) and negotiate_binary(request.headers.get("accept")):
                body_bytes, dim = encode_shaped_binary(shaped)
                if shape.container != "scalar":
                    headers[DIM_HEADER] = str(dim)
                return Response(body_bytes, media_type=BINARY_MEDIA_TYPE, headers=headers)
            return Response(encode_shaped_json(shaped, shape), media_type=JSON_MEDIA_TYPE, headers=headers)
        assert samples is not None
        if binary_capable and negotiate_binary(request.headers.get("accept")):
            if output_kind == "vector":
                headers[DIM_HEADER] = str(samples.shape[1])
            return Response(encode_binary(samples), media_type=BINARY_MEDIA_TYPE, headers=headers)
        return Response(encode_json(samples), media_type=JSON_MEDIA_TYPE, headers=headers)

    sample_endpoint.__name__ = f"sample_{name}"
    return sample_endpoint


def _webhook(secret: str | typing.Sequence[str] | None) -> Verifier | None:
    """The signature check (the SDK's, docs/protocol.md §2): one accepted secret, or several while
    the endpoint's secret is rotated; None switches it off."""
    if secret is None:
        return None
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise ValueError("give at least one secret, or None to disable verification")
    for one in secrets:
        validate_secret(one)
    return Verifier(secrets)


def _route_name(path: str) -> str:
    name = "".join(c if c.isalnum() else "_" for c in path.strip("/"))
    return name or "root"


# --------------------------------------------------------------------------- public API


def make_endpoint_router(
    routes: Mapping[str, tuple[MechanismFunction, OutputKind | OutputShape]],
    *,
    secret: str | typing.Sequence[str] | None,
    max_n: int = DEFAULT_MAX_N,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    seed: int | None = None,
) -> APIRouter:
    """An APIRouter with one ``POST`` route per ``path -> (f, output_kind)``.

    ``secret=None`` disables signature verification (local demos only). A list of secrets
    accepts a request signed with any of them (an endpoint whose secret is being rotated).
    ``seed`` makes the per-request generators reproducible (tests); by default
    each request gets a Generator seeded from OS entropy.
    """
    if max_n < 1 or max_body_bytes < 1:
        raise ValueError("max_n and max_body_bytes must be >= 1")
    webhook = _webhook(secret)
    rng_factory = _RngFactory(seed)
    router = APIRouter()
    for path, (f, output_kind) in routes.items():
        if not path.startswith("/"):
            raise ValueError(f"route paths must start with '/', got {path!r}")
        name = _route_name(path)
        router.add_api_route(
            path,
            _make_handler(f, output_kind, webhook, max_n, max_body_bytes, rng_factory, name),
            methods=["POST"],
            name=f"sample_{name}",
            summary=f"Sampling endpoint ({output_kind.describe() if isinstance(output_kind, OutputShape) else output_kind} outputs)",
            response_class=Response,
        )
    return router


def make_multi_endpoint_app(
    routes: Mapping[str, tuple[MechanismFunction, OutputKind | OutputShape]],
    secret: str | typing.Sequence[str] | None,
    *,
    max_n: int = DEFAULT_MAX_N,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    seed: int | None = None,
) -> FastAPI:
    """A FastAPI app serving several mechanism functions, one per path."""
    app = FastAPI(title="dpwatch sampling endpoints", openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(
        make_endpoint_router(routes, secret=secret, max_n=max_n, max_body_bytes=max_body_bytes, seed=seed)
    )
    return app


def make_endpoint_app(
    f: MechanismFunction,
    *,
    secret: str | typing.Sequence[str] | None,
    output_kind: OutputKind,
    path: str = "/",
    max_n: int = DEFAULT_MAX_N,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    seed: int | None = None,
) -> FastAPI:
    """A FastAPI app serving ``f`` at ``POST path``."""
    return make_multi_endpoint_app(
        {path: (f, output_kind)}, secret, max_n=max_n, max_body_bytes=max_body_bytes, seed=seed
    )
