"""Why the e-process's p90 delay was longer than the aggregator's, and what the horizon-tuned bet changes.

The service's scenarios as ``bench/eprocess_variants.py --scenarios`` draws them (same seeds: T = 200,
n = 200, change at t₀ = 50, α = 0.05), on the face the shipped e-process picks, with single components
and mixtures the EProcessDesign labels cannot express (docs/sequential.md, "The horizon-tuned bet"):

- ``oracle`` rows know the post-change gap D and bet Kelly's c* = (s + d)·D/σ² (an upper bound, not a
  detector): from the change only with a start there (``known t₀``), with the start weights of §13.3
  (``ω_k``), or 1/H over the horizon (``1/H``);
- ``aGRAPA`` alone (weight 1, §13.3 starts) with the plug-in past of memory r, also from the change only;
- the grid on 1/H starts besides aGRAPA (0.8, §13.3 starts);
- the horizon-tuned bet of method.md §13.3d alone and in the mixture, for windows of 0.2–0.35·H.

    nice -n 10 .venv/bin/python bench/eprocess_tuned_explore.py --runs 2000 --scenarios a,b,d,f
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from app.reference import SCENARIOS
from app.simulation import exact_check_probabilities
from app.simulation_results import evaluate_alarms
from app.stats.aggregator import first_crossing, weighted_statistic_path
from app.stats.period import period_statistic
from app.stats.sequential import (
    AGRAPA_CAP,
    _discounted_past,
    _log_evalue_fraction,
    agrapa_fraction,
    bet_grid,
    e_process_paths_from_increments,
    log_evalues_sd,
    predictable_face,
    tuned_fraction,
    tuned_rate,
)
from app.stats.thresholds import threshold_for

T, N, T0, ALPHA = 200, 200, 50, 0.05


def draws(key: str, runs: int, seed: int) -> tuple[float, np.ndarray, np.ndarray, tuple[float, float]]:
    sc = SCENARIOS[key]
    (p0, q0), (p1, q1) = exact_check_probabilities(sc).values()
    rng = np.random.default_rng([seed, ord(key)])  # as bench/eprocess_variants.py
    a = np.empty((runs, T), dtype=np.int64)
    b = np.empty((runs, T), dtype=np.int64)
    a[:, :T0 - 1], b[:, :T0 - 1] = rng.binomial(N, p0, (runs, T0 - 1)), rng.binomial(N, q0, (runs, T0 - 1))
    a[:, T0 - 1:], b[:, T0 - 1:] = rng.binomial(N, p1, (runs, T - T0 + 1)), rng.binomial(N, q1, (runs, T - T0 + 1))
    return sc.epsilon, a, b, (p1, q1)


def summary(log_w: np.ndarray) -> str:
    hit = log_w >= math.log(1 / ALPHA)
    first = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)
    res = evaluate_alarms("x", first, 0.0, T0, T, N, curve=False)
    med, p90 = (("—" if not math.isfinite(v) else f"{v:g}") for v in (res.median_delay, res.p90_delay))
    return f"{med} / {p90}"


def mixture(parts: list[tuple[np.ndarray, float, str]]) -> np.ndarray:
    """log W of components (inc (R, T, K), total weight, starts "omega" | "uniform") mixed."""
    inc = np.concatenate([p[0] for p in parts], axis=-1)
    lp = np.log(np.concatenate([np.full(p[0].shape[-1], p[1] / p[0].shape[-1]) for p in parts]))
    tuned = np.concatenate([np.full(p[0].shape[-1], p[2] == "uniform") for p in parts])
    # "uniform" starts: horizon_start_weight with H = T (0.9/H within the horizon)
    return e_process_paths_from_increments(inc, log_prior=lp, tuned=tuned, horizon=T)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--scenarios", default="a,b,d,f")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    keys = args.scenarios.split(",")
    rows: dict[str, list[str]] = {}
    for key in keys:
        eps, a_i, b_i, (p1, q1) = draws(key, args.runs, args.seed)
        s, d = math.exp(eps), 0.0
        a, b = a_i.astype(float), b_i.astype(float)
        n = np.full(a.shape, float(N))
        r = 0.9
        pa, pb, pn = _discounted_past(a, r), _discounted_past(b, r), _discounted_past(n, r)
        flip = predictable_face(pa, pb, pn, s, d)
        fa, fb = np.where(flip, n - b, a), np.where(flip, n - a, b)
        qa, qb = np.where(flip, pn - pb, pa), np.where(flip, pn - pa, pb)

        def comp(c: np.ndarray) -> np.ndarray:
            return _log_evalue_fraction(fa, fb, n, s, d, c)[..., None]

        out: dict[str, str] = {}
        thr = threshold_for(T, 0.25, ALPHA).value
        z = period_statistic(a_i, b_i, N, eps).z
        first = first_crossing(weighted_statistic_path(z, T, 0.25), thr)
        res = evaluate_alarms("aggregator", first, thr, T0, T, N, curve=False)
        out["aggregator"] = f"{res.median_delay:g} / {res.p90_delay:g}"
        gap, var = p1 - s * q1 - d, p1 * (1 - p1) + s * s * q1 * (1 - q1)
        c_star = min(gap / var * (s + d), AGRAPA_CAP)
        post = np.zeros(a.shape)
        post[:, T0 - 1:] = c_star
        out["c* = (s + d)·D/σ² after the change"] = f"{c_star:.3f}"
        out["oracle: c* from t₀ (0 before), starts ω_k"] = summary(mixture([(comp(post), 1.0, "omega")]))
        fixed = comp(np.full(a.shape, c_star))
        known = np.cumsum(np.where(np.arange(T) >= T0 - 1, fixed[..., 0], 0.0), axis=1)
        known[:, :T0 - 1] = -np.inf
        out["oracle: fixed c*, known t₀"] = summary(known)
        out["oracle: fixed c*, starts ω_k"] = summary(mixture([(fixed, 1.0, "omega")]))
        out["oracle: fixed c*, starts 1/H"] = summary(mixture([(fixed, 1.0, "uniform")]))
        ag = comp(agrapa_fraction(qa, qb, pn, s, d))
        out["aGRAPA alone (r = 0.9)"] = summary(mixture([(ag, 1.0, "omega")]))
        mask = (np.arange(T) >= T0 - 1).astype(float)
        ma, mb, mn = _discounted_past(fa * mask, 1.0), _discounted_past(fb * mask, 1.0), _discounted_past(n * mask, 1.0)
        out["aGRAPA alone, past from t₀ only (r = 1)"] = summary(mixture([(comp(agrapa_fraction(ma, mb, mn, s, d)),
                                                                          1.0, "omega")]))
        grid = log_evalues_sd(fa, fb, n, s, d, bet_grid(4, 0.05, 0.4))
        out["grid of 4 (0.05–0.4) on 1/H starts 0.5, aGRAPA 0.5"] = summary(
            mixture([(grid, 0.5, "uniform"), (ag, 0.5, "omega")]))
        full = log_evalues_sd(fa, fb, n, s, d, bet_grid())
        out["shipped: grid 0.2, aGRAPA 0.8 (auto,agrapa=0.8,grid=16)"] = summary(
            mixture([(full, 0.2, "omega"), (ag, 0.8, "omega")]))
        for window in (0.2, 0.25, 0.3, 0.35):
            kappa = tuned_rate(ALPHA, T, 0.7, window)
            tb = comp(tuned_fraction(qa, qb, pn, n, s, d, kappa))
            if window == 0.3:
                out[f"tuned bet alone (window {window}·H, κ at τ = 0.7), starts 1/H"] = summary(
                    mixture([(tb, 1.0, "uniform")]))
            out[f"tuned {window}·H 0.7, aGRAPA 0.2, grid 0.1"] = summary(
                mixture([(tb, 0.7, "uniform"), (ag, 0.2, "omega"), (full, 0.1, "omega")]))
        for name, v in out.items():
            rows.setdefault(name, []).append(v)
        print(f"({key}) done", flush=True)
    print(f"R = {args.runs}, seed {args.seed}: median / p90 delay after the change")
    print("| component(s) | " + " | ".join(f"({k})" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, vals in rows.items():
        print(f"| {name} | " + " | ".join(vals) + " |")


if __name__ == "__main__":
    main()
