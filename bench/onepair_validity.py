"""P(ever reject within N pairs) of the shipped one-pair auditor on mechanisms that satisfy the claim.

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/onepair_validity.py run --mechanism TightLaplace \
        --epsilon 0.1 --first 0 --last 500 --out docs/results/onepair/validity_TightLaplace_0.1_a.txt
    python bench/onepair_validity.py summary docs/results/onepair/validity_*.txt

``run`` audits runs ``first..last−1`` with the streams of bench/sequential_audit.py (same seed and rng
layout: run r of a cell there is run r here) for up to ``--max-pairs`` pairs, and appends one line per
run, ``r rejected_at`` (0: never), flushed as it goes, so a split or interrupted study keeps what it
did. ``summary`` pools the files per (mechanism, ε) and prints the rejection rate with its 95%
Clopper–Pearson interval. ``--method ours-v4`` / ``ours-v3`` audit with the earlier auditors (the spline
witness with ρ = 3 and the constant bet / ρ = 1 and the ONS bet).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, "bench")
from sequential_audit import MECHANISMS, ONEPAIR_OPTIONS, X_DB, X_PRIME_DB, claim_for, clopper_pearson  # noqa: E402

from app.stats.onepair import audit_pairs  # noqa: E402


def run(args: argparse.Namespace) -> None:
    mech = MECHANISMS[args.mechanism]
    eps = args.epsilon
    line = claim_for("dp", mech, eps).tangent(0.5)
    opts = ONEPAIR_OPTIONS[args.method]
    with open(args.out, "a") as fh:
        fh.write(f"# {mech.name} {eps} {args.method} max_pairs={args.max_pairs} seed={args.seed}\n")
        for r in range(args.first, args.last):
            rng = np.random.default_rng([args.seed, r, int(eps * 1e6), sum(map(ord, mech.name))])
            mech.draw(rng, X_DB, 20, eps)
            mech.draw(rng, X_PRIME_DB, 20, eps)
            x = mech.draw(rng, X_DB, args.max_pairs, eps)
            y = mech.draw(rng, X_PRIME_DB, args.max_pairs, eps)
            res = audit_pairs(x, y, line, args.alpha, **opts)  # type: ignore[arg-type]
            fh.write(f"{r} {res.rejected_at or 0}\n")
            fh.flush()


def summary(paths: list[str]) -> None:
    cells: dict[str, dict[int, int]] = defaultdict(dict)
    for path in paths:
        key = ""
        for line in open(path):
            if line.startswith("#"):
                key = " ".join(line[1:].split()[:3])
                continue
            r, t = line.split()
            cells[key][int(r)] = int(t)
    print("| mechanism ε method | runs | rejected | rate [95% CI] |")
    print("|---|---|---|---|")
    for key, runs in sorted(cells.items()):
        n, k = len(runs), sum(t > 0 for t in runs.values())
        lo, hi = clopper_pearson(k, n)
        print(f"| {key} | {n} | {k} | {k / n:.4f} [{lo:.4f}, {hi:.4f}] |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--mechanism", required=True, choices=[m for m, v in MECHANISMS.items() if v.dp])
    r.add_argument("--epsilon", type=float, required=True)
    r.add_argument("--first", type=int, default=0)
    r.add_argument("--last", type=int, default=1000)
    r.add_argument("--max-pairs", type=int, default=5000)
    r.add_argument("--alpha", type=float, default=0.05)
    r.add_argument("--seed", type=int, default=2025)
    r.add_argument("--method", choices=["ours-v5", "ours-v4", "ours-v3"], default="ours-v5")
    r.add_argument("--out", required=True)
    s = sub.add_parser("summary")
    s.add_argument("paths", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args)
    else:
        summary(args.paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
