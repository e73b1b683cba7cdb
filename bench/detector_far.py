"""False-alarm rate of every detector on checks exactly on the boundary p = e^ε·q.

    nice -n 10 python bench/detector_far.py                  # the study grid below, R = 2000, T = 200
    python bench/detector_far.py --ns 10 200 --ps 0.5 --epsilons 1 --replications 500

For each (n, p, ε) of the grid, R runs of T periods draw Binomial(n, p) and Binomial(n, p·e^{−ε})
counts (the worst case pure ε-DP allows for that event: D = 0 in every period) and every
detector sees the same draws. A false alarm is any alarm within the T periods:

  aggregator  q_{1−α}(T, γ) from the shipped table (P(FA by T) ≤ α, Monte Carlo)
  naive       each period's exact test at α/T (P(FA by T) ≤ α, exact)
  e-process   W_t ≥ 1/α (P(FA ever) ≤ α, Ville)
  e-detector  M_t ≥ T/α (P(FA by T) ≤ α)

Prints one row per cell with each rate and its 95% Clopper–Pearson interval, and whether the rate
is ≤ α + 0.01. Exit status 1 if any rate is above α + 0.01.
"""

from __future__ import annotations

import argparse
import sys
import time

from app.simulation import DEFAULT_DETECTORS, SimulationConfig, boundary_false_alarms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replications", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--ns", type=int, nargs="+", default=[10, 50, 200, 1000])
    ap.add_argument("--ps", type=float, nargs="+", default=[0.5, 0.1, 0.01, 0.001])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 2.0])
    ap.add_argument("--detectors", nargs="+", default=list(DEFAULT_DETECTORS))
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args(argv)
    cfg = SimulationConfig(replications=args.replications, horizon=args.horizon, change_at=args.horizon,
                           gamma=args.gamma, alpha=args.alpha, seed=args.seed, detectors=tuple(args.detectors))
    bound = args.alpha + 0.01
    print(f"T={args.horizon} alpha={args.alpha} gamma={args.gamma} R={args.replications} seed={args.seed}; "
          f"rate [95% CI] per detector; bound alpha + 0.01 = {bound:.2f}")
    head = f"| {'n':>5} | {'p':>6} | {'eps':>4} | {'n*q':>7} | " + " | ".join(f"{d:^21}" for d in cfg.detectors) + " | ok |"
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    worst = {d: 0.0 for d in cfg.detectors}
    failed = 0
    started = time.perf_counter()
    for n in args.ns:
        for eps in args.epsilons:
            for p in args.ps:
                rates = boundary_false_alarms(n, p, eps, cfg)
                ok = all(r[0] <= bound for r in rates.values())
                failed += not ok
                for d, r in rates.items():
                    worst[d] = max(worst[d], r[0])
                cells = " | ".join(f"{r[0]:.4f} [{r[1]:.3f},{r[2]:.3f}]" for r in rates.values())
                nq = n * p / 2.718281828459045 ** eps
                print(f"| {n:>5} | {p:>6} | {eps:>4} | {nq:>7.3f} | {cells} | {'yes' if ok else 'NO'} |", flush=True)
    print("worst rate per detector: " + ", ".join(f"{d} {w:.4f}" for d, w in worst.items())
          + f"  ({time.perf_counter() - started:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
