"""The e-process's own guarantee at long horizons: P(W_t ≥ 1/α for some t ≤ H) → at most α.

At T = 200 periods the e-process's false-alarm rate on the boundary is far below α (0.006 on
average over far_grid's 76 cells): its guarantee is P(ever) ≤ α, and over 200 periods a test
martingale on the boundary has not yet spent its chances. This runs R paths of H periods at a few
boundary cells of pure ε-DP (the line is fixed, so the e-process is the service's, both faces or
the predictable face of method.md §13.3c) and prints the cumulative rate of crossing 1/α by
several horizons, with 95% Clopper–Pearson intervals. Every design is run on the same draws.

``randomized``: the uniformly randomized Ville inequality (Ramdas & Manole 2023, *Randomized and
exchangeable improvements of Markov's, Chebyshev's and Chernoff's inequalities*, arXiv 2304.02611;
proof in method.md §13.3c): for a test supermartingale W and a bounded stopping time τ (here the
fixed horizon H), with U ~ Unif(0, 1) independent, P(∃t ≤ τ: W_t ≥ 1/α, or W_τ ≥ U/α) ≤ α. It is
valid only for that one budget H, so it is what a fixed-horizon user (a budget of H periods) could
spend; the monitor, which has no horizon, does not use it.

    nice -n 10 .venv/bin/python bench/eprocess_long_far.py --runs 1000 --horizon 20000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from app.stats.claims import clopper_pearson
from app.stats.sequential import EProcessDesign, SupportingLine

#: (label, ε, p, q) on the boundary of pure ε-DP.
CELLS = [
    ("ε = 1, vertex", 1.0, math.e / (1 + math.e), 1 / (1 + math.e)),
    ("ε = 1, edge q = 0.1", 1.0, math.e * 0.1, 0.1),
    ("ε = 0.1, edge q = 0.1", 0.1, math.exp(0.1) * 0.1, 0.1),
    ("ε = 1, edge q = 0.01", 1.0, math.e * 0.01, 0.01),
    # scenario (a) of method.md §8 before its change: Laplace(1/ε) at 0 vs 1, event [0.5, ∞)
    ("scenario (a) before the change: p = 0.5, q = e⁻¹/2", 1.0, 0.5, math.exp(-1.0) / 2),
]


def ci(k: int, n: int) -> str:
    lo = float(clopper_pearson(k, n, 0.025, "lower"))
    hi = float(clopper_pearson(k, n, 0.025, "upper"))
    return f"{k / n:.4f} [{lo:.4f}, {hi:.4f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--horizon", type=int, default=20000)
    ap.add_argument("--checkpoints", default="200,1000,5000,20000")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--chunk", type=int, default=25, help="runs per batch (memory: chunk·H·C floats)")
    ap.add_argument("--cells", default=None, help="indices into CELLS, e.g. 0,1")
    ap.add_argument("--designs", nargs="+", default=["both,agrapa,grid=16"])
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--jensen", type=int, default=0, metavar="DRAWS",
                    help="instead: E[F(λ_j)] of each grid bet on the boundary, exact (enumerated over (a, b)) and from "
                         "DRAWS periods, for the exact e-value of method.md §13.2 (1) and its Jensen bound (below 1: "
                         "what the bound gives away)")
    args = ap.parse_args()
    if args.jensen:
        from scipy.stats import binom

        from app.stats.sequential import bet_grid, log_evalues_sd

        cells = CELLS if args.cells is None else [CELLS[int(i)] for i in args.cells.split(",")]
        rng = np.random.default_rng(args.seed)
        print(f"n = {args.n}: E[F(λ_j)] of the bet fractions c_j on the boundary; 'enumerated': the sum over every "
              f"(a, b) with binomial weights (no sampling error); 'sampled': the mean over {args.jensen} periods")
        print("| cell | payoff | mean | " + " | ".join(f"{c:.3g}" for c in bet_grid()) + " |")
        print("|---|---|---|" + "---|" * bet_grid().size)
        ks = np.arange(args.n + 1)
        for label, eps, p, q in cells:
            a = rng.binomial(args.n, p, args.jensen)
            b = rng.binomial(args.n, q, args.jensen)
            w = binom.pmf(ks[:, None], args.n, p) * binom.pmf(ks[None, :], args.n, q)
            for payoff in ("per-sample-jensen", "per-sample"):
                f_all = np.exp(log_evalues_sd(ks[:, None], ks[None, :], args.n, math.exp(eps), 0.0, bet_grid(),
                                              payoff))  # type: ignore[arg-type]
                enumerated = np.einsum("ab,abk->k", w, f_all)
                sampled = np.exp(log_evalues_sd(a, b, args.n, math.exp(eps), 0.0, bet_grid(),
                                                payoff)).mean(axis=0)  # type: ignore[arg-type]
                for kind, m in (("enumerated", enumerated), ("sampled", sampled)):
                    print(f"| {label} | {payoff} | {kind} | " + " | ".join(f"{v:.3f}" for v in m) + " |", flush=True)
        return
    designs = [EProcessDesign.parse(t) for t in args.designs]
    checks = [h for h in (int(v) for v in args.checkpoints.split(",")) if h <= args.horizon]
    cells = CELLS if args.cells is None else [CELLS[int(i)] for i in args.cells.split(",")]
    level = math.log(1 / args.alpha)
    print(f"R = {args.runs}, n = {args.n}, α = {args.alpha}: share of runs with W_t ≥ 1/α for some t ≤ H "
          f"[95% Clopper–Pearson]; 'rand.': also W_H ≥ U/α (randomized Ville at the budget H)")
    print("| cell | design | " + " | ".join(f"H = {h}" for h in checks) + " | " + " | ".join(f"rand. H = {h}" for h in checks)
          + " | κ = α·E[W_σ, given a crossing] (overshoot) | L = E[W_H; never crossed] | 1 − P(cross)·κ/α − L (drift)"
          " | E[W_{σ∧H}] ± s.e. (≤ 1) |")
    print("|---|---|" + "---|" * (2 * len(checks) + 4))
    for label, eps, p, q in cells:
        started = time.time()
        line = SupportingLine.pure(eps)
        hits = {d.label: np.zeros(len(checks), dtype=np.int64) for d in designs}
        rand = {d.label: np.zeros(len(checks), dtype=np.int64) for d in designs}
        # Ville's bound is an equality only without overshoot and with W → 0: P(cross)·E[W_σ, given a crossing]
        # + E[W_H; no cross] ≤ 1, so these two say where the rest of α went (method.md §13.3c).
        at_cross = {d.label: [] for d in designs}
        at_end = {d.label: [] for d in designs}
        rng = np.random.default_rng([args.seed, int(eps * 1000), int(q * 1e6)])
        u_rng = np.random.default_rng([args.seed, 7919, int(eps * 1000), int(q * 1e6)])
        for lo in range(0, args.runs, args.chunk):
            r = min(args.chunk, args.runs - lo)
            a = rng.binomial(args.n, p, (r, args.horizon))
            b = rng.binomial(args.n, q, (r, args.horizon))
            u = u_rng.uniform(size=r)
            for d in designs:
                log_w = d.paths(a, b, args.n, line)
                running = np.maximum.accumulate(log_w, axis=1)
                hit = log_w >= level
                ever = hit.any(axis=1)
                first = hit.argmax(axis=1)
                at_cross[d.label] += list(np.exp(log_w[ever, first[ever]] - level))
                at_end[d.label] += list(np.exp(log_w[~ever, -1]))
                for i, h in enumerate(checks):
                    crossed = running[:, h - 1] >= level
                    hits[d.label][i] += int(crossed.sum())
                    # W_H ≥ U/α  ⇔  log W_H ≥ log U + log(1/α)
                    rand[d.label][i] += int((crossed | (log_w[:, h - 1] >= np.log(u) + level)).sum())
        for d in designs:
            kappa = float(np.mean(at_cross[d.label])) if at_cross[d.label] else float("nan")
            left = float(np.sum(at_end[d.label])) / args.runs
            # W at min(first crossing, H), one per run: optional stopping says its mean is ≤ 1
            stopped = np.concatenate([np.asarray(at_cross[d.label]) / args.alpha, np.asarray(at_end[d.label])])
            print(f"| {label} | {d.label} | " + " | ".join(ci(int(k), args.runs) for k in hits[d.label]) + " | "
                  + " | ".join(ci(int(k), args.runs) for k in rand[d.label])
                  + f" | {kappa:.2f} | {left:.3f} | {1 - hits[d.label][-1] / args.runs * kappa / args.alpha - left:.3f}"
                  + f" | {stopped.mean():.3f} ± {stopped.std(ddof=1) / math.sqrt(stopped.size):.3f} |", flush=True)
        print(f"<!-- {label}: {time.time() - started:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
