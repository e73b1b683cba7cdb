"""A rare partition-selection leak: does the audit engine test it, or give up after the pilot?

    PYTHONPATH=. .venv/bin/python bench/rare_leak.py [--p 2e-4] [--runs 20] [--budgets 200000 1000000 4096000]

A keyed release leaks the key "z" with probability ``p`` on a table holding a row of the unit and
never on the empty table (outputs otherwise empty: partition selection with no threshold), claimed
ε = 1 (true ε = ∞). For each budget (outputs per database) it prints how many of ``--runs`` seeded
audits refuted the claim and how many stopped with "no candidate event" (nothing varied in the
outputs drawn). The pilot (2 000 outputs) sees no leak with probability e^(−2000p) (0.67 at 2·10⁻⁴).
Run it from another checkout to compare engines (docs/audit.md §4, "When nothing varies").
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from app.audit import AuditSettings, local_sampler, run_engine
from app.stats.claims import PureDP
from app.stats.keyed import KeyedSamples
from app.stats.shapes import OutputShape


def rare_key(p: float):  # type: ignore[no-untyped-def]
    def sample(database, n, rng):  # type: ignore[no-untyped-def]
        hits = rng.random(n) < p if database else np.zeros(n, dtype=bool)
        indptr = np.concatenate([[0], np.cumsum(hits)]).astype(np.int64)
        nnz = int(indptr[-1])
        return KeyedSamples(("z",), indptr, np.zeros(nnz, dtype=np.int64), np.ones(nnz))
    return sample


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--p", type=float, default=2e-4)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--budgets", type=int, nargs="+", default=[200_000, 1_000_000, 4_096_000])
    a = ap.parse_args()
    pairs = [([{"user": 1, "city": "z"}], [])]
    print(f"leak probability {a.p:g}, claim ε = 1, {a.runs} runs per budget\n")
    print("| budget per database | refuted | stopped: no candidate event | seconds |")
    print("|---:|---:|---:|---:|")
    for budget in a.budgets:
        refuted = early = 0
        t0 = time.perf_counter()
        for seed in range(a.runs):
            res = asyncio.run(run_engine(local_sampler(rare_key(a.p), seed=seed), pairs, OutputShape(container="keyed"),
                                         PureDP(1.0), AuditSettings(budget=budget, seed=seed)))
            refuted += res.refuted
            early += res.stopped.startswith("no candidate")
        print(f"| {budget:,} | {refuted}/{a.runs} | {early}/{a.runs} | {time.perf_counter() - t0:.1f} |", flush=True)


if __name__ == "__main__":
    main()
