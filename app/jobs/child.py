"""The child process of one job (or one snapshot's computation): limits first, then the work.

This module is the target of a ``spawn``-ed process, so its top level imports the standard library
only: the limits (``resource.setrlimit``) and the thread counts of the numeric libraries are set
before numpy, scipy or numba are imported. What the child sends back through its pipe is one
tuple, ``(state, kwargs)``, read by :mod:`app.jobs.isolation` in the worker.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

#: Environment variables that hold the numeric libraries to one thread each: a job is one process
#: on one core, and each extra BLAS or numba thread reserves address space the memory limit counts.
ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
              "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
#: glibc's ``mallopt`` parameter M_ARENA_MAX: each thread's malloc arena reserves 64 MB of address
#: space, which RLIMIT_AS counts although nothing is used; two arenas are enough for one job.
_M_ARENA_MAX = -8
#: Address space a child may map beyond its memory limit: shared libraries and thread stacks.
ADDRESS_SPACE_SLACK = 512 * 2**20


@dataclass(frozen=True)
class Limits:
    """What one child may use. ``memory_bytes`` bounds its data (RLIMIT_DATA: an allocation
    beyond it raises MemoryError), its address space (RLIMIT_AS, with slack) and its resident size
    (watched by the parent); ``cpu_seconds`` its CPU time (RLIMIT_CPU: SIGXCPU,
    then SIGKILL 5 s later); ``wall_seconds`` its time alive (the parent kills it)."""

    memory_bytes: int
    cpu_seconds: int
    wall_seconds: float


def apply_limits(limits: Limits) -> None:
    """Set the limits of the calling process (the child, before it imports anything heavy)."""
    import resource

    for name in ONE_THREAD:
        os.environ[name] = "1"
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, 2)
    except (OSError, AttributeError):  # not glibc: RLIMIT_AS still holds
        pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # RLIMIT_DATA counts the heap and private writable mappings (what a job's arrays and objects
    # take); RLIMIT_AS, a backstop, also counts the shared libraries' mappings (about 300 MB once
    # numpy, scipy and the service are imported), hence its slack.
    resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
    address_space = limits.memory_bytes + ADDRESS_SPACE_SLACK
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = max(1, int(limits.cpu_seconds))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def job_child(entry_ref: str, job_id: str, settings: Any, kind: str, handler_ref: str, limits: Limits,
              conn: Any) -> None:
    """Run one claimed job in this process and send ``(state, kwargs)`` to the parent.

    ``entry_ref`` ("module:function") runs the job in this process (app.jobs.runner:run_job_here);
    it is named, not imported, so that this module stays below the runner that starts it.

    The job's handler runs on this process's own event loop, with its own database engine and
    sampling client; it reports progress (which also renews the lease) under the worker's id, as it
    would in the worker. The parent writes the outcome."""
    apply_limits(limits)
    outcome: tuple[str, dict[str, Any]]
    try:
        outcome = resolve_ref(entry_ref)(job_id, settings, kind, handler_ref)
    except MemoryError:
        outcome = ("failed", {"error": "the job went over its memory limit", "failure_reason": "memory limit"})
    except BaseException as exc:  # noqa: BLE001  (reported to the parent, which decides)
        outcome = ("failed", {"error": f"the job's process failed: {type(exc).__name__}: {exc}"[:4000],
                              "failure_reason": "crashed"})
    try:
        conn.send(outcome)
    except MemoryError:
        conn.send(("failed", {"error": "the job went over its memory limit", "failure_reason": "memory limit"}))
    finally:
        conn.close()


def resolve_ref(ref: str) -> Any:
    """The function a ``"module:name"`` reference names (imported now, in this process)."""
    import importlib

    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def call_child(func_ref: str, args: tuple[Any, ...], kwargs: dict[str, Any], limits: Limits, conn: Any) -> None:
    """Run ``func_ref(*args, **kwargs)`` (a plain function, e.g. a snapshot's computation) under
    ``limits`` and send ``("succeeded", {"result": …})`` or a failure to the parent."""
    apply_limits(limits)
    try:
        outcome: tuple[str, dict[str, Any]] = ("succeeded", {"result": resolve_ref(func_ref)(*args, **kwargs)})
    except MemoryError:
        outcome = ("failed", {"error": "the computation went over its memory limit", "failure_reason": "memory limit"})
    except BaseException as exc:  # noqa: BLE001
        reason = getattr(exc, "reason", None)
        text = f"{reason}: {exc}" if reason else f"{type(exc).__name__}: {exc}"
        outcome = ("failed", {"error": text[:2000], "failure_reason": "error"})
    try:
        conn.send(outcome)
    finally:
        conn.close()
        sys.stdout.flush()
