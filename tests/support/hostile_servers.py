"""Hostile HTTP servers for the tests and bench/hostile.py, on 127.0.0.1 only.

``RawServer`` is a keep-alive HTTP/1.1 server written on asyncio streams, in a thread, whose
handler returns the exact bytes to write: it can send what no framework would (bytes after a
response, a response split in time, a body that never ends). Counts its TCP connections.

    with RawServer(handler) as server:       # handler(RawRequest) -> RawReply
        server.url("/path")

Builders for the attacks: :func:`response` (a well-framed answer),
:func:`json_flood` (a valid JSON answer of many tiny values), :func:`gzip_bomb` (nested gzip).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["RawReply", "RawRequest", "RawServer", "gzip_bomb", "json_flood", "response"]


@dataclass
class RawRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int  # which TCP connection of the server (0, 1, ...) carried it

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class RawReply:
    """What to write: ``parts`` in order, sleeping ``pauses[i]`` seconds before part i (if given);
    ``close`` ends the connection afterwards; ``hang`` keeps it open without answering."""

    parts: list[bytes] = field(default_factory=list)
    pauses: list[float] = field(default_factory=list)
    close: bool = False
    hang: float = 0.0


Handler = Callable[[RawRequest], RawReply | Awaitable[RawReply]]


def response(body: bytes, *, status: int = 200, content_type: str = "application/json",
             headers: dict[str, str] | None = None, chunk: int | None = None) -> bytes:
    """A well-framed HTTP/1.1 response (Content-Length, or chunked when ``chunk`` is given)."""
    reason = {200: "OK", 204: "No Content", 500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "X")
    head = [f"HTTP/1.1 {status} {reason}", f"content-type: {content_type}"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if chunk is None:
        head.append(f"content-length: {len(body)}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body
    head.append("transfer-encoding: chunked")
    out = [("\r\n".join(head) + "\r\n\r\n").encode()]
    for i in range(0, len(body), chunk):
        piece = body[i : i + chunk]
        out.append(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)


def json_flood(size_bytes: int, element: bytes = b"{}") -> bytes:
    """A *valid* JSON answer ``{"samples":[{},{},...]}`` of about ``size_bytes`` bytes."""
    count = max(1, size_bytes // (len(element) + 1))
    return b'{"samples":[' + b",".join([element] * count) + b"]}"


def gzip_bomb(unpacked_bytes: int, layers: int = 2) -> bytes:
    """Zeros gzip-compressed ``layers`` times (``Content-Encoding: gzip, gzip`` for 2): a few KB
    on the wire, ``unpacked_bytes`` once fully decoded."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container, streamed
    block = b"\0" * (1 << 20)
    parts = [compressor.compress(block) for _ in range(unpacked_bytes >> 20)]
    data = b"".join(parts) + compressor.flush()
    for _ in range(layers - 1):
        data = gzip.compress(data, compresslevel=9)
    return data


class RawServer:
    def __init__(self, handler: Handler, *, host: str = "127.0.0.1") -> None:
        self.handler = handler
        self.host = host
        self.port = 0
        self.connections = 0
        self.requests: list[RawRequest] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    def __enter__(self) -> RawServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the raw server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        self._server.close()
        for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = self.connections
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                request = RawRequest(method, path, headers, body, number)
                self.requests.append(request)
                reply = self.handler(request)
                if asyncio.iscoroutine(reply):
                    reply = await reply
                assert isinstance(reply, RawReply)
                if reply.hang:
                    await asyncio.sleep(reply.hang)
                for i, part in enumerate(reply.parts):
                    if i < len(reply.pauses) and reply.pauses[i]:
                        await asyncio.sleep(reply.pauses[i])
                    writer.write(part)
                    await writer.drain()
                if reply.close:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            writer.close()
