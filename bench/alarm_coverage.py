"""Is the evidence attached to an alarm valid at the alarm? Coverage at the (stopping) time of the alarm.

Each cell: R runs of T periods, n outputs per side and period, one event with
q = q0 throughout; p sits on the claim's boundary before the change (p = e·q0 for the claim ε = 1,
p = Φ(Φ⁻¹(q0) + 1) for the claim μ = 1) and moves to the changed value θ₁ at period t0
(p = e^θ₁·q0, or Φ(Φ⁻¹(q0) + θ₁)). For ρ-zCDP (claim ρ = 0.5) p sits on the boundary of the
service's ρ-zCDP region, h_ρ(q0) = app.stats.claims.ZCDP(ρ).upper(q0) (the (ε, δ(ε)) polygon of
dp-accounting's conversion), before (ρ = 0.5) and after (ρ = θ₁) the change: the sequence's own
parameter, so covering it is the strictest check (the Bernoulli pair's own zCDP ρ, sup_α D_α/α, is
at least as large: the polygon contains the exact region). With ``--zcdp-boundary exact`` p sits
where the pair is exactly ρ-zCDP instead (inside the polygon): the mechanism's true ρ, and a
"no change" mechanism that keeps the claim. Every detector runs on the same counts:

- aggregator (seed 002 eq. 13, T, γ = 1/4, q_{1−α}(T, γ)); naive: the randomised exact test at α/T
  (pure ε only); e-process (W ≥ 1/α); e-detector (mixture e-SR, c = T/α).

At each run's first alarm τ the bench records

- the headline: the anytime-valid lower bound LB_τ of app.stats.confidence (eq. CS), computed on
  every period 1..τ; covered when LB_τ < θ_true(τ) (θ₁ after the change, the claim before);
- the old window bound (the inverted score statistic on the detector's data-chosen window, the
  lag attaining M_τ for the aggregator, the periods since log W was last ≤ 0 for the e-process),
  pure ε only, now labelled descriptive: its coverage, for comparison;
- the confirmation: the exact Clopper–Pearson test of the claim (each side at α/2) on
  ``--fresh`` fresh outputs per side drawn after τ (app.stats.evidence.confirmation).

- the bound the verdict leads with: the stored evidence of the alarm (the anytime part, the
  detector's guarantee and statistic, the confirmation, in the shapes the service stores) is read by
  the service's own app.alarms.verdict.alarm_verdict, and the bound of the estimator its sentence
  quotes (``Verdict.strongest``: the fresh confirmation when it refutes, else LB_τ when it does,
  else no bound: the detector's test or nothing) is recorded; "no bound" counts as −∞ (covers,
  and never reaches the halfway mark). The MPL snapshot is not simulated (it could lead only when
  neither the confirmation nor LB_τ refutes).

Among false alarms (τ < t0, and the ``--null`` cells with no change at all) it reports how often
each contradicts the claim. ``--bound-table`` prints, per cell and detector, the coverage, the
median and the 10th percentile of LB_τ and of the bound the verdict leads with, the true value
(:func:`true_value`: for ρ-zCDP on the polygon the pair's exact ρ, above θ₁; coverage is read against it),
the halfway mark (claim + (truth − claim)/2) and whether the lead bound's median reaches it, and
the median delay (docs/jobs_and_evidence.md §2, "Per-cell bound tables").

    nice -n 10 .venv/bin/python bench/alarm_coverage.py --runs 1000 --out docs/results/alarm_coverage
    nice -n 10 .venv/bin/python bench/alarm_coverage.py --runs 500 --kinds dp --bound-table --out docs/results/bound_tables/dp
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri

from app.alarms.verdict import Verdict, alarm_verdict
from app.stats.aggregator import first_crossing, lag_weights, weighted_statistic_path
from app.stats.claim_period import claim_z_path, sequential_lines
from app.stats.claims import ZCDP, GaussianDP, PureDP, parse_claim
from app.stats.confidence import confidence_sequence
from app.stats.evidence import confirmation, detection_guarantee, score_lower_bound
from app.stats.exact_naive import exact_naive_alarm_period, exact_naive_test
from app.stats.period import period_statistic
from app.stats.sequential import (
    SupportingLine,
    bet_grid,
    component_parts,
    e_detector_paths_from_increments,
    edetector_threshold,
    service_design,
)
from app.stats.thresholds import threshold_for


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def first_at_least(x: np.ndarray, level: float) -> np.ndarray:
    above = x >= level
    return np.where(above.any(axis=1), above.argmax(axis=1) + 1, 0)


#: The claimed value of each kind's cells, and the parameter's symbol.
CLAIMED = {"dp": 1.0, "gdp": 1.0, "zcdp": 0.5}
PARAM = {"dp": "ε", "gdp": "μ", "zcdp": "ρ"}
SEED_KIND = {"dp": 0, "gdp": 1, "zcdp": 2}


#: Where the zCDP cells put p: on the service's region ("polygon") or where the Bernoulli pair is
#: exactly ρ-zCDP ("exact"); set from --zcdp-boundary.
ZCDP_BOUNDARY = {"mode": "polygon"}


def exact_zcdp_p(rho: float, q0: float) -> float:
    """The p > q0 at which Bern(p) vs Bern(q0) is exactly ρ-zCDP: sup_α max(D_α(p‖q), D_α(q‖p))/α = ρ
    (Bun & Steinke 2016, Def. 1.1, on the event's indicator; app.stats.claims.rho_lower_bound)."""
    from scipy.optimize import brentq

    from app.stats.claims import rho_lower_bound

    return float(brentq(lambda x: max(rho_lower_bound(x, q0), rho_lower_bound(1 - q0, 1 - x)) - rho,
                        q0 + 1e-12, 1 - 1e-12, xtol=1e-12))


def p_of(kind: str, theta: float, q0: float) -> float:
    if kind == "zcdp":
        return exact_zcdp_p(theta, q0) if ZCDP_BOUNDARY["mode"] == "exact" else float(ZCDP(theta).upper(q0))
    return min(1.0, math.exp(theta) * q0) if kind == "dp" else float(ndtr(ndtri(q0) + theta))


def true_value(kind: str, theta: float, q0: float) -> float:
    """The mechanism's own parameter after the change: θ for ε and μ (the pair lies on the boundary of
    θ, and on no smaller θ's region), and for ρ-zCDP with ``--zcdp-boundary exact``; with p on the
    service's polygon (the default) the pair's exact ρ, sup_α max(D_α(p‖q), D_α(q‖p))/α, which is
    larger than θ (the polygon contains the exact region). The fresh confirmation bounds that ρ, so
    its coverage is read against it; LB_τ, the polygon sequence's, covers θ and so this too."""
    if kind == "zcdp" and ZCDP_BOUNDARY["mode"] == "polygon":
        from app.stats.claims import rho_lower_bound

        p = p_of(kind, theta, q0)
        return float(max(rho_lower_bound(p, q0), rho_lower_bound(1 - q0, 1 - p)))
    return theta


def family_claim(kind: str, claimed: float):
    """The claim of the family ``kind`` ("dp", "gdp" or "zcdp") at the claimed value."""
    return {"dp": PureDP, "gdp": GaussianDP, "zcdp": ZCDP}[kind](claimed)


def claim_of(kind: str, claimed: float):  # the stats claim (detectors) and the evidence's claim (confirmation)
    if kind == "dp":
        return None, PureDP(claimed)
    form = {"gdp_mu": claimed} if kind == "gdp" else {"zcdp_rho": claimed}
    held = parse_claim(form)
    return held, held


class DetectorRun(NamedTuple):
    """One detector on a cell's counts: its first alarm per run (0 = none), the path that chose the
    old window (None: not kept), and the statistic it compares with its threshold (what an alarm stores)."""

    first: np.ndarray
    window_path: np.ndarray | None
    statistic: np.ndarray
    threshold: float


def detector_alarms(kind: str, a: np.ndarray, b: np.ndarray, n: int, claimed: float, horizon: int, alpha: float,
                    gamma: float, rng: np.random.Generator) -> dict[str, DetectorRun]:
    """Each detector's :class:`DetectorRun` on the counts ``a``, ``b`` (runs × periods)."""
    out: dict[str, DetectorRun] = {}
    if kind == "dp":
        z = period_statistic(a, b, n, claimed).z
    else:
        z = claim_z_path(a, b, n, claim_of(kind, claimed)[0])
    m = weighted_statistic_path(z, horizon, gamma)
    m_threshold = threshold_for(horizon, gamma, alpha).value
    out["aggregator"] = DetectorRun(first_crossing(m, m_threshold), z, m, m_threshold)
    if kind == "dp":
        line = SupportingLine.pure(claimed)
        test = exact_naive_test(int(n), line, alpha / horizon)
        out["naive"] = DetectorRun(exact_naive_alarm_period(a, b, n, line, alpha, horizon, rng=rng), None,
                                   test.statistic(a, b), float(test.threshold))
    # Each period's line and counts as the service's horizon-free checks take them (sequential_lines): the
    # claim's line for pure ε; for μ-GDP and ρ-zCDP the line at the discounted past counts, in its orientation.
    ca, cb, s, d, pa, pb, pn = sequential_lines(claim_of(kind, claimed)[1], a, b, n)
    nn = np.full(a.shape, float(n))
    # The e-process as the service ships it for a monitor with this horizon: the design tuned to it
    # (method.md §13.3d), on the period's line.
    design = service_design(horizon)
    log_w = design.paths_from_increments(component_parts(ca, cb, nn, s, d, pa, pb, pn, design.faces, design.agrapa,
                                                         design.grid, design.payoff, design.tuned_rate(alpha)))
    out["e-process"] = DetectorRun(first_at_least(log_w, math.log(1 / alpha)), log_w, log_w, math.log(1 / alpha))
    # the service's e-detector: the 16 bets on the predictable face (method.md §13.3c, §13.4), same lines
    log_m = e_detector_paths_from_increments(component_parts(ca, cb, nn, s, d, pa, pb, pn, "auto", False, bet_grid()))
    log_c = math.log(edetector_threshold(alpha, horizon))
    out["e-detector"] = DetectorRun(first_at_least(log_m, log_c), None, log_m, log_c)
    return out


#: The estimators whose figure is a bound on the claim's parameter (the others the verdict may quote,
#: the detector's test and the e-detector's detection, carry no number on it).
LEAD_BOUNDS = ("confirmation", "anytime_bound")


def stored_alarm(name: str, kind: str, claimed: float, alpha: float, horizon: int, tau: int, statistic: float,
                 threshold: float, lower: float, contradicts: bool, conf: dict) -> dict:
    """The alarm as the service stores it (app.alarms.evidence.privacy_evidence, with_confirmation), with
    the parts the verdict reads: the anytime bound at τ on periods 1..τ, the detector's guarantee and
    statistic, the confirmation on fresh outputs. The descriptive window bound is left out (never leads)."""
    claim = family_claim(kind, claimed)
    claim_record = claim_of(kind, claimed)[1].to_dict()
    arl = edetector_threshold(alpha, horizon) if name == "e-detector" else None
    anytime = {"method": "confidence_sequence", "parameter": claim.parameter,
               "lower_bound": lower if math.isfinite(lower) else None, "confidence": 1 - alpha,
               "contradicts_claim": bool(contradicts), "periods": tau, "from_t": 1, "to_t": tau,
               "validity": "across_runs", "restates_alarm": True}
    check = {"parameter": claim.parameter, "claim": claim_record, "anytime": anytime, "confidence": 1 - alpha,
             "detection": detection_guarantee(name, alpha=alpha, arl=arl, window=horizon)}
    return {"kind": "privacy", "statistic": statistic, "threshold": threshold, "t": tau, "horizon_index": 0,
            "claim": claim_record, "evidence": {"kind": "privacy", "check": check, "confirmation": conf}}


def lead_bound(verdict: Verdict) -> tuple[str, float]:
    """The estimator the verdict's sentence quotes (``Verdict.strongest``) and its bound; ``("none", −∞)``
    when it quotes no bound on the parameter (the detector's own test, a detection, or nothing refutes)."""
    if verdict.strongest in LEAD_BOUNDS:
        value = next(e.value for e in verdict.estimators if e.name == verdict.strongest)
        return verdict.strongest, -math.inf if value is None else float(value)
    return "none", -math.inf


def quantile(values: list[float], q: float) -> float | None:
    """The empirical q-quantile (a sample value, so −∞ entries are kept as such); None when empty."""
    return float(np.quantile(np.asarray(values, dtype=float), q, method="inverted_cdf")) if values else None


def old_window_bound(name: str, path: np.ndarray, a: np.ndarray, b: np.ndarray, n: int, tau: int, horizon: int,
                     gamma: float, alpha: float) -> float:
    """The old headline (before the anytime-valid bound): the score bound on the detector's data-chosen window."""
    if name == "aggregator":
        s = np.concatenate([[0.0], np.cumsum(path[:tau])])
        ratios = (s[tau] - s[tau - 1::-1][:tau]) / lag_weights(horizon, gamma)[1: tau + 1]
        lag = int(np.argmax(ratios)) + 1
    else:  # e-process: the periods since log W was last ≤ 0
        low = np.nonzero(path[:tau] <= 0.0)[0]
        lag = max(1, tau - (int(low[-1]) + 1 if low.size else 0))
    big_a, big_b = int(a[tau - lag: tau].sum()), int(b[tau - lag: tau].sum())
    return score_lower_bound(big_a, big_b, n * lag, alpha)


def run_cell(kind: str, claimed: float, theta1: float, q0: float, n: int, runs: int, horizon: int, change_at: int,
             alpha: float, gamma: float, fresh: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, int(round(theta1 * 1000)), int(q0 * 1e5), n, SEED_KIND[kind], change_at])
    p0, p1 = p_of(kind, claimed, q0), p_of(kind, theta1, q0)
    a = np.empty((runs, horizon), dtype=np.int64)
    a[:, : change_at - 1] = rng.binomial(n, p0, size=(runs, change_at - 1))
    a[:, change_at - 1:] = rng.binomial(n, p1, size=(runs, horizon - change_at + 1))
    b = rng.binomial(n, q0, size=(runs, horizon))
    t0 = time.perf_counter()
    # the check of a monitor created with this horizon: the design tuned to it (method.md §13.3d) for ε and
    # (ε, δ), which the anytime bound inverts too; the other claims' sequence is the curve's (one design)
    cs = confidence_sequence(a, b, n, family_claim(kind, claimed), alpha,
                             design=service_design(horizon) if kind == "dp" else None)
    cs_seconds = time.perf_counter() - t0
    claim_obj = claim_of(kind, claimed)[1]
    true1 = true_value(kind, theta1, q0)
    rows = {}
    for name, det in detector_alarms(kind, a, b, n, claimed, horizon, alpha, gamma, rng).items():
        first, path = det.first, det.window_path
        right = {"alarms": 0, "covered": 0, "cs_contradicts": 0, "old_covered": 0, "old_n": 0, "confirms": 0,
                 "lb": [], "delay": [], "lead": [], "lead_covered": 0, "lb_covered_true": 0,
                 "led_by": {k: 0 for k in (*LEAD_BOUNDS, "none")}}
        false = {"alarms": 0, "cs_contradicts": 0, "old_contradicts": 0, "old_n": 0, "confirms": 0}
        for r in np.nonzero(first > 0)[0]:
            tau = int(first[r])
            after = tau >= change_at
            truth = theta1 if after else claimed
            lb = float(cs.lower[r, tau - 1])
            fa, fb = rng.binomial(fresh, p1 if after else p0), rng.binomial(fresh, q0)
            conf_record = confirmation(int(fa), int(fb), fresh, claim_obj, alpha)
            conf = conf_record["confirms"]
            old = (old_window_bound(name, path[r], a[r], b[r], n, tau, horizon, gamma, alpha)
                   if (kind == "dp" and path is not None) else None)
            if after:
                right["alarms"] += 1
                right["covered"] += lb < truth
                right["cs_contradicts"] += lb >= claimed
                right["confirms"] += conf
                right["lb"].append(lb)
                right["delay"].append(tau - change_at)
                verdict = alarm_verdict(stored_alarm(
                    name, kind, claimed, alpha, horizon, tau, float(det.statistic[r, tau - 1]), det.threshold, lb,
                    bool(cs.claim_rejected[r, tau - 1]), conf_record))
                led_by, lead = lead_bound(verdict)
                right["led_by"][led_by] += 1
                right["lead"].append(lead)
                right["lead_covered"] += lead < true1
                right["lb_covered_true"] += lb < true1
                if old is not None:
                    right["old_n"] += 1
                    right["old_covered"] += old < truth
            else:
                false["alarms"] += 1
                false["cs_contradicts"] += lb >= claimed
                false["confirms"] += conf
                if old is not None:
                    false["old_n"] += 1
                    false["old_contradicts"] += old > claimed
        rows[name] = {
            "right_alarms": right["alarms"], "coverage": right["covered"] / max(right["alarms"], 1),
            "coverage_ci": wilson(right["covered"], right["alarms"]),
            "cs_contradicts_claim": right["cs_contradicts"] / max(right["alarms"], 1),
            "confirmation_confirms": right["confirms"] / max(right["alarms"], 1),
            "old_window_coverage": (right["old_covered"] / right["old_n"]) if right["old_n"] else None,
            "old_window_coverage_ci": wilson(right["old_covered"], right["old_n"]) if right["old_n"] else None,
            "median_lb": float(np.median(right["lb"])) if right["lb"] else None,
            "median_delay": float(np.median(right["delay"])) if right["delay"] else None,
            "coverage_true": right["lb_covered_true"] / max(right["alarms"], 1),
            "coverage_true_ci": wilson(right["lb_covered_true"], right["alarms"]),
            "lb_median": quantile(right["lb"], 0.5), "lb_p10": quantile(right["lb"], 0.1),
            "lead_coverage": right["lead_covered"] / max(right["alarms"], 1),
            "lead_coverage_ci": wilson(right["lead_covered"], right["alarms"]),
            "lead_median": quantile(right["lead"], 0.5), "lead_p10": quantile(right["lead"], 0.1),
            "led_by": right["led_by"],
            "false_alarms": false["alarms"], "false_cs_contradicts": false["cs_contradicts"],
            "false_confirmation_contradicts": false["confirms"], "false_old_contradicts": false["old_contradicts"],
            "false_old_n": false["old_n"],
        }
    return {"kind": kind, "claimed": claimed, "theta1": theta1, "true_value": true1, "p0": p0, "p1": p1,
            "zcdp_boundary": ZCDP_BOUNDARY["mode"] if kind == "zcdp" else None, "q0": q0, "n": n, "runs": runs, "horizon": horizon,
            "change_at": change_at, "cs_seconds": round(cs_seconds, 1),
            "cs_ever_above_truth_after_change": float(np.mean((cs.lower[:, change_at - 1:] >= theta1).any(axis=1))),
            "detectors": rows}


def fmt_cell(res: dict) -> list[str]:
    par = PARAM[res["kind"]]
    lines = []
    for name, row in res["detectors"].items():
        lo, hi = row["coverage_ci"]
        old = ("—" if row["old_window_coverage"] is None else
               f"{row['old_window_coverage']:.3f} [{row['old_window_coverage_ci'][0]:.3f}, {row['old_window_coverage_ci'][1]:.3f}]")
        lines.append(
            f"| {par} {res['claimed']:g} → {res['theta1']:g} | {res['q0']:g} | {res['n']} | {name} | {row['right_alarms']} | "
            f"{row['coverage']:.3f} [{lo:.3f}, {hi:.3f}] | {old} | {row['cs_contradicts_claim']:.3f} | "
            f"{row['confirmation_confirms']:.3f} | {row['median_lb'] if row['median_lb'] is None else round(row['median_lb'], 2)} | "
            f"{row['median_delay']} | {row['false_alarms']}: {row['false_cs_contradicts']} / {row['false_confirmation_contradicts']} |")
    return lines


HEADER = ("| change | q0 | n | detector | right alarms | coverage of LB_τ [95% CI] | old window bound coverage | "
          "LB_τ ≥ claim | fresh confirmation | median LB_τ | median delay | false alarms: CS / fresh contradict |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def _b(x: float | None) -> str:
    return "—" if x is None else ("−∞" if x == -math.inf else f"{x:.3g}")


def fmt_bound_cell(res: dict) -> list[str]:
    """One row per detector: LB_τ and the bound the verdict leads with, against the truth and the halfway mark."""
    par, claimed, theta1, truth = PARAM[res["kind"]], res["claimed"], res["theta1"], res["true_value"]
    halfway = claimed + (truth - claimed) / 2
    lines = []
    for name, row in res["detectors"].items():
        k = row["right_alarms"]
        if k == 0:
            lines.append(f"| {par} {claimed:g} → {theta1:g} | {res['q0']:g} | {res['n']} | {name} | 0 | {truth:.3g} | "
                         f"{halfway:.3g} | — | — | — | — | — | — | — | — | — |")
            continue
        lo, hi = (max(0.0, x) for x in row["coverage_true_ci"])
        llo, lhi = (max(0.0, x) for x in row["lead_coverage_ci"])
        led = row["led_by"]
        reaches = row["lead_median"] is not None and row["lead_median"] >= halfway
        lines.append(
            f"| {par} {claimed:g} → {theta1:g} | {res['q0']:g} | {res['n']} | {name} | {k} | {truth:.3g} | {halfway:.3g} | "
            f"{row['coverage_true']:.3f} [{lo:.3f}, {hi:.3f}] | {_b(row['lb_median'])} | {_b(row['lb_p10'])} | "
            f"{led['confirmation'] / k:.2f} / {led['anytime_bound'] / k:.2f} / {led['none'] / k:.2f} | "
            f"{row['lead_coverage']:.3f} [{llo:.3f}, {lhi:.3f}] | {_b(row['lead_median'])} | {_b(row['lead_p10'])} | "
            f"{'yes' if reaches else '**no**'} | {row['median_delay']:g} |")
    return lines


BOUND_HEADER = ("| change | q0 | n | detector | right alarms | truth | halfway mark | coverage of LB_τ [95% CI] | "
                "median LB_τ | p10 LB_τ | verdict leads with: fresh / LB_τ / no bound | coverage of the lead bound "
                "[95% CI] | median lead bound | p10 lead bound | lead median ≥ halfway | median delay |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--change-at", type=int, default=51)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--fresh", type=int, default=25000, help="fresh outputs per side for the confirmation "
                    "(half of the service's default alarm_snapshot_samples = 50,000)")
    ap.add_argument("--kinds", default="dp,gdp")
    ap.add_argument("--thetas", default="1.3,2", help="the changed ε or μ (claim 1)")
    ap.add_argument("--zcdp-thetas", default="0.65,2", help="the changed ρ (claim ρ = 0.5)")
    ap.add_argument("--zcdp-boundary", choices=("polygon", "exact"), default="polygon",
                    help="zCDP cells: p on the service's (ε, δ(ε)) region of ρ (polygon), or where the Bernoulli "
                    "pair is exactly ρ-zCDP (exact, inside the polygon)")
    ap.add_argument("--q0", default="0.1,0.01")
    ap.add_argument("--samples", default="200,1000")
    ap.add_argument("--null-runs", type=int, default=0, help="also run cells with no change (boundary only)")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--bound-table", action="store_true", help="print the per-cell bound table (LB_τ and the bound "
                    "the verdict leads with: coverage, median, p10, the truth, the halfway mark, the delay)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ZCDP_BOUNDARY["mode"] = args.zcdp_boundary
    results = []
    started = time.time()
    print(BOUND_HEADER if args.bound_table else HEADER, flush=True)
    for kind in args.kinds.split(","):
        for theta1 in [float(v) for v in (args.zcdp_thetas if kind == "zcdp" else args.thetas).split(",") if v]:
            for q0 in [float(v) for v in args.q0.split(",")]:
                for n in [int(v) for v in args.samples.split(",")]:
                    res = run_cell(kind, CLAIMED[kind], theta1, q0, n, args.runs, args.horizon, args.change_at, args.alpha,
                                   args.gamma, args.fresh, args.seed)
                    results.append(res)
                    print("\n".join((fmt_bound_cell if args.bound_table else fmt_cell)(res)), flush=True)
    if args.null_runs:
        print("\nNo change (every period on the boundary): false alarms and how often the evidence contradicts the claim")
        for kind in args.kinds.split(","):
            for q0 in [float(v) for v in args.q0.split(",")]:
                for n in [int(v) for v in args.samples.split(",")]:
                    res = run_cell(kind, CLAIMED[kind], CLAIMED[kind], q0, n, args.null_runs, args.horizon, args.horizon + 1,
                                   args.alpha, args.gamma, args.fresh, args.seed)
                    res["null"] = True
                    results.append(res)
                    for name, row in res["detectors"].items():
                        fa = row["false_alarms"]
                        print(f"| {PARAM[kind]} = {CLAIMED[kind]:g} | {q0:g} | {n} | {name} | {fa} / {args.null_runs} | "
                              f"CS contradicts {row['false_cs_contradicts']} / {fa} | fresh confirmation contradicts "
                              f"{row['false_confirmation_contradicts']} / {fa} | old window bound contradicts "
                              f"{row['false_old_contradicts']} / {row['false_old_n']} |", flush=True)
    print(f"\n{time.time() - started:.0f} s")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "coverage.json").write_text(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
