"""Heavy work in child processes, never on the worker's event loop.

A job's handler (a search, an audit, a discovery, a re-discovery) or a snapshot's computation runs
in a process of its own, started by a fork server that has the service's modules loaded
(``multiprocessing``'s ``forkserver`` start method: the server is a fresh, single-threaded
interpreter, so a fork of it carries none of the worker's threads, sockets or locks). The child
sets its limits before it does anything (app/jobs/child.py):

- **memory**: ``RLIMIT_DATA`` (an allocation beyond it raises MemoryError, reported as
  ``memory limit``), ``RLIMIT_AS`` with slack for the shared libraries, and the parent watches the
  child's resident size and kills it above the limit (also ``memory limit``);
- **CPU time**: ``RLIMIT_CPU`` (SIGXCPU, then SIGKILL): ``time limit``;
- **wall time**: the parent kills a child alive longer than ``wall_seconds``: ``time limit``.

The parent polls every :data:`POLL_SECONDS`: it reads the child's answer, checks its size and age,
and (for jobs) renews the lease, which also returns the job's cancel flag: a cancel kills the child
within about a second. A child that dies without an answer (a segfault, the OOM killer) is
``crashed``. None of this blocks the worker's loop: the only waits are ``asyncio.sleep`` and short
database statements in a thread.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from app.jobs.child import Limits, call_child, job_child

# What a job's child runs (named, not imported: the runner imports this module).
JOB_ENTRY = "app.jobs.runner:run_job_here"

log = structlog.get_logger("dpwatch.jobs")

#: How often the parent looks at its child (answer, size, age, cancel flag).
POLL_SECONDS = 0.5
#: How often a job's lease is renewed (and its cancel flag read) while its child runs.
RENEW_SECONDS = 1.0

_context: Any = None


def process_context() -> Any:
    """The ``forkserver`` context whose server preloads app.scheduler.preload (``spawn`` where fork is
    not available)."""
    global _context
    if _context is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["app.scheduler.preload"])
        else:  # pragma: no cover  (not Linux)
            ctx = multiprocessing.get_context("spawn")
        _context = ctx
    return _context


def resident_bytes(pid: int) -> int | None:
    """The resident set size of a process (Linux ``/proc``), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class ChildOutcome:
    """How a child ended: ``state`` (succeeded, failed, cancelled, lost) and what to write."""

    state: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    peak_rss: int = 0
    seconds: float = 0.0

    @property
    def failure_reason(self) -> str | None:
        return self.kwargs.get("failure_reason")


def _exit_reason(exitcode: int | None, limits: Limits, cpu: float | None) -> tuple[str, str]:
    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL) and cpu is not None and cpu >= limits.cpu_seconds - 1:
        return "time limit", f"the job used its {limits.cpu_seconds} s of CPU time"
    if exitcode == -signal.SIGXCPU:
        return "time limit", f"the job used its {limits.cpu_seconds} s of CPU time"
    return "crashed", f"the job's process ended without an answer (exit code {exitcode})"


async def supervise(target: Callable[..., None], args: tuple[Any, ...], limits: Limits, *,
                    poll: Callable[[], Awaitable[str]] | None = None, label: str = "") -> ChildOutcome:
    """Start ``target(*args, limits, conn)`` in a child and wait for its answer without blocking
    the loop. ``poll`` (every :data:`RENEW_SECONDS`) answers ``ok``, ``cancel`` (kill the child:
    ``cancelled``) or ``lost`` (kill it: the lease is another worker's now)."""
    ctx = process_context()
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(*args, limits, send), daemon=True,
                          name=f"dpwatch-job-{label}"[:60])
    started = time.monotonic()
    flag = {"answer": "ok"}

    async def renew() -> None:  # from the start: a fork server's first start takes seconds
        while poll is not None:
            await asyncio.sleep(RENEW_SECONDS)
            answer = await poll()
            if answer in ("cancel", "lost"):
                flag["answer"] = answer
                return

    renewer = asyncio.create_task(renew())
    peak = 0
    outcome: ChildOutcome | None = None
    try:
        await asyncio.to_thread(process.start)
        send.close()
        while True:
            if receive.poll():
                try:
                    state, kwargs = receive.recv()
                    outcome = ChildOutcome(state, kwargs)
                except (EOFError, OSError):
                    pass
                break
            if not process.is_alive():
                if receive.poll():
                    continue  # the answer came just before the exit: read it
                break
            rss = resident_bytes(process.pid) or 0
            peak = max(peak, rss)
            if rss > limits.memory_bytes:
                outcome = ChildOutcome("failed", {"error": f"the job went over its memory limit "
                                                  f"({limits.memory_bytes // 2**20} MB resident)",
                                                  "failure_reason": "memory limit"})
                break
            if time.monotonic() - started > limits.wall_seconds:
                outcome = ChildOutcome("failed", {"error": f"the job ran longer than its {limits.wall_seconds:g} s",
                                                  "failure_reason": "time limit"})
                break
            if flag["answer"] == "cancel":
                outcome = ChildOutcome("cancelled", {"message": "cancelled", "failure_reason": "cancelled"})
                break
            if flag["answer"] == "lost":
                outcome = ChildOutcome("lost")
                break
            await asyncio.sleep(POLL_SECONDS)
    finally:
        renewer.cancel()
        cpu = cpu_seconds(process.pid) if process.pid else None
        if process.pid is not None:
            if process.is_alive():
                process.kill()
            await asyncio.to_thread(process.join, 10)
        receive.close()
        send.close()
    if outcome is None:
        reason, text = _exit_reason(process.exitcode, limits, cpu)
        outcome = ChildOutcome("failed", {"error": text, "failure_reason": reason})
    outcome.peak_rss = peak
    outcome.seconds = time.monotonic() - started
    if process.exitcode is not None:
        process.close()
    return outcome


async def run_job_in_child(job_id: str, settings: Any, kind: str, handler_ref: str, limits: Limits,
                           poll: Callable[[], Awaitable[str]]) -> ChildOutcome:
    return await supervise(job_child, (JOB_ENTRY, job_id, settings, kind, handler_ref), limits, poll=poll,
                           label=job_id[:12])


class ChildFailed(Exception):
    """A computation in a child process ended without a result."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


async def call_in_child(func_ref: str, args: tuple[Any, ...], limits: Limits, **kwargs: Any) -> Any:
    """``func_ref(*args, **kwargs)`` (``"module:function"``) in a child under ``limits``; its result,
    or :class:`ChildFailed` with the reason."""
    outcome = await supervise(call_child, (func_ref, args, kwargs), limits, label=func_ref.rsplit(":", 1)[-1])
    if outcome.state == "succeeded":
        return outcome.kwargs["result"]
    raise ChildFailed(outcome.kwargs.get("error", "failed"), outcome.kwargs.get("failure_reason") or "crashed")


def handler_ref(handler: Callable[..., Any]) -> str | None:
    """``module:name`` of a module-level handler (what a child can import), else None."""
    module, name = getattr(handler, "__module__", None), getattr(handler, "__qualname__", "")
    if not module or "<" in name or "." in name:
        return None
    return f"{module}:{name}"
