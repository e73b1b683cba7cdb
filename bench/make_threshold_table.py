"""Generate the shipped threshold table app/stats/data/thresholds.json (method.md §3).

    python bench/make_threshold_table.py                # the full grid (about 25 min on one core)
    python bench/make_threshold_table.py --horizons 10 100 --gammas 0.25 --out /tmp/t.json

One Monte-Carlo sample of M* per (T, γ) serves every α of the grid. Horizons of 5000 and more use
fewer replications (they cost O(T) per replication and more); each entry records its count.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from app.stats.thresholds import DEFAULT_SEED, quantile_with_error, simulate_max_statistic, table_grid

OUT = Path(__file__).resolve().parents[1] / "app" / "stats" / "data" / "thresholds.json"


def replications_for(horizon: int, base: int) -> int:
    return base if horizon < 5000 else max(base // 5, 1000)


def main(argv: list[str] | None = None) -> int:
    horizons, gammas, alphas = table_grid()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--horizons", type=int, nargs="+", default=list(horizons))
    ap.add_argument("--gammas", type=float, nargs="+", default=list(gammas))
    ap.add_argument("--replications", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    entries = []
    started = time.perf_counter()
    for gi, gamma in enumerate(args.gammas):
        for hi, horizon in enumerate(args.horizons):
            reps = replications_for(horizon, args.replications)
            seed = args.seed + 1000 * gi + hi
            t0 = time.perf_counter()
            sample = simulate_max_statistic(horizon, gamma, reps, seed)
            for alpha in alphas:
                value, se = quantile_with_error(sample, alpha)
                entries.append({"horizon": horizon, "gamma": gamma, "alpha": alpha, "value": round(value, 6),
                                "std_error": round(se, 6), "replications": reps, "seed": seed})
            q05 = quantile_with_error(sample, 0.05)[0]
            print(f"T={horizon:>6} gamma={gamma:<5} R={reps:>7} q95={q05:.4f} "
                  f"({time.perf_counter() - t0:6.1f} s, total {time.perf_counter() - started:7.1f} s)",
                  file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "description": "Upper alpha-quantiles of M* (seed 002 eq. 15) by Monte Carlo; see bench/make_threshold_table.py",
        "alphas": list(alphas), "entries": entries,
    }, indent=1))
    print(f"wrote {len(entries)} entries to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
