"""Offline reproduction of the monitoring paper's experiments (seed 002 §4.2, Figure 3).

For each scenario (a)–(h) of method.md §8, R independent monitoring runs of T periods draw n
outputs per side and period from a reference mechanism that changes at period ``change_at``.
Three detectors see the same draws:

``aggregator-score``  the weighted aggregator (eq. 13) on z with the score variance (default);
``aggregator-wald``   the same with the paper's variance, eq. (8) + (16) (the paper as written);
``naive``             the per-period test with Bonferroni over T (eq. 11), on the score z, so the
                      comparison with ``aggregator-score`` isolates the effect of aggregation.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.reference import SCENARIOS, Scenario
from app.stats.aggregator import first_crossing, weighted_statistic_path
from app.stats.events import event_contains
from app.stats.multiple import naive_alarm_period, naive_threshold
from app.stats.period import period_statistic
from app.stats.thresholds import threshold_for

DETECTORS = ("aggregator-score", "aggregator-wald", "naive")
#: Outputs drawn per call to a mechanism; bounds memory for vector outputs (SVT).
DRAW_CHUNK = 200_000

Progress = Callable[[str], None]


@dataclass(frozen=True)
class SimulationConfig:
    replications: int = 500
    horizon: int = 200
    samples_per_period: int = 200
    change_at: int = 50
    gamma: float = 0.25
    alpha: float = 0.05
    seed: int = 2024

    def __post_init__(self) -> None:
        if self.replications < 1 or self.samples_per_period < 1:
            raise ValueError("replications and samples_per_period must be >= 1")
        if not 1 <= self.change_at <= self.horizon:
            raise ValueError(f"change_at must lie in [1, horizon={self.horizon}], got {self.change_at}")


@dataclass(frozen=True)
class DetectorResult:
    detector: str
    threshold: float
    false_alarms_before_change: float
    alarm_rate_by_horizon: float
    detected_after_change: float
    median_delay: float
    p90_delay: float
    detected_by_period: list[float] = field(repr=False)

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("detected_by_period")
        return d


@dataclass(frozen=True)
class ScenarioResult:
    key: str
    title: str
    harmful: bool
    seconds: float
    detectors: list[DetectorResult]


def count_hits(mechanism: Any, database: Any, event: Any, replications: int, n: int,
               rng: np.random.Generator, period: int) -> NDArray[np.int64]:
    """Counts a (one per replication) of n fresh outputs of ``mechanism(database)`` in ``event``."""
    counts = np.empty(replications, dtype=np.int64)
    per_chunk = max(1, DRAW_CHUNK // n)
    for lo in range(0, replications, per_chunk):
        hi = min(replications, lo + per_chunk)
        outputs = mechanism.sample(database, (hi - lo) * n, rng, period=period)
        inside = event_contains(event, outputs).reshape(hi - lo, n)
        counts[lo:hi] = inside.sum(axis=1)
    return counts


def evaluate_alarms(name: str, alarm_t: NDArray[np.int64], threshold: float, cfg: SimulationConfig) -> DetectorResult:
    """Summaries of first-alarm periods (0 = never) for one detector."""
    fired = alarm_t > 0
    early = fired & (alarm_t < cfg.change_at)
    late = fired & (alarm_t >= cfg.change_at)
    # Delay counts periods from the first changed period; runs that alarmed early are excluded
    # (their monitor had stopped), runs never alarmed count as infinite delay.
    delays = np.where(late, alarm_t - cfg.change_at, np.inf)[~early]
    periods = np.arange(1, cfg.horizon + 1)
    curve = [(fired & (alarm_t <= t)).mean() for t in periods]
    return DetectorResult(
        detector=name,
        threshold=threshold,
        false_alarms_before_change=float(early.mean()),
        alarm_rate_by_horizon=float(fired.mean()),
        detected_after_change=float(late.mean()),
        # inverted_cdf picks an observed delay (no interpolation between a delay and "never").
        median_delay=float(np.quantile(delays, 0.5, method="inverted_cdf")) if delays.size else math.inf,
        p90_delay=float(np.quantile(delays, 0.9, method="inverted_cdf")) if delays.size else math.inf,
        detected_by_period=[float(v) for v in curve],
    )


def run_scenario(scenario: Scenario, cfg: SimulationConfig, progress: Progress | None = None) -> ScenarioResult:
    """Simulate one scenario and evaluate the three detectors on the same draws."""
    started = time.perf_counter()
    rng = np.random.default_rng([cfg.seed, ord(scenario.key)])
    mech = scenario.switching(cfg.change_at)
    r, horizon, n = cfg.replications, cfg.horizon, cfg.samples_per_period
    a = np.empty((r, horizon), dtype=np.int64)
    b = np.empty((r, horizon), dtype=np.int64)
    step = max(1, horizon // 10)
    for t in range(1, horizon + 1):
        a[:, t - 1] = count_hits(mech, scenario.x, scenario.event, r, n, rng, t)
        b[:, t - 1] = count_hits(mech, scenario.x_prime, scenario.event, r, n, rng, t)
        if progress and (t % step == 0 or t == horizon):
            progress(f"  ({scenario.key}) period {t}/{horizon}  {time.perf_counter() - started:6.1f} s")

    threshold = threshold_for(horizon, cfg.gamma, cfg.alpha).value
    results = []
    z_score = None
    for variance in ("score", "wald"):
        z = period_statistic(a, b, n, scenario.epsilon, variance=variance).z
        if variance == "score":
            z_score = z
        m = weighted_statistic_path(z, horizon, cfg.gamma)
        results.append(evaluate_alarms(f"aggregator-{variance}", first_crossing(m, threshold), threshold, cfg))
    results.append(evaluate_alarms("naive", naive_alarm_period(z_score, cfg.alpha, horizon),
                                   naive_threshold(cfg.alpha, horizon), cfg))
    return ScenarioResult(scenario.key, scenario.title, scenario.harmful, time.perf_counter() - started, results)


def run(keys: Sequence[str], cfg: SimulationConfig, progress: Progress | None = None) -> list[ScenarioResult]:
    from app.claims.simulation import CLAIM_SCENARIOS, run_claim_scenario

    unknown = [k for k in keys if k not in SCENARIOS and k not in CLAIM_SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; choose from {sorted(SCENARIOS) + sorted(CLAIM_SCENARIOS)}")
    out = []
    for key in keys:
        if key in CLAIM_SCENARIOS:  # (i)-(l): (ε, δ), GDP and zCDP claims (app/claims/simulation.py)
            if progress:
                progress(f"scenario ({key}) {CLAIM_SCENARIOS[key].title}")
            out.append(run_claim_scenario(CLAIM_SCENARIOS[key], cfg, progress))
            continue
        if progress:
            progress(f"scenario ({key}) {SCENARIOS[key].title}")
        out.append(run_scenario(SCENARIOS[key], cfg, progress))
    return out


def _fmt(v: float, pct: bool = False) -> str:
    if math.isinf(v):
        return "never"
    return f"{100 * v:5.1f}%" if pct else f"{v:g}"


def format_table(results: Sequence[ScenarioResult], cfg: SimulationConfig) -> str:
    head = (f"R={cfg.replications} T={cfg.horizon} n={cfg.samples_per_period} change at t0={cfg.change_at} "
            f"gamma={cfg.gamma} alpha={cfg.alpha} seed={cfg.seed}\n")
    cols = ["scenario", "kind", "detector", "threshold", "FA before t0", "alarm by T", "median delay", "p90 delay"]
    rows = []
    for res in results:
        for d in res.detectors:
            rows.append([f"({res.key}) {res.title}", "harmful" if res.harmful else "benign", d.detector,
                         f"{d.threshold:.3f}", _fmt(d.false_alarms_before_change, True),
                         _fmt(d.alarm_rate_by_horizon, True), _fmt(d.median_delay), _fmt(d.p90_delay)])
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths))  # noqa: E731
    return head + "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows])


def to_json(results: Sequence[ScenarioResult], cfg: SimulationConfig) -> dict[str, Any]:
    return {
        "config": asdict(cfg),
        "scenarios": [
            {"key": r.key, "title": r.title, "harmful": r.harmful, "seconds": round(r.seconds, 2),
             "detectors": [d.summary() for d in r.detectors]}
            for r in results
        ],
    }


def write_curves_csv(results: Sequence[ScenarioResult], path: Path) -> None:
    """Proportion of runs with an alarm by each period, one row per (scenario, detector, period)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["scenario", "detector", "period", "proportion_detected"])
        for r in results:
            for d in r.detectors:
                for t, v in enumerate(d.detected_by_period, start=1):
                    w.writerow([r.key, d.detector, t, f"{v:.4f}"])


def plot_curves(results: Sequence[ScenarioResult], cfg: SimulationConfig, path: Path) -> None:
    """A grid of detection curves like the paper's Figure 3, with the change and α marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False, sharey=True)
    periods = np.arange(1, cfg.horizon + 1)
    styles = {"aggregator-score": "-", "aggregator-wald": "--", "naive": ":"}
    for ax, res in zip(axes.flat, results):
        for d in res.detectors:
            ax.plot(periods, d.detected_by_period, styles[d.detector], label=d.detector)
        ax.axvline(cfg.change_at, color="grey", lw=0.8)
        ax.axhline(cfg.alpha, color="red", lw=0.8)
        ax.set_title(f"({res.key}) {res.title}", fontsize=8)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("period t", fontsize=8)
    for ax in list(axes.flat)[len(results):]:
        ax.axis("off")
    axes[0][0].set_ylabel("proportion detected")
    axes[0][0].legend(fontsize=7, loc="center right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_json(results: Sequence[ScenarioResult], cfg: SimulationConfig, path: Path) -> None:
    path.write_text(json.dumps(to_json(results, cfg), indent=2))


def boundary_false_alarm_rate(
    n: int, p: float, epsilon: float, cfg: SimulationConfig, variance: str = "score",
    threshold: float | None = None,
) -> tuple[float, float]:
    """False-alarm rate of the aggregator on a check exactly at the null boundary p = e^ε·q.

    Counts are drawn as Binomial(n, p) and Binomial(n, p·e^{−ε}) for every run and period
    (the worst case that pure ε-DP allows for that event). Returns the rate over the horizon
    and its binomial standard error.
    """
    rng = np.random.default_rng([cfg.seed, n, int(p * 1e6)])
    q = p * math.exp(-epsilon)
    shape = (cfg.replications, cfg.horizon)
    a = rng.binomial(n, p, size=shape)
    b = rng.binomial(n, q, size=shape)
    z = period_statistic(a, b, n, epsilon, variance=variance).z  # type: ignore[arg-type]
    thr = threshold if threshold is not None else threshold_for(cfg.horizon, cfg.gamma, cfg.alpha).value
    m = weighted_statistic_path(z, cfg.horizon, cfg.gamma)
    rate = float(np.mean(first_crossing(m, thr) > 0))
    return rate, math.sqrt(rate * (1 - rate) / cfg.replications)
