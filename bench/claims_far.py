"""False-alarm rates of (ε, δ) and μ-GDP claims at the tight boundary (the goal: FAR ≤ α + 0.01).

    nice -n 10 .venv/bin/python bench/claims_far.py                       # the table in docs/benchmarks.md
    .venv/bin/python bench/claims_far.py --replications 300 --ns 100     # a quick look

For every claim and every boundary point (p, q) — where the claim is tight, including the (ε, δ)
vertex where both constraints bind and the corner (δ, 0) — R runs of T periods draw
a ~ Binomial(n, p) and b ~ Binomial(n, q) each period, compute the anchored claim statistic
(method.md §10.3) and run the weighted aggregator with the shipped threshold. A run is a false
alarm when M_t crosses the threshold. Prints one row per cell with the rate and its 95%
Clopper–Pearson interval, and exits 1 if a rate exceeds α + 0.01.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from scipy import special

from app.stats.aggregator import first_crossing, weighted_statistic_path
from app.stats.claim_period import claim_z_path
from app.stats.claims import ApproxDP, Claim, GaussianDP, clopper_pearson
from app.stats.thresholds import threshold_for


def boundary_points(claim: Claim) -> list[tuple[str, float, float]]:
    """(label, p, q) on the boundary of the claim's region (upper branch)."""
    if isinstance(claim, ApproxDP):
        c, d = math.exp(claim.epsilon), claim.delta
        return [
            ("vertex", (c + d) / (1 + c), (1 - d) / (1 + c)),
            ("q=0.1", c * 0.1 + d, 0.1),
            ("q=0.01", c * 0.01 + d, 0.01),
            ("corner (δ,0)", d, 0.0),
        ]
    assert isinstance(claim, GaussianDP)
    pts = [(f"q={q:g}", float(claim.upper(q)), q) for q in (0.001, 0.01, 0.1)]
    q_mid = float(special.ndtr(-claim.mu / 2))
    pts.append(("symmetric", float(claim.upper(q_mid)), q_mid))
    return pts


def far(claim: Claim, p: float, q: float, n: int, replications: int, horizon: int, gamma: float, alpha: float,
        seed: int) -> tuple[int, float]:
    rng = np.random.default_rng([seed, n, int(1e6 * p), int(1e6 * q)])
    hits = 0
    chunk = 500
    thr = threshold_for(horizon, gamma, alpha).value
    for lo in range(0, replications, chunk):
        r = min(chunk, replications - lo)
        a = rng.binomial(n, min(p, 1.0), size=(r, horizon))
        b = rng.binomial(n, q, size=(r, horizon))
        z = claim_z_path(a, b, n, claim)
        hits += int(np.sum(first_crossing(weighted_statistic_path(z, horizon, gamma), thr) > 0))
    return hits, thr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replications", "-R", type=int, default=1000)
    ap.add_argument("--horizon", "-T", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--ns", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--deltas", type=float, nargs="+", default=[1e-6, 1e-3, 0.05])
    ap.add_argument("--mus", type=float, nargs="+", default=[0.1, 0.5, 1.0, 3.0])
    ap.add_argument("--seed", type=int, default=9)
    args = ap.parse_args(argv)
    claims: list[Claim] = [ApproxDP(args.epsilon, d) for d in args.deltas] + [GaussianDP(m) for m in args.mus]
    bound = args.alpha + 0.01
    print(f"T={args.horizon} alpha={args.alpha} gamma={args.gamma} R={args.replications} seed={args.seed}; "
          f"95% Clopper-Pearson intervals")
    print("| claim | point | p | q | n | FAR | 95% CI | ≤ α + 0.01 |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    started = time.perf_counter()
    for claim in claims:
        for label, p, q in boundary_points(claim):
            for n in args.ns:
                hits, _ = far(claim, p, q, n, args.replications, args.horizon, args.gamma, args.alpha, args.seed)
                rate = hits / args.replications
                lo = float(clopper_pearson(hits, args.replications, 0.025, "lower"))
                hi = float(clopper_pearson(hits, args.replications, 0.025, "upper"))
                worst = max(worst, rate)
                print(f"| {claim.describe()} | {label} | {p:.4g} | {q:.4g} | {n} | {rate:.4f} | [{lo:.4f}, {hi:.4f}] | "
                      f"{'yes' if rate <= bound else 'NO'} |", flush=True)
    print(f"\nworst FAR {worst:.4f} (bound {bound:.2f}); {time.perf_counter() - started:.0f} s")
    return 0 if worst <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
