"""Does the anytime-valid bound reject the claim exactly when the e-process detector alarms?

For a pure-ε claim the bound's e-process at the claimed ε is the detector's own statistic
(docs/method.md §11.2), so the two must agree run by run and period by period. For (ε, δ) they are
different e-processes of the same claim: the detector bets on the anchored supporting line
(app.monitors.detectors.sequential_line), the bound on p ≤ e^ε q + δ in the past periods'
orientation (app.stats.confidence.predictable_orientation). This bench counts, on the same draws
at the claim's vertex, the runs where each fires within T periods, the runs in common, and the
periods where "the detector has alarmed by t" and "the bound rejects the claim by t" differ.

    nice -n 10 .venv/bin/python bench/bound_vs_detector.py --runs 2000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import optimize

from app.monitors.detectors import initial_state, sequential_line, sequential_step
from app.stats.claims import parse_claim
from app.stats.confidence import confidence_sequence, cs_claim_of


def vertex(claim: dict) -> tuple[float, float]:
    up = parse_claim(claim).upper
    if float(up(0.5)) <= 0.5:
        return 0.5, 0.5
    q = float(optimize.brentq(lambda q: float(up(q)) + q - 1.0, 0.0, 0.5, xtol=1e-14))
    return float(up(q)), q


def cell(claim: dict, n: int, runs: int, horizon: int, alpha: float, seed: int) -> dict:
    p, q = vertex(claim)
    rng = np.random.default_rng(seed)
    a = rng.binomial(n, p, size=(runs, horizon))
    b = rng.binomial(n, q, size=(runs, horizon))
    det_by_t = np.zeros((runs, horizon), dtype=bool)
    for r in range(runs):
        state = initial_state("e-process", horizon=horizon, gamma=0.25, threshold=float(np.log(1 / alpha)),
                              level=alpha, claim=claim)
        fired = False
        for t in range(horizon):
            if not fired:
                step = sequential_step(state, int(a[r, t]), int(b[r, t]), n, sequential_line(state, claim))
                state = step.state
                fired = step.alarm
            det_by_t[r, t] = fired
    cs = confidence_sequence(a, b, n, cs_claim_of(parse_claim(claim)), alpha)
    bound_by_t = np.maximum.accumulate(cs.claim_rejected, axis=1)
    det_runs, bound_runs = det_by_t[:, -1], bound_by_t[:, -1]
    return {"claim": claim, "p": p, "q": q, "n": n, "runs": runs, "detector": int(det_runs.sum()),
            "bound": int(bound_runs.sum()), "both": int((det_runs & bound_runs).sum()),
            "period_disagreements": int((det_by_t != bound_by_t).sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=2030)
    args = ap.parse_args()
    print(f"runs {args.runs}, T = {args.horizon}, n = {args.n}, α = {args.alpha}, seed {args.seed}; at the claim's vertex")
    print("| claim | p, q | detector alarms | bound rejects | both | periods that disagree | seconds |")
    print("|---|---|---|---|---|---|---|")
    for claim in ({"epsilon": 1.0}, {"epsilon": 1.0, "delta": 0.01}):
        t0 = time.time()
        res = cell(claim, args.n, args.runs, args.horizon, args.alpha, args.seed)
        label = ", ".join(f"{k} {v:g}" for k, v in claim.items())
        print(f"| {label} | {res['p']:.4f}, {res['q']:.4f} | {res['detector']} | {res['bound']} | {res['both']} | "
              f"{res['period_disagreements']:,} | {time.time() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
