"""A mechanism served as a dpwatch sampling endpoint (docs/protocol.md).

    endpoint = Endpoint(noisy_sum, output="real", secret=os.environ["DPWATCH_SECRET"])
    app.mount("/dp", endpoint.asgi)                      # FastAPI / Starlette
    flask_app.wsgi_app = endpoint.wsgi_middleware(flask_app.wsgi_app, "/dp")   # Flask, Django
    endpoint.serve(port=8080)                            # or a server of its own

Per request, whichever the server: the body is read (at most ``max_body_bytes``, else 413); the
Standard Webhooks signature is checked (401); the body is validated (422, FastAPI-style
``{"detail": [{"loc", "msg", "type"}]}``, also for ``n`` above ``max_n``); the sampler runs with a
fresh generator (in a worker thread under ASGI); its outputs are checked (500 with the reason if it
raised or did not return ``n`` valid outputs); the answer is JSON, or little-endian float64 when the
caller prefers ``application/x-dpwatch-float64`` and the outputs are numbers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socketserver
import threading
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

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

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_N", "Endpoint", "Mechanism", "RunningServer"]

log = logging.getLogger("dpwatch_sdk.endpoint")

DEFAULT_MAX_N = 1_000_000
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

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
    def endpoint(self, *, secret: str | typing.Sequence[str] | None, **options: typing.Any) -> "Endpoint":
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
        seed: int | None = None,
    ) -> None:
        if not isinstance(mechanism, Mechanism):
            mechanism = Mechanism(mechanism, output=Output.of(output or "real"))
        elif output is not None:
            mechanism = Mechanism(mechanism.sample, Output.of(output), mechanism.claim, mechanism.name,
                                  mechanism.details)
        if max_n < 1 or max_body_bytes < 1:
            raise ValueError("max_n and max_body_bytes must be >= 1")
        self.mechanism = mechanism
        self.output = mechanism.output
        self.max_n = max_n
        self.max_body_bytes = max_body_bytes
        self._verifier = None if secret is None else Verifier(secret)
        self._rng = RngFactory(seed)
        self._with_period = takes_period(mechanism.sample)
        self.asgi = _ASGIApp(self)
        self.wsgi = _WSGIApp(self)

    # ------------------------------------------------------------------ the two halves of a request

    def accept(self, body: bytes, headers: typing.Mapping[str, str]) -> SampleRequest:
        """Check the signature and the body; raises :class:`BadRequest` (401, 422)."""
        if self._verifier is not None:
            problem = self._verifier.problem(body, headers)
            if problem is not None:
                log.info("dpwatch endpoint %s: refused a request with a bad signature: %s", self.mechanism.name, problem)
                raise BadRequest(401, f"invalid or missing webhook signature: {problem}")
        return parse_request(body, self.max_n)

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
        """One request, start to end (for servers that are neither ASGI nor WSGI)."""
        try:
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

    def start(self, host: str = "127.0.0.1", port: int = 0) -> "RunningServer":
        """Serve in a background thread (port 0: an ephemeral port); ``.url``, ``.stop()``."""
        return RunningServer(self, host, port)

    def serve(self, host: str = "127.0.0.1", port: int = 8080) -> None:
        """Serve until interrupted. For production, put ``endpoint.asgi`` behind uvicorn or
        ``endpoint.wsgi`` behind gunicorn instead."""
        server = RunningServer(self, host, port, background=False)
        log.warning("dpwatch endpoint %s serving on %s", self.mechanism.name, server.url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()


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
            status, headers, body = _json_error(405, "use POST")
            return status, [*headers, ("allow", "POST")], body
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        limit = endpoint.max_body_bytes
        announced = headers.get("content-length", "")
        if announced.isdigit() and int(announced) > limit:
            return _json_error(413, f"the request body exceeds {limit} bytes")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return 400, [], b""
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return _json_error(413, f"the request body exceeds {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        try:
            request = endpoint.accept(b"".join(chunks), headers)
        except BadRequest as exc:
            return _json_error(exc.status, exc.detail)
        # The sampler is synchronous and usually CPU-bound: run it off the event loop.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, endpoint.answer, request, headers.get("accept"))


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
            status, headers, body = _json_error(405, "use POST")
            return status, [*headers, ("allow", "POST")], body
        limit = endpoint.max_body_bytes
        length_text = environ.get("CONTENT_LENGTH") or ""
        stream = environ["wsgi.input"]
        if length_text.isdigit():
            length = int(length_text)
            if length > limit:
                return _json_error(413, f"the request body exceeds {limit} bytes")
            body = stream.read(length) if length else b""
        elif environ.get("wsgi.input_terminated"):
            body = stream.read(limit + 1)
            if len(body) > limit:
                return _json_error(413, f"the request body exceeds {limit} bytes")
        else:
            body = b""
        headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items()
                   if key.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        try:
            request = endpoint.accept(body, headers)
        except BadRequest as exc:
            return _json_error(exc.status, exc.detail)
        return endpoint.answer(request, headers.get("accept"))


# ---------------------------------------------------------------------------- a server of its own


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: typing.Any) -> None:  # noqa: A002 - the base's name
        log.debug("%s - %s", self.address_string(), format % args)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class RunningServer:
    """An endpoint (or any WSGI app) on the standard library's threaded WSGI server. ``url`` is
    ``http://host:port/``; use as a context manager or call ``stop()``."""

    def __init__(self, app: Endpoint | Callable[..., typing.Any], host: str = "127.0.0.1", port: int = 0, *,
                 background: bool = True) -> None:
        wsgi = app.wsgi if isinstance(app, Endpoint) else app
        self._server = make_server(host, port, wsgi, server_class=_ThreadingServer,
                                   handler_class=_QuietHandler)
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

    def __enter__(self) -> "RunningServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
