"""A monitor check's stated detection power against the service's own detectors (docs/method.md §13.11).

For each cell: X = the smallest ε the check states it catches within K periods with probability ≥ 0.9
(app.stats.monitor_power), then the fraction of seeded runs in which the service's detector
(app.monitors.detectors, ε = 1, α = 0.05, T = 200) alarms within K periods at p = e^X q, and at the
halfway violation (1 + X)/2.

    nice -n 10 .venv/bin/python bench/monitor_power.py --runs 1000
"""

from __future__ import annotations

import argparse
import math
import time

from app.stats.monitor_power import smallest_caught_violation
from tests.monitors.test_monitor_power import EPS, _design, _detected_within

CELLS = [("e-process", 200, 0.1, 10), ("e-process", 1000, 0.01, 10), ("e-process", 200, 0.1, 1),
         ("e-detector", 200, 0.1, 10), ("e-detector", 200, 0.1, 1), ("aggregator", 200, 0.1, 10),
         ("aggregator", 1000, 0.01, 10), ("aggregator", 200, 0.01, 50)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    print(f"runs {args.runs}, seed {args.seed}")
    print("| detector | n, q, K | X | caught within K at X | at (1 + X)/2 | seconds |")
    print("|---|---|---|---|---|---|")
    for det, n, q, k in CELLS:
        t0 = time.time()
        res = smallest_caught_violation(det, n=n, q=q, epsilon=EPS, periods=k, **_design(det))  # type: ignore[arg-type]
        if res.epsilon is None:
            print(f"| {det} | {n}, {q:g}, {k} | none | | | |")
            continue
        at_x = _detected_within(det, n, res.violation_p, q, k, args.runs, args.seed)
        half = EPS + (res.epsilon - EPS) / 2
        at_half = _detected_within(det, n, math.exp(half) * q, q, k, args.runs, args.seed + 1)
        print(f"| {det} | {n}, {q:g}, {k} | {res.epsilon:.2f} | {at_x:.3f} | {at_half:.3f} | {time.time() - t0:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
