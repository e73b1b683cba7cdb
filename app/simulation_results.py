"""What a detector comparison reports: the configuration, the detectors' guarantees, and the
summaries of first-alarm periods (used by :mod:`app.simulation` and :mod:`app.claims.simulation`).

Every rate carries its exact Clopper–Pearson interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import beta as beta_dist

DETECTOR_CHOICES = ("aggregator", "aggregator-wald", "naive", "naive-normal", "e-process", "e-detector")
DEFAULT_DETECTORS = ("aggregator", "naive", "e-process", "e-detector")
#: The guarantee each detector's threshold gives, as printed in tables and JSON.
GUARANTEES = {
    "aggregator": "P(FA by T) <= alpha",
    "aggregator-score": "P(FA by T) <= alpha",
    "aggregator-wald": "P(FA by T) <= alpha (nominal; anti-conservative for rare events)",
    "naive": "P(FA by T) <= alpha (exact, Bonferroni)",
    "naive-normal": "P(FA by T) <= alpha (normal approximation)",
    "e-process": "P(FA ever) <= alpha",
    "e-detector": "P(FA by T) <= alpha, ARL >= T/alpha",
}


def parse_detectors(spec: str | Sequence[str]) -> tuple[str, ...]:
    """'aggregator,naive' → ('aggregator', 'naive'); 'aggregator-score' is an alias of 'aggregator'."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names = []
    for item in items:
        name = item.strip()
        if not name:
            continue
        name = "aggregator" if name == "aggregator-score" else name
        if name not in DETECTOR_CHOICES:
            raise ValueError(f"unknown detector {name!r}; choose from {', '.join(DETECTOR_CHOICES)}")
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("choose at least one detector")
    return tuple(names)


@dataclass(frozen=True)
class SimulationConfig:
    replications: int = 500
    horizon: int = 200
    samples_per_period: int = 200
    change_at: int = 50
    gamma: float = 0.25
    alpha: float = 0.05
    seed: int = 2024
    detectors: tuple[str, ...] = DEFAULT_DETECTORS

    def __post_init__(self) -> None:
        if self.replications < 1 or self.samples_per_period < 1:
            raise ValueError("replications and samples_per_period must be >= 1")
        if not 1 <= self.change_at <= self.horizon:
            raise ValueError(f"change_at must lie in [1, horizon={self.horizon}], got {self.change_at}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")
        object.__setattr__(self, "detectors", parse_detectors(self.detectors))


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson interval for a proportion (exact; used for every rate we report)."""
    if trials <= 0:
        return (0.0, 1.0)
    a = (1 - confidence) / 2
    lo = 0.0 if successes == 0 else float(beta_dist.ppf(a, successes, trials - successes + 1))
    hi = 1.0 if successes == trials else float(beta_dist.ppf(1 - a, successes + 1, trials - successes))
    return lo, hi


@dataclass(frozen=True)
class DetectorResult:
    """One detector on one scenario. Delays count periods from the first changed period
    (an alarm in that period has delay 0); ``median_samples`` is the number of outputs per side
    drawn after the change up to and including the alarming period, (delay + 1)·n. Runs that
    alarmed before the change are left out of the delays; runs that never alarmed count as an
    infinite delay, so a median or p90 is ``inf`` (``null`` in JSON) when more than half (10%)
    of the runs did not detect the change by the end of the run."""

    detector: str
    threshold: float
    guarantee: str
    false_alarms_before_change: float
    false_alarm_ci: tuple[float, float]
    alarm_rate_by_horizon: float
    detected_after_change: float
    median_delay: float
    p90_delay: float
    median_samples: float
    detected_by_period: list[float] = field(repr=False)

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("detected_by_period")
        d["false_alarm_ci"] = list(self.false_alarm_ci)
        return d


@dataclass(frozen=True)
class ScenarioResult:
    key: str
    title: str
    harmful: bool
    seconds: float
    detectors: list[DetectorResult]


def evaluate_alarms(name: str, alarm_t: NDArray[np.int64], threshold: float, change_at: int | SimulationConfig,
                    horizon: int | None = None, n: int | None = None, curve: bool = True) -> DetectorResult:
    """Summaries of first-alarm periods (0 = never) for one detector.

    ``change_at`` may also be a :class:`SimulationConfig` (the older call form), which supplies
    the change period, the horizon and n.
    """
    if isinstance(change_at, SimulationConfig):
        cfg = change_at
        change_at, horizon, n = cfg.change_at, cfg.horizon, cfg.samples_per_period
    if horizon is None or n is None:
        raise ValueError("evaluate_alarms needs the horizon and n")
    fired = alarm_t > 0
    early = fired & (alarm_t < change_at)
    late = fired & (alarm_t >= change_at)
    delays = np.where(late, alarm_t - change_at, np.inf)[~early]
    # inverted_cdf picks an observed delay (no interpolation between a delay and "never").
    median = float(np.quantile(delays, 0.5, method="inverted_cdf")) if delays.size else math.inf
    p90 = float(np.quantile(delays, 0.9, method="inverted_cdf")) if delays.size else math.inf
    by_period: list[float] = []
    if curve:
        sorted_t = np.sort(alarm_t[fired])
        by_period = [float(v) for v in np.searchsorted(sorted_t, np.arange(1, horizon + 1), side="right") / alarm_t.size]
    return DetectorResult(
        detector=name,
        threshold=float(threshold),
        guarantee=GUARANTEES.get(name, ""),
        false_alarms_before_change=float(early.mean()),
        false_alarm_ci=clopper_pearson(int(early.sum()), int(alarm_t.size)),
        alarm_rate_by_horizon=float(fired.mean()),
        detected_after_change=float(late.mean()),
        median_delay=median,
        p90_delay=p90,
        median_samples=(median + 1) * n if math.isfinite(median) else math.inf,
        detected_by_period=by_period,
    )
