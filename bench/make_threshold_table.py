"""Generate the shipped threshold table app/stats/data/thresholds.json (method.md §3).

    nice -n 10 python bench/make_threshold_table.py          # the full grid, 10⁶ paths per (T, γ)
    python bench/make_threshold_table.py --horizons 10 100 --gammas 0.25 --replications 20000 --out /tmp/t.json

One Monte-Carlo sample of M* per (T, γ) serves every α of the grid (the common levels and the
Bonferroni shares α/m, m ≤ 8). Every entry records its replications, seed and standard error.

Each (T, γ) is appended to a checkpoint file (``--checkpoint``, JSON lines) as soon as it is
done, and a run started again with the same arguments skips what the checkpoint already has,
so an interrupted run loses at most one (T, γ). Cheap designs run first.

Where 10⁶ paths cost too much (horizons above ``--large-above``, 2000 by default, with γ > 0:
about 10 CPU-minutes each at T = 10⁴), ``--large-replications`` paths are drawn instead (2·10⁵)
and the table ships the **upper 95% confidence limit** of each quantile instead of its point
estimate: the order statistic whose rank is one-sided 95% above R·(1 − α), so that its realised
level is ≤ α with 95% confidence. Every entry records which one it ships (``shipped``), its
replications, seed, standard error, point estimate and upper limit.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from app.stats.thresholds import quantile_with_error, simulate_max_statistic, table_grid

OUT = Path(__file__).resolve().parents[1] / "app" / "stats" / "data" / "thresholds.json"
#: The base seed of the 10⁶-path table (the earlier 10⁵-path table used 20240601).
TABLE_SEED = 20_260_301


def upper_confidence_limit(sorted_sample: np.ndarray, alpha: float, confidence: float = 0.95) -> float:
    """An upper confidence limit for q_{1−α}: the order statistic of rank ⌈R(1−α) + z·√(Rα(1−α))⌉.

    P(#{M* ≤ q_{1−α}} ≥ rank) ≤ 1 − confidence (normal approximation of the binomial count), so
    the order statistic of that rank is ≥ q_{1−α} with the stated confidence.
    """
    from scipy.stats import norm

    r = sorted_sample.size
    rank = math.ceil(r * (1 - alpha) + norm.ppf(confidence) * math.sqrt(r * alpha * (1 - alpha)))
    return float(sorted_sample[min(r - 1, rank - 1)])


def design_cost(horizon: int, gamma: float) -> float:
    """Rough relative cost of a (T, γ), to run cheap designs first."""
    return horizon * (1.0 if gamma == 0 else math.sqrt(horizon))


def main(argv: list[str] | None = None) -> int:
    horizons, gammas, alphas = table_grid()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--horizons", type=int, nargs="+", default=list(horizons))
    ap.add_argument("--gammas", type=float, nargs="+", default=list(gammas))
    ap.add_argument("--replications", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=TABLE_SEED)
    ap.add_argument("--large-above", type=int, default=2000,
                    help="Horizons above this (with gamma > 0) use --large-replications and ship the UCL.")
    ap.add_argument("--large-replications", type=int, default=200_000)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--checkpoint", type=Path, default=None, help="JSON-lines file of finished designs "
                    "(default: OUT with suffix .partial.jsonl).")
    args = ap.parse_args(argv)
    checkpoint = args.checkpoint or args.out.with_suffix(".partial.jsonl")

    def large(horizon: int, gamma: float) -> bool:
        return horizon > args.large_above and gamma > 0

    def planned(horizon: int, gamma: float) -> int:
        return args.large_replications if large(horizon, gamma) else args.replications

    done: dict[tuple[int, float], list[dict]] = {}
    if checkpoint.exists():
        for line in checkpoint.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                if rec["replications"] == planned(rec["horizon"], rec["gamma"]) and rec["base_seed"] == args.seed:
                    done[(rec["horizon"], rec["gamma"])] = rec["entries"]
        print(f"resuming: {len(done)} designs already in {checkpoint}", file=sys.stderr)

    designs = sorted(((h, g) for g in args.gammas for h in args.horizons), key=lambda d: design_cost(*d))
    started = time.perf_counter()
    for horizon, gamma in designs:
        if (horizon, gamma) in done:
            continue
        gi = list(gammas).index(gamma) if gamma in gammas else len(gammas)
        hi = list(horizons).index(horizon) if horizon in horizons else len(horizons) + horizon
        seed = args.seed + 1000 * gi + hi
        t0 = time.perf_counter()
        last = [0.0]

        def progress(d: int, total: int) -> None:
            if time.perf_counter() - last[0] > 60:
                last[0] = time.perf_counter()
                print(f"  T={horizon} gamma={gamma}: {d}/{total}", file=sys.stderr, flush=True)

        reps = planned(horizon, gamma)
        sample = np.sort(simulate_max_statistic(horizon, gamma, reps, seed, progress))
        ucl = large(horizon, gamma)
        entries = []
        for alpha in alphas:
            value, se = quantile_with_error(sample, alpha)
            upper = upper_confidence_limit(sample, alpha)
            entries.append({"horizon": horizon, "gamma": gamma, "alpha": alpha,
                            "value": round(upper if ucl else value, 6), "std_error": round(se, 6),
                            "estimate": round(value, 6), "upper_95": round(upper, 6),
                            "shipped": "upper_95" if ucl else "estimate",
                            "replications": reps, "seed": seed})
        done[(horizon, gamma)] = entries
        with checkpoint.open("a") as fh:
            fh.write(json.dumps({"horizon": horizon, "gamma": gamma, "replications": reps,
                                 "base_seed": args.seed, "entries": entries}) + "\n")
        q05 = quantile_with_error(sample, 0.05)[0]
        print(f"T={horizon:>6} gamma={gamma:<5} R={reps:>8} q95={q05:.4f} "
              f"({time.perf_counter() - t0:7.1f} s, total {time.perf_counter() - started:8.1f} s)",
              file=sys.stderr, flush=True)

    entries = [e for h, g in sorted(done) for e in done[(h, g)] if h in args.horizons and g in args.gammas]
    entries.sort(key=lambda e: (e["gamma"], e["horizon"], -e["alpha"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "description": "Upper alpha-quantiles of M* (seed 002 eq. 15) by Monte Carlo; "
                       "see bench/make_threshold_table.py. 'value' is what monitors use.",
        "alphas": list(alphas), "entries": entries,
    }, indent=1))
    print(f"wrote {len(entries)} entries to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
