"""Is the power a "none found" states real? Violations at the stated size are found in ≥ 90% of runs.

For each seed: (1) a search of a correct mechanism finds nothing and states its power: at event
probability q₀ on the rarer side, the smallest ε it would have caught with probability ≥ 0.9
(app.audit.power, eq. POW of app.stats.heldout_power); (2) a search with the same seed and budget
of the same mechanism with a violation of exactly that size: the mechanism releases an atom with
probability q₀ on databases of even size and q₀·e^{ε_stated} on odd ones (every add/remove pair
has one of each), else the sum of records in [0, 1] plus Lap(1/ε) (exactly ε-DP; the correct
mechanism releases the atom with probability q₀ on every database). Its true ε is ε_stated,
attained by the atom with q = q₀. Prints the rate at which (2) certifies, with its 95%
Clopper–Pearson interval.

    nice -n 10 .venv/bin/python bench/search_power.py --runs 30 --q 0.01
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.search.domain import InputDomain  # noqa: E402
from app.search.draws import function_sampler  # noqa: E402
from app.search.run import SearchSettings, run_search  # noqa: E402
from app.stats.claims import PureDP
from app.stats.heldout import clopper_pearson_lower, clopper_pearson_upper  # noqa: E402
from app.stats.shapes import OutputShape  # noqa: E402

DOMAIN = {"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 0, "max": 10}, "neighbours": ["add_remove"]}
ATOM = -50.0


def mechanism(q0: float, theta: float):
    def sample(db, n, rng):
        arr = np.clip(np.asarray(db, dtype=np.float64), 0, 1)
        r = q0 * (math.exp(theta) if len(db) % 2 else 1.0)
        out = arr.sum() + rng.laplace(0.0, 1.0, n)
        out[rng.random(n) < r] = ATOM
        return out
    return sample


def stated(res, q0: float) -> float | None:
    vals = [d["theta"] for r in res.power or [] for d in r["detected"] if d["q"] == q0 and d["theta"] is not None]
    return min(vals) if vals else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--q", type=float, default=0.01)
    ap.add_argument("--budget", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=3000)
    args = ap.parse_args()
    claim, domain, shape = PureDP(1.0), InputDomain.model_validate(DOMAIN), OutputShape()
    found, thetas, clean_certified = 0, [], 0
    for r in range(args.runs):
        seed = args.seed + r
        settings = SearchSettings(budget=args.budget, seed=seed, severity=False)
        clean = asyncio.run(run_search(function_sampler(mechanism(args.q, 0.0), shape, seed), domain, claim, shape,
                                       settings))
        if clean.certified:
            clean_certified += 1
            print(f"seed {seed}: the correct mechanism was certified (a false certification)", flush=True)
            continue
        theta = stated(clean, args.q)
        if theta is None:
            print(f"seed {seed}: no power stated at q = {args.q:g}", flush=True)
            continue
        thetas.append(theta)
        bad = asyncio.run(run_search(function_sampler(mechanism(args.q, theta), shape, seed + 10_000), domain, claim,
                                     shape, settings))
        found += bad.certified
        print(f"seed {seed}: stated ε ≥ {theta:.3f} at q = {args.q:g}; violation of that size "
              f"{'certified' if bad.certified else 'missed'} ({bad.samples['total']:,} outputs)", flush=True)
    m = len(thetas)
    if m:
        lo = float(clopper_pearson_lower(found, m, 0.025))
        hi = float(clopper_pearson_upper(found, m, 0.025))
        print(f"\nq₀ = {args.q:g}, budget {args.budget:,}: stated ε median {statistics.median(thetas):.3f} "
              f"(range {min(thetas):.3f}–{max(thetas):.3f}); violations of the stated size certified in {found}/{m} "
              f"runs = {found / m:.3f} (95% CI {lo:.3f}–{hi:.3f}); false certifications of the correct one: "
              f"{clean_certified}/{args.runs}")


if __name__ == "__main__":
    main()
