"""A mechanism served as a dpwatch sampling endpoint (docs/protocol.md).

    endpoint = Endpoint(noisy_sum, output="real", secret=os.environ["DPWATCH_SECRET"])
    app.mount("/dp", endpoint.asgi)                      # FastAPI / Starlette
    flask_app.wsgi_app = endpoint.wsgi_middleware(flask_app.wsgi_app, "/dp")   # Flask, Django
    endpoint.serve(port=8080)                            # or a server of its own

Per request, whichever the server, in this order, so that nothing is read for a request that is
refused on its headers:

1. the signature headers are checked without the body (present, a fresh timestamp, a ``v1``
   signature of the right form: else 401), and the declared ``Content-Length`` against
   ``max_body_bytes`` (else 413; no length and no chunked body: 411);
2. a place is taken among the ``max_concurrency`` requests served at once (else 503 with
   ``Retry-After``), and the body's bytes are reserved from ``max_buffered_bytes`` (the request
   waits up to ``queue_seconds`` for them, else 503): the bodies held at once never exceed it;
3. the body is read (its declared length, or a chunked body up to ``max_body_bytes``: 413 past
   it; chunked bodies are decoded under WSGI servers that pass them raw, such as wsgiref), then
   the Standard Webhooks signature is checked over it (401);
4. the body is validated (422, FastAPI-style ``{"detail": [{"loc", "msg", "type"}]}``, also for
   ``n`` above ``max_n``); the sampler runs with a fresh generator (under ASGI in a thread of the
   endpoint's own pool, so that a hanging sampler never starves another endpoint);
   its outputs are checked (500 with the reason if it raised or did not return ``n`` valid
   outputs); the answer is JSON, or little-endian float64 when the caller prefers
   ``application/x-dpwatch-float64`` and the outputs are numbers.

The server of its own (:meth:`Endpoint.serve`, :meth:`Endpoint.start`) serves ``threads``
connections at once from a fixed pool, queues at most ``backlog`` more (the next are answered 503
at once) and drops a connection idle for ``socket_timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mmap
import threading
import time
import typing
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from .mechanism import Claim, RngFactory, Sampler, takes_period
from .protocol import (
    BadRequest,
    Output,
    OutputError,
    SampleRequest,
    Verifier,
    encode_answer,
    negotiate_binary,
    parse_request,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_BUFFERED_BYTES", "DEFAULT_MAX_CONCURRENCY", "DEFAULT_MAX_N",
           "Endpoint", "Mechanism", "RunningServer"]

log = logging.getLogger("dpwatch_sdk.endpoint")

DEFAULT_MAX_N = 1_000_000
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
#: The request bodies held in memory at once, together (each request reserves its declared length,
#: or ``max_body_bytes`` for a chunked body, before it reads a byte).
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024
#: Requests past their header check served at once; the next are answered 503.
DEFAULT_MAX_CONCURRENCY = 32
#: How long a request waits for room among the buffered bytes before a 503.
DEFAULT_QUEUE_SECONDS = 10.0
#: The server of its own: connections served at once, queued beyond them, idle seconds allowed.
DEFAULT_THREADS = 16
DEFAULT_BACKLOG = 64
DEFAULT_SOCKET_TIMEOUT = 15.0
#: Bodies are read this much at a time.
_READ_SIZE = 64 * 1024
#: The longest line of a chunked body's framing (a size and its extensions, a trailer).
_MAX_CHUNK_LINE = 4096

Answer = tuple[int, list[tuple[str, str]], bytes]


@dataclass
class Mechanism:
    """A sampler with its output and, when known, the claim it makes.

    ``sample(database, n, rng)`` returns ``n`` independent outputs (a list or a numpy array; it may
    also take ``period=``). Adapters (``dpwatch_sdk.adapters``) build these from real libraries and
    fill ``claim`` from the library's own accounting.
    """

    sample: Sampler
    output: Output = field(default_factory=Output)
    claim: Claim | None = None
    name: str | None = None
    details: dict[str, typing.Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.sample):
            raise TypeError("sample must be callable: f(database, n, rng)")
        self.output = Output.of(self.output)
        if self.name is None:
            self.name = getattr(self.sample, "__name__", None) or "mechanism"

    # Serving: the endpoint, as an ASGI app, a WSGI app or a server of its own.
    def endpoint(self, *, secret: str | typing.Sequence[str] | None, **options: typing.Any) -> Endpoint:
        return Endpoint(self, secret=secret, **options)

    def asgi(self, *, secret: str | typing.Sequence[str] | None, **options: typing.Any) -> typing.Any:
        """An ASGI app (FastAPI/Starlette: ``app.mount("/dp", mechanism.asgi(secret=...))``)."""
        return self.endpoint(secret=secret, **options).asgi

    def wsgi(self, *, secret: str | typing.Sequence[str] | None, **options: typing.Any) -> typing.Any:
        """A WSGI app (Flask, Django; or ``endpoint.wsgi_middleware`` to add it under a path)."""
        return self.endpoint(secret=secret, **options).wsgi

    def serve(self, *, secret: str | typing.Sequence[str] | None, host: str = "127.0.0.1", port: int = 8080,
              **options: typing.Any) -> None:
        """Serve the endpoint until interrupted (a threaded HTTP server from the standard library)."""
        self.endpoint(secret=secret, **options).serve(host=host, port=port)

    def registration(self, sampling_url: str, *, name: str | None = None, secret: str | None = None,
                     **fields: typing.Any) -> dict[str, typing.Any]:
        """The body of ``POST /v1/mechanisms`` for this mechanism served at ``sampling_url``."""
        body: dict[str, typing.Any] = {"name": name or self.name, "sampling_url": sampling_url,
                                       "output_kind": self.output.output_kind, "output_shape": self.output.shape()}
        if self.output.kind == "vector":
            if self.output.length is None:
                raise ValueError("registering a vector mechanism needs its length: Output('vector', length=d)")
            body["dim"] = self.output.length
        if self.output.kind == "list" and "dim" not in fields:
            raise ValueError("a list output is registered with its longest length: pass dim=L and "
                             "output_shape={'container': 'list', 'max_length': L, …}")
        if secret is not None:
            body["secret"] = secret
        body.update(fields)
        return body


def _json_error(status: int, detail: typing.Any) -> Answer:
    body = json.dumps({"detail": detail}).encode()
    return status, [("content-type", "application/json"), ("cache-control", "no-store")], body


class Endpoint:
    """A protocol endpoint for one mechanism.

    ``mechanism``: a :class:`~dpwatch_sdk.Mechanism` (adapters make them), or a sampler
    ``f(database, n, rng)`` with ``output``. ``secret``: the ``whsec_`` secret dpwatch signs with
    (a list accepts any of several while it is rotated); ``None`` switches the check off (local
    tests only). ``seed`` makes the generators reproducible (tests).
    """

    def __init__(
        self,
        mechanism: Mechanism | Callable[..., typing.Any],
        *,
        secret: str | Sequence[str] | None,
        output: Output | str | tuple[str, int] | None = None,
        max_n: int = DEFAULT_MAX_N,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        queue_seconds: float = DEFAULT_QUEUE_SECONDS,
        seed: int | None = None,
    ) -> None:
        if not isinstance(mechanism, Mechanism):
            mechanism = Mechanism(mechanism, output=Output.of(output or "real"))
        elif output is not None:
            mechanism = Mechanism(mechanism.sample, Output.of(output), mechanism.claim, mechanism.name,
                                  mechanism.details)
        if max_n < 1 or max_body_bytes < 1 or max_concurrency < 1:
            raise ValueError("max_n, max_body_bytes and max_concurrency must be >= 1")
        if max_buffered_bytes < max_body_bytes:
            raise ValueError("max_buffered_bytes must be at least max_body_bytes (one whole body)")
        if not queue_seconds >= 0:
            raise ValueError("queue_seconds must be >= 0")
        self.mechanism = mechanism
        self.output = mechanism.output
        self.max_n = max_n
        self.max_body_bytes = max_body_bytes
        self.max_buffered_bytes = max_buffered_bytes
        self.max_concurrency = max_concurrency
        self.queue_seconds = queue_seconds
        self._admission = _Admission(max_concurrency, max_buffered_bytes)
        self._verifier = None if secret is None else Verifier(secret)
        self._rng = RngFactory(seed)
        self._with_period = takes_period(mechanism.sample)
        # The sampler's own threads under ASGI (started as needed, at most one per request admitted):
        # a sampler that hangs holds this endpoint's threads, never the event loop's default pool
        # that other endpoints of the same server (and the server itself) run on.
        self._executor = ThreadPoolExecutor(max_concurrency, thread_name_prefix=f"dpwatch-{mechanism.name}")
        self.asgi = _ASGIApp(self)
        self.wsgi = _WSGIApp(self)

    # ------------------------------------------------------------------ the two halves of a request

    def precheck(self, headers: typing.Mapping[str, str], declared_length: int | None) -> None:
        """What can be refused before the body is read (lower-case ``headers``): the signature
        headers (401) and the declared length (413). Raises :class:`BadRequest`."""
        if self._verifier is not None:
            problem = self._verifier.header_problem(headers)
            if problem is not None:
                log.info("dpwatch endpoint %s: refused a request with a bad signature: %s", self.mechanism.name, problem)
                raise BadRequest(401, f"invalid or missing webhook signature: {problem}")
        if declared_length is not None and declared_length > self.max_body_bytes:
            raise BadRequest(413, f"the request body exceeds {self.max_body_bytes} bytes")

    def accept(self, body: bytes | typing.Any, headers: typing.Mapping[str, str]) -> SampleRequest:
        """Check the signature and the body (any bytes-like buffer); raises :class:`BadRequest`
        (401, 422). The signature is checked over the buffer in place; only a signed body is
        copied, to be parsed."""
        if self._verifier is not None:
            problem = self._verifier.problem(body, headers)
            if problem is not None:
                log.info("dpwatch endpoint %s: refused a request with a bad signature: %s", self.mechanism.name, problem)
                raise BadRequest(401, f"invalid or missing webhook signature: {problem}")
        return parse_request(body if isinstance(body, bytes) else bytes(body), self.max_n)

    def answer(self, request: SampleRequest, accept: str | None) -> Answer:
        """Draw the outputs and encode them (500 with the reason when the mechanism fails)."""
        rng = self._rng()
        try:
            if self._with_period:
                outputs = self.mechanism.sample(request.database, request.n, rng, period=request.period)
            else:
                outputs = self.mechanism.sample(request.database, request.n, rng)
        except Exception as exc:  # noqa: BLE001 - the mechanism's failure is the caller's 500
            log.exception("dpwatch endpoint %s: the mechanism raised (request %s)", self.mechanism.name,
                          request.request_id)
            return _json_error(500, f"the mechanism raised {type(exc).__name__}: {str(exc)[:200]}")
        try:
            body, media_type, extra = encode_answer(outputs, request.n, self.output, negotiate_binary(accept))
        except OutputError as exc:
            log.error("dpwatch endpoint %s: invalid outputs: %s", self.mechanism.name, exc)
            return _json_error(500, f"the mechanism returned invalid outputs: {exc}")
        headers = [("content-type", media_type), ("cache-control", "no-store"), ("vary", "accept"),
                   *extra.items()]
        return 200, headers, body

    def handle(self, body: bytes, headers: typing.Mapping[str, str]) -> Answer:
        """One request, start to end (for servers that are neither ASGI nor WSGI; the body is
        already read, so only its size is bounded here)."""
        try:
            self.precheck({k.lower(): v for k, v in headers.items()}, len(body))
            request = self.accept(body, headers)
        except BadRequest as exc:
            return _json_error(exc.status, exc.detail)
        lowered = {k.lower(): v for k, v in headers.items()}
        return self.answer(request, lowered.get("accept"))

    # ------------------------------------------------------------------ servers

    def route(self, path: str) -> typing.Any:
        """A Starlette ``Route`` (``Starlette(routes=[endpoint.route("/dp")])``)."""
        from starlette.routing import Route

        return Route(path, self.asgi, methods=["POST"])

    def wsgi_middleware(self, inner: Callable[..., typing.Any], path: str) -> Callable[..., typing.Any]:
        """A WSGI app that answers ``path`` with this endpoint and passes every other request to
        ``inner`` (Flask: ``app.wsgi_app = endpoint.wsgi_middleware(app.wsgi_app, "/dp")``; Django:
        ``application = endpoint.wsgi_middleware(get_wsgi_application(), "/dp")``)."""
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/', got {path!r}")
        wanted = path.rstrip("/") or "/"

        def app(environ: dict[str, typing.Any], start_response: Callable[..., typing.Any]) -> typing.Iterable[bytes]:
            here = (environ.get("PATH_INFO") or "/").rstrip("/") or "/"
            if here == wanted:
                return self.wsgi(environ, start_response)
            return inner(environ, start_response)

        return app

    def start(self, host: str = "127.0.0.1", port: int = 0, **server: typing.Any) -> RunningServer:
        """Serve in a background thread (port 0: an ephemeral port); ``.url``, ``.stop()``.
        ``server``: ``threads``, ``backlog``, ``socket_timeout`` (:class:`RunningServer`)."""
        return RunningServer(self, host, port, **server)

    def serve(self, host: str = "127.0.0.1", port: int = 8080, **server: typing.Any) -> None:
        """Serve until interrupted. For production, put ``endpoint.asgi`` behind uvicorn or
        ``endpoint.wsgi`` behind gunicorn instead (and bound connections there too, e.g.
        ``uvicorn --limit-concurrency``)."""
        running = RunningServer(self, host, port, background=False, **server)
        log.warning("dpwatch endpoint %s serving on %s", self.mechanism.name, running.url)
        try:
            running.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            running.stop()


# ---------------------------------------------------------------------------- ASGI


class _ASGIApp:
    """The endpoint as an ASGI application (an object, not a function, so that Starlette's
    ``Route``/``add_route`` and ``mount`` treat it as an app). Answers ``POST`` on any path."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: dict[str, typing.Any], receive: Callable[..., typing.Any],
                       send: Callable[..., typing.Any]) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        status, headers, body = await self._respond(scope, receive)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in
                                [*headers, ("content-length", str(len(body)))]]})
        await send({"type": "http.response.body", "body": body})

    async def _respond(self, scope: dict[str, typing.Any], receive: Callable[..., typing.Any]) -> Answer:
        endpoint = self.endpoint
        if scope["method"] != "POST":
            status, error_headers, error_body = _json_error(405, "use POST")
            return status, [*error_headers, ("allow", "POST")], error_body
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            declared = _declared_length(headers.get("content-length"))
            endpoint.precheck(headers, declared)
        except BadRequest as exc:
            return _json_error(exc.status, exc.detail)
        admission = endpoint._admission
        if not admission.enter():
            return _busy("too many requests at once")
        try:
            reserve = declared if declared is not None else endpoint.max_body_bytes
            deadline = time.monotonic() + endpoint.queue_seconds
            while not admission.try_reserve(reserve):
                if time.monotonic() >= deadline:
                    return _busy("too many request bodies at once")
                await asyncio.sleep(0.01)
            try:
                limit = declared if declared is not None else endpoint.max_body_bytes
                with _Body(limit) as body:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            return 400, [], b""
                        chunk = message.get("body", b"")
                        if body.size + len(chunk) > limit:
                            if declared is not None:
                                return _json_error(400, "the request body is longer than its Content-Length")
                            return _json_error(413, f"the request body exceeds {limit} bytes")
                        body.append(chunk)
                        more = message.get("more_body", False)
                        del chunk, message
                        if not more:
                            break
                    try:
                        request = endpoint.accept(body.view(), headers)
                    except BadRequest as exc:
                        return _json_error(exc.status, exc.detail)
            finally:
                admission.release(reserve)
            # The sampler is synchronous and usually CPU-bound: run it off the event loop.
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(endpoint._executor, endpoint.answer, request, headers.get("accept"))
        finally:
            admission.leave()


def _declared_length(value: str | None) -> int | None:
    """The ``Content-Length`` (None when absent); 400 when it is not a number."""
    if value is None:
        return None
    value = value.strip()
    if not value.isdigit() or len(value) > 18:
        raise BadRequest(400, "the Content-Length header is not a number")
    return int(value)


def _busy(why: str) -> Answer:
    status, headers, body = _json_error(503, f"the endpoint is busy ({why}); retry later")
    return status, [*headers, ("retry-after", "1")], body


class _Admission:
    """How many requests are served at once, and how many body bytes are held at once (shared
    by the ASGI and WSGI halves; thread-safe, never blocks an event loop)."""

    def __init__(self, max_concurrency: int, max_buffered_bytes: int) -> None:
        self._max_concurrency = max_concurrency
        self._max_bytes = max_buffered_bytes
        self._lock = threading.Condition()
        self._inside = 0
        self._reserved = 0

    def enter(self) -> bool:
        with self._lock:
            if self._inside >= self._max_concurrency:
                return False
            self._inside += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._inside -= 1

    def try_reserve(self, size: int) -> bool:
        with self._lock:
            if self._reserved + size > self._max_bytes:
                return False
            self._reserved += size
            return True

    def reserve(self, size: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``size`` bytes of room (threads)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._reserved + size > self._max_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            self._reserved += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._reserved -= size
            self._lock.notify_all()


# ---------------------------------------------------------------------------- WSGI


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed",
            413: "Content Too Large", 422: "Unprocessable Content", 500: "Internal Server Error"}


class _WSGIApp:
    """The endpoint as a WSGI application (PEP 3333). Answers ``POST`` on any path."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def __call__(self, environ: dict[str, typing.Any], start_response: Callable[..., typing.Any]) -> list[bytes]:
        status, headers, body = self._respond(environ)
        start_response(f"{status} {_REASONS.get(status, '')}".strip(),
                       [*headers, ("content-length", str(len(body)))])
        return [body]

    def _respond(self, environ: dict[str, typing.Any]) -> Answer:
        endpoint = self.endpoint
        if environ.get("REQUEST_METHOD") != "POST":
            status, error_headers, error_body = _json_error(405, "use POST")
            return status, [*error_headers, ("allow", "POST")], error_body
        headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items()
                   if key.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        terminated = bool(environ.get("wsgi.input_terminated"))
        try:
            declared = None if chunked else _declared_length(environ.get("CONTENT_LENGTH") or None)
            if declared is None and not (chunked or terminated):
                raise BadRequest(411, "send the body with a Content-Length or chunked")
            endpoint.precheck(headers, declared)
        except BadRequest as exc:
            return _json_error(exc.status, exc.detail)
        admission = endpoint._admission
        if not admission.enter():
            return _busy("too many requests at once")
        try:
            reserve = declared if declared is not None else endpoint.max_body_bytes
            if not admission.reserve(reserve, endpoint.queue_seconds):
                return _busy("too many request bodies at once")
            try:
                stream = environ["wsgi.input"]
                with _Body(reserve) as body:
                    if declared is not None:
                        _read_exactly(stream, declared, body)
                    elif chunked and not terminated:  # the server passes the chunked body raw (wsgiref)
                        _read_chunked(stream, body)
                    else:  # the server decoded the body and ends the stream there (gunicorn, werkzeug)
                        _read_to_end(stream, body)
                    request = endpoint.accept(body.view(), headers)
            except BadRequest as exc:
                return _json_error(exc.status, exc.detail)
            finally:
                admission.release(reserve)
            return endpoint.answer(request, headers.get("accept"))
        finally:
            admission.leave()


class _Body:
    """A request body of at most ``capacity`` bytes, read into an anonymous memory map: pages are
    taken only as bytes arrive, the signature is checked over it in place, and closing it gives
    the memory back to the system at once (a freed 16 MiB ``bytes`` would stay in the allocator's
    arenas, where the next request of another thread cannot reuse it)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._map = mmap.mmap(-1, max(capacity, 1))

    def append(self, data: bytes) -> None:
        end = self.size + len(data)
        if end > self.capacity:
            raise BadRequest(413, f"the request body exceeds {self.capacity} bytes")
        self._map[self.size:end] = data
        self.size = end

    def view(self) -> memoryview:
        return memoryview(self._map)[: self.size]

    def __enter__(self) -> _Body:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._map.close()
        except BufferError:  # a view of it is still alive (an exception's frame): freed with it
            pass


def _read_exactly(stream: typing.Any, length: int, body: _Body) -> None:
    left = length
    while left > 0:
        part = stream.read(min(_READ_SIZE, left))
        if not part:
            raise BadRequest(400, "the request body is shorter than its Content-Length")
        body.append(part)
        left -= len(part)


def _read_to_end(stream: typing.Any, body: _Body) -> None:
    while True:
        part = stream.read(_READ_SIZE)
        if not part:
            return
        body.append(part)


def _chunk_line(stream: typing.Any) -> bytes:
    line = stream.readline(_MAX_CHUNK_LINE + 1)
    if not line.endswith(b"\n") or len(line) > _MAX_CHUNK_LINE:
        raise BadRequest(400, "the chunked request body is malformed")
    return line.rstrip(b"\r\n")


def _read_chunked(stream: typing.Any, body: _Body) -> None:
    """A ``Transfer-Encoding: chunked`` body (RFC 9112 §7.1) from the raw stream, at most the
    body's capacity (413 past it); extensions and trailers are read and ignored."""
    while True:
        line = _chunk_line(stream)
        text = line.split(b";", 1)[0].strip()
        try:
            if not text or len(text) > 16:
                raise ValueError
            chunk_size = int(text, 16)
        except ValueError:
            raise BadRequest(400, "the chunked request body is malformed") from None
        if chunk_size == 0:
            while _chunk_line(stream):  # trailers, up to the empty line
                pass
            return
        if body.size + chunk_size > body.capacity:
            raise BadRequest(413, f"the request body exceeds {body.capacity} bytes")
        _read_exactly(stream, chunk_size, body)
        if _chunk_line(stream):
            raise BadRequest(400, "the chunked request body is malformed")


# ---------------------------------------------------------------------------- a server of its own


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: typing.Any) -> None:  # noqa: A002 - the base's name
        log.debug("%s - %s", self.address_string(), format % args)


class _PooledServer(WSGIServer):
    """The standard library's WSGI server with a fixed pool of ``threads`` (instead of one thread
    per connection): at most ``backlog`` more connections wait for a thread, the next are answered
    503 at once and closed."""

    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog (socketserver's 5 drops SYNs under a burst)
    _BUSY_BODY = b'{"detail": "the endpoint is busy (too many connections); retry later"}'
    _BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
             b"connection: close\r\ncontent-length: " + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n" + _BUSY_BODY)

    def __init__(self, address: tuple[str, int], handler: type, *, threads: int, backlog: int) -> None:
        super().__init__(address, handler)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="dpwatch-endpoint")
        self._slots = threading.BoundedSemaphore(threads + backlog)

    def process_request(self, request: typing.Any, client_address: typing.Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.sendall(self._BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            self._pool.submit(self._work, request, client_address)
        except RuntimeError:  # shutting down
            self._slots.release()
            self.shutdown_request(request)

    def _work(self, request: typing.Any, client_address: typing.Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - socketserver's own handling of a failed request
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request: typing.Any, client_address: typing.Any) -> None:
        import sys

        error = sys.exc_info()[1]
        if isinstance(error, OSError):  # a connection idle past socket_timeout, or reset: not a fault here
            log.debug("dpwatch endpoint: connection from %s dropped: %r", client_address, error)
            return
        log.exception("dpwatch endpoint: request from %s failed", client_address)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class RunningServer:
    """An endpoint (or any WSGI app) on the standard library's WSGI server, served by a fixed pool
    of ``threads``, with at most ``backlog`` connections waiting (503 past them) and
    ``socket_timeout`` seconds allowed between two reads or writes of a connection. ``url`` is
    ``http://host:port/``; use as a context manager or call ``stop()``."""

    def __init__(self, app: Endpoint | Callable[..., typing.Any], host: str = "127.0.0.1", port: int = 0, *,
                 background: bool = True, threads: int = DEFAULT_THREADS, backlog: int = DEFAULT_BACKLOG,
                 socket_timeout: float = DEFAULT_SOCKET_TIMEOUT) -> None:
        if threads < 1 or backlog < 0 or not socket_timeout > 0:
            raise ValueError("threads must be >= 1, backlog >= 0 and socket_timeout > 0")
        wsgi = app.wsgi if isinstance(app, Endpoint) else app
        handler = type("_Handler", (_QuietHandler,), {"timeout": socket_timeout})
        # What wsgiref's make_server does, with the pool's arguments passed to the server.
        self._server = _PooledServer((host, port), handler, threads=threads, backlog=backlog)
        self._server.set_app(wsgi)
        self.host, self.port = host, self._server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/"
        self._thread: threading.Thread | None = None
        if background:
            # A short poll interval: stop() returns within 50 ms instead of half a second.
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                            name=f"dpwatch-endpoint-{self.port}", daemon=True)
            self._thread.start()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
