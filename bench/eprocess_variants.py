"""The e-process's designs: one face or both, the grid alone or with aGRAPA.

R runs of T = 200 periods, claim ε = 1 (pure), q = q0 throughout, p = e·q0 before the change at
period 51 and e^θ₁·q0 after it; plus a violation of the complement face only (p = 0.95,
1 − q = e^1.5·(1 − p) after the change). Median delay after the change (runs that alarmed after
it) and the false-alarm rate before it, for each variant, on the same draws.

    nice -n 10 .venv/bin/python bench/eprocess_variants.py --runs 500

``--designs`` compares other mixtures (app.stats.sequential.EProcessDesign labels, method.md §13.3c)
on the same draws instead of the four variants (a design with the horizon-tuned bet, ``tuned=τ``,
method.md §13.3d, runs with the horizon T unless its label gives one), e.g.

    nice -n 10 .venv/bin/python bench/eprocess_variants.py --runs 500 \\
        --designs "both,agrapa,grid=16" "auto,agrapa=0.5,grid=16"

``--scenarios a,b,c,d,e,f`` runs the service's scenarios instead (``dpwatch simulate``'s (a)–(h),
counts drawn from their exact (p, q) before and after the change at t₀ = 50, n = 200, T = 200) and
adds the aggregator at its Monte-Carlo threshold (γ = 1/4): median / p90 delay after the change as
``dpwatch simulate`` reports it (runs without an early alarm; never = ∞), and the early-alarm rate.
``--edetector`` adds, for each design on one or the predictable face, the e-detector (c = T/α) with
that design's faces and payoff (the shipped e-detector: ``auto,…``). The exact period e-value against
its Jensen bound (docs/sequential.md, "the exact period e-value"):

    nice -n 10 .venv/bin/python bench/eprocess_variants.py --runs 2000 --scenarios a,b,c,d,e,f,g,h --edetector \
        --designs "auto,agrapa=0.8,grid=16" "auto,agrapa=0.8,grid=16,jensen"
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from app.stats.sequential import (
    EProcessDesign,
    SupportingLine,
    e_detector_paths,
    e_process_paths_from_increments,
    edetector_threshold,
    face_increments,
)

VARIANTS = [("one", False), ("one", True), ("both", False), ("both", True)]


def _first(log_w: np.ndarray, level: float) -> np.ndarray:
    hit = log_w >= level
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)


def scenarios(keys: list[str], designs: list[EProcessDesign], runs: int, horizon: int, change_at: int, n: int,
              alpha: float, gamma: float, seed: int, edetector: bool = False) -> None:
    from app.reference import SCENARIOS
    from app.simulation import exact_check_probabilities
    from app.simulation_results import evaluate_alarms
    from app.stats.aggregator import first_crossing, weighted_statistic_path
    from app.stats.period import period_statistic
    from app.stats.thresholds import threshold_for

    detectors = [d for d in designs if edetector and d.faces in ("one", "auto")]
    names = ["aggregator"] + [d.label for d in designs] + [f"e-detector [{d.label}]" for d in detectors]
    c_level = math.log(edetector_threshold(alpha, horizon))
    print(f"R = {runs}, T = {horizon}, n = {n}, change at t₀ = {change_at}, α = {alpha}: median / p90 delay "
          "after the change (— = not within T); early-alarm rate in brackets")
    print("| scenario | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    thr = threshold_for(horizon, gamma, alpha).value
    for key in keys:
        sc = SCENARIOS[key]
        (p0, q0), (p1, q1) = exact_check_probabilities(sc).values()
        rng = np.random.default_rng([seed, ord(key)])
        a = np.empty((runs, horizon), dtype=np.int64)
        b = np.empty((runs, horizon), dtype=np.int64)
        before = change_at - 1
        a[:, :before], b[:, :before] = rng.binomial(n, p0, (runs, before)), rng.binomial(n, q0, (runs, before))
        a[:, before:] = rng.binomial(n, p1, (runs, horizon - before))
        b[:, before:] = rng.binomial(n, q1, (runs, horizon - before))
        line = SupportingLine.pure(sc.epsilon)
        firsts = [first_crossing(weighted_statistic_path(period_statistic(a, b, n, sc.epsilon).z, horizon, gamma), thr)]
        firsts += [_first((d.with_horizon(horizon) if d.tuned and d.horizon is None else d).paths(a, b, n, line,
                                                                                             alpha=alpha),
                          math.log(1 / alpha)) for d in designs]
        firsts += [_first(e_detector_paths(a, b, n, line, faces="auto" if d.faces == "auto" else "one",
                                           payoff=d.payoff, grid=d.grid), c_level) for d in detectors]
        cells = []
        for name, first in zip(names, firsts):
            res = evaluate_alarms(name, first, 0.0, change_at, horizon, n, curve=False)
            med = "—" if not math.isfinite(res.median_delay) else f"{res.median_delay:g}"
            p90 = "—" if not math.isfinite(res.p90_delay) else f"{res.p90_delay:g}"
            cells.append(f"{med} / {p90} [{res.false_alarms_before_change:.3f}]")
        print(f"| ({key}) {sc.title} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--change-at", type=int, default=None, help="51 (default), 50 with --scenarios")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--designs", nargs="+", default=None, help="EProcessDesign labels, e.g. 'auto,agrapa=0.5,grid=16'")
    ap.add_argument("--scenarios", default=None, help="comma-separated keys of dpwatch simulate's scenarios")
    ap.add_argument("--n", type=int, default=200, help="outputs per side and period (--scenarios)")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--edetector", action="store_true", help="with --scenarios: the e-detector of each design too")
    ap.add_argument("--estimate-discount", type=float, default=None,
                    help="an experiment: the discount of the past counts behind the aGRAPA bet and the predictable "
                         "face (the classes' ESTIMATE_DISCOUNT, 0.9); the draws stay the same")
    ap.add_argument("--extra-cells", action="store_true",
                    help="add changes at the vertex (both faces bind before the change) and ε 1 → 1.15")
    args = ap.parse_args()
    designs = [EProcessDesign.parse(t) for t in args.designs] if args.designs else None
    if args.estimate_discount is not None:
        from app.stats.sequential import _MixtureBase

        _MixtureBase.ESTIMATE_DISCOUNT = args.estimate_discount
    if args.scenarios:
        scenarios(args.scenarios.split(","), designs or [EProcessDesign()], args.runs, args.horizon,
                  args.change_at or 50, args.n, args.alpha, args.gamma, args.seed, args.edetector)
        return
    rng = np.random.default_rng(args.seed)
    r, t_max, t0 = args.runs, args.horizon, args.change_at or 51
    line = SupportingLine.pure(1.0)
    cells = [(f"ε 1 → {e1:g}, q0 = {q0:g}, n = {n}", math.e * q0, q0, math.exp(e1) * q0, q0, n)
             for e1 in (1.3, 2.0) for q0 in (0.1, 0.01) for n in (200, 1000)]
    cells.append(("complement face: p = 0.95, 1 − q: e¹ → e^1.5 × (1 − p), n = 200", 0.95, 1 - math.e * 0.05, 0.95,
                  1 - math.exp(1.5) * 0.05, 200))
    if args.extra_cells:
        pv, qv = math.e / (1 + math.e), 1 / (1 + math.e)
        cells += [(f"vertex: ε 1 → {e1:g} (p up, q fixed), n = {n}", pv, qv, math.exp(e1) * qv, qv, n)
                  for e1 in (1.05, 1.1) for n in (200, 1000)]
        cells += [(f"ε 1 → 1.15, q0 = {q0:g}, n = 200", math.e * q0, q0, math.exp(1.15) * q0, q0, 200)
                  for q0 in (0.1, 0.01)]
    if designs is None:
        header = [f"{f} face{'s' if f == 'both' else ''}, {'grid + aGRAPA' if g else 'grid'}" for f, g in VARIANTS]
    else:
        header = [d.label for d in designs]
    print("| cell | " + " | ".join(header) + " |")
    print("|---|" + "---|" * len(header))
    for label, p0, q0, p1, q1, n in cells:
        a = np.empty((r, t_max))
        b = np.empty((r, t_max))
        a[:, : t0 - 1] = rng.binomial(n, p0, (r, t0 - 1))
        b[:, : t0 - 1] = rng.binomial(n, q0, (r, t0 - 1))
        a[:, t0 - 1:] = rng.binomial(n, p1, (r, t_max - t0 + 1))
        b[:, t0 - 1:] = rng.binomial(n, q1, (r, t_max - t0 + 1))
        row = []
        paths = ([e_process_paths_from_increments(face_increments(a, b, n, line, f, g)) for f, g in VARIANTS]
                 if designs is None else [(d.with_horizon(t_max) if d.tuned and d.horizon is None else d)
                                          .paths(a, b, n, line) for d in designs])
        for log_w in paths:
            first = _first(log_w, math.log(20))
            after = first[first >= t0] - t0
            med = f"{np.median(after):g} ({after.size / r:.0%})" if after.size > r / 2 else f"— ({after.size / r:.0%})"
            row.append(f"{med}; FA {np.mean((first > 0) & (first < t0)):.3f}")
        print(f"| {label} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
