"""Async client that draws samples from a mechanism's sampling endpoint.

    async with SamplingClient(http_config=SafeHttpConfig(allow_networks=[...])) as client:
        samples = await client.sample(endpoint, database, 100_000, monitor_id="m1", period=7)

``n`` is split into batches of at most ``endpoint.max_batch`` outputs, sent
concurrently (at most ``config.max_concurrency`` in flight per call), each
signed with the endpoint's secret, validated strictly and concatenated in
order.  Transient failures (timeout, connection error, HTTP 5xx and 429) are
retried with exponential backoff and jitter until ``config.max_attempts`` or
the call's deadline; anything else fails fast with a :class:`SamplingError`.
"""

from __future__ import annotations

import email.utils
import functools
import hashlib
import random
import re
import time
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import numpy as np
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from app.stats.shapes import KeyedSamples, ListSamples, OutputShape, concat_outputs

from .answers import MAX_KEY_LENGTH, MAX_KEYS, answer_reader, too_many_keys
from .logs import get_logger
from .protocol import (
    ACCEPT_BINARY,
    ACCEPT_JSON,
    JSON_MEDIA_TYPE,
    OUTPUT_KINDS,
    OutputKind,
    SamplingError,
    Signer,
    encode_database,
    encode_request,
    sign_headers,
    validate_secret,
)
from .safe_http import ByteBudget, SafeAsyncClient, SafeHttpConfig, SafeHttpError, redact_url

__all__ = ["ByteBudget", "MechanismEndpoint", "OnRequest", "SamplingClient", "SamplingClientConfig"]

log = get_logger("dpwatch.sampling")

#: ``on_request(duration_seconds, outcome)``; outcome is ``"ok"``, a
#: :data:`~app.sampling.protocol.SAMPLING_REASONS` value, or
#: ``"internal_error"`` (a bug on our side).  Called once per HTTP attempt
#: (retries included); exceptions it raises are logged and ignored.
OnRequest = Callable[[float, str], None]

_REQUEST_ID_PREFIX = re.compile(r"^[A-Za-z0-9._:-]{1,120}$")
# No retry is started with less than this left before the deadline, and an
# attempt that finds less than _MIN_START_SECONDS left does not start.
_MIN_ATTEMPT_SECONDS = 0.05
_MIN_START_SECONDS = 0.01


class _DeadlineReached(SamplingError):
    """The call's deadline passed before an attempt could start."""


@dataclass(frozen=True)
class MechanismEndpoint:
    """Where and how to call one mechanism.

    ``secret`` (``whsec_<base64>``) signs every request; it is excluded from
    ``repr`` so it never reaches logs.  ``previous_secrets`` (a secret being
    rotated out, during its overlap) sign every request too: the
    ``webhook-signature`` header then carries one signature per secret, and an
    endpoint holding either one accepts.  ``timeout_seconds`` bounds one HTTP
    attempt (connect + answer).  ``prefer_binary`` asks for the float64 binary
    format (only used for real and vector outputs).  ``vector_dim``, if set,
    is the required length of each vector output.  ``shape``, if set, is the
    output contract (app.stats.shapes.OutputShape): answers are validated
    against it and returned in its canonical form, and ``output_kind`` and
    ``vector_dim`` are then ignored.

    ``isolation_key`` names whose connections these are (the service passes
    the mechanism's id): keep-alive connections are reused only between
    requests with the same key, URL and secret, never across mechanisms or
    tenants (docs/hardening.md, "Hostile tenants").
    """

    sampling_url: str
    secret: str = field(repr=False)
    output_kind: OutputKind = "real"
    max_batch: int = 10_000
    timeout_seconds: float = 30.0
    prefer_binary: bool = False
    vector_dim: int | None = None
    shape: OutputShape | None = None
    previous_secrets: tuple[str, ...] = field(default=(), repr=False)
    isolation_key: str | None = None
    #: The connection pool of this endpoint (derived; see ``isolation_key``).
    pool_key: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        digest = hashlib.sha256("\0".join((self.isolation_key or "", self.sampling_url, self.secret)).encode())
        object.__setattr__(self, "pool_key", digest.hexdigest())
        if self.shape is not None and not isinstance(self.shape, OutputShape):
            raise ValueError("shape must be an OutputShape")
        if self.output_kind not in OUTPUT_KINDS:
            raise ValueError(f"output_kind must be one of {OUTPUT_KINDS}, got {self.output_kind!r}")
        if not isinstance(self.max_batch, int) or self.max_batch < 1:
            raise ValueError("max_batch must be a positive integer")
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be > 0")
        if self.vector_dim is not None:
            if self.output_kind != "vector":
                raise ValueError("vector_dim is only meaningful for output_kind='vector'")
            if self.vector_dim < 1:
                raise ValueError("vector_dim must be >= 1")
        validate_secret(self.secret)
        if not isinstance(self.previous_secrets, tuple):
            raise ValueError("previous_secrets must be a tuple")
        for previous in self.previous_secrets:
            validate_secret(previous)


@dataclass(frozen=True)
class SamplingClientConfig:
    """``deadline_seconds``: budget of one ``sample()`` call, retries and all.
    ``max_attempts``: attempts per batch (1 = no retry).  Backoff before retry
    k (k = 1, 2, ...) is uniform in [b/2, b] with b = min(backoff_max,
    backoff_initial * 2**(k-1)), or the server's Retry-After if longer.
    ``max_response_bytes``: cap on one answer body (a period's answers together are capped by
    the :class:`ByteBudget` its caller passes to :meth:`SamplingClient.sample`).
    ``max_keys``, ``max_key_length``: a keyed answer releases at most this many distinct keys,
    each of at most this many characters (app.sampling.answers; more is ``oversized``).
    ``max_call_keys``: the same cap on the union of a call's batches (a period's sample of one
    database); None: only each answer is capped (jobs, bounded by their process's limits)."""

    max_concurrency: int = 4
    deadline_seconds: float = 120.0
    max_attempts: int = 5
    backoff_initial: float = 0.25
    backoff_max: float = 10.0
    max_response_bytes: int = 64 * 1024 * 1024
    max_keys: int = MAX_KEYS
    max_key_length: int = MAX_KEY_LENGTH
    max_call_keys: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if not self.deadline_seconds > 0:
            raise ValueError("deadline_seconds must be > 0")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.backoff_initial < 0 or self.backoff_max < 0:
            raise ValueError("backoff values must be >= 0")
        if self.max_response_bytes < 1:
            raise ValueError("max_response_bytes must be >= 1")
        if self.max_keys < 1 or self.max_key_length < 1:
            raise ValueError("max_keys and max_key_length must be >= 1")


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def _split(n: int, max_batch: int) -> list[int]:
    full, rest = divmod(n, max_batch)
    return [max_batch] * full + ([rest] if rest else [])


def _first_sampling_error(group: BaseExceptionGroup) -> SamplingError | None:
    for exc in group.exceptions:
        if isinstance(exc, SamplingError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_sampling_error(exc)
            if found is not None:
                return found
    return None


class SamplingClient:
    """Draws samples from mechanism endpoints through a :class:`SafeAsyncClient`.

    Pass ``http`` to share one safe client with other users (webhooks);
    otherwise one is created from ``http_config`` and closed by :meth:`aclose`.
    """

    def __init__(
        self,
        http: SafeAsyncClient | None = None,
        config: SamplingClientConfig | None = None,
        *,
        http_config: SafeHttpConfig | None = None,
        on_request: OnRequest | None = None,
    ) -> None:
        if http is not None and http_config is not None:
            raise ValueError("pass either http or http_config, not both")
        self._owns_http = http is None
        self._http = http if http is not None else SafeAsyncClient(http_config)
        self.config = config if config is not None else SamplingClientConfig()
        self._on_request = on_request

    async def __aenter__(self) -> SamplingClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    # ------------------------------------------------------------------ public

    async def sample(
        self,
        mechanism: MechanismEndpoint,
        database: typing.Any,
        n: int,
        *,
        monitor_id: str,
        period: int,
        request_id_prefix: str | None = None,
        budget: ByteBudget | None = None,
        deadline_seconds: float | None = None,
    ) -> np.ndarray:
        """Draw ``n`` outputs of ``mechanism`` on ``database``.

        ``deadline_seconds`` overrides the configured budget of this call (retries and all), for
        a caller whose work has its own size (a snapshot's extra samples).

        Returns real -> float64 (n,); discrete -> int64 (n,) or object array
        of str (n,); vector -> float64 (n, d).  Raises :class:`SamplingError`
        (see ``reason``) on failure, ValueError on invalid arguments (n < 1,
        a database that is not strict JSON, a malformed request_id_prefix).

        Batch ``i`` (0-based) is sent with ``request_id = f"{prefix}-{i}"``,
        which is also its ``webhook-id`` (unchanged across retries, so an
        endpoint may deduplicate); the prefix defaults to a random hex string.

        ``budget`` caps the bytes of every answer of this call together (and of the other calls
        sharing it: one period's databases); without it each answer is capped alone. Answers
        sent with a ``Content-Encoding`` other than ``identity`` are refused unread
        (``content_encoding_refused``).
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError("n must be a positive integer")
        if not isinstance(period, int) or isinstance(period, bool) or period < 0:
            raise ValueError("period must be a non-negative integer")
        if not isinstance(monitor_id, str) or not 1 <= len(monitor_id) <= 200:
            raise ValueError("monitor_id must be a string of 1 to 200 characters")
        prefix = uuid.uuid4().hex[:16] if request_id_prefix is None else request_id_prefix
        if not _REQUEST_ID_PREFIX.match(prefix):
            raise ValueError("request_id_prefix must match [A-Za-z0-9._:-]{1,120}")
        database_json = encode_database(database)
        webhook = Signer((mechanism.secret, *mechanism.previous_secrets))
        sizes = _split(n, mechanism.max_batch)
        budget_seconds = self.config.deadline_seconds if deadline_seconds is None else deadline_seconds
        if not budget_seconds > 0:
            raise ValueError("deadline_seconds must be > 0")
        deadline = time.monotonic() + budget_seconds
        binary = mechanism.prefer_binary and (
            mechanism.shape.binary_capable if mechanism.shape is not None
            else mechanism.output_kind in ("real", "vector"))
        bound = log.bind(
            url=redact_url(mechanism.sampling_url),
            monitor_id=monitor_id,
            period=period,
            request_id_prefix=prefix,
        )
        bound.debug("sampling.start", n=n, batches=len(sizes), binary=binary)
        started = time.monotonic()

        semaphore = anyio.Semaphore(self.config.max_concurrency)
        call_cap = self.config.max_call_keys
        call_keys: set[str] = set()  # with a call cap: the union of the batches' keys so far
        results: list[np.ndarray | ListSamples | KeyedSamples | None] = [None] * len(sizes)

        async def run(index: int, size: int) -> None:
            request_id = f"{prefix}-{index}"
            # Bodies are built inside the semaphore, so memory stays bounded by
            # max_concurrency even with many batches and a large database.
            body = functools.partial(
                encode_request, None, size, request_id, monitor_id, period, database_json=database_json
            )
            results[index] = part = await self._batch_with_retries(
                mechanism, webhook, body, size, request_id, binary, deadline, semaphore, bound, budget
            )
            if call_cap is not None and isinstance(part, KeyedSamples):
                # The batches' union, counted as each answer arrives (each one holds at most
                # max_keys): many small batches must not build a huge key table either.
                call_keys.update(part.keys)
                if len(call_keys) > call_cap:
                    raise too_many_keys(call_cap)

        try:
            async with anyio.create_task_group() as tg:
                for index, size in enumerate(sizes):
                    tg.start_soon(run, index, size)
        except BaseExceptionGroup as group:
            error = _first_sampling_error(group)
            if error is None:
                raise
            bound.warning(
                "sampling.failed",
                n=n,
                reason=error.reason,
                detail=error.detail,
                seconds=round(time.monotonic() - started, 4),
            )
            raise error from None

        samples = self._concatenate(mechanism, [r for r in results if r is not None])
        bound.debug(
            "sampling.done", n=n, batches=len(sizes), seconds=round(time.monotonic() - started, 4)
        )
        return samples

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _concatenate(mechanism: MechanismEndpoint, parts: list[typing.Any]) -> typing.Any:
        if len(parts) == 1:
            return parts[0]
        if isinstance(parts[0], (ListSamples, KeyedSamples)):
            return concat_outputs(parts)
        if mechanism.shape is not None and mechanism.shape.container == "scalar" and mechanism.shape.nullable:
            # a nullable integer batch without nulls is int64; one with nulls is float64
            if len({p.dtype.kind for p in parts} - {"O"}) > 1 and all(p.dtype.kind in "if" for p in parts):
                return np.concatenate([p.astype(np.float64) for p in parts])
        first = parts[0]
        for i, part in enumerate(parts[1:], start=1):
            if part.dtype != first.dtype:
                what = {np.dtype(np.int64): "integers", np.dtype(object): "strings"}
                raise SamplingError(
                    "wrong_type",
                    f"batch {i} returned {what.get(part.dtype, part.dtype)} while batch 0 "
                    f"returned {what.get(first.dtype, first.dtype)}",
                )
            if part.shape[1:] != first.shape[1:]:
                raise SamplingError(
                    "wrong_type",
                    f"batch {i} returned vectors of length {part.shape[1]} while batch 0 "
                    f"returned length {first.shape[1]}",
                )
        return np.concatenate(parts)

    def _reader(self, mechanism: MechanismEndpoint, size: int, status: int, headers: typing.Any) -> typing.Any:
        """The streaming reader of a ``200`` answer (app.sampling.answers); other statuses are read whole."""
        if status != 200:
            return None
        return answer_reader(headers, size, mechanism.output_kind, mechanism.vector_dim, shape=mechanism.shape,
                             max_bytes=self.config.max_response_bytes, max_keys=self.config.max_keys,
                             max_key_length=self.config.max_key_length)

    def _report(self, duration: float, outcome: str) -> None:
        if self._on_request is None:
            return
        try:
            self._on_request(duration, outcome)
        except Exception:  # noqa: BLE001 - a metrics hook must never break sampling
            log.exception("sampling.on_request_hook_failed")

    def _stop(self, deadline: float) -> Callable[[RetryCallState], bool]:
        max_attempts = self.config.max_attempts

        def stop(state: RetryCallState) -> bool:
            if state.attempt_number >= max_attempts:
                return True
            upcoming = getattr(state, "upcoming_sleep", 0.0) or 0.0
            return time.monotonic() + upcoming >= deadline - _MIN_ATTEMPT_SECONDS

        return stop

    def _wait(self, state: RetryCallState) -> float:
        base = min(self.config.backoff_max, self.config.backoff_initial * 2 ** (state.attempt_number - 1))
        delay = base / 2 + random.uniform(0.0, base / 2)
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, SamplingError) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        return delay

    async def _batch_with_retries(
        self,
        mechanism: MechanismEndpoint,
        webhook: Signer,
        body: Callable[[], bytes],
        size: int,
        request_id: str,
        binary: bool,
        deadline: float,
        semaphore: anyio.Semaphore,
        bound: typing.Any,
        budget: ByteBudget | None = None,
    ) -> np.ndarray:
        last_failure: list[SamplingError] = []

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            if isinstance(exc, SamplingError) and not isinstance(exc, _DeadlineReached):
                last_failure[:] = [exc]
            bound.warning(
                "sampling.retry",
                request_id=request_id,
                attempt=state.attempt_number,
                reason=getattr(exc, "reason", type(exc).__name__),
                detail=getattr(exc, "detail", str(exc)),
                sleep_seconds=round(state.next_action.sleep if state.next_action else 0.0, 3),
            )

        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda e: isinstance(e, SamplingError) and e.retryable),
            stop=self._stop(deadline),
            wait=self._wait,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return await retrying(
                self._attempt, mechanism, webhook, body, size, request_id, binary, deadline, semaphore, bound,
                budget,
            )
        except _DeadlineReached:
            # Report what actually went wrong rather than "no time left".
            if last_failure:
                raise last_failure[0] from None
            raise

    async def _attempt(
        self,
        mechanism: MechanismEndpoint,
        webhook: Signer,
        body: Callable[[], bytes],
        size: int,
        request_id: str,
        binary: bool,
        deadline: float,
        semaphore: anyio.Semaphore,
        bound: typing.Any,
        budget: ByteBudget | None = None,
    ) -> np.ndarray:
        async with semaphore:
            remaining = deadline - time.monotonic()
            if remaining <= _MIN_START_SECONDS:
                raise _DeadlineReached(
                    "timeout",
                    "the sampling deadline of this call was reached",
                )
            payload = body()
            headers = sign_headers(webhook, request_id, payload)
            headers["content-type"] = JSON_MEDIA_TYPE
            headers["accept"] = ACCEPT_BINARY if binary else ACCEPT_JSON
            t0 = time.monotonic()
            outcome = "internal_error"
            try:
                try:
                    resp = await self._http.request(
                        "POST",
                        mechanism.sampling_url,
                        content=payload,
                        headers=headers,
                        max_bytes=self.config.max_response_bytes,
                        timeout=min(mechanism.timeout_seconds, remaining),
                        identity_only=True,
                        budget=budget,
                        isolation=mechanism.pool_key,
                        reader=functools.partial(self._reader, mechanism, size),
                    )
                except SafeHttpError as exc:
                    raise SamplingError(exc.reason, exc.detail) from None
                if resp.status_code != 200:
                    excerpt = resp.content[:200].decode("utf-8", "replace").replace("\n", " ")
                    raise SamplingError(
                        "http_status",
                        f"HTTP {resp.status_code} from {resp.url}: {excerpt!r}",
                        status_code=resp.status_code,
                        retry_after=_retry_after_seconds(resp.headers.get("retry-after")),
                    )
                samples = resp.parsed
                outcome = "ok"
            except SamplingError as exc:
                outcome = exc.reason
                raise
            finally:
                duration = time.monotonic() - t0
                self._report(duration, outcome)
            bound.debug(
                "sampling.batch_ok", request_id=request_id, n=size, seconds=round(duration, 4)
            )
            return samples
