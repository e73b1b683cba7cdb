"""Time the Monte-Carlo threshold (target: T=1000, gamma=1/4, 1e5 replications in <= 15 s on one core).

    python bench/threshold_speed.py
    python bench/threshold_speed.py --horizons 100 1000 --replications 100000

The kernel is single-threaded; the first call also compiles it (numba, cached on disk), so the
script times a warm-up call separately.
"""

from __future__ import annotations

import argparse
import time

from app.stats.thresholds import threshold_quantile


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--horizons", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--replications", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    threshold_quantile(10, args.gamma, 0.05, replications=10, seed=0)
    print(f"warm-up (compile or load cache): {time.perf_counter() - t0:.2f} s")
    print(f"{'T':>6} {'gamma':>6} {'R':>8} {'q95':>8} {'s.e.':>7} {'best s':>7} {'mean s':>7}")
    for horizon in args.horizons:
        times = []
        for rep in range(args.repeats):
            t0 = time.perf_counter()
            est = threshold_quantile(horizon, args.gamma, 0.05, replications=args.replications, seed=rep)
            times.append(time.perf_counter() - t0)
        print(f"{horizon:>6} {args.gamma:>6} {args.replications:>8} {est.value:>8.4f} {est.std_error:>7.4f} "
              f"{min(times):>7.2f} {sum(times) / len(times):>7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
