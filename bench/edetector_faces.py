"""The e-detector on one face against the predictable face (method.md §13.3c, §13.4), same draws.

    nice -n 10 .venv/bin/python bench/edetector_faces.py --runs 1000

Cells of bench/alarm_coverage.py (claim ε = 1, p on the line p = e·q0 before the change at t0 = 51, at
e^θ₁·q0 after it; T = 200, c = T/α) and a violation of the complement face only (p = 0.95, 1 − q moves
from e·(1 − p) to e^1.5·(1 − p)), which one face cannot see, and the vertex p = e/(1 + e), q = 1/(1 + e) without a change, where both
faces bind (its "FA" is the share of runs alarming before t0, its delay column the runs after). Median delay after the change (share of
runs alarming after it) and the false-alarm rate before it.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from app.stats.sequential import (
    SupportingLine,
    bet_grid,
    e_detector_paths_from_increments,
    edetector_threshold,
    face_increments,
    log_evalues_sd,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--change-at", type=int, default=51)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    T, t0, R = args.horizon, args.change_at, args.runs
    log_c = math.log(edetector_threshold(args.alpha, T))
    line = SupportingLine.pure(1.0)

    def first(paths: np.ndarray) -> np.ndarray:
        hit = paths >= log_c
        return np.where(hit.any(1), hit.argmax(1) + 1, 0)

    def cell(ft: np.ndarray) -> str:
        late = ft[ft >= t0] - t0
        med = f"{np.median(late):g}" if (ft >= t0).mean() >= 0.5 else "—"
        return f"{med} ({(ft >= t0).mean():.0%}); FA {((ft > 0) & (ft < t0)).mean():.3f}"

    cells = []
    for th in (1.3, 2.0):
        for q0 in (0.1, 0.01):
            for n in (200, 1000):
                p = np.r_[np.full(t0 - 1, math.e * q0), np.full(T - t0 + 1, math.exp(th) * q0)]
                cells.append((f"ε 1 → {th:g}, q0 = {q0:g}, n = {n}", p, np.full(T, q0), n))
    p0 = 0.95
    q = np.r_[np.full(t0 - 1, 1 - math.e * (1 - p0)), np.full(T - t0 + 1, 1 - math.exp(1.5) * (1 - p0))]
    cells.append(("complement face: 1 − q from e·(1 − p) to e^1.5·(1 − p), p = 0.95, n = 200", np.full(T, p0), q, 200))
    pv, qv = math.e / (1 + math.e), 1 / (1 + math.e)  # the vertex: both faces bind
    cells.append(("vertex, no change (both faces on the boundary), n = 200", np.full(T, pv), np.full(T, qv), 200))
    rng = np.random.default_rng(args.seed)
    print(f"R = {R}, T = {T}, change at {t0}, α = {args.alpha}, c = T/α = {T / args.alpha:g}\n")
    print("| cell | one face (the grid) | predictable face (the grid), shipped |")
    print("|---|---|---|")
    for name, p, q, n in cells:
        a, b = rng.binomial(n, p, (R, T)), rng.binomial(n, q, (R, T))
        one = first(e_detector_paths_from_increments(log_evalues_sd(a, b, n, line.slope, line.intercept, bet_grid())))
        auto = first(e_detector_paths_from_increments(face_increments(a, b, n, line, "auto", False)))
        print(f"| {name} | {cell(one)} | {cell(auto)} |", flush=True)


if __name__ == "__main__":
    main()
