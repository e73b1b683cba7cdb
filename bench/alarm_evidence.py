"""Does an alarm's evidence support it? The Clopper–Pearson bound over the detector's window.

Superseded by bench/alarm_coverage.py: since then the headline of ``alarm_evidence``
is the anytime-valid bound on every period passed in (here the periods 1..t), and the window's
score and exact bounds are its ``window_bound`` and ``exact`` (descriptive). This script reports
the headline it is given; its old table (the score bound as headline) is in git history.

For the paper's harmful scenarios (a)–(f) (method.md §8), R monitoring runs of T periods draw n
outputs per side and period from the reference mechanism, which changes at period t0. At the
first alarm, the evidence of app.stats.evidence is computed exactly as the service does: the
lag k attaining M_t, the pooled counts of the last k periods, the headline bound (the inverted
score statistic) and the exact bound ln(p_lo/q_hi) with each Clopper–Pearson bound at α/2. The
table reports, among the alarms after the change (right alarms), how often each exceeds the
claimed ε, with a Wilson 95% interval for the headline; and among the alarms
before the change (false alarms) and on the benign scenarios (g), (h), how often it does too
(there the detector fired on data that looked bad by chance, so the bound often agrees with it:
the evidence describes what the alarm saw, it is not a new test).

    nice -n 10 .venv/bin/python bench/alarm_evidence.py --replications 300 --horizon 100 --change-at 30
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from app.reference import SCENARIOS
from app.simulation import count_hits
from app.stats.aggregator import lag_weights, weighted_statistic_path
from app.stats.evidence import alarm_evidence
from app.stats.period import period_statistic
from app.stats.thresholds import threshold_for


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def lag_at(z: np.ndarray, t: int, horizon: int, gamma: float) -> int:
    """The k attaining M_t at period t (1-based) for one path of z."""
    s = np.concatenate([[0.0], np.cumsum(z[:t])])
    w = lag_weights(horizon, gamma)
    ratios = (s[t] - s[t - 1::-1][: t]) / w[1: t + 1]
    return int(np.argmax(ratios)) + 1


def run(key: str, n: int, replications: int, horizon: int, change_at: int, alpha: float, gamma: float,
        rng: np.random.Generator) -> dict:
    sc = SCENARIOS[key]
    mech = sc.switching(change_at)
    a = np.zeros((replications, horizon), dtype=np.int64)
    b = np.zeros((replications, horizon), dtype=np.int64)
    for t in range(1, horizon + 1):
        a[:, t - 1] = count_hits(mech, sc.x, sc.event, replications, n, rng, t)
        b[:, t - 1] = count_hits(mech, sc.x_prime, sc.event, replications, n, rng, t)
    z = period_statistic(a, b, n, sc.epsilon).z
    q = threshold_for(horizon, gamma, alpha).value
    m = weighted_statistic_path(z, horizon, gamma)
    above = m > q
    fired = above.any(axis=1)
    first = np.where(fired, above.argmax(axis=1) + 1, 0)
    right, wrong = [], []
    for r in np.flatnonzero(fired):
        t = int(first[r])
        lag = lag_at(z[r], t, horizon, gamma)
        ev = alarm_evidence(a[r, :t].tolist(), b[r, :t].tolist(), [n] * t, list(range(1, t + 1)), lag=lag,
                            claim=sc.epsilon, alpha=alpha)
        row = (ev["exceeds_claim"], ev["epsilon_lower_bound"], lag, t, ev["exact"]["exceeds_claim"])
        (right if sc.harmful and t >= change_at else wrong).append(row)
    return {"key": key, "n": n, "harmful": sc.harmful, "right": right, "wrong": wrong, "runs": replications}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replications", "-R", type=int, default=300)
    ap.add_argument("--horizon", "-T", type=int, default=100)
    ap.add_argument("--change-at", type=int, default=30)
    ap.add_argument("--samples", default="50,200,1000", help="n per side and period (comma-separated)")
    ap.add_argument("--scenarios", default="abcdefgh")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"T={args.horizon}, change at {args.change_at}, α={args.alpha}, γ={args.gamma}, R={args.replications}")
    print(f"{'scn':>3} {'n':>5} {'right alarms':>12} {'score > claim':>13} {'95% CI':>15} {'min ε_lb':>9} "
          f"{'exact > claim':>13} {'med lag':>7} | {'false alarms':>12} {'score > claim':>13} {'s':>6}")
    for key in args.scenarios:
        for n in (int(v) for v in args.samples.split(",")):
            started = time.perf_counter()
            out = run(key, n, args.replications, args.horizon, args.change_at, args.alpha, args.gamma, rng)
            right, wrong = out["right"], out["wrong"]
            k = sum(1 for r in right if r[0])
            lo, hi = wilson(k, len(right))
            bounds = [r[1] for r in right if r[1] is not None]
            print(f"{key:>3} {n:>5} {len(right):>12} {k / len(right) if right else math.nan:>13.3f} "
                  f"[{lo:.3f}, {hi:.3f}] {min(bounds) if bounds else math.nan:>9.3f} "
                  f"{(sum(1 for r in right if r[4]) / len(right)) if right else math.nan:>13.3f} "
                  f"{np.median([r[2] for r in right]) if right else math.nan:>7.1f} | {len(wrong):>12} "
                  f"{(sum(1 for r in wrong if r[0]) / len(wrong)) if wrong else math.nan:>13.3f} "
                  f"{time.perf_counter() - started:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
