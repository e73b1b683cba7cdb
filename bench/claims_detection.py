"""Detection of the buggy Gaussian variants under their claims, against the naive auditor.

    nice -n 10 .venv/bin/python bench/claims_detection.py                 # the table in docs/benchmarks.md
    .venv/bin/python bench/claims_detection.py -R 100 --ns 200           # a quick look

Scenarios (i)–(l) of app/reference/gaussian.py: a correct mechanism until period t0, then its
buggy variant. Both detectors see the same anchored claim statistic z_t (method.md §10.3): the
weighted aggregator (eq. 13, shipped threshold) and the naive auditor (one-period test with
Bonferroni over T, eq. 11). Delays count periods from t0 (0: the first changed period).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from app.claims.simulation import CLAIM_SCENARIOS, run_claim_scenario
from app.simulation import SimulationConfig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replications", "-R", type=int, default=500)
    ap.add_argument("--horizon", "-T", type=int, default=100)
    ap.add_argument("--change-at", type=int, default=20)
    ap.add_argument("--ns", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--scenarios", default="ijkl")
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args(argv)
    print(f"R={args.replications} T={args.horizon} t0={args.change_at} gamma=0.25 alpha=0.05 seed={args.seed}")
    print("| scenario | claim | n | detector | false alarms before t0 | detected by T | median delay | p90 delay |")
    print("|---|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    missed = 0
    for key in args.scenarios:
        scenario = CLAIM_SCENARIOS[key]
        for n in args.ns:
            cfg = SimulationConfig(args.replications, args.horizon, n, args.change_at, 0.25, 0.05, args.seed)
            res = run_claim_scenario(scenario, cfg)
            for d in res.detectors:
                fmt = lambda v: "never" if math.isinf(v) else f"{v:g}"  # noqa: E731
                print(f"| ({key}) {scenario.title} | {scenario.before_mechanism().claim_object().describe()} | {n} | "
                      f"{d.detector} | {100 * d.false_alarms_before_change:.1f}% | {100 * d.detected_after_change:.1f}% | "
                      f"{fmt(d.median_delay)} | {fmt(d.p90_delay)} |", flush=True)
                if d.detector == "aggregator" and math.isinf(d.median_delay):
                    missed += 1
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
