"""A check's detector in the service: the aggregator, the e-process or the e-detector, with O(1) state.

A monitor chooses with ``detector`` (docs/sequential.md, method.md §13):

``aggregator``  the weighted Brownian-motion aggregator of seed 002 (eq. 13) over a horizon of T
                periods, against q_{1−α_j/m}(T, γ); renewed or completed after T.
``e-process``   :class:`app.stats.sequential.EProcess` at level α/m: alarm when W_t ≥ m/α.
                P(any false alarm, ever) ≤ α; no horizon, never renewed (``horizon`` is ignored).
                New checks run :data:`SERVICE_DESIGN` (the predictable face, the grid and the aGRAPA
                bet with 0.8 of the prior, method.md §13.3c); states written before keep their design.
                :func:`initial_state` with ``design_horizon=H`` runs :data:`HORIZON_DESIGN` for H instead
                (§13.3d): a monitor created with a ``horizon`` passes it (``monitors.design_horizon``);
                one created without keeps the design without a horizon (its stored 1000 is unused).
``e-detector``  :class:`app.stats.sequential.EDetector` (mixture e-SR) with c = T·m/α
                (:func:`edetector_threshold` at α/m over a window of T periods): P(false alarm
                within T periods) ≤ α and ARL ≥ T·m/α. It keeps running after T (never renewed);
                ``horizon`` is only the window of that guarantee. New checks bet on the predictable
                face (``faces="auto"``, the same 16 bets); states written before keep one face.

State kept on the check (``checks.detector_state``) is a few numbers whatever t is:

- aggregator (version 2): horizon, γ, threshold, t, S_t, first alarm, max M_t, argmax lag. The
  past prefix sums S_1..S_{t−1} that eq. 13 needs are the ``prefix_sum`` column of the check's
  ``period_checks`` rows of the horizon (one row per period, written anyway); the runner reads
  them with the plan (:func:`aggregator_step`). Version-1 states (every prefix sum in the JSON)
  are still read.
- e-process / e-detector: the classes' own ``to_state()`` (16 bets) plus ``lag``.

Each kind is a :class:`app.stats.detector.Detector` (step → statistic, threshold, alarm; to/from
state); a stored state is read through the registry there (``kind`` → class), not dispatched here.

Everything here is a pure function of the plan's numbers: the runner computes a period's results
before its write transaction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.stats.claims import Claim, PureDP, parse_claim
from app.stats.detector import (
    COUNT_DISCOUNT,
    AggregatorDetector,
    DetectorParams,
    DetectorStep,
    EValueDetector,
    Observation,
    create,
    detector_class,
    discounted_counts,
    kind_of,
    load,
    needs_past,
    state_lag,
    state_t,
)
from app.stats.sequential import SupportingLine

__all__ = ["COUNT_DISCOUNT", "DEFAULT_WINDOW", "DETECTORS", "HORIZON_FREE", "DetectorStep", "aggregator_step",
           "discounted_counts", "finite", "initial_state", "is_horizon_free", "needs_prefix_sums",
           "sequential_line", "sequential_log_threshold", "sequential_step", "state_lag", "state_t", "step_state"]

#: The detectors a monitor may run (app/stats/detector.py has the naive test too, for the simulation).
DETECTORS = ("aggregator", "e-process", "e-detector")
HORIZON_FREE = tuple(k for k in DETECTORS if detector_class(k).horizon_free)
#: ``horizon`` of an e-process / e-detector monitor created without one: the e-detector's window.
DEFAULT_WINDOW = 1000


def is_horizon_free(detector: str) -> bool:
    return detector in DETECTORS and detector_class(detector).horizon_free


def sequential_log_threshold(detector: str, level: float, window: int) -> float:
    """log of the alarm threshold of a horizon-free check at level α/m: log(1/level) for the
    e-process, log(window/level) for the e-detector (the class's ``log_threshold_for``)."""
    cls = detector_class(detector) if detector in DETECTORS else None
    if cls is None or not cls.horizon_free or not issubclass(cls, EValueDetector):
        raise ValueError(f"not a horizon-free detector: {detector!r}")
    return cls.log_threshold_for(level, window)


def _pure_line(claim: Claim | dict[str, Any]) -> SupportingLine | None:
    parsed = parse_claim(claim)
    return SupportingLine.pure(parsed.epsilon) if isinstance(parsed, PureDP) else None


def initial_state(detector: str, *, horizon: int, gamma: float, threshold: float, level: float | None,
                  claim: dict[str, Any], design_horizon: int | None = None) -> dict[str, Any]:
    """A fresh detector's state. ``threshold`` is the aggregator's q, or the log threshold of the others.

    New e-process checks run :data:`app.stats.sequential.SERVICE_DESIGN` (the predictable face, the grid
    and the aGRAPA bet with 0.8 of the prior, method.md §13.3c), new e-detector checks bet on the
    predictable face (§13.3c, §13.4); checks created before keep their stored design (version-1
    states). ``design_horizon``: an e-process with a horizon of H periods runs
    :data:`app.stats.sequential.HORIZON_DESIGN` for H instead (method.md §13.3d); None keeps the design
    without a horizon. The stored line is the claim's line for pure ε; other claims get one per period
    (:func:`sequential_line`)."""
    if detector not in DETECTORS:
        raise ValueError(f"unknown detector {detector!r}")
    # Only the e-values read the claim's line (the aggregator's claim may be empty: rediscovery).
    line = _pure_line(claim) if detector_class(detector).horizon_free else None
    params = DetectorParams(horizon=int(horizon), gamma=float(gamma), threshold=float(threshold), level=level,
                            line=line, design_horizon=None if design_horizon is None else int(design_horizon))
    return create(detector, params).to_state()


def needs_prefix_sums(state: dict[str, Any] | None) -> bool:
    """Whether the next step reads past prefix sums from the period rows (version-2 aggregator, t ≥ 1)."""
    return needs_past(state)


def step_state(state: dict[str, Any], obs: Observation, past: list[float] | None = None) -> DetectorStep:
    """One period of whichever detector ``state`` describes (its ``kind``, through the registry of
    app/stats/detector.py); ``past``: the aggregator's prefix sums S_1..S_t from the period rows."""
    return load(state, past).step(obs)


def aggregator_step(state: dict[str, Any], z: float, past: list[float] | None,
                    counts: tuple[int, int, int] = (0, 0, 0)) -> DetectorStep:
    """One period of the aggregator from its O(1) state and the horizon's past prefix sums S_1..S_t
    (``past``, in period order; None for a version-1 state, which carries them)."""
    a, b, n = counts
    return AggregatorDetector.from_state(state, past).step(Observation(a=a, b=b, n=n, z=z))


def sequential_line(state: dict[str, Any], claim: Claim | dict[str, Any]) -> Any:
    """The line a horizon-free check tests this period, chosen from past periods only: the claim's
    own line for pure ε, else ``anchor_line(claim, *det.anchor_counts())`` (method.md §13.1)."""
    line = _pure_line(claim)
    if line is not None:
        return line
    from app.stats.claim_period import a_priori_line, anchor_line

    sums = [float(v) for v in state.get("sums", [0.0, 0.0, 0.0])]
    if sums[2] <= 0:  # no past period: the line fixed a priori, not the pseudo-counts' one
        return a_priori_line(parse_claim(claim))
    return anchor_line(parse_claim(claim), *sums)


def sequential_step(state: dict[str, Any], a: int, b: int, n: int, line: Any) -> DetectorStep:
    """One period of an e-process or e-detector from its state; ``line`` from :func:`sequential_line`."""
    det = load(state)
    if not det.horizon_free:
        raise ValueError(f"not a horizon-free detector state: {kind_of(state)!r}")
    return det.step(Observation(a=int(a), b=int(b), n=int(n), line=line))


def finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None
