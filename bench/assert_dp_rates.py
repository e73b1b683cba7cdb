"""How often does ``assert_dp`` fail? A correct Laplace mechanism (false failures: at most α
expected) and the same mechanism with half its noise (true ε doubled: it should fail every run).

Each run is exactly what a user's test does: ``dpwatch_sdk.testing.Auditor.run`` serves the
mechanism on an ephemeral loopback port and runs ``dpwatch audit`` (a subprocess of the given
dpwatch installation) with ``assert_dp``'s defaults (α = 0.05, budget 20 000 outputs per database).

    .venv/bin/python bench/assert_dp_rates.py --runs 200 [--workers 2] [--out docs/results/assert_dp_rates.json]

Prints a table: runs, failures, the failure rate with its exact (Clopper–Pearson) 95% interval,
and the median seconds per test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from scipy.stats import beta

from dpwatch_sdk.testing import DEFAULT_BUDGET, Auditor

EPSILON = 1.0
PAIRS = [([0, 0, 0, 0, 0], [0, 0, 0, 0, 1])]  # a sum query: the neighbours' sums differ by 1


def correct(database: Any, n: int, rng: Any) -> Any:
    """Laplace with scale Δ/ε = 1: exactly 1-DP."""
    return float(sum(database)) + rng.laplace(0.0, 1.0 / EPSILON, n)


def half_noise(database: Any, n: int, rng: Any) -> Any:
    """Half the noise: 2-DP, claimed 1-DP."""
    return float(sum(database)) + rng.laplace(0.0, 0.5 / EPSILON, n)


MECHANISMS = {"correct Laplace (ε = 1)": correct, "half the noise (true ε = 2)": half_noise}


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def study(runs: int, auditor: Auditor, alpha: float, budget: int, workers: int,
          progress: Any = None, only: str | None = None) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for name, f in MECHANISMS.items():
        if only is not None and f.__name__ != only:
            continue
        def one(i: int, f: Any = f) -> tuple[bool, float]:
            r = auditor.run(f, epsilon=EPSILON, pairs=PAIRS, alpha=alpha, budget=budget, output="real")
            return r.violated, r.seconds

        outcomes: list[tuple[bool, float]] = []
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for outcome in pool.map(one, range(runs)):
                outcomes.append(outcome)
                if progress and len(outcomes) % 10 == 0:
                    progress(f"{name}: {len(outcomes)}/{runs}, failures so far {sum(v for v, _ in outcomes)}")
        failures = sum(v for v, _ in outcomes)
        low, high = clopper_pearson(failures, runs)
        results[name] = {"runs": runs, "failures": failures, "rate": failures / runs, "ci95": [low, high],
                         "median_seconds": statistics.median(s for _, s in outcomes)}
    return results


def table(results: dict[str, dict[str, Any]], alpha: float) -> str:
    lines = [f"{'mechanism':32} {'runs':>5} {'failures':>8} {'rate':>7} {'95% CI':>17} {'median s':>9}"]
    for name, r in results.items():
        lines.append(f"{name:32} {r['runs']:>5} {r['failures']:>8} {r['rate']:>7.3f} "
                     f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] {r['median_seconds']:>9.1f}")
    lines.append(f"(α = {alpha}: a correct mechanism may fail in at most α of the runs)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET)
    parser.add_argument("--workers", type=int, default=1, help="tests run at once")
    parser.add_argument("--dpwatch", default=str(Path(sys.executable).parent / "dpwatch"),
                        help="the dpwatch command (default: this venv's)")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument("--only", choices=[f.__name__ for f in MECHANISMS.values()], default=None,
                        help="run one of the two mechanisms (to run them side by side)")
    args = parser.parse_args()
    started = time.monotonic()
    results = study(args.runs, Auditor(args.dpwatch), args.alpha, args.budget, args.workers,
                    progress=lambda m: print(m, file=sys.stderr, flush=True), only=args.only)
    print(table(results, args.alpha))
    print(f"total {time.monotonic() - started:.0f} s")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"alpha": args.alpha, "budget": args.budget, "epsilon": EPSILON,
                                        "pairs": PAIRS, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
