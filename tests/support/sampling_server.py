"""Run an ASGI app with uvicorn on 127.0.0.1 in a background thread (the SDK's
``dpwatch_sdk.serve_asgi``, which the SDK's own tests use too), as the tests use it.

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
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dpwatch_sdk.serve_asgi import ASGIThread, serve_asgi

__all__ = ["ASGIThread", "free_port", "live_server", "serve_app"]


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_app(app: object, **kwargs: Any) -> contextlib.AbstractContextManager[str]:
    """Serve ``app`` on a free loopback port; ``lifespan="on"`` runs its startup/shutdown."""
    return serve_asgi(app, **kwargs)


@pytest.fixture
def live_server() -> Iterator[Callable[..., str]]:
    """Factory fixture: ``live_server(app) -> base_url``; servers stop at teardown."""
    with contextlib.ExitStack() as stack:

        def start(app: object, **kwargs: Any) -> str:
            return stack.enter_context(serve_app(app, **kwargs))

        yield start
