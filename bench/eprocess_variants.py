"""The e-process before and after issue 20: one face or both, the grid alone or with aGRAPA.

R runs of T = 200 periods, claim ε = 1 (pure), q = q0 throughout, p = e·q0 before the change at
period 51 and e^θ₁·q0 after it; plus a violation of the complement face only (p = 0.95,
1 − q = e^1.5·(1 − p) after the change). Median delay after the change (runs that alarmed after
it) and the false-alarm rate before it, for each variant, on the same draws.

    nice -n 10 .venv/bin/python bench/eprocess_variants.py --runs 500
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from app.stats.sequential import SupportingLine, e_process_paths_from_increments, face_increments

VARIANTS = [("one", False), ("one", True), ("both", False), ("both", True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--change-at", type=int, default=51)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    r, t_max, t0 = args.runs, args.horizon, args.change_at
    line = SupportingLine.pure(1.0)
    cells = [(f"ε 1 → {e1:g}, q0 = {q0:g}, n = {n}", math.e * q0, q0, math.exp(e1) * q0, q0, n)
             for e1 in (1.3, 2.0) for q0 in (0.1, 0.01) for n in (200, 1000)]
    cells.append(("complement face: p = 0.95, 1 − q: e¹ → e^1.5 × (1 − p), n = 200", 0.95, 1 - math.e * 0.05, 0.95,
                  1 - math.exp(1.5) * 0.05, 200))
    print("| cell | " + " | ".join(f"{f} face{'s' if f == 'both' else ''}, {'grid + aGRAPA' if g else 'grid'}"
                                   for f, g in VARIANTS) + " |")
    print("|---|" + "---|" * len(VARIANTS))
    for label, p0, q0, p1, q1, n in cells:
        a = np.empty((r, t_max))
        b = np.empty((r, t_max))
        a[:, : t0 - 1] = rng.binomial(n, p0, (r, t0 - 1))
        b[:, : t0 - 1] = rng.binomial(n, q0, (r, t0 - 1))
        a[:, t0 - 1:] = rng.binomial(n, p1, (r, t_max - t0 + 1))
        b[:, t0 - 1:] = rng.binomial(n, q1, (r, t_max - t0 + 1))
        row = []
        for faces, agrapa in VARIANTS:
            log_w = e_process_paths_from_increments(face_increments(a, b, n, line, faces, agrapa))
            hit = log_w >= math.log(20)
            first = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)
            after = first[first >= t0] - t0
            med = f"{np.median(after):g} ({after.size / r:.0%})" if after.size > r / 2 else f"— ({after.size / r:.0%})"
            row.append(f"{med}; FA {np.mean((first > 0) & (first < t0)):.3f}")
        print(f"| {label} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
