"""Serve an ASGI app on 127.0.0.1 in a background thread, for tests (``pip install 'dpwatch-sdk[serve]'``: uvicorn).

    from dpwatch_sdk.serve_asgi import serve_asgi

    with serve_asgi(app) as base_url:          # "http://127.0.0.1:<port>"
        httpx.post(f"{base_url}/sample", ...)

Useful to test the endpoint you mount in your own FastAPI or Starlette app (``Mechanism.asgi``)
the way dpwatch will call it, over a real socket. The socket is bound before the server starts
(port 0), so there is no race for a free port; ``ssl_certfile``/``ssl_keyfile`` serve HTTPS and
``lifespan="on"`` runs the app's startup and shutdown. uvicorn is imported only when a server is
made, so the SDK itself stays without it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

__all__ = ["ASGIThread", "serve_asgi"]


class ASGIThread:
    """An ASGI app served by uvicorn on ``host`` (an ephemeral port) in a daemon thread.

    ``start()``/``stop()``, or use it as a context manager; ``base_url``, ``host`` and ``port`` say
    where it listens."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", ssl_certfile: str | None = None,
                 ssl_keyfile: str | None = None, lifespan: Literal["auto", "on", "off"] = "off") -> None:
        try:
            import uvicorn
        except ImportError as exc:  # pragma: no cover - the extra is missing
            raise ImportError("dpwatch_sdk.serve_asgi needs uvicorn: pip install 'dpwatch-sdk[serve]'") from exc
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on accepted sockets whose proto
        # is IPPROTO_TCP; with proto=0 every keep-alive request stalls ~40 ms (Nagle + delayed ACK).
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        self.base_url = f"{'https' if ssl_certfile else 'http'}://{host}:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan=lifespan, loop="asyncio", http="h11", ws="none",
                                access_log=False, timeout_graceful_shutdown=1, ssl_certfile=ssl_certfile,
                                ssl_keyfile=ssl_keyfile)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def start(self, timeout: float = 10.0) -> None:
        """Start serving; returns once uvicorn has started (``RuntimeError`` if it exits or takes longer)."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("uvicorn exited during startup")
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start in time")
            time.sleep(0.01)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and close the socket (``RuntimeError`` if the thread does not end in time)."""
        self.server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()
        if self._thread.is_alive():
            raise RuntimeError("uvicorn did not stop in time")

    def __enter__(self) -> ASGIThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def serve_asgi(app: Any, *, host: str = "127.0.0.1", ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
               lifespan: Literal["auto", "on", "off"] = "off") -> Iterator[str]:
    """Serve ``app`` on a free port of ``host`` for the ``with`` block; yields its base URL."""
    with ASGIThread(app, host=host, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, lifespan=lifespan) as server:
        yield server.base_url
