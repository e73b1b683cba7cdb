"""Where ours-v3 loses against the oracle: the witness or the bet (method.md §13.10).

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/onepair_decomposition.py --runs 300 \
        --combos learned/ons learned/mix oracle/ons oracle/mix learned/oracle oracle/oracle
    PYTHONPATH=. nice -n 10 .venv/bin/python bench/onepair_decomposition.py --runs 300 --ridge 3 \
        --combos learned/fixed learned/oracle

On the four non-private cells of bench/sequential_audit.py (same streams: seed 2025, same rng
layout), every run is audited once per combination of

  witness: ``learned`` (ours-v3's h_t: ridge-logistic r̂ on pairs < t, the face with the larger
           past score, OP2/OP3/OP5) or ``oracle`` (OP3 with the true likelihood ratio, first face);
  bet:     ``ons`` (ours-v3's online Newton step on the realised payoffs, OP4'), ``onsw`` (the same
           started at --start/(s + d) instead of 0), ``mix`` (the equal-weight mixture of 64 constant
           bets spread evenly over (0, 0.9/(s + d))), ``fixed`` (the constant bet --c/(s + d) on the
           witness min(1, --k·h_t); k = 1, c = 0.9 is the shipped OP4) or ``oracle``
           (λ_t = argmax_λ E log(1 + λ(h_t(X) − s·h_t(Y) − d)) under the true P, Q, for the h_t in use,
           capped at 0.9/(s + d)).

``--ridge`` is ρ of the learned witness (1: ours-v3, 3: ours-v4; the spline witness of OP2/OP3 either way). The oracle bet knows
P and Q, so ``*/oracle`` rows are not tests: they only split the gap. Prints
the mean pairs to rejection (sd) per cell and combination.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
from scipy.stats import laplace, norm

from app.stats.onepair import OnePairAuditor, kelly_witness, ons_step
from app.stats.sequential import SupportingLine

sys.path.insert(0, "bench")
from sequential_audit import MECHANISMS, X_DB, X_PRIME_DB  # noqa: E402

CAP = 0.9
MIX_POINTS = 64
RIDGE = [1.0]
START = [0.5]
KSCALE = [1.0]
FIXED_CAP = [0.9]


def true_law(kind: str, eps: float):  # type: ignore[no-untyped-def]
    """(P, Q) of NonDP{Laplace,Gaussian}1 at ε: P = M((0)), Q = M((0, 1)), as frozen scipy laws."""
    dist = laplace if kind == "laplace" else norm
    return dist(0.0, 2.0 / eps), dist(0.5, 1.0 / eps)


def grid(p_law, q_law, eps: float, bins: int = 400):  # type: ignore[no-untyped-def]
    """Bin midpoints and the bin masses of P and Q (outer bins unbounded, their point at the edge)."""
    lim = 25.0 / eps
    edges = np.linspace(-lim, lim, bins + 1)
    mids = 0.5 * (edges[1:] + edges[:-1])
    edges[0], edges[-1] = -np.inf, np.inf
    return mids, np.diff(p_law.cdf(edges)), np.diff(q_law.cdf(edges))


def oracle_bet(hx: np.ndarray, hy: np.ndarray, pw: np.ndarray, qw: np.ndarray, s: float, d: float) -> float:
    """argmax over λ ∈ [0, c/(s + d)] of Σ_ij p_i q_j log(1 + λ(hx_i − s·hy_j − d)) (Newton, concave)."""
    # collapse equal witness values (h = 0 on most of the line) to keep the double sum small
    ux, ix = np.unique(np.round(hx, 6), return_inverse=True)
    uy, iy = np.unique(np.round(hy, 6), return_inverse=True)
    px, qy = np.bincount(ix, pw), np.bincount(iy, qw)
    z = ux[:, None] - s * uy[None, :] - d
    w = px[:, None] * qy[None, :]
    cap = CAP / (s + d)
    if float((w * z).sum()) <= 0:
        return 0.0
    lam = 0.0
    for _ in range(30):
        f = 1.0 + lam * z
        g1 = float((w * z / f).sum())
        g2 = float((w * z * z / (f * f)).sum())
        new = min(max(lam + g1 / g2, 0.0), cap)
        if abs(new - lam) < 1e-9:
            break
        lam = new
    return lam


def run_one(x: np.ndarray, y: np.ndarray, line: SupportingLine, alpha: float, true_lr, mids, pw, qw,  # type: ignore[no-untyped-def]
            witness: str, bet_rule: str) -> int:
    s, d = line.slope, line.intercept
    learner = OnePairAuditor(alpha, line, ridge=RIDGE[0], model="spline", shape="op3", ramp=0)
    log_w, lam, a_sum = 0.0, (START[0] / (s + d) if bet_rule == "onsw" else 0.0), 1.0
    thr = math.log(1.0 / alpha)
    lam_cache: dict[int, float] = {}
    h_or_mid = kelly_witness(true_lr(mids), s)
    lam_oracle_fixed = oracle_bet(h_or_mid, h_or_mid, pw, qw, s, d)
    lam_grid = (np.arange(MIX_POINTS) + 0.5) / MIX_POINTS * CAP / (s + d)  # uniform prior on (0, c/(s + d))
    grid_log_w = np.zeros(MIX_POINTS)
    for t in range(x.size):
        face = 1 if witness == "oracle" else learner._face
        if t >= 2 and face:
            if witness == "oracle":
                hx, hy = kelly_witness(true_lr(np.array([x[t], y[t]])), s)
            else:
                hx, hy = learner.witness(np.array([x[t], y[t]]), face, s)
            if bet_rule == "fixed":  # witness scaled by k (h = min(1, k·h_OP3)), bet c/(s + d)
                hx, hy = min(1.0, KSCALE[0] * hx), min(1.0, KSCALE[0] * hy)
            z = (hx - s * hy - d) if face == 1 else (hy - s * hx - d)
            if bet_rule == "mix":
                grid_log_w += np.log1p(lam_grid * z)
                top = float(grid_log_w.max())
                log_w = top + math.log(float(np.mean(np.exp(grid_log_w - top))))
            elif bet_rule == "fixed":
                log_w += math.log1p(FIXED_CAP[0] / (s + d) * z)
            elif bet_rule.startswith("ons"):
                b = min(lam, CAP / (s + d))
                log_w += math.log1p(b * z)
                lam, a_sum = ons_step(b, z, a_sum, CAP / (s + d))
            else:
                if witness == "oracle":
                    b = lam_oracle_fixed
                else:
                    key = learner.t * 10 + face
                    if key not in lam_cache:
                        hm = learner.witness(mids, face, s)
                        b_pw, b_qw = (pw, qw) if face == 1 else (qw, pw)
                        lam_cache[key] = oracle_bet(hm, hm, b_pw, b_qw, s, d)
                    b = lam_cache[key]
                log_w += math.log1p(b * z)
            if log_w >= thr:
                return t + 1
        learner.update(float(x[t]), float(y[t]))  # learns from pair t (its own wealth is not used)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--max-pairs", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--combos", nargs="+", default=["learned/ons", "oracle/ons", "learned/oracle", "oracle/oracle"])
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--ridge", type=float, default=1.0)
    ap.add_argument("--start", type=float, default=0.5, help="onsw: the first bet, times 1/(s + d)")
    ap.add_argument("--k", type=float, default=1.0, help="fixed: witness scale")
    ap.add_argument("--c", type=float, default=0.9, help="fixed: bet c/(s + d)")
    ap.add_argument("--cells", nargs="+", default=["laplace/0.01", "laplace/0.1", "gaussian/0.01", "gaussian/0.1"])
    args = ap.parse_args(argv)
    RIDGE[0], START[0], KSCALE[0], FIXED_CAP[0] = args.ridge, args.start, args.k, args.c
    print(f"runs={args.runs} seed={args.seed} max pairs={args.max_pairs}; mean pairs to rejection (sd), rejected")
    print("| cell | " + " | ".join(args.combos) + " |")
    print("|---|" + "---|" * len(args.combos))
    results = []
    for name, kind in (("NonDPLaplace1", "laplace"), ("NonDPGaussian1", "gaussian")):
        mech = MECHANISMS[name]
        for eps in (0.01, 0.1):
            if f"{kind}/{eps}" not in args.cells:
                continue
            t0 = time.perf_counter()
            p_law, q_law = true_law(kind, eps)
            mids, pw, qw = grid(p_law, q_law, eps)
            line = SupportingLine.approximate(eps, mech.delta)

            def true_lr(v: np.ndarray, p_law=p_law, q_law=q_law) -> np.ndarray:
                return p_law.logpdf(v) - q_law.logpdf(v)

            times: dict[str, list[int]] = {c: [] for c in args.combos}
            for r in range(args.runs):
                rng = np.random.default_rng([args.seed, r, int(eps * 1e6), sum(map(ord, mech.name))])
                mech.draw(rng, X_DB, 20, eps)
                mech.draw(rng, X_PRIME_DB, 20, eps)
                x = mech.draw(rng, X_DB, args.max_pairs, eps)
                y = mech.draw(rng, X_PRIME_DB, args.max_pairs, eps)
                for c in args.combos:
                    w, b = c.split("/")
                    times[c].append(run_one(x, y, line, args.alpha, true_lr, mids, pw, qw, w, b))
            cells = []
            for c in args.combos:
                a = np.array(times[c])
                rej = a[a > 0]
                cells.append(f"{rej.mean():.1f} ({rej.std(ddof=1):.0f}) {rej.size}/{a.size}")
                results.append({"mechanism": name, "epsilon": eps, "combo": c, "times": times[c]})
            print(f"| {name} ε={eps} | " + " | ".join(cells) + " |", flush=True)
            print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"config": vars(args), "results": results}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
