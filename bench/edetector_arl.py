"""The e-detector's guarantee is an average run length: measured at the claim's boundary.

Under the claim the mixture e-SR statistic M_t satisfies E[M_t | past] ≤ M_{t−1} + 1, so its first
alarm N at c has E[N] ≥ c (ARL), and P(N ≤ m) ≤ m/c (method.md §13.4). Nothing bounds P(N ≤ m) for
m ≫ c·α: within many multiples of the window a false alarm is expected, and after one the detector
restarts (``reset``) and the next run length is again ARL ≥ c.

R runs of L = ``--length-factor``·c periods at a boundary point; N is censored at L, so mean(min(N, L))
is a lower bound of E[N].

    nice -n 10 .venv/bin/python bench/edetector_arl.py --runs 300
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from app.stats.claims import clopper_pearson
from app.stats.sequential import SupportingLine, e_detector_paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--thresholds", default="200,2000")
    ap.add_argument("--length-factor", type=float, default=5.0)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args()
    eps = 1.0
    cells = [("ε = 1, q = 0.1 (edge)", math.e * 0.1, 0.1), ("ε = 1, vertex", math.e / (1 + math.e), 1 / (1 + math.e))]
    print("| point | c | L | runs | P(N ≤ 0.05·c) [95% CI] | P(N ≤ c) | P(N ≤ L) | mean min(N, L) (≤ ARL) | median N |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, p, q in cells:
        for c in [float(v) for v in args.thresholds.split(",")]:
            length = int(args.length_factor * c)
            rng = np.random.default_rng([args.seed, int(c), int(p * 1e6)])
            first = np.zeros(args.runs, dtype=np.int64)
            chunk = 50
            for lo in range(0, args.runs, chunk):
                r = min(chunk, args.runs - lo)
                a = rng.binomial(args.n, p, size=(r, length))
                b = rng.binomial(args.n, q, size=(r, length))
                log_m = e_detector_paths(a, b, args.n, SupportingLine.pure(eps))
                hit = log_m >= math.log(c)
                first[lo: lo + r] = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)
            n_eff = np.where(first > 0, first, length)
            window = int(0.05 * c)
            k = int(np.sum((first > 0) & (first <= window)))
            lo_ci = float(clopper_pearson(k, args.runs, 0.025, "lower"))
            hi_ci = float(clopper_pearson(k, args.runs, 0.025, "upper"))
            print(f"| {label} | {c:g} | {length} | {args.runs} | {k / args.runs:.3f} [{lo_ci:.3f}, {hi_ci:.3f}] | "
                  f"{np.mean((first > 0) & (first <= c)):.3f} | {np.mean(first > 0):.3f} | {n_eff.mean():.0f} | "
                  f"{int(np.median(n_eff)) if np.mean(first > 0) > 0.5 else f'> {length}'} |", flush=True)


if __name__ == "__main__":
    main()
