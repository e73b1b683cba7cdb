"""Audits of one corpus mechanism at the default budget, one seed per run: refuted or not, and the event.

Written for SVT 3 (``svt3-values``, claim ε = 0.1), which the engine misses in some runs:

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/svt3_runs.py svt3-values 1 5
    PYTHONPATH=. nice -n 10 .venv/bin/python bench/svt3_runs.py svt3-values 2 3 --keep-pairs 8 --tests
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.audit import AuditSettings, local_sampler, run_engine  # noqa: E402
from app.audit.engine import DEFAULT_BUDGET  # noqa: E402
from app.reference.corpus import corpus  # noqa: E402
from app.stats.claims import PureDP


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slug")
    ap.add_argument("first_seed", type=int)
    ap.add_argument("end_seed", type=int, help="one past the last seed")
    ap.add_argument("--claim", type=float, default=0.1)
    ap.add_argument("--keep-pairs", type=int, default=AuditSettings().keep_pairs)
    ap.add_argument("--tests", action="store_true", help="print every held-out test")
    ap.add_argument("--rescore-late", action=argparse.BooleanOptionalAction, default=AuditSettings().rescore_late,
                    help="AuditSettings.rescore_late (late re-ranking; on by default)")
    args = ap.parse_args()
    m = corpus()[args.slug]
    print(f"{args.slug}: pairs' ε {m.pair_epsilon():.4g}, claim {args.claim:g}, budget {DEFAULT_BUDGET:,}, "
          f"keep_pairs {args.keep_pairs}, rescore_late {args.rescore_late}", flush=True)
    for seed in range(args.first_seed, args.end_seed):
        t0 = time.time()
        settings = AuditSettings(budget=DEFAULT_BUDGET, seed=seed, keep_pairs=args.keep_pairs,
                                 rescore_late=args.rescore_late)
        res = asyncio.run(run_engine(local_sampler(m.sample, seed=seed), m.pairs, m.shape, PureDP(args.claim),
                                     settings))
        print(f"seed {seed}: refuted {res.refuted}, LB {res.lower_bound:.4g}, samples {res.samples_used:,}, "
              f"{time.time() - t0:.0f} s, {(res.best or {}).get('describe')}", flush=True)
        if args.tests:
            for t in res.to_dict().get("tests", []):
                print(f"  round {t['round']} pair {t['pair']} ({t['family']}): {t.get('describe')}: "
                      f"LB {t['held_out']['lower_bound']:.4g}")


if __name__ == "__main__":
    main()
