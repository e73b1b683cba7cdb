"""Offline comparison of the detectors on the monitoring paper's scenarios (seed 002 §4.2, Figure 3).

For each scenario (a)–(h) of method.md §8, R independent monitoring runs of T periods draw n
outputs per side and period from a reference mechanism that changes at period ``change_at``.
Every detector sees the same draws (``--detectors``):

``aggregator``       the weighted aggregator (eq. 13) on z with the score variance (default), at its
                     Monte-Carlo threshold q_{1−α}(T, γ): P(false alarm by T) ≤ α.
``aggregator-wald``  the same with the paper's variance, eq. (8) + (16) (the paper as written).
``naive``            the fair naive baseline: each period's exact test at α/T (method.md §13.5).
``naive-normal``     the paper's naive auditor z_t > Φ⁻¹(1 − α/T) (eq. 11), kept for comparison.
``e-process``        the service's mixture test martingale (method.md §13.3, §13.3c; with the horizon-tuned bet for
                     the horizon T, §13.3d; long runs: without it): P(false alarm, ever) ≤ α.
``e-detector``       the mixture e-SR detector (method.md §13.4) at c = T/α: P(false alarm by T) ≤ α.

:func:`run_long` compares them over long runs with the change at t = 5,000 or 50,000, with
counts drawn from the scenarios' exact probabilities; there the aggregator is renewed every
``renew_horizon`` periods at α_j = 6α/(π² j²), as a monitor with ``renew`` runs it.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.claims.simulation import CLAIM_SCENARIOS, run_claim_scenario
from app.reference import SCENARIOS, Scenario
from app.simulation_results import (  # noqa: F401  (re-exported: the CLI, tests and bench use them from here)
    DEFAULT_DETECTORS,
    DETECTOR_CHOICES,
    GUARANTEES,
    DetectorResult,
    ScenarioResult,
    SimulationConfig,
    clopper_pearson,
    evaluate_alarms,
    parse_detectors,
)
from app.stats.aggregator import first_alarm_renewed, first_crossing, weighted_statistic_path
from app.stats.events import event_contains
from app.stats.exact_naive import exact_naive_alarm_period, exact_naive_test
from app.stats.multiple import naive_alarm_period, naive_threshold, renewal_alpha
from app.stats.period import period_statistic
from app.stats.sequential import SERVICE_DESIGN, SupportingLine, e_detector_paths, edetector_threshold, service_design
from app.stats.thresholds import quantile_with_error, simulate_max_statistic, threshold_for

#: Outputs drawn per call to a mechanism; bounds memory for vector outputs (SVT).
DRAW_CHUNK = 200_000

Progress = Callable[[str], None]


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


def _first_at_least(statistic: NDArray[np.float64], threshold: float) -> NDArray[np.int64]:
    above = statistic >= threshold
    return np.where(above.any(axis=-1), above.argmax(axis=-1) + 1, 0)


def alarm_periods(name: str, a: NDArray[np.int64], b: NDArray[np.int64], n: int, epsilon: float,
                  cfg: SimulationConfig) -> tuple[NDArray[np.int64], float]:
    """First alarm period (0 = none) of detector ``name`` on counts of shape (R, T), and its threshold."""
    horizon = a.shape[-1]
    line = SupportingLine.pure(epsilon)
    if name in ("aggregator", "aggregator-wald"):
        threshold = threshold_for(horizon, cfg.gamma, cfg.alpha).value
        z = period_statistic(a, b, n, epsilon, variance="score" if name == "aggregator" else "wald").z
        return first_crossing(weighted_statistic_path(z, horizon, cfg.gamma), threshold), threshold
    if name == "naive":
        test = exact_naive_test(int(n), line, cfg.alpha / horizon)
        # The randomised exact test (size exactly α/T per period, method.md §13.5), own seed.
        u_rng = np.random.default_rng([cfg.seed, 7919, int(n), horizon])
        return exact_naive_alarm_period(a, b, n, line, cfg.alpha, horizon, rng=u_rng), test.threshold
    if name == "naive-normal":
        z = period_statistic(a, b, n, epsilon).z
        return naive_alarm_period(z, cfg.alpha, horizon), naive_threshold(cfg.alpha, horizon)
    if name == "e-process":  # the service's e-process for a check with a horizon of T periods (method.md §13.3d)
        log_w = service_design(horizon).paths(a, b, n, line, alpha=cfg.alpha)
        return _first_at_least(log_w, math.log(1 / cfg.alpha)), 1 / cfg.alpha
    if name == "e-detector":
        c = edetector_threshold(cfg.alpha, horizon)
        # the service's e-detector: the predictable face (method.md §13.3c, §13.4)
        return _first_at_least(e_detector_paths(a, b, n, line, faces="auto"), math.log(c)), c
    raise ValueError(f"unknown detector {name!r}")


def run_scenario(scenario: Scenario, cfg: SimulationConfig, progress: Progress | None = None) -> ScenarioResult:
    """Simulate one scenario and evaluate the chosen detectors on the same draws."""
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
    results = []
    for name in cfg.detectors:
        first, threshold = alarm_periods(name, a, b, n, scenario.epsilon, cfg)
        results.append(evaluate_alarms(name, first, threshold, cfg.change_at, horizon, n))
    return ScenarioResult(scenario.key, scenario.title, scenario.harmful, time.perf_counter() - started, results)


def run(keys: Sequence[str], cfg: SimulationConfig, progress: Progress | None = None) -> list[ScenarioResult]:
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


# ---------------------------------------------------------------------------------------------
# Long runs: the change after 5,000 or 50,000 stable periods.
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LongRunConfig:
    """A run of ``change_at − 1`` stable periods and ``after`` changed ones (length L).

    Every detector holds P(false alarm during the run) ≤ α: the e-process (ever), the e-detector
    at c = L/α, the naive test at α/L, and the aggregator renewed every ``renew_horizon`` periods
    at α_j = 6α/(π² j²), j = 1, 2, … (its thresholds are drawn once, by Monte Carlo with
    ``threshold_replications`` paths, from a seed other than the runs').
    """

    change_at: int = 5000
    after: int = 1000
    replications: int = 200
    samples_per_period: int = 200
    renew_horizon: int = 1000
    gamma: float = 0.25
    alpha: float = 0.05
    seed: int = 2024
    threshold_replications: int | None = None
    detectors: tuple[str, ...] = DEFAULT_DETECTORS

    def __post_init__(self) -> None:
        if self.change_at < 1 or self.after < 1 or self.replications < 1 or self.samples_per_period < 1:
            raise ValueError("change_at, after, replications and samples_per_period must be >= 1")
        if self.renew_horizon < 2:
            raise ValueError("renew_horizon must be >= 2")
        object.__setattr__(self, "detectors", parse_detectors(self.detectors))
        bad = [d for d in self.detectors if d in ("aggregator-wald", "naive-normal")]
        if bad:
            raise ValueError(f"long runs support aggregator, naive, e-process and e-detector, not {bad}")

    @property
    def length(self) -> int:
        return self.change_at - 1 + self.after


LONG_RUN_GUARANTEES = {
    "aggregator": "P(FA by L) <= alpha (renewed horizons at alpha_j)",
    "naive": "P(FA by L) <= alpha (exact, Bonferroni over L)",
    "e-process": "P(FA ever) <= alpha",
    "e-detector": "P(FA by L) <= alpha, ARL >= L/alpha",
}


def renewal_thresholds(horizon: int, gamma: float, alpha: float, count: int, replications: int | None = None,
                       seed: int = 7_777) -> NDArray[np.float64]:
    """q_{1−α_j}(T, γ) for j = 1..count, α_j = 6α/(π² j²), from one Monte-Carlo sample of M*."""
    alphas = [renewal_alpha(alpha, j) for j in range(1, count + 1)]
    reps = replications or int(min(2_000_000, max(100_000, 50 / alphas[-1])))
    sample = simulate_max_statistic(horizon, gamma, reps, seed)
    return np.array([quantile_with_error(sample, a)[0] for a in alphas])


def exact_check_probabilities(scenario: Scenario) -> dict[str, tuple[float, float]]:
    """(p, q) of the scenario's check before and after the change, by formula or quadrature."""
    from app.reference.exact import exact_probability

    out = {}
    for phase, mech in (("before", scenario.before_mechanism()), ("after", scenario.after_mechanism())):
        out[phase] = (exact_probability(mech, scenario.x, scenario.event),
                      exact_probability(mech, scenario.x_prime, scenario.event))
    return out


def run_long_scenario(scenario: Scenario, cfg: LongRunConfig, thresholds: NDArray[np.float64] | None,
                      progress: Progress | None = None) -> ScenarioResult:
    started = time.perf_counter()
    probs = exact_check_probabilities(scenario)
    rng = np.random.default_rng([cfg.seed, ord(scenario.key), cfg.change_at])
    r, n, length = cfg.replications, cfg.samples_per_period, cfg.length
    before = cfg.change_at - 1
    a = np.empty((r, length), dtype=np.int32)
    b = np.empty((r, length), dtype=np.int32)
    (p0, q0), (p1, q1) = probs["before"], probs["after"]
    a[:, :before] = rng.binomial(n, p0, size=(r, before))
    b[:, :before] = rng.binomial(n, q0, size=(r, before))
    a[:, before:] = rng.binomial(n, p1, size=(r, cfg.after))
    b[:, before:] = rng.binomial(n, q1, size=(r, cfg.after))
    line = SupportingLine.pure(scenario.epsilon)
    results = []
    for name in cfg.detectors:
        t0 = time.perf_counter()
        if name == "aggregator":
            assert thresholds is not None
            z = period_statistic(a, b, n, scenario.epsilon).z
            first = first_alarm_renewed(z, cfg.renew_horizon, cfg.gamma, thresholds)
            threshold = float(thresholds[0])
        elif name == "naive":
            threshold = exact_naive_test(int(n), line, cfg.alpha / length).threshold
            first = exact_naive_alarm_period(a, b, n, line, cfg.alpha, length,
                                             rng=np.random.default_rng([cfg.seed, 7919, int(n), length]))
        elif name == "e-process":
            threshold = 1 / cfg.alpha
            first = _first_at_least(SERVICE_DESIGN.paths(a, b, n, line), math.log(threshold))
        else:
            threshold = edetector_threshold(cfg.alpha, length)
            first = _first_at_least(e_detector_paths(a, b, n, line), math.log(threshold))
        res = evaluate_alarms(name, first, threshold, cfg.change_at, length, n, curve=False)
        res = replace(res, guarantee=LONG_RUN_GUARANTEES[name])
        results.append(res)
        if progress:
            progress(f"  ({scenario.key}) {name}: {time.perf_counter() - t0:6.1f} s")
    return ScenarioResult(scenario.key, scenario.title, scenario.harmful, time.perf_counter() - started, results)


def run_long(keys: Sequence[str], cfg: LongRunConfig, progress: Progress | None = None) -> list[ScenarioResult]:
    unknown = [k for k in keys if k not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; choose from {sorted(SCENARIOS)}")
    thresholds = None
    if "aggregator" in cfg.detectors:
        count = -(-cfg.length // cfg.renew_horizon)
        if progress:
            progress(f"aggregator thresholds for {count} renewed horizons of {cfg.renew_horizon} periods")
        thresholds = renewal_thresholds(cfg.renew_horizon, cfg.gamma, cfg.alpha, count, cfg.threshold_replications)
    out = []
    for key in keys:
        if progress:
            progress(f"scenario ({key}) {SCENARIOS[key].title}: change at t = {cfg.change_at}")
        out.append(run_long_scenario(SCENARIOS[key], cfg, thresholds, progress))
    return out


# ---------------------------------------------------------------------------------------------
# Output: table, strict JSON, CSV, figures.
# ---------------------------------------------------------------------------------------------

def _fmt(v: float, pct: bool = False) -> str:
    if math.isinf(v):
        return "never"
    return f"{100 * v:5.1f}%" if pct else f"{v:g}"


def _fmt_threshold(name: str, v: float) -> str:
    if name.startswith("aggregator"):
        return f"M>{v:.3f}"
    if name.startswith("naive"):
        return "never" if math.isinf(v) else f"z>{v:.3f}"
    if name == "e-process":
        return f"W>={v:g}"
    return f"M>={v:.4g}"


def _head(cfg: SimulationConfig | LongRunConfig) -> str:
    if isinstance(cfg, LongRunConfig):
        return (f"long run: R={cfg.replications} n={cfg.samples_per_period} change at t0={cfg.change_at} "
                f"run length L={cfg.length} alpha={cfg.alpha} aggregator renewed every {cfg.renew_horizon} "
                f"(gamma={cfg.gamma}) seed={cfg.seed}\n")
    return (f"R={cfg.replications} T={cfg.horizon} n={cfg.samples_per_period} change at t0={cfg.change_at} "
            f"gamma={cfg.gamma} alpha={cfg.alpha} seed={cfg.seed}\n")


def format_table(results: Sequence[ScenarioResult], cfg: SimulationConfig | LongRunConfig) -> str:
    cols = ["scenario", "kind", "detector", "threshold", "FA before t0 [95% CI]", "alarm by end",
            "median delay", "p90 delay", "median samples/side"]
    rows = []
    for res in results:
        for d in res.detectors:
            lo, hi = d.false_alarm_ci
            rows.append([f"({res.key}) {res.title}", "harmful" if res.harmful else "benign", d.detector,
                         _fmt_threshold(d.detector, d.threshold),
                         f"{_fmt(d.false_alarms_before_change, True)} [{100 * lo:.1f}, {100 * hi:.1f}]",
                         _fmt(d.alarm_rate_by_horizon, True), _fmt(d.median_delay), _fmt(d.p90_delay),
                         _fmt(d.median_samples)])
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths))  # noqa: E731
    notes = ("\ndelay: periods from the first changed period to the alarm (0 = alarm in that period); "
             "'never': more than half (median) or 10% (p90) of the runs did not detect the change by the end.")
    return _head(cfg) + "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows]) + notes


def _strict(value: Any) -> Any:
    """Replace non-finite floats by None, recursively (JSON has no Infinity or NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


JSON_NULLS = ("null means 'not reached': a median_delay/p90_delay/median_samples of null means more than "
              "half (10% for p90) of the runs never detected the change by the end of the run; a naive "
              "threshold of null means the exact test cannot reject at that level with that n.")


def to_json(results: Sequence[ScenarioResult], cfg: SimulationConfig | LongRunConfig) -> dict[str, Any]:
    """The summary as strict JSON data: non-finite numbers become null (see ``nulls``)."""
    config = asdict(cfg)
    config["mode"] = "long-run" if isinstance(cfg, LongRunConfig) else "scenarios"
    if isinstance(cfg, LongRunConfig):
        config["length"] = cfg.length
    return _strict({
        "config": config,
        "nulls": JSON_NULLS,
        "scenarios": [
            {"key": r.key, "title": r.title, "harmful": r.harmful, "seconds": round(r.seconds, 2),
             "detectors": [d.summary() for d in r.detectors]}
            for r in results
        ],
    })


def dumps_json(results: Sequence[ScenarioResult], cfg: SimulationConfig | LongRunConfig) -> str:
    return json.dumps(to_json(results, cfg), indent=2, allow_nan=False)


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


_STYLES = {"aggregator": "-", "aggregator-wald": "--", "naive": ":", "naive-normal": (0, (1, 3)),
           "e-process": "-.", "e-detector": (0, (5, 1))}


def plot_curves(results: Sequence[ScenarioResult], cfg: SimulationConfig, path: Path) -> None:
    """A grid of detection curves like the paper's Figure 3, with the change and α marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False, sharey=True)
    periods = np.arange(1, cfg.horizon + 1)
    for ax, res in zip(axes.flat, results):
        for d in res.detectors:
            ax.plot(periods, d.detected_by_period, linestyle=_STYLES.get(d.detector, "-"), label=d.detector)
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


def plot_summary(results: Sequence[ScenarioResult], cfg: SimulationConfig | LongRunConfig, path: Path) -> None:
    """Three panels per detector and scenario: false alarms before the change (95% CI, α marked),
    median detection delay (bar) with its p90 (tick), and median samples per side to detection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(d.detector for r in results for d in r.detectors))
    keys = [r.key for r in results]
    x = np.arange(len(keys))
    width = 0.8 / max(1, len(names))
    fig, axes = plt.subplots(3, 1, figsize=(max(7.0, 1.1 * len(keys) + 2.0), 9.0))
    finite_p90 = [d.p90_delay for r in results for d in r.detectors if math.isfinite(d.p90_delay)]
    top = max(finite_p90, default=1.0)
    for i, name in enumerate(names):
        pos = x - 0.4 + (i + 0.5) * width
        ds = [next(d for d in r.detectors if d.detector == name) for r in results]
        fa = np.array([d.false_alarms_before_change for d in ds])
        lo = np.array([d.false_alarm_ci[0] for d in ds])
        hi = np.array([d.false_alarm_ci[1] for d in ds])
        axes[0].bar(pos, fa, width, yerr=[fa - lo, hi - fa], capsize=2, label=name)
        med = np.array([d.median_delay for d in ds])
        p90 = np.array([d.p90_delay for d in ds])
        axes[1].bar(pos, np.where(np.isfinite(med), med, 0.0), width)
        axes[1].scatter(pos[np.isfinite(p90)], p90[np.isfinite(p90)], marker="_", color="black", s=60)
        never = ~np.isfinite(med)
        axes[1].scatter(pos[never], np.full(never.sum(), top * 1.05 + 1), marker="x", color="red", s=20)
        samples = np.array([d.median_samples for d in ds])
        axes[2].bar(pos, np.where(np.isfinite(samples), samples, np.nan), width)
    axes[0].axhline(cfg.alpha, color="red", lw=0.8)
    axes[0].set_title("false alarms before the change (95% CI)", fontsize=9)
    axes[1].set_title("detection delay: median (bar), p90 (tick), x = never", fontsize=9)
    axes[2].set_title("median samples per side to detection", fontsize=9)
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xticks(x, [f"({k})" for k in keys])
    axes[0].legend(fontsize=7, ncol=len(names))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_json(results: Sequence[ScenarioResult], cfg: SimulationConfig | LongRunConfig, path: Path) -> None:
    path.write_text(dumps_json(results, cfg))


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


def boundary_false_alarms(n: int, p: float, epsilon: float, cfg: SimulationConfig) -> dict[str, tuple[float, float, float]]:
    """False-alarm rate by T of every detector of ``cfg`` on a check exactly on the boundary p = e^ε·q.

    The same draws (Binomial(n, p) and Binomial(n, p·e^{−ε}), R runs of T periods) for all of
    them. Returns, per detector, (rate, 95% Clopper–Pearson low, high).
    """
    rng = np.random.default_rng([cfg.seed, n, int(round(p * 1e7)), int(round(epsilon * 1e4))])
    q = p * math.exp(-epsilon)
    shape = (cfg.replications, cfg.horizon)
    a = rng.binomial(n, p, size=shape)
    b = rng.binomial(n, q, size=shape)
    out = {}
    for name in cfg.detectors:
        first, _ = alarm_periods(name, a, b, n, epsilon, cfg)
        k = int(np.sum(first > 0))
        lo, hi = clopper_pearson(k, cfg.replications)
        out[name] = (k / cfg.replications, lo, hi)
    return out
