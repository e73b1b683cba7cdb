"""Coverage, power and accuracy of MPL (seed 003, Algorithm 4) on the reference mechanisms.

    python bench/mpl_coverage.py                       # every study, 200 runs each
    python bench/mpl_coverage.py --study coverage --runs 200
    python bench/mpl_coverage.py --study power --mechanisms svt5 --runs 50

Studies (α = 0.05, ε ∈ {0.2, 0.7, 1.5}, sizes and floors of seed 003 §V unless stated):

- ``coverage``: correct mechanisms (Laplace, Report Noisy Max, SVT 2); fraction of runs with
  LB ≤ ε (goal ≥ 0.90; the nominal level is 0.95);
- ``power``: SVT 5, SVT 6 and RNM reporting the value; fraction of runs with LB > claimed ε
  (goal ≥ 0.90);
- ``accuracy``: Laplace with smaller scale s (true ε/s); mean ε̂ of the chosen pair against ε/s
  (goal: within 10 %) and the LB;
- ``error``: ε̂ of DPL on one Laplace pair (0 vs 1, ε = 1.5) at n = 5000 and 20000 (paper 003,
  Figure 6): bias, RMSE and MSE as fractions of ε.

Pairs: Laplace family ``s_b = 0`` vs ``s'_b = b/10``, ``b = 1..10`` with ``C = [−1, 1]`` (paper
003 §V); RNM and RNM-value: the 8 patterns of Table I with k = 6 queries (RNM-value with
``C = [−1, 3]``); SVT: Table I with k = 10 queries, threshold T = 1, cutoff c_max = 1 (as in paper
003, from StatDP) for SVT 2. Every run uses its own seed from one SeedSequence.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference import get_mechanism  # noqa: E402
from app.stats.mpl import MPLParams, dpl, mpl, table1_pairs  # noqa: E402

EPSILONS = (0.2, 0.7, 1.5)
ALPHA = 0.05


def laplace_pairs() -> list[tuple[list[float], list[float]]]:
    """Seed 003 §V: s_b = 0 and s'_b = b/10 for b = 1..10."""
    return [([0.0], [b / 10]) for b in range(1, 11)]


def setting(slug: str, eps: float, **mech: Any) -> tuple[Any, list[Any], str, MPLParams, str]:
    """Mechanism, pairs, kind, parameters and a label for one reference mechanism."""
    if slug.startswith("laplace"):
        return (get_mechanism(slug, epsilon=eps, **mech), laplace_pairs(), "continuous",
                MPLParams(region=(-1.0, 1.0), alpha=ALPHA), "Laplace pairs 0 vs b/10, C=[-1,1]")
    if slug == "rnm":
        return (get_mechanism(slug, epsilon=eps), list(table1_pairs(6)), "discrete",
                MPLParams(alpha=ALPHA), "Table I, k=6")
    if slug == "rnm-value":
        return (get_mechanism(slug, epsilon=eps), list(table1_pairs(6)), "continuous",
                MPLParams(region=(-1.0, 3.0), alpha=ALPHA), "Table I, k=6, C=[-1,3]")
    if slug.startswith("svt"):
        extra = {"threshold": 1.0}
        if slug in ("svt1", "svt2", "svt4"):
            extra["cutoff"] = 1
        return (get_mechanism(slug, epsilon=eps, **extra), list(table1_pairs(10)), "discrete",
                MPLParams.for_output_kind("vector", alpha=ALPHA), "Table I, k=10, T=1" + (", c=1" if "cutoff" in extra else ""))
    raise ValueError(slug)


def run_mpl(slug: str, eps: float, runs: int, seed: int, **mech: Any) -> dict[str, Any]:
    m, pairs, kind, params, label = setting(slug, eps, **mech)
    seeds = np.random.SeedSequence([seed, int(round(eps * 1000)), sum(map(ord, slug))]).spawn(runs)
    lbs, eps_hats, chosen = [], [], Counter()
    t0 = time.perf_counter()
    for ss in seeds:
        res = mpl(m.sample, pairs, kind, params, np.random.default_rng(ss))
        lbs.append(res.lower_bound.lower_bound)
        eps_hats.append(res.epsilon_hat)
        chosen[res.chosen] += 1
    elapsed = time.perf_counter() - t0
    names = [getattr(p, "name", f"b={i + 1}") for i, p in enumerate(pairs)]
    top, count = chosen.most_common(1)[0]
    return {
        "mechanism": m,
        "label": label,
        "params": params,
        "lb": np.asarray(lbs),
        "eps_hat": np.asarray(eps_hats),
        "top_pair": f"{names[top]} ({count}/{runs})",
        "seconds": elapsed,
    }


def _se(p: float, runs: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / runs)


def study_coverage(runs: int, seed: int, mechanisms: list[str]) -> None:
    print(f"\n### Coverage on correct mechanisms: fraction of runs with LB <= eps (alpha = {ALPHA}, {runs} runs)\n")
    print("| mechanism | eps | n | N | tau | coverage | s.e. | mean LB | mean eps_hat | most chosen pair | s/run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for slug in mechanisms:
        for eps in EPSILONS:
            r = run_mpl(slug, eps, runs, seed)
            p = r["params"]
            true_eps = r["mechanism"].true_epsilon
            cov = float(np.mean(r["lb"] <= true_eps))
            print(f"| {slug} | {eps} | {p.n} | {p.N} | {p.tau:g} | {cov:.3f} | {_se(cov, runs):.3f} | "
                  f"{r['lb'].mean():.3f} | {r['eps_hat'].mean():.3f} | {r['top_pair']} | {r['seconds'] / runs:.2f} |",
                  flush=True)


def study_power(runs: int, seed: int, mechanisms: list[str]) -> None:
    print(f"\n### Power on incorrect mechanisms: fraction of runs with LB > claimed eps (alpha = {ALPHA}, {runs} runs)\n")
    print("| mechanism | claimed eps | true eps | n | N | tau | power | s.e. | mean LB | median LB | most chosen pair | s/run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for slug in mechanisms:
        for eps in EPSILONS:
            kwargs = {"num_queries": 6} if slug == "rnm-value" else {}
            r = run_mpl(slug, eps, runs, seed, **kwargs)
            m = r["mechanism"]
            if slug == "rnm-value":
                m = get_mechanism(slug, epsilon=eps, num_queries=6)
            p = r["params"]
            power = float(np.mean(r["lb"] > eps))
            true = m.true_epsilon
            true_s = "inf" if true is not None and math.isinf(true) else f"{true:g}"
            print(f"| {slug} | {eps} | {true_s} | {p.n} | {p.N} | {p.tau:g} | {power:.3f} | {_se(power, runs):.3f} | "
                  f"{r['lb'].mean():.3f} | {np.median(r['lb']):.3f} | {r['top_pair']} | {r['seconds'] / runs:.2f} |",
                  flush=True)


def study_accuracy(runs: int, seed: int, scales: list[float]) -> None:
    print(f"\n### Laplace with smaller scale s: eps_hat of MPL's chosen pair vs true eps/s ({runs} runs)\n")
    print("| s | claimed eps | true eps/s | mean eps_hat | mean eps_hat / (eps/s) - 1 | share within 10% | mean LB | power LB > eps | s/run |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in scales:
        for eps in EPSILONS:
            r = run_mpl("laplace-smaller-scale", eps, runs, seed, scale_factor=s)
            true = eps / s
            rel = r["eps_hat"] / true - 1
            print(f"| {s} | {eps} | {true:.3f} | {r['eps_hat'].mean():.3f} | {rel.mean():+.3f} | "
                  f"{np.mean(np.abs(rel) <= 0.10):.3f} | {r['lb'].mean():.3f} | {np.mean(r['lb'] > eps):.3f} | "
                  f"{r['seconds'] / runs:.2f} |", flush=True)


def study_error(runs: int, seed: int, sizes: list[int]) -> None:
    eps = 1.5
    print(f"\n### Error of eps_hat (DPL, one pair 0 vs 1, C = [-1, 1]) on Laplace, eps = {eps} ({runs} runs; paper 003 Fig. 6)\n")
    print("| n | mean eps_hat | bias / eps | RMSE / eps | MSE | MSE / eps | mean abs err / eps | s/run |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    m = get_mechanism("laplace", epsilon=eps)
    params = MPLParams(region=(-1.0, 1.0))
    for n in sizes:
        seeds = np.random.SeedSequence([seed, n]).spawn(runs)
        t0 = time.perf_counter()
        est = []
        for ss in seeds:
            rng = np.random.default_rng(ss)
            est.append(dpl(m.sample([0.0], n, rng), m.sample([1.0], n, rng), "continuous", params).epsilon_hat)
        elapsed = time.perf_counter() - t0
        e = np.asarray(est) - eps
        mse = float(np.mean(e**2))
        print(f"| {n} | {np.mean(est):.4f} | {e.mean() / eps:+.4f} | {math.sqrt(mse) / eps:.4f} | {mse:.5f} | "
              f"{mse / eps:.5f} | {np.mean(np.abs(e)) / eps:.4f} | {elapsed / runs:.3f} |", flush=True)


STUDIES: dict[str, Callable[..., None]] = {
    "coverage": study_coverage,
    "power": study_power,
    "accuracy": study_accuracy,
    "error": study_error,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study", choices=[*STUDIES, "all"], default="all")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--mechanisms", nargs="+", default=None,
                    help="coverage: laplace rnm svt2 (default); power: svt5 svt6 rnm-value (default)")
    ap.add_argument("--scales", type=float, nargs="+", default=[0.9, 0.5], help="accuracy: scale factors s")
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000], help="error: sample sizes n")
    args = ap.parse_args(argv)
    chosen = list(STUDIES) if args.study == "all" else [args.study]
    t0 = time.perf_counter()
    for name in chosen:
        t1 = time.perf_counter()
        if name == "coverage":
            study_coverage(args.runs, args.seed, args.mechanisms or ["laplace", "rnm", "svt2"])
        elif name == "power":
            study_power(args.runs, args.seed, args.mechanisms or ["svt5", "svt6", "rnm-value"])
        elif name == "accuracy":
            study_accuracy(args.runs, args.seed, args.scales)
        else:
            study_error(args.runs, args.seed, args.sizes)
        print(f"\n({name}: {time.perf_counter() - t1:.0f} s)", flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
