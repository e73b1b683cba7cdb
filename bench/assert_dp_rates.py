"""How often does ``assert_dp`` fail, and how fast? (docs/sdk.md §4, "Measured")

Three studies, each a table; every run is ``dpwatch_sdk.testing.check_dp`` in-process, exactly
what a user's ``assert_dp`` runs (a fresh random seed per run, recorded):

- ``correct``: correct Laplace, Gaussian and discrete mechanisms at the exact boundary of their
  claims, with the defaults (α = 10⁻⁵, 200 000 outputs per database, coupled mode on). Failures,
  their exact (Clopper–Pearson) 95% interval, seconds and outputs. Calibration comes from the same
  runs: the test fails at level α iff the largest e-value after any batch reaches 1/α_seq or the
  final test's adjusted p-value is ≤ α − α_seq (the events, bets and p-values do not depend on α;
  α only stops the test), so the table also gives the rate every α would have had (0.01 among
  them); see ``fails_at``.
- ``violating``: twelve violating mechanisms with coupled mode off (the statistical test alone):
  failure rate, median seconds and outputs per database, beside the claim parameter the run
  states it would catch (its power) and the mechanism's true one; and coupled mode's verdict on
  20 seeds (deterministic: it finds a certain violation on all of them or on none).

    nice -n 10 .venv/bin/python bench/assert_dp_rates.py correct --runs 3000 --workers 2 \
        --out docs/results/assert_dp_correct.json
    nice -n 10 .venv/bin/python bench/assert_dp_rates.py violating --runs 200 --workers 2 \
        --out docs/results/assert_dp_violating.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from dpwatch_sdk.testing import DEFAULT_ALPHA, check_dp
from dpwatch_sdk.testing._final import SEQUENTIAL_SHARE
from scipy.stats import beta

PAIR = [([0, 0, 0, 0, 0], [0, 0, 0, 0, 1])]  # sums 1 apart


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


# ---------------------------------------------------------------------------- mechanisms (numpy, vectorised)


def laplace(scale: float) -> Callable[..., Any]:
    def sample(database: Any, n: int, rng: np.random.Generator) -> Any:
        return float(sum(database)) + rng.laplace(0.0, scale, n)
    return sample


def gaussian(sigma: float) -> Callable[..., Any]:
    def sample(database: Any, n: int, rng: np.random.Generator) -> Any:
        return rng.normal(float(sum(database)), sigma, n)
    return sample


def discrete_laplace(epsilon: float) -> Callable[..., Any]:
    """The two-sided geometric mechanism: P(k) ∝ e^{−ε|k|} (a difference of two geometrics)."""
    def sample(database: Any, n: int, rng: np.random.Generator) -> Any:
        p = -math.expm1(-epsilon)
        return int(sum(database)) + rng.geometric(p, n) - rng.geometric(p, n)
    return sample


def unclamped_sum(database: Any, n: int, rng: np.random.Generator) -> Any:
    """Records are meant to lie in [0, 1] (sensitivity 1); the clamp is forgotten."""
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def mean_by_true_count(database: Any, n: int, rng: np.random.Generator) -> Any:
    """A noisy sum of records clamped to [0, 1], divided by the true count (which leaks)."""
    clamped = np.clip(np.asarray(database, dtype=float), 0.0, 1.0)
    return (clamped.sum() + rng.laplace(0.0, 1.0, n)) / len(database)


def randomized_response(epsilon: float) -> Callable[..., Any]:
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))

    def sample(database: Any, n: int, rng: np.random.Generator) -> Any:
        truth, lie = ("yes", "no") if database[0] else ("no", "yes")
        return np.where(rng.random(n) < keep, truth, lie).tolist()
    return sample


def histogram(scale: float) -> Callable[..., Any]:
    """Three counts with Laplace noise per count; replacing a record moves two counts (L1 = 2)."""
    def sample(database: Any, n: int, rng: np.random.Generator) -> Any:
        counts = np.bincount(np.asarray(database), minlength=3).astype(float)
        return counts[None, :] + rng.laplace(0.0, scale, (n, 3))
    return sample


@dataclass(frozen=True)
class Case:
    name: str
    sampler: Callable[..., Any]
    claim: dict[str, float]
    pairs: list[Any]
    output: Any = "real"
    truth: str = ""          # the mechanism's true parameter, in the claim's terms

    def run(self, seed: int, alpha: float, coupled: bool) -> dict[str, Any]:
        result = check_dp(self.sampler, output=self.output, pairs=self.pairs, alpha=alpha, seed=seed, coupled=coupled,
                          time_limit=None, **self.claim)
        seq = result.sequential
        best = result.power.smallest if result.power is not None else None
        return {"seed": seed, "violated": result.violated, "seconds": result.seconds,
                "outputs": seq.drawn if seq is not None else 0,
                "max_log_evalue": seq.max_log_evalue if seq is not None else None,
                "final_p_adjusted": seq.final_p_adjusted if seq is not None else None,
                "rejected_by": seq.rejected_by if seq is not None else None,
                "coupled": None if result.coupled is None else [f.status for f in result.coupled.findings],
                "power_theta": best.theta if best is not None else None,
                "power_q": best.q if best is not None else None}


CORRECT = [
    Case("Laplace, scale 1 (ε = 1)", laplace(1.0), {"epsilon": 1.0}, PAIR),
    Case("Gaussian, σ = 1 (μ = 1 GDP)", gaussian(1.0), {"mu": 1.0}, PAIR),
    Case("discrete Laplace (ε = 1), integers", discrete_laplace(1.0), {"epsilon": 1.0}, PAIR, "integer"),
]

VIOLATING = [
    Case("Laplace, ε × 1.03", laplace(1 / 1.03), {"epsilon": 1.0}, PAIR, truth="ε = 1.03"),
    Case("Laplace, ε × 1.1", laplace(1 / 1.1), {"epsilon": 1.0}, PAIR, truth="ε = 1.1"),
    Case("Laplace, ε × 1.5", laplace(1 / 1.5), {"epsilon": 1.0}, PAIR, truth="ε = 1.5"),
    Case("Laplace, ε × 2 (half the noise)", laplace(0.5), {"epsilon": 1.0}, PAIR, truth="ε = 2"),
    Case("Laplace, ε × 10", laplace(0.1), {"epsilon": 1.0}, PAIR, truth="ε = 10"),
    Case("forgotten clamp (a record of 3)", unclamped_sum, {"epsilon": 1.0}, [([0, 0, 0, 3], [0, 0, 0])],
         truth="ε = 3"),
    Case("mean divided by the true count", mean_by_true_count, {"epsilon": 1.0}, [([1, 1, 1, 1], [1, 1, 1])],
         truth="ε = ∞ (scales 1/4 and 1/3)"),
    Case("Gaussian, μ × 1.5 (σ = 2/3)", gaussian(2 / 3), {"mu": 1.0}, PAIR, truth="μ = 1.5"),
    Case("Gaussian, ρ × 2 (σ = 1/√2, claim ρ = 0.5)", gaussian(1 / math.sqrt(2)), {"rho": 0.5}, PAIR, truth="ρ = 1"),
    Case("discrete Laplace, ε × 2", discrete_laplace(2.0), {"epsilon": 1.0}, PAIR, "integer", truth="ε = 2"),
    Case("randomized response, ε × 2 (labels)", randomized_response(2.0), {"epsilon": 1.0}, [([1], [0])], "label",
         truth="ε = 2"),
    Case("histogram, L1 sensitivity 2 noised for 1 (vectors)", histogram(1.0), {"epsilon": 1.0},
         [([0, 1, 2], [0, 1, 1])], ("vector", 3), truth="ε = 2"),
]


def _one(args: tuple[str, int, int, float, bool]) -> dict[str, Any]:
    study, index, seed, alpha, coupled = args
    case = (CORRECT if study == "correct" else VIOLATING)[index]
    return case.run(seed, alpha, coupled)


CALIBRATION_ALPHAS = (0.5, 0.2, 0.1, 0.05, 0.01, 1e-3, 1e-4, 1e-5)


def fails_at(r: dict[str, Any], alpha: float) -> bool:
    """Whether a run made at the default α would have failed at a larger ``alpha``: the runs are the
    same until the sequential part crosses 1/α_seq (it fails), and otherwise reach the same final
    test, whose p-value does not depend on α."""
    if r["violated"]:
        return True
    m, p = r["max_log_evalue"], r["final_p_adjusted"]
    return (m is not None and m >= math.log(1 / (SEQUENTIAL_SHARE * alpha))) or (
        p is not None and p <= (1 - SEQUENTIAL_SHARE) * alpha)


def correct_study(runs: int, workers: int, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    with ProcessPoolExecutor(workers) as pool:
        for index, case in enumerate(CORRECT):
            started = time.monotonic()
            seeds = [secrets.randbelow(2**32) for _ in range(runs)]
            results = list(pool.map(_one, [("correct", index, s, DEFAULT_ALPHA, True) for s in seeds], chunksize=8))
            failures = sum(r["violated"] for r in results)
            max_e = [r["max_log_evalue"] for r in results]
            calibration = {}
            for alpha in CALIBRATION_ALPHAS:
                k = sum(1 for r in results if fails_at(r, alpha))
                calibration[str(alpha)] = {"failures": k, "rate": k / runs, "ci95": clopper_pearson(k, runs)}
            row = {"mechanism": case.name, "runs": runs, "failures": failures, "rate": failures / runs,
                   "ci95": clopper_pearson(failures, runs),
                   "median_seconds": statistics.median(r["seconds"] for r in results),
                   "max_seconds": max(r["seconds"] for r in results),
                   "median_outputs": statistics.median(r["outputs"] for r in results),
                   "coupled": sorted({s for r in results for s in (r["coupled"] or [])}),
                   "largest_log_evalue": max(m for m in max_e if m is not None),
                   "calibration": calibration, "wall_seconds": time.monotonic() - started,
                   "load_before": os.getloadavg()[0], "seeds_failed": [r["seed"] for r in results if r["violated"]]}
            rows.append(row)
            progress(f"{case.name}: {failures}/{runs} failures, {row['wall_seconds']:.0f} s, "
                     f"load {os.getloadavg()[0]:.1f}")
    return rows


def violating_study(runs: int, workers: int, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    with ProcessPoolExecutor(workers) as pool:
        for index, case in enumerate(VIOLATING):
            started = time.monotonic()
            seeds = [secrets.randbelow(2**32) for _ in range(runs)]
            results = list(pool.map(_one, [("violating", index, s, DEFAULT_ALPHA, False) for s in seeds], chunksize=4))
            coupled = list(pool.map(_one, [("violating", index, s, DEFAULT_ALPHA, True) for s in range(20)]))
            failures = sum(r["violated"] for r in results)
            certain = sum(1 for r in coupled if r["coupled"] and "violation" in r["coupled"])
            row = {"mechanism": case.name, "truth": case.truth, "claim": case.claim, "runs": runs, "failures": failures,
                   "rate": failures / runs, "ci95": clopper_pearson(failures, runs),
                   "median_seconds": statistics.median(r["seconds"] for r in results),
                   "median_outputs": statistics.median(r["outputs"] for r in results),
                   "stated_power_theta": results[0]["power_theta"], "stated_power_q": results[0]["power_q"],
                   "coupled_certain": certain, "coupled_runs": len(coupled),
                   "coupled_statuses": sorted({s for r in coupled for s in (r["coupled"] or [])}),
                   "wall_seconds": time.monotonic() - started, "load_before": os.getloadavg()[0]}
            rows.append(row)
            progress(f"{case.name}: {failures}/{runs}, coupled {certain}/20, {row['wall_seconds']:.0f} s, "
                     f"load {os.getloadavg()[0]:.1f}")
    return rows


def print_correct(rows: list[dict[str, Any]]) -> None:
    print(f"| mechanism | runs | failures at the default α = {DEFAULT_ALPHA:g} | exact 95% interval | at α = 0.01 (95% interval) "
          "| median s | max s |")
    print("|---|---:|---:|---|---|---:|---:|")
    for r in rows:
        c = r["calibration"]["0.01"]
        print(f"| {r['mechanism']} | {r['runs']:,} | {r['failures']} | [{r['ci95'][0]:.5f}, {r['ci95'][1]:.5f}] | "
              f"{c['failures']} = {c['rate']:.4f} [{c['ci95'][0]:.4f}, {c['ci95'][1]:.4f}] | "
              f"{r['median_seconds']:.2f} | "
              f"{r['max_seconds']:.2f} |")
    print()
    print("| mechanism | " + " | ".join(f"α = {a:g}" for a in CALIBRATION_ALPHAS) + " |")
    print("|---|" + "---:|" * len(CALIBRATION_ALPHAS))
    for r in rows:
        rates = " | ".join(f"{r['calibration'][str(a)]['rate']:.4f}" for a in CALIBRATION_ALPHAS)
        print(f"| {r['mechanism']} | {rates} |")


def print_violating(rows: list[dict[str, Any]]) -> None:
    print("| mechanism | claim | truth | failure rate (statistical) | median outputs per database | median s | "
          "stated power (smallest) | coupled mode |")
    print("|---|---|---|---:|---:|---:|---|---|")
    for r in rows:
        claim = ", ".join(f"{k} = {v:g}" for k, v in r["claim"].items())
        power = (f"{r['stated_power_theta']:.3g} at q = {r['stated_power_q']:g}" if r["stated_power_theta"] is not None
                 else "none")
        coupled = f"certain on {r['coupled_certain']}/{r['coupled_runs']} seeds" if r["coupled_certain"] else \
            ", ".join(r["coupled_statuses"])
        print(f"| {r['mechanism']} | {claim} | {r['truth']} | {r['failures']}/{r['runs']} | "
              f"{r['median_outputs']:,.0f} | "
              f"{r['median_seconds']:.2f} | {power} | {coupled} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", choices=["correct", "violating"])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = time.monotonic()
    load = os.getloadavg()[0]

    def progress(line: str) -> None:
        print(line, flush=True)

    rows = (correct_study if args.study == "correct" else violating_study)(args.runs, args.workers, progress)
    (print_correct if args.study == "correct" else print_violating)(rows)
    summary = {"study": args.study, "runs": args.runs, "workers": args.workers, "rows": rows,
               "seconds": time.monotonic() - started, "load_at_start": load, "load_at_end": os.getloadavg()[0]}
    print(f"\n{time.monotonic() - started:.0f} s; load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
