"""The one-pair audit (app/stats/onepair.py, method.md §13.10) on the scalar mechanisms of the corpus.

    nice -n 10 .venv/bin/python bench/onepair_corpus.py --runs 50 --max-pairs 5000 [--method ours-v4]

Mechanisms the witness was not designed for: integer outputs (report noisy max's index, the
truncated geometric), outputs on a lattice (Laplace noise rounded, or drawn from a coarse set), a
value reported by the exponential mechanism. Each row: one pair, the corpus's claim (ε = 0.1), R
runs of at most ``--max-pairs`` pairs; the share of runs that reject and the median pairs to
rejection, with the atoms of eq. OP2b (the shipped auditor) and without them (the smooth model only,
an ablation): the fitted laws of OP2c (``--method ours-v5``, the default) or the spline of OP2
(``--method ours-v4``). A correct mechanism's row is a false-rejection rate (≤ α = 0.05 by Ville).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import beta as beta_dist

from app.reference.corpus import corpus
from app.stats.onepair import audit_pairs
from app.stats.sequential import SupportingLine

CASES = [  # slug, x, x', what the corpus says of it
    ("laplace-lattice-noise", [0], [1]),
    ("laplace-coarse-uniform", [0], [1]),
    ("rnm-exponential-value", [2, 1, 1, 1, 1], [1, 1, 1, 1, 1]),
    ("rnm-laplace-value", [2, 1, 1, 1, 1], [1, 1, 1, 1, 1]),
    ("truncated-geometric-resampled", [1], [0]),
    ("laplace", [0], [1]),
    ("laplace-rounded", [0], [1]),
    ("rnm-laplace", [2, 1, 1, 1, 1], [1, 1, 1, 1, 1]),
    ("rnm-exponential", [2, 1, 1, 1, 1], [1, 1, 1, 1, 1]),
    ("truncated-geometric", [1], [0]),
]


def cp(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta_dist.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(0.975, k + 1, n - k))
    return lo, hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--max-pairs", type=int, default=5000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--method", choices=["ours-v5", "ours-v4"], default="ours-v5")
    args = ap.parse_args()
    opts: dict[str, object] = {} if args.method == "ours-v5" else {"model": "spline", "shape": "op3", "ramp": 0}
    c = corpus()
    print(f"{args.method}: R = {args.runs} runs of at most {args.max_pairs:,} pairs, α = {args.alpha}, seed {args.seed}\n")
    print("| mechanism | true ε (claim 0.1) | atoms (shipped): rejected [95% CI] | median pairs | smooth model only: rejected "
          "| median pairs | seconds |")
    print("|---|---|---|---|---|---|---|")
    for slug, x, xp in CASES:
        m = c[slug]
        started = time.perf_counter()
        cells = []
        for atoms in (True, False):
            times = []
            for r in range(args.runs):
                rng = np.random.default_rng([args.seed, r])
                a = np.asarray(m.sample(x, args.max_pairs, rng), dtype=np.float64).ravel()
                b = np.asarray(m.sample(xp, args.max_pairs, rng), dtype=np.float64).ravel()
                res = audit_pairs(a, b, SupportingLine.pure(m.claimed_epsilon), args.alpha, atoms=atoms,
                                  **opts)  # type: ignore[arg-type]
                times.append(res.rejected_at)
            hit = [t for t in times if t is not None]
            lo, hi = cp(len(hit), args.runs)
            cells.append(f"{len(hit)}/{args.runs} [{lo:.2f}, {hi:.2f}] | {np.median(hit):.0f}" if hit
                         else f"0/{args.runs} [0.00, {hi:.2f}] | —")
        true = m.true_epsilon
        print(f"| {slug} | {true:.3g} | {cells[0]} | {cells[1]} | {time.perf_counter() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
