"""False-alarm rates of the service's detectors on checks with keyed events, at the claim's boundary.

    nice -n 10 .venv/bin/python bench/keyed_far.py                        # the table in docs/audit.md §8
    .venv/bin/python bench/keyed_far.py --replications 300 --ns 10        # a quick look

Cells (app.reference.keyed.KEYED_BOUNDARY_CELLS): partition selection (Laplace counts above
τ = 1 + ln(1/(2δ))/ε, an (ε, δ) claim) with the event "a key held by one record released", at the
corner (p, q) = (δ, 0), for δ = 0.01 (a rare event) and 0.1; a pure-ε Laplace histogram with
"value('a') ≥ t" at p = e^ε·q, for p = 0.5 and p = 0.01. Every run draws n keyed outputs per side
and period from the numpy mechanism, counts them in the keyed event, and runs the aggregator, the
e-process and the e-detector as the service does (app.simulation_keyed). Prints one row per cell,
n and detector, with the rate and its 95% Clopper–Pearson interval, and exits 1 if a rate's
interval lies above α + 0.01.
"""

from __future__ import annotations

import argparse
import time

from app.reference.keyed import KEYED_BOUNDARY_CELLS
from app.simulation_keyed import DETECTORS, false_alarms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replications", "-R", type=int, default=1000)
    ap.add_argument("--horizon", "-T", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--ns", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--seed", type=int, default=26)
    args = ap.parse_args(argv)
    print(f"T={args.horizon} α={args.alpha} γ={args.gamma} R={args.replications} seed={args.seed}; "
          "95% Clopper–Pearson intervals")
    print("| cell | exact p | exact q | n | p̂ | q̂ | detector | false alarms | rate | 95% CI |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    over = False
    for cell in KEYED_BOUNDARY_CELLS:
        for n in args.ns:
            rates = false_alarms(cell, n, args.replications, args.horizon, detectors=DETECTORS, alpha=args.alpha,
                                 gamma=args.gamma, seed=args.seed)
            for name, r in rates.items():
                over |= r["low"] > args.alpha + 0.01
                print(f"| {cell.label} | {cell.p:.4g} | {cell.q:.4g} | {n} | {r['p_hat']:.4g} | {r['q_hat']:.4g} | "
                      f"{name} | {r['alarms']}/{args.replications} | {r['rate']:.3f} | "
                      f"[{r['low']:.3f}, {r['high']:.3f}] |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
