"""False alarms of every detector at the boundary of every kind of claim.

Claims: ε 0.1, 1 and 3; (1, 10⁻⁵) and (1, 10⁻²); μ 0.5, 1 and 2; ρ 0.5. Boundary points: the
vertex (both faces bind; GDP/zCDP: the symmetric point), an edge (q = 0.1, or half the vertex's q
when q = 0.1 is outside), the mirrored edge (the complement face 1 − q = h(1 − p), at 1 − p = 0.1),
the corner (δ, 0) where it exists, and a rare event p = 0.01. n 50 and 200, T = 200, α = 0.05.

Detectors on the same draws: the aggregator (anchored statistic, shipped threshold), the fair naive
(randomised exact test at α/T; pure ε only), the e-process on both faces (the
grid + aGRAPA), the e-process of the first design (one face, grid), and the e-detector (c = T/α). Lines of
non-pure claims: the anchor at the discounted past counts (the service's ``sequential_line``; the
a-priori line in period 1). A run is a false alarm when the detector fires within T periods.

    nice -n 10 .venv/bin/python bench/far_grid.py --runs 2000 > docs/results/far_grid/far.txt

``--designs`` adds e-processes of other designs (app.stats.sequential.EProcessDesign labels, method.md
§13.3c) on the same draws; ``--only-designs`` runs just the both-faces e-process and those
(docs/sequential.md, "an e-process that wastes less evidence"):

    nice -n 10 .venv/bin/python bench/far_grid.py --runs 2000 --only-designs --designs "auto,agrapa=0.8,grid=16"

A design with the horizon-tuned bet (``tuned=τ``, method.md §13.3d) runs with the horizon T unless its
label gives one; the FAR grid of the service's horizon design (docs/sequential.md, "the horizon-tuned bet"):

    nice -n 10 .venv/bin/python bench/far_grid.py --runs 4000 --ns 50,200 --sparse --only-designs --no-reference \
        --designs "auto,agrapa=0.8,grid=16" "auto,agrapa=0.2,grid=16,tuned=0.7"

``--no-reference`` leaves the both-faces e-process out of ``--only-designs``; ``--edetector`` adds, for
each design on one face or the predictable face, the e-detector (c = T/α) on that design's grid bets
(the shipped e-detector is the one of ``auto,…``); ``--sparse`` adds the boundary point q = 0.01;
``--chunk`` runs are computed at a time. The exact period e-value against its Jensen bound
(docs/sequential.md, "the exact period e-value"):

    nice -n 10 .venv/bin/python bench/far_grid.py --runs 4000 --ns 200,1000 --sparse --only-designs \
        --no-reference --edetector --designs "auto,agrapa=0.8,grid=16" "auto,agrapa=0.8,grid=16,jensen"
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import optimize

from app.stats.aggregator import first_crossing, weighted_statistic_path
from app.stats.claim_period import SequentialLines, claim_z_path, sequential_lines
from app.stats.claims import ZCDP, ApproxDP, Claim, GaussianDP, clopper_pearson, parse_claim
from app.stats.exact_naive import exact_naive_alarm_period
from app.stats.period import period_statistic
from app.stats.sequential import (
    EProcessDesign,
    SupportingLine,
    bet_grid,
    component_parts,
    e_detector_paths_from_increments,
    e_process_paths_from_increments,
    edetector_threshold,
)
from app.stats.thresholds import threshold_for


def points(claim: Claim, sparse: bool = False) -> list[tuple[str, float, float]]:
    up = claim.upper

    def solve(f, lo=0.0, hi=1.0):
        return float(optimize.brentq(f, lo, hi, xtol=1e-14))

    q_v = solve(lambda q: float(up(q)) + q - 1.0, 0.0, 0.5 + 1e-12) if float(up(0.5)) > 0.5 else 0.5
    out = [("vertex", float(up(q_v)), q_v)]
    q_e = 0.1 if 0.1 < q_v else q_v / 2
    out.append((f"edge q={q_e:.3g}", float(up(q_e)), q_e))
    # mirrored edge: 1 − q = h(1 − p) with 1 − p = 0.1 (or half of 1 − p at the vertex)
    one_minus_p = 0.1 if 0.1 < 1 - float(up(q_v)) else (1 - float(up(q_v))) / 2
    out.append(("mirrored edge", 1 - one_minus_p, 1 - float(up(one_minus_p))))
    if float(up(0.0)) > 0:
        out.append(("corner (δ,0)", float(up(0.0)), 0.0))
    if float(up(0.0)) < 0.01 < float(up(q_v)):
        q_r = solve(lambda q: float(up(q)) - 0.01, 0.0, q_v)
        out.append(("rare p=0.01", 0.01, q_r))
    if sparse and 0.01 < q_v and q_e != 0.01:
        out.append(("sparse q=0.01", float(up(0.01)), 0.01))
    return out


def increments(lines: SequentialLines, n: int, faces: str, agrapa: bool, grid_size: int = 16,
               payoff: str = "per-sample", tuned: float | None = None) -> np.ndarray:
    """Every component's log e-value (app.stats.sequential.component_parts) on each period's line, in its
    orientation (``sequential_lines``); ``tuned``: the rate κ of the horizon-tuned bet (method.md §13.3d)."""
    nn = np.full(lines.a.shape, float(n))
    return component_parts(lines.a, lines.b, nn, lines.slope, lines.intercept, lines.past_a, lines.past_b,
                           lines.past_n, faces, agrapa, bet_grid(grid_size), payoff, tuned)


def cell(claim: Claim, p: float, q: float, n: int, runs: int, horizon: int, alpha: float, gamma: float,
         seed: int, designs: tuple[EProcessDesign, ...] = (), only_designs: bool = False, edetector: bool = False,
         chunk: int = 1000) -> dict[str, int]:
    rng = np.random.default_rng([seed, n, int(p * 1e9), int(q * 1e9)])
    a = rng.binomial(n, min(p, 1.0), size=(runs, horizon))
    b = rng.binomial(n, min(max(q, 0.0), 1.0), size=(runs, horizon))
    pure = getattr(claim, "delta", None) == 0.0 or claim.kind == "epsilon"
    out = {}
    lines = sequential_lines(claim, a, b, n)  # each period's line, as the service's checks take it
    if pure:
        eps = float(claim.epsilon)
        z = None if only_designs else period_statistic(a, b, n, eps).z
        if not only_designs:
            out["naive"] = int(np.sum(exact_naive_alarm_period(a, b, n, SupportingLine.pure(eps), alpha, horizon,
                                                              rng=rng) > 0))
    else:
        z = None if only_designs else claim_z_path(a, b, n, claim)
    level = math.log(1 / alpha)
    c_level = math.log(edetector_threshold(alpha, horizon))
    for design in designs:  # on the same draws (method.md §13.3c); a tuned design without a horizon gets T
        label = design.label
        design = design.with_horizon(horizon) if design.tuned and design.horizon is None else design
        hits = det_hits = 0
        for lo in range(0, runs, chunk):
            rows = slice(lo, min(runs, lo + chunk))
            inc = increments(SequentialLines(*(x[rows] for x in lines)), n, design.faces, design.agrapa,
                             design.grid_size, design.payoff, design.tuned_rate(alpha))
            hits += int(np.sum((design.paths_from_increments(inc) >= level).any(axis=1)))
            if edetector and design.faces in ("one", "auto"):  # its first grid_size components: the grid bets
                grid_inc = np.ascontiguousarray(inc[..., :design.grid_size])
                det_hits += int(np.sum((e_detector_paths_from_increments(grid_inc) >= c_level).any(axis=1)))
        out[f"e-process [{label}]"] = hits
        if edetector and design.faces in ("one", "auto"):
            out[f"e-detector [{label}]"] = det_hits
    if only_designs:
        return out
    thr = threshold_for(horizon, gamma, alpha).value
    out["aggregator"] = int(np.sum(first_crossing(weighted_statistic_path(z, horizon, gamma), thr) > 0))
    new = e_process_paths_from_increments(increments(lines, n, "both", True))
    out["e-process"] = int(np.sum((new >= level).any(axis=1)))
    one = increments(lines, n, "one", False)
    out["e-process (one face, grid)"] = int(np.sum((e_process_paths_from_increments(one) >= level).any(axis=1)))
    c = math.log(edetector_threshold(alpha, horizon))
    out["e-detector"] = int(np.sum((e_detector_paths_from_increments(one) >= c).any(axis=1)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--ns", default="50,200")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--designs", nargs="+", default=[],
                    help="more e-processes on the same draws (EProcessDesign labels, e.g. 'auto,agrapa=0.8,grid=16')")
    ap.add_argument("--only-designs", action="store_true",
                    help="run only the shipped e-process and the --designs (no aggregator, naive, e-detector)")
    ap.add_argument("--no-reference", action="store_true", help="with --only-designs: no both-faces e-process")
    ap.add_argument("--edetector", action="store_true",
                    help="the e-detector (c = T/α) on the grid bets of each design on one or the predictable face")
    ap.add_argument("--sparse", action="store_true", help="add the boundary point q = 0.01")
    ap.add_argument("--chunk", type=int, default=1000, help="runs computed at a time")
    args = ap.parse_args()
    designs = tuple(EProcessDesign.parse(t) for t in args.designs)
    claims = [parse_claim({"epsilon": e}) for e in (0.1, 1.0, 3.0)] + [ApproxDP(1.0, 1e-5), ApproxDP(1.0, 1e-2)] \
        + [GaussianDP(m) for m in (0.5, 1.0, 2.0)] + [ZCDP(0.5)]
    names = ["aggregator", "naive", "e-process", "e-process (one face, grid)", "e-detector"]
    if args.only_designs:
        designs = designs if args.no_reference else (EProcessDesign(),) + designs
        names = []
    for d in designs:
        names.append(f"e-process [{d.label}]")
        if args.edetector and d.faces in ("one", "auto"):
            names.append(f"e-detector [{d.label}]")
    print(f"R = {args.runs}, T = {args.horizon}, α = {args.alpha}; FAR per detector (— : not run); "
          f"95% Clopper–Pearson interval of the largest in the last column")
    print("| claim | point | p | q | n | " + " | ".join(names) + " | max [95% CI] |")
    print("|---|---|---|---|---|" + "---|" * len(names) + "---|")
    worst = {k: (0.0, "") for k in names}
    rates_of: dict[str, list[float]] = {k: [] for k in names}
    started = time.time()
    cells = 0
    for claim in claims:
        for label, p, q in points(claim, args.sparse):
            for n in [int(v) for v in args.ns.split(",")]:
                t_cell = time.time()
                res = cell(claim, p, q, n, args.runs, args.horizon, args.alpha, args.gamma, args.seed, designs,
                           args.only_designs, args.edetector, args.chunk)
                cells += 1
                rates = {k: res[k] / args.runs for k in res}
                top = max(res.values())
                lo = float(clopper_pearson(top, args.runs, 0.025, "lower"))
                hi = float(clopper_pearson(top, args.runs, 0.025, "upper"))
                for k, v in rates.items():
                    rates_of[k].append(v)
                    if v > worst[k][0]:
                        worst[k] = (v, f"{claim.describe()} {label} n={n}")
                print(f"| {claim.describe()} | {label} | {p:.4g} | {q:.4g} | {n} | "
                      + " | ".join(f"{rates[k]:.4f}" if k in rates else "—" for k in names)
                      + f" | {top / args.runs:.4f} [{lo:.4f}, {hi:.4f}] |"
                      + (f" {time.time() - t_cell:.0f} s" if args.only_designs else ""), flush=True)
    print(f"\n{cells} cells, {time.time() - started:.0f} s. Worst per detector:")
    for k, (v, where) in worst.items():
        hits = round(v * args.runs)
        lo_w = float(clopper_pearson(hits, args.runs, 0.025, "lower"))
        hi_w = float(clopper_pearson(hits, args.runs, 0.025, "upper"))
        print(f"- {k}: {v:.4f} [{lo_w:.4f}, {hi_w:.4f}] ({where})")
    print("Mean FAR over the cells it ran in:")
    for k in names:
        print(f"- {k}: {np.mean(rates_of[k]):.4f} ({len(rates_of[k])} cells, {sum(r > args.alpha + 0.01 for r in rates_of[k])} "
              f"above α + 0.01)")


if __name__ == "__main__":
    main()
