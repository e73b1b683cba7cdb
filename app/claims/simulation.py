"""The claim scenarios (i)–(l) offline (``dpwatch simulate --scenarios ijkl``; method.md §10.6).

Each run draws n outputs per side and period from the scenario's deployment, which switches from
a correct Gaussian-type mechanism to a buggy one at period ``change_at``; counts in the check's
event give the anchored claim statistic z_t (method.md §10.3). Two detectors see the same z:

``aggregator``        the weighted aggregator (eq. 13) with the shipped threshold;
``naive-normal``      the per-period normal-quantile test with Bonferroni over T (eq. 11); the claim
                      scenarios compare the aggregator with it only (the e-process and e-detector are
                      simulated on the pure-ε scenarios).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from app.reference.gaussian import CLAIM_SCENARIOS, ClaimScenario
from app.simulation_results import ScenarioResult, evaluate_alarms
from app.stats.aggregator import first_crossing, weighted_statistic_path
from app.stats.claim_period import claim_z_path
from app.stats.claims import parse_claim
from app.stats.events import event_contains
from app.stats.multiple import naive_alarm_period, naive_threshold
from app.stats.thresholds import threshold_for

DRAW_CHUNK = 400_000


def _counts(mech: Any, database: Any, event: Any, replications: int, n: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(replications, dtype=np.int64)
    per = max(1, DRAW_CHUNK // n)
    for lo in range(0, replications, per):
        hi = min(replications, lo + per)
        inside = event_contains(event, mech.sample(database, (hi - lo) * n, rng)).reshape(hi - lo, n)
        out[lo:hi] = inside.sum(axis=1)
    return out


def claim_counts(scenario: ClaimScenario, replications: int, horizon: int, n: int, change_at: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Counts (R, T) on x and x' of n outputs per period, the deployment switching at ``change_at``."""
    before, after = scenario.before_mechanism(), scenario.after_mechanism()
    a = np.empty((replications, horizon), dtype=np.int64)
    b = np.empty((replications, horizon), dtype=np.int64)
    for t in range(1, horizon + 1):
        mech = before if t < change_at else after
        a[:, t - 1] = _counts(mech, scenario.x, scenario.event, replications, n, rng)
        b[:, t - 1] = _counts(mech, scenario.x_prime, scenario.event, replications, n, rng)
    return a, b


def run_claim_scenario(scenario: ClaimScenario, cfg: Any, progress: Any = None) -> Any:
    """Like :func:`app.simulation.run_scenario` for a claim scenario (returns a ScenarioResult)."""

    started = time.perf_counter()
    rng = np.random.default_rng([cfg.seed, ord(scenario.key)])
    if progress:
        progress(f"  ({scenario.key}) drawing {cfg.replications} x {cfg.horizon} periods")
    a, b = claim_counts(scenario, cfg.replications, cfg.horizon, cfg.samples_per_period, cfg.change_at, rng)
    z = claim_z_path(a, b, cfg.samples_per_period, parse_claim(scenario.claim))
    threshold = threshold_for(cfg.horizon, cfg.gamma, cfg.alpha).value
    m = weighted_statistic_path(z, cfg.horizon, cfg.gamma)
    detectors = [
        evaluate_alarms("aggregator", first_crossing(m, threshold), threshold, cfg),
        evaluate_alarms("naive-normal", naive_alarm_period(z, cfg.alpha, cfg.horizon), naive_threshold(cfg.alpha, cfg.horizon),
                        cfg),
    ]
    title = f"{scenario.title} [{parse_claim(scenario.claim).describe()}]"
    return ScenarioResult(scenario.key, title, True, time.perf_counter() - started, detectors)


__all__ = ["CLAIM_SCENARIOS", "claim_counts", "run_claim_scenario"]
