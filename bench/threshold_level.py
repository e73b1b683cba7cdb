"""Realised level of the shipped threshold table against an independent simulation.

    nice -n 10 python bench/threshold_level.py                     # T = 50, 200, 1000; gamma = 0.25 (+ 0, 0.4 at T = 50)
    python bench/threshold_level.py --designs 50:0.25 --paths 200000 --old /tmp/old_thresholds.json

For each design (T, γ) it draws ``--paths`` fresh paths of M* (seed 2026_0000 + …, disjoint from
the table's seeds) and reports, for α and its Bonferroni shares α/m, the fraction of paths with
M* > q (the realised level) and its 95% Clopper–Pearson interval. With ``--old`` it also reports
the level of another table (for instance the earlier 10⁵-path table) on the same paths.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist

from app.stats.thresholds import simulate_max_statistic, table_entries

ALPHAS = (0.1, 0.05, 0.025, 0.0125, 0.01, 0.00625, 0.005, 0.001, 0.00125)


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta_dist.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(0.975, k + 1, n - k))
    return lo, hi


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--designs", nargs="+", default=["50:0.25", "50:0.0", "50:0.4", "200:0.25", "1000:0.25"],
                    help="T:gamma pairs")
    ap.add_argument("--paths", type=int, default=1_000_000)
    ap.add_argument("--old", type=Path, default=None, help="Another table (JSON) to measure on the same paths.")
    args = ap.parse_args(argv)
    table = {(e.horizon, round(e.gamma, 9), round(e.alpha, 12)): e for e in table_entries()}
    old = {}
    if args.old:
        for e in json.loads(args.old.read_text())["entries"]:
            old[(e["horizon"], round(e["gamma"], 9), round(e["alpha"], 12))] = e["value"]
    print(f"independent paths per design: {args.paths}")
    print("| T | γ | α | q (table) | realised level [95% CI] | level/α |" + (" old q | old level |" if old else ""))
    print("|---|---|---|---|---|---|" + ("---|---|" if old else ""))
    for i, spec in enumerate(args.designs):
        horizon, gamma = int(spec.split(":")[0]), float(spec.split(":")[1])
        t0 = time.perf_counter()
        sample = simulate_max_statistic(horizon, gamma, args.paths, seed=2026_0000 + 97 * i + horizon)
        for alpha in ALPHAS:
            key = (horizon, round(gamma, 9), round(alpha, 12))
            if key not in table:
                continue
            q = table[key].value
            k = int(np.sum(sample > q))
            lo, hi = clopper_pearson(k, args.paths)
            row = f"| {horizon} | {gamma} | {alpha:g} | {q:.4f} | {k / args.paths:.5f} [{lo:.5f}, {hi:.5f}] | {k / args.paths / alpha:.3f} |"
            if old and key in old:
                ko = int(np.sum(sample > old[key]))
                row += f" {old[key]:.4f} | {ko / args.paths:.5f} |"
            print(row, flush=True)
        print(f"  (T={horizon}, gamma={gamma}: {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
