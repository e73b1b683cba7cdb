"""One interface for the family of sequential detectors: a period in, a statistic, a threshold and an
alarm out, and a JSON state to store and read back.

The family (docs/sequential.md, method.md §5, §13):

``aggregator``  the weighted Brownian-motion aggregator of seed 002, eq. (13), over a horizon of T
                periods (:class:`app.stats.aggregator.WeightedAggregator`): M_t > q.
``naive``       the exact per-period test at α/T (:mod:`app.stats.exact_naive`, method.md §13.5):
                Z_mono(a_t, b_t) > c*.
``e-process``   :class:`app.stats.sequential.EProcess`: log W_t ≥ log(1/α) (Ville, method.md §13.3).
``e-detector``  :class:`app.stats.sequential.EDetector`: log M_t ≥ log c (mixture e-SR, method.md §13.4).

Each is a :class:`Detector`: ``step(Observation)`` returns a :class:`DetectorStep`, ``to_state()``
and ``from_state()`` round-trip the state the service keeps on a check (``checks.detector_state``),
and :data:`REGISTRY` maps a state's ``kind`` to its class (:func:`load`). The classes of
:mod:`app.stats.aggregator`, :mod:`app.stats.sequential` and :mod:`app.stats.exact_naive` keep their
own APIs; the classes here adapt them and write exactly the states the service wrote before:

- aggregator, version 2: horizon, γ, threshold, t, S_t, first alarm, max M_t, argmax lag, discounted
  counts. The past prefix sums S_1..S_{t−1} that eq. 13 needs are not in the state: the caller
  passes them to :meth:`AggregatorDetector.from_state` (``past``) when :meth:`needs_past` says so.
  Version-1 states (every prefix sum in the JSON, no ``kind``) are still read.
- e-process / e-detector: the classes' own ``to_state()`` plus ``lag`` and ``low_t``.
- naive: horizon, α, t, first alarm, max statistic, discounted counts.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from app.stats.aggregator import WeightedAggregator
from app.stats.exact_naive import exact_naive_test
from app.stats.sequential import EDetector, EProcess, OrientedLine, SupportingLine, edetector_threshold, service_design

#: Discount of the running (a, b, n) counts every state keeps for the sparse-event advice (the
#: e-detectors' own ``ESTIMATE_DISCOUNT``): about the last ten periods.
COUNT_DISCOUNT = 0.9


def discounted_counts(state: dict[str, Any] | None, a: int, b: int, n: int) -> list[float]:
    """(r·Σa + a, r·Σb + b, r·Σn + n) with r = :data:`COUNT_DISCOUNT`: the exponentially discounted
    past counts (the running estimate of method.md §13.1, as ``_MixtureBase.anchor_counts``)."""
    sa, sb, sn = [float(v) for v in (state or {}).get("sums", [0.0, 0.0, 0.0])]
    r = COUNT_DISCOUNT
    return [r * sa + a, r * sb + b, r * sn + n]


@dataclass(frozen=True)
class Observation:
    """One period's numbers; each detector reads the ones it needs.

    ``a``, ``b``: hits of the event in n outputs on x and x'; ``z``: the period's standardised
    statistic (eq. 12, the aggregator's input); ``line``: the supporting line tested this period
    (e-values, naive test; None keeps the detector's own); ``u``: a uniform for the randomised
    naive test (None: the plain test).
    """

    a: int = 0
    b: int = 0
    n: int = 0
    z: float | None = None
    line: SupportingLine | OrientedLine | None = None
    u: float | None = None


@dataclass(frozen=True)
class DetectorParams:
    """What a new detector of any kind is made from (:meth:`Detector.from_params`); each kind reads its own.

    ``horizon``: T (the aggregator's and naive test's horizon; the e-detector's window); ``gamma``: γ of
    eq. (13); ``threshold``: the aggregator's q, or the log threshold of an e-value detector (None: from
    ``level``, :meth:`Detector.log_threshold_for`); ``level``: the check's α/m (the naive test's α over
    the horizon); ``line``: the claim's supporting line (e-values, naive test); ``design_horizon``: the
    horizon of H periods an e-process sizes its bets for (method.md §13.3d,
    :func:`app.stats.sequential.service_design`), None for an e-process without one (§13.3c).
    """

    horizon: int
    gamma: float = 0.25
    threshold: float | None = None
    level: float | None = None
    line: SupportingLine | None = None
    design_horizon: int | None = None


@dataclass(frozen=True)
class DetectorStep:
    statistic: float
    threshold: float
    alarm: bool
    lag: int  # the periods the evidence pools (eq. 13's argmax k; for e-values since the statistic was ≤ 0)
    max_statistic: float
    prefix_sum: float | None  # S_t for the aggregator
    state: dict[str, Any] = field(repr=False)


@runtime_checkable
class Detector(Protocol):
    """A sequential detector: ``step`` one period, read its threshold, store and load its state."""

    kind: ClassVar[str]
    #: no horizon: the e-values run on (never renewed); the aggregator and naive test have one
    horizon_free: ClassVar[bool]

    @property
    def t(self) -> int: ...

    @property
    def threshold(self) -> float: ...

    @property
    def lag(self) -> int | None: ...

    def step(self, obs: Observation) -> DetectorStep: ...

    def to_state(self) -> dict[str, Any]: ...

    @classmethod
    def from_params(cls, params: DetectorParams) -> Detector: ...

    @classmethod
    def from_state(cls, state: dict[str, Any], past: list[float] | None = None) -> Detector: ...


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class AggregatorDetector:
    """The aggregator of eq. (13) behind :class:`Detector`, with the service's O(1) version-2 state."""

    kind: ClassVar[str] = "aggregator"
    horizon_free: ClassVar[bool] = False

    def __init__(self, horizon: int, gamma: float, threshold: float = math.inf) -> None:
        self._det = WeightedAggregator(horizon, gamma, threshold)
        self._lag: int | None = None
        self._sums = [0.0, 0.0, 0.0]

    @property
    def t(self) -> int:
        return self._det.t

    @property
    def threshold(self) -> float:
        return self._det.threshold

    @property
    def lag(self) -> int | None:
        return self._lag

    @classmethod
    def from_params(cls, params: DetectorParams) -> AggregatorDetector:
        """A fresh aggregator over ``params.horizon`` periods with γ and the threshold q_{1−α_j/m}(T, γ)."""
        if params.threshold is None:
            raise ValueError("threshold: the aggregator needs its q (from the threshold table)")
        return cls(int(params.horizon), float(params.gamma), float(params.threshold))

    @staticmethod
    def needs_past(state: dict[str, Any] | None) -> bool:
        """Whether :meth:`from_state` needs the past prefix sums S_1..S_t (version 2, t ≥ 1)."""
        return state is not None and state.get("version") != 1 and int(state.get("t", 0)) > 0

    @classmethod
    def from_state(cls, state: dict[str, Any], past: list[float] | None = None) -> AggregatorDetector:
        """From a stored state and, for version 2, the horizon's past prefix sums S_1..S_t (``past``,
        in period order, from the check's period rows); version 1 carries them itself."""
        if is_legacy_aggregator(state):  # written before 0004s: every prefix sum in the JSON
            legacy = WeightedAggregator.from_state(state)
            obj = cls(legacy.horizon, legacy.gamma, legacy.threshold)
            obj._det = legacy
            obj._lag = legacy.current_lag() if legacy.t else None
        else:
            t = int(state["t"])
            prefix = list(past or [])
            if len(prefix) != t or (t and not math.isclose(prefix[-1], float(state["s"]), rel_tol=0, abs_tol=1e-9)):
                raise ValueError(f"the check's period rows hold {len(prefix)} prefix sums for t = {t}")
            threshold = math.inf if state.get("threshold") is None else float(state["threshold"])
            obj = cls(int(state["horizon"]), float(state["gamma"]), threshold)
            obj._det._prefix = [0.0] + [float(v) for v in prefix]
            obj._det.alarm_t = state.get("alarm_t")
            ms = state.get("max_statistic")
            obj._det.max_statistic = -math.inf if ms is None else float(ms)
            lag = state.get("lag")
            obj._lag = None if lag is None else int(lag)
        obj._sums = [float(v) for v in state.get("sums", [0.0, 0.0, 0.0])]
        return obj

    def to_state(self) -> dict[str, Any]:
        det = self._det
        return {"version": 2, "kind": self.kind, "horizon": det.horizon, "gamma": det.gamma,
                "threshold": _finite(det.threshold), "t": det.t, "s": det._prefix[-1], "alarm_t": det.alarm_t,
                "max_statistic": _finite(det.max_statistic), "lag": self._lag, "sums": list(self._sums)}

    def step(self, obs: Observation) -> DetectorStep:
        """M_{t+1} of eq. (13) from z_{t+1} = ``obs.z``."""
        if obs.z is None:
            raise ValueError("z: the aggregator needs the period's standardised statistic")
        step = self._det.update(obs.z)
        self._lag = step.lag
        self._sums = discounted_counts({"sums": self._sums}, obs.a, obs.b, obs.n)
        return DetectorStep(step.statistic, step.threshold, step.alarm, step.lag, self._det.max_statistic,
                            self._det._prefix[-1], self.to_state())


class EValueDetector(ABC):
    """An e-process or e-detector behind :class:`Detector`: the class's state plus ``lag``, ``low_t``."""

    kind: ClassVar[str] = "base"
    horizon_free: ClassVar[bool] = True
    _det: EProcess | EDetector

    def __init__(self, det: EProcess | EDetector, lag: int | None = None, low_t: int = 0) -> None:
        self._det = det
        self._lag = lag
        self._low_t = low_t

    @property
    def t(self) -> int:
        return self._det.t

    @property
    def threshold(self) -> float:
        return self._det.log_threshold

    @property
    def lag(self) -> int | None:
        return self._lag

    @property
    def inner(self) -> EProcess | EDetector:
        return self._det

    @classmethod
    @abstractmethod
    def _inner_from_state(cls, state: dict[str, Any]) -> EProcess | EDetector:
        """The e-value detector of this kind, rebuilt from its stored state."""

    @classmethod
    @abstractmethod
    def log_threshold_for(cls, level: float, window: int) -> float:
        """log of the alarm threshold at level α/m over ``window`` periods."""

    @classmethod
    @abstractmethod
    def _new(cls, log_threshold: float, level: float, line: SupportingLine,
             design_horizon: int | None = None) -> EValueDetector:
        """A fresh detector of this kind at ``log_threshold`` on ``line`` (``design_horizon``: the
        e-process's horizon, method.md §13.3d; the e-detector has none)."""

    @classmethod
    def from_params(cls, params: DetectorParams) -> EValueDetector:
        """A fresh detector at ``params.level`` on ``params.line`` (the pure line with ε = 0 when None: a
        claim without a line of its own gets one per period, ``anchor_line``); the stored log threshold
        is ``params.threshold`` when given."""
        if params.level is None:
            raise ValueError("level: a horizon-free check needs its level")
        log_threshold = (cls.log_threshold_for(params.level, params.horizon) if params.threshold is None
                         else float(params.threshold))
        det = cls._new(log_threshold, params.level, params.line or SupportingLine.pure(0.0), params.design_horizon)
        det._det.log_threshold = log_threshold
        return det

    @classmethod
    def from_state(cls, state: dict[str, Any], past: list[float] | None = None) -> EValueDetector:
        lag = state.get("lag")
        return cls(cls._inner_from_state(state), None if lag is None else int(lag), int(state.get("low_t", 0)))

    def to_state(self) -> dict[str, Any]:
        state = self._det.to_state()
        state["lag"], state["low_t"] = self._lag, self._low_t
        return state

    def step(self, obs: Observation) -> DetectorStep:
        """One period's e-value update (method.md §13.3 / §13.4); lag = periods since the statistic was ≤ 0."""
        step = self._det.update(int(obs.a), int(obs.b), int(obs.n), line=obs.line)
        if step.statistic <= 0.0:
            self._low_t = step.t
        self._lag = max(1, step.t - self._low_t)
        return DetectorStep(step.statistic, step.threshold, bool(step.alarm), self._lag, self._det.max_statistic,
                            None, self.to_state())


class EProcessDetector(EValueDetector):
    kind: ClassVar[str] = EProcess.kind

    @classmethod
    def create(cls, level: float, line: SupportingLine, horizon: int | None = None) -> EProcessDetector:
        """A new check's e-process at ``level``: without a horizon :data:`SERVICE_DESIGN` (the predictable
        face, the grid and the aGRAPA bet with 0.8 of the prior, method.md §13.3c); with a horizon of H
        periods :data:`HORIZON_DESIGN` for H (the horizon-tuned bet besides them, §13.3d)."""
        return cls(EProcess.from_design(level, line, service_design(horizon)))

    @classmethod
    def _inner_from_state(cls, state: dict[str, Any]) -> EProcess:
        return EProcess.from_state(state)

    @classmethod
    def log_threshold_for(cls, level: float, window: int) -> float:
        """log(1/α): Ville's inequality bounds P(sup_t W_t ≥ 1/α) ≤ α (method.md §13.3)."""
        return math.log(1.0 / level)

    @classmethod
    def _new(cls, log_threshold: float, level: float, line: SupportingLine,
             design_horizon: int | None = None) -> EProcessDetector:
        return cls.create(level, line, design_horizon)


class EDetectorDetector(EValueDetector):
    kind: ClassVar[str] = EDetector.kind

    @classmethod
    def create(cls, threshold: float, line: SupportingLine) -> EDetectorDetector:
        """A new check's e-detector with threshold c (ARL ≥ c, method.md §13.4) on the predictable face."""
        return cls(EDetector(threshold, line, faces="auto"))

    @classmethod
    def _inner_from_state(cls, state: dict[str, Any]) -> EDetector:
        return EDetector.from_state(state)

    @classmethod
    def log_threshold_for(cls, level: float, window: int) -> float:
        """log c with c = window/α (:func:`edetector_threshold`, method.md §13.4): P(false alarm within
        the window) ≤ α and ARL ≥ c."""
        return math.log(edetector_threshold(level, window))

    @classmethod
    def _new(cls, log_threshold: float, level: float, line: SupportingLine,
             design_horizon: int | None = None) -> EDetectorDetector:
        return cls.create(math.exp(log_threshold), line)


class NaiveDetector:
    """The exact per-period test at α/T over a horizon of T periods (method.md §13.5, Bonferroni):
    alarm at the first period with Z_mono(a_t, b_t) > c*, or = c* and u_t < γ (randomised)."""

    kind: ClassVar[str] = "naive"
    horizon_free: ClassVar[bool] = False

    def __init__(self, horizon: int, alpha: float) -> None:
        if horizon < 1:
            raise ValueError("horizon must be >= 1")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
        self.horizon, self.alpha = int(horizon), float(alpha)
        self._t = 0
        self._threshold = math.nan  # c* depends on n and the line: known after the first step
        self.alarm_t: int | None = None
        self.max_statistic = -math.inf
        self._sums = [0.0, 0.0, 0.0]

    @property
    def t(self) -> int:
        return self._t

    @property
    def threshold(self) -> float:
        return self._threshold

    @property
    def lag(self) -> int | None:
        return 1 if self._t else None

    @classmethod
    def from_params(cls, params: DetectorParams) -> NaiveDetector:
        """A fresh naive test over ``params.horizon`` periods at overall level α = ``params.level`` (α/T a period)."""
        if params.level is None:
            raise ValueError("level: the naive test needs its level")
        return cls(int(params.horizon), float(params.level))

    @classmethod
    def from_state(cls, state: dict[str, Any], past: list[float] | None = None) -> NaiveDetector:
        if state.get("kind") != cls.kind or state.get("version") != 1:
            raise ValueError(f"not a version-1 naive state: {state.get('kind')!r} v{state.get('version')!r}")
        obj = cls(int(state["horizon"]), float(state["alpha"]))
        obj._t = int(state["t"])
        obj._threshold = math.nan if state.get("threshold") is None else float(state["threshold"])
        obj.alarm_t = state.get("alarm_t")
        ms = state.get("max_statistic")
        obj.max_statistic = -math.inf if ms is None else float(ms)
        obj._sums = [float(v) for v in state.get("sums", [0.0, 0.0, 0.0])]
        return obj

    def to_state(self) -> dict[str, Any]:
        return {"version": 1, "kind": self.kind, "horizon": self.horizon, "alpha": self.alpha, "t": self._t,
                "threshold": _finite(self._threshold), "alarm_t": self.alarm_t,
                "max_statistic": _finite(self.max_statistic), "lag": self.lag, "sums": list(self._sums)}

    def step(self, obs: Observation) -> DetectorStep:
        """The exact test of period t+1 at level α/T on (a, b) against ``obs.line``."""
        if obs.line is None or not isinstance(obs.line, SupportingLine):
            raise ValueError("line: the naive test needs the period's supporting line")
        if self._t >= self.horizon:
            raise ValueError(f"the naive test has taken all {self.horizon} periods of its horizon")
        test = exact_naive_test(int(obs.n), obs.line, self.alpha / self.horizon)
        statistic = float(test.statistic(obs.a, obs.b))
        u = None if obs.u is None else [obs.u]
        alarm = bool(test.rejects([obs.a], [obs.b], u)[0])
        self._t += 1
        self._threshold = float(test.threshold)
        if alarm and self.alarm_t is None:
            self.alarm_t = self._t
        self.max_statistic = max(self.max_statistic, statistic)
        self._sums = discounted_counts({"sums": self._sums}, obs.a, obs.b, obs.n)
        return DetectorStep(statistic, self._threshold, alarm, 1, self.max_statistic, None, self.to_state())


#: A stored state's ``kind`` → the class that reads it (:func:`load`).
REGISTRY: dict[str, type[Detector]] = {
    cls.kind: cls for cls in (AggregatorDetector, NaiveDetector, EProcessDetector, EDetectorDetector)
}


def is_legacy_aggregator(state: dict[str, Any]) -> bool:
    """A version-1 aggregator state (every prefix sum in the JSON, written before 0004s). E-process
    and e-detector states are version 1 too (and 2 for the e-process of method.md §13.3c): they have
    a ``kind`` and no ``prefix_sums``."""
    return state.get("version") == 1 and "prefix_sums" in state and state.get("kind", "aggregator") == "aggregator"


def kind_of(state: dict[str, Any] | None) -> str:
    """The detector kind of a stored state (a state without ``kind`` is an aggregator's: the version-1
    aggregator states never wrote one)."""
    kind = (state or {}).get("kind", "aggregator")
    if kind not in REGISTRY:
        raise ValueError(f"kind: unknown detector {kind!r} (known: {', '.join(REGISTRY)})")
    return str(kind)


def detector_class(kind: str) -> type[Detector]:
    """The class registered for ``kind``."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise ValueError(f"detector: unknown detector {kind!r} (known: {', '.join(REGISTRY)})") from None


def create(kind: str, params: DetectorParams) -> Detector:
    """A fresh detector of ``kind`` (the registry's class) from ``params``."""
    return detector_class(kind).from_params(params)


def load(state: dict[str, Any], past: list[float] | None = None) -> Detector:
    """The detector a stored state describes (``past``: the aggregator's prefix sums, see
    :meth:`AggregatorDetector.from_state`)."""
    return REGISTRY[kind_of(state)].from_state(state, past)


def needs_past(state: dict[str, Any] | None) -> bool:
    """Whether loading ``state`` needs past prefix sums from the period rows (version-2 aggregator, t ≥ 1)."""
    return bool(state) and kind_of(state) == AggregatorDetector.kind and AggregatorDetector.needs_past(state)


def state_t(state: dict[str, Any] | None) -> int:
    """Periods the detector has taken (0 for None); no past prefix sums needed."""
    if not state:
        return 0
    if is_legacy_aggregator(state):
        return len(state["prefix_sums"]) - 1
    return int(state.get("t", 0))


def state_lag(state: dict[str, Any] | None) -> int | None:
    """The lag the latest step pooled (None before the first); no past prefix sums needed."""
    if not state:
        return None
    if is_legacy_aggregator(state):
        return AggregatorDetector.from_state(state).lag
    lag = state.get("lag")
    return None if lag is None else int(lag)
