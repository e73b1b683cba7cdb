"""Fixtures of the SDK's tests. The tests that run dpwatch need a dpwatch installation:
``DPWATCH_COMMAND`` (the main suite's tests/test_sdk.py sets it to the server's venv). Without one
they skip, except under ``CI``, where they fail."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time

import pytest
from dpwatch_sdk.testing import Auditor


@pytest.fixture(scope="session")
def auditor() -> Auditor:
    command = os.environ.get("DPWATCH_COMMAND") or shutil.which("dpwatch")
    if not command:
        if os.environ.get("CI"):
            pytest.fail("no dpwatch installation: set DPWATCH_COMMAND")
        pytest.skip("no dpwatch installation: set DPWATCH_COMMAND to run the audits")
    return Auditor(command)


class UvicornThread:
    """An ASGI app served by uvicorn on 127.0.0.1 (an ephemeral port) in a thread."""

    def __init__(self, app) -> None:
        import uvicorn

        # IPPROTO_TCP so that asyncio sets TCP_NODELAY (docs/protocol.md §8).
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> UvicornThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture
def serve_asgi():
    return UvicornThread
