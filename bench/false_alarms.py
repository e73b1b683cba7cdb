"""False-alarm rate at the null boundary p = e^ε q (the goal: FAR ≤ α + 0.01).

    python bench/false_alarms.py                   # T=200, alpha=0.05, R=2000, n x p grid
    python bench/false_alarms.py --replications 500 --ns 100 --ps 0.5

Prints one row per (n, p) with the score (default) and the wald rates and their s.e.
"""

from __future__ import annotations

import argparse
import sys
import time

from app.simulation import SimulationConfig, boundary_false_alarm_rate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replications", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--ns", type=int, nargs="+", default=[100, 300, 1000])
    ap.add_argument("--ps", type=float, nargs="+", default=[0.5, 0.05, 0.01])
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    cfg = SimulationConfig(replications=args.replications, horizon=args.horizon, change_at=args.horizon,
                           gamma=args.gamma, alpha=args.alpha, seed=args.seed)
    print(f"T={args.horizon} alpha={args.alpha} gamma={args.gamma} eps={args.epsilon} R={args.replications} seed={args.seed}")
    print(f"{'n':>6} {'p':>6} | {'score FAR':>10} {'s.e.':>6} | {'wald FAR':>9} {'s.e.':>6} | ok(score <= alpha+0.01)")
    worst = 0.0
    for n in args.ns:
        for p in args.ps:
            t0 = time.perf_counter()
            s, s_se = boundary_false_alarm_rate(n, p, args.epsilon, cfg, "score")
            w, w_se = boundary_false_alarm_rate(n, p, args.epsilon, cfg, "wald")
            worst = max(worst, s)
            print(f"{n:>6} {p:>6} | {s:>10.4f} {s_se:>6.4f} | {w:>9.4f} {w_se:>6.4f} | "
                  f"{'yes' if s <= args.alpha + 0.01 else 'NO'}   ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"worst score FAR: {worst:.4f} (bound {args.alpha + 0.01:.2f})")
    return 0 if worst <= args.alpha + 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
