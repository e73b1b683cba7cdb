"""Calibration computations that misbehave, for tests/monitors/test_calibration_process.py. They
live in a module of their own so that a calibration's child process can import them by name
(``module:function``, ``Calibrator.compute_ref``); each takes what
``app.monitors.calibration.compute_here`` takes."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from app.monitors.calibration import CalibrationResult, compute_here

#: How long :func:`spin_then_compute` holds the CPU before it computes.
SPIN_SECONDS = 4.0


def hog_memory(plan: Any, settings: Any) -> CalibrationResult:
    """Allocates and touches 50 MB more every step, without end (a discovery that grows)."""
    blocks = []
    while True:
        blocks.append(bytearray(50 * 2**20))
        for i in range(0, len(blocks[-1]), 4096):
            blocks[-1][i] = 1


def die(plan: Any, settings: Any) -> CalibrationResult:
    """The process dies without an answer (a segfault in a native library)."""
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(5)
    raise AssertionError("unreachable")


def spin_then_compute(plan: Any, settings: Any) -> CalibrationResult:
    """Holds the CPU in pure Python, never yielding, for :data:`SPIN_SECONDS` (a candidate choice
    or a Monte-Carlo threshold on a large design), then computes the real result."""
    ends = time.perf_counter() + SPIN_SECONDS
    x = 0
    while time.perf_counter() < ends:
        x += 1
    return compute_here(plan, settings)
