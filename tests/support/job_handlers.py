"""Job handlers that misbehave, for tests/test_job_isolation.py. They live in a module of their own
so that a job's child process can import them by name (``module:function``)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from app.jobs.context import JobContext


async def hog_memory(ctx: JobContext) -> dict[str, Any]:
    """Allocates and touches 50 MB more every step, without end (the issue's growing search)."""
    blocks = []
    while True:
        blocks.append(bytearray(50 * 2**20))
        for i in range(0, len(blocks[-1]), 4096):
            blocks[-1][i] = 1


async def spin(ctx: JobContext) -> dict[str, Any]:
    """Holds the CPU synchronously, never awaiting (the search's candidate generation on a huge domain)."""
    x = 0
    while True:
        x += 1


async def die(ctx: JobContext) -> dict[str, Any]:
    """The process dies without an answer (a segfault in a native library)."""
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(5)
    return {}


async def quick(ctx: JobContext) -> dict[str, Any]:
    ctx.progress(0.5, "half way", force=True)
    return {"pid": os.getpid(), "tenant": str(ctx.tenant_id)}
