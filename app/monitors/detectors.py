"""A check's detector in the service: the aggregator, the e-process or the e-detector, with O(1) state.

A monitor chooses with ``detector`` (docs/sequential.md, method.md §13):

``aggregator``  the weighted Brownian-motion aggregator of seed 002 (eq. 13) over a horizon of T
                periods, against q_{1−α_j/m}(T, γ); renewed or completed after T.
``e-process``   :class:`app.stats.sequential.EProcess` at level α/m: alarm when W_t ≥ m/α.
                P(any false alarm, ever) ≤ α; no horizon, never renewed (``horizon`` is ignored).
                New checks run :data:`SERVICE_DESIGN` (the predictable face, the grid and the aGRAPA
                bet with 0.8 of the prior, method.md §13.3c); states written before keep their design.
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

Everything here is a pure function of the plan's numbers: the runner computes a period's results
before its write transaction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.stats.aggregator import WeightedAggregator
from app.stats.claims import PureDP, parse_claim
from app.stats.sequential import SERVICE_DESIGN, EDetector, EProcess, SupportingLine, edetector_threshold

DETECTORS = ("aggregator", "e-process", "e-detector")
HORIZON_FREE = ("e-process", "e-detector")
#: ``horizon`` of an e-process / e-detector monitor created without one: the e-detector's window.
DEFAULT_WINDOW = 1000


def is_horizon_free(detector: str) -> bool:
    return detector in HORIZON_FREE


def sequential_log_threshold(detector: str, level: float, window: int) -> float:
    """log of the alarm threshold of a horizon-free check at level α/m: log(1/level) for the
    e-process, log(window/level) for the e-detector."""
    if detector == "e-process":
        return math.log(1.0 / level)
    if detector == "e-detector":
        return math.log(edetector_threshold(level, window))
    raise ValueError(f"not a horizon-free detector: {detector!r}")


def _pure_line(claim: dict[str, Any]) -> SupportingLine | None:
    parsed = parse_claim(claim)
    return SupportingLine.pure(parsed.epsilon) if isinstance(parsed, PureDP) else None


def initial_state(detector: str, *, horizon: int, gamma: float, threshold: float, level: float | None,
                  claim: dict[str, Any]) -> dict[str, Any]:
    """A fresh detector's state. ``threshold`` is the aggregator's q, or the log threshold of the others."""
    if detector == "aggregator":
        return {"version": 2, "kind": "aggregator", "horizon": int(horizon), "gamma": float(gamma),
                "threshold": float(threshold), "t": 0, "s": 0.0, "alarm_t": None, "max_statistic": None, "lag": None,
                "sums": [0.0, 0.0, 0.0]}
    if level is None:
        raise ValueError("a horizon-free check needs its level")
    # The stored line is the claim's line for pure ε; other claims get one per period (anchor_line).
    line = _pure_line(claim) or SupportingLine.pure(0.0)
    det: EProcess | EDetector
    if detector == "e-process":
        # The predictable face, the grid and the aGRAPA bet with 0.8 of the prior (method.md §13.3c);
        # checks created before keep their stored design (§13.3b, version-1 states).
        det = EProcess.from_design(level, line, SERVICE_DESIGN)
    elif detector == "e-detector":
        # the predictable face (method.md §13.3c, §13.4): the same 16 bets, on the face the past points to
        det = EDetector(math.exp(threshold), line, faces="auto")
    else:
        raise ValueError(f"unknown detector {detector!r}")
    state = det.to_state()
    state["log_threshold"] = float(threshold)
    state["lag"] = None
    state["low_t"] = 0
    return state


@dataclass(frozen=True)
class DetectorStep:
    statistic: float
    threshold: float
    alarm: bool
    lag: int  # the periods the evidence pools (eq. 13's argmax k; for e-values since the statistic was ≤ 0)
    max_statistic: float
    prefix_sum: float | None  # S_t for the aggregator
    state: dict[str, Any]


def needs_prefix_sums(state: dict[str, Any] | None) -> bool:
    """Whether the next step reads past prefix sums from the period rows (version-2 aggregator, t ≥ 1)."""
    return bool(state) and state.get("kind") == "aggregator" and int(state.get("t", 0)) > 0


#: Discount of the running (a, b, n) counts every state keeps for the sparse-event advice (the
#: e-detectors' own ``ESTIMATE_DISCOUNT``): about the last ten periods.
COUNT_DISCOUNT = 0.9


def discounted_counts(state: dict[str, Any] | None, a: int, b: int, n: int) -> list[float]:
    sa, sb, sn = [float(v) for v in (state or {}).get("sums", [0.0, 0.0, 0.0])]
    r = COUNT_DISCOUNT
    return [r * sa + a, r * sb + b, r * sn + n]


def aggregator_step(state: dict[str, Any], z: float, past: list[float] | None,
                    counts: tuple[int, int, int] = (0, 0, 0)) -> DetectorStep:
    """One period of the aggregator from its O(1) state and the horizon's past prefix sums S_1..S_t
    (``past``, in period order; None for a version-1 state, which carries them)."""
    if state.get("version") == 1:  # written before 0004s: every prefix sum in the JSON
        legacy = WeightedAggregator.from_state(state)
        prefix = list(legacy._prefix)
        horizon, gamma, threshold = legacy.horizon, legacy.gamma, legacy.threshold
        alarm_t, max_stat = legacy.alarm_t, legacy.max_statistic
    else:
        t = int(state["t"])
        past = list(past or [])
        if len(past) != t or (t and not math.isclose(past[-1], float(state["s"]), rel_tol=0, abs_tol=1e-9)):
            raise ValueError(f"the check's period rows hold {len(past)} prefix sums for t = {t}")
        prefix = [0.0] + [float(v) for v in past]
        horizon, gamma = int(state["horizon"]), float(state["gamma"])
        threshold = math.inf if state.get("threshold") is None else float(state["threshold"])
        alarm_t = state.get("alarm_t")
        max_stat = -math.inf if state.get("max_statistic") is None else float(state["max_statistic"])
    det = WeightedAggregator(horizon, gamma, threshold)
    det._prefix = prefix
    det.alarm_t = alarm_t
    det.max_statistic = max_stat
    step = det.update(z)
    new = {"version": 2, "kind": "aggregator", "horizon": horizon, "gamma": gamma,
           "threshold": threshold if math.isfinite(threshold) else None, "t": det.t, "s": det._prefix[-1],
           "alarm_t": det.alarm_t, "max_statistic": det.max_statistic if math.isfinite(det.max_statistic) else None,
           "lag": step.lag, "sums": discounted_counts(state, *counts)}
    return DetectorStep(step.statistic, step.threshold, step.alarm, step.lag, det.max_statistic, det._prefix[-1], new)


def sequential_line(state: dict[str, Any], claim: dict[str, Any]) -> Any:
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
    kind = state.get("kind")
    det: EProcess | EDetector = EProcess.from_state(state) if kind == "e-process" else EDetector.from_state(state)
    step = det.update(int(a), int(b), int(n), line=line)
    new = det.to_state()
    low_t = int(state.get("low_t", 0))
    if step.statistic <= 0.0:
        low_t = step.t
    lag = max(1, step.t - low_t)
    new["lag"], new["low_t"] = lag, low_t
    return DetectorStep(step.statistic, step.threshold, bool(step.alarm), lag, det.max_statistic, None, new)


def _legacy_aggregator(state: dict[str, Any]) -> bool:
    """A version-1 aggregator state (every prefix sum in the JSON, written before 0004s). E-process
    and e-detector states are version 1 too (and 2 for the e-process of method.md §13.3c): they have
    a ``kind`` and no ``prefix_sums``."""
    return state.get("version") == 1 and "prefix_sums" in state and state.get("kind", "aggregator") == "aggregator"


def state_t(state: dict[str, Any] | None) -> int:
    """Periods the detector has taken (0 for None)."""
    if not state:
        return 0
    if _legacy_aggregator(state):
        return len(state["prefix_sums"]) - 1
    return int(state.get("t", 0))


def state_lag(state: dict[str, Any] | None) -> int | None:
    """The lag the latest step pooled (None before the first)."""
    if not state:
        return None
    if _legacy_aggregator(state):
        det = WeightedAggregator.from_state(state)
        return det.current_lag() if det.t else None
    lag = state.get("lag")
    return None if lag is None else int(lag)


def finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None
