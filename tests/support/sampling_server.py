"""Run an ASGI app with uvicorn on 127.0.0.1 in a background thread (tests only).

    with serve_app(app) as base_url:           # "http://127.0.0.1:<port>"
        ...

or, in a test module, import the fixture factory:

    from tests.support.sampling_server import live_server  # noqa: F401  (pytest fixture)

    def test_x(live_server):
        base_url = live_server(app)

The socket is bound before the server starts (port 0), so there is no race
for a free port.  ``ssl_certfile``/``ssl_keyfile`` serve HTTPS.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn

__all__ = ["UvicornThread", "free_port", "live_server", "serve_app"]


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UvicornThread:
    def __init__(
        self,
        app: object,
        *,
        host: str = "127.0.0.1",
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        lifespan: str = "off",
    ) -> None:
        # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted
        # sockets whose proto is IPPROTO_TCP; with proto=0 every keep-alive
        # request stalls ~40 ms (Nagle + delayed ACK).
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.port: int = self._sock.getsockname()[1]
        self.host = host
        scheme = "https" if ssl_certfile else "http"
        self.base_url = f"{scheme}://{host}:{self.port}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan=lifespan,
            loop="asyncio",
            http="h11",
            ws="none",
            access_log=False,
            timeout_graceful_shutdown=1,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("uvicorn exited during startup")
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start in time")
            time.sleep(0.01)

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()
        if self._thread.is_alive():
            raise RuntimeError("uvicorn did not stop in time")


@contextlib.contextmanager
def serve_app(app: object, **kwargs: str | None) -> Iterator[str]:
    """Serve ``app`` on a free loopback port; ``lifespan="on"`` runs its startup/shutdown."""
    server = UvicornThread(app, **kwargs)  # type: ignore[arg-type]
    server.start()
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture
def live_server() -> Iterator[Callable[..., str]]:
    """Factory fixture: ``live_server(app) -> base_url``; servers stop at teardown."""
    with contextlib.ExitStack() as stack:

        def start(app: object, **kwargs: str | None) -> str:
            return stack.enter_context(serve_app(app, **kwargs))

        yield start
