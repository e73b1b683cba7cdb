"""Audit every mechanism of the testers' corpus at its default budget, for several claims.

One row per (mechanism, claim): the expected verdict (from the exact ground truth), the engine's
verdict, ε̂ (MPL), LB (held-out Clopper–Pearson, 95%), samples used and seconds, beside the lower
bounds DP-Sniper and StatDP publish for the same mechanism at ε = 0.1.

Claims: ε = 0.1 (the published setting) for every mechanism; the mechanism's true ε (or its upper
bound) where finite, which must not be refuted; ε/2 for the correct ones and 1.0 for the
unbounded ones, which must be refuted.

    nice -n 10 .venv/bin/python bench/corpus_audit.py                     # in process
    nice -n 10 .venv/bin/python bench/corpus_audit.py --http              # over serve-reference
    nice -n 10 .venv/bin/python bench/corpus_audit.py --far 40 --budget 64000   # false refutations

``--far N`` repeats N audits (seeds 1..N) of every mechanism at a claim it satisfies (its true ε
or upper bound) and reports the false-refutation rate with its exact 95% interval.

``--estimate`` runs without a claim: the engine spends the whole budget and reports the largest
held-out lower bound, the number to set beside DP-Sniper's and StatDP's (which use ≥ 2·10⁸
outputs per side for their final estimate, DP-Sniper's ``n_final``, at 90% confidence).

    nice -n 10 .venv/bin/python bench/corpus_audit.py --estimate --budget 1024000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import beta  # noqa: E402

from app.audit import AuditSettings, local_sampler, run_engine  # noqa: E402
from app.audit.engine import DEFAULT_BUDGET  # noqa: E402
from app.reference.corpus import corpus  # noqa: E402
from app.stats.claims import PureDP


def claims_for(m) -> list[float]:
    out = [m.epsilon]
    if math.isfinite(m.true_epsilon) and not math.isclose(m.true_epsilon, m.epsilon):
        out.append(m.true_epsilon)
    if math.isclose(m.true_epsilon, m.epsilon):
        out.append(m.epsilon / 2)
    if math.isinf(m.true_epsilon):
        out.append(1.0)
    return out


#: AuditSettings.rescore_late for every audit of the run (on by default; ``--no-rescore-late``).
RESCORE_LATE = {"on": AuditSettings().rescore_late}


async def audit(m, claim: float | None, budget: int, seed: int, http: dict | None):
    settings = AuditSettings(budget=budget, seed=seed, rescore_late=RESCORE_LATE["on"])
    if http is None:
        return await run_engine(local_sampler(m.sample, seed=seed), m.pairs, m.shape,
                                None if claim is None else PureDP(claim), settings)
    from app.audit.service import audit_endpoint
    from app.sampling.client import MechanismEndpoint
    from app.sampling.safe_http import SafeHttpConfig

    endpoint = MechanismEndpoint(sampling_url=f"{http['base']}/reference/corpus/{m.slug}", secret=http["secret"],
                                 shape=m.shape, max_batch=50_000, prefer_binary=m.shape.binary_capable,
                                 timeout_seconds=120)
    return await audit_endpoint(endpoint, list(m.pairs), None if claim is None else PureDP(claim), settings,
                                http_config=SafeHttpConfig(allow_networks=("127.0.0.0/8",)))


def fmt(x, digits=3):
    if x is None:
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="*", help="slugs")
    ap.add_argument("--http", action="store_true", help="sample over HTTP from the corpus endpoints")
    ap.add_argument("--far", type=int, default=0, help="repetitions of the false-refutation study")
    ap.add_argument("--claim", type=float, action="append", help="claims to test instead of the default grid")
    ap.add_argument("--estimate", action="store_true", help="no claim: the largest lower bound within the budget")
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON")
    ap.add_argument("--rescore-late", action=argparse.BooleanOptionalAction, default=AuditSettings().rescore_late,
                    help="AuditSettings.rescore_late (late re-ranking; on by default)")
    args = ap.parse_args()
    RESCORE_LATE["on"] = args.rescore_late
    table = corpus()
    slugs = args.only or list(table)
    http = None
    server = None
    if args.http:
        from app.reference.server import reference_app
        from app.sampling.protocol import generate_secret
        from tests.support.sampling_server import serve_app

        secret = generate_secret()
        server = serve_app(reference_app(secret))
        http = {"base": server.__enter__(), "secret": secret}
    rows = []
    try:
        if args.estimate:
            print(f"estimates without a claim, budget {args.budget:,} outputs per database, 95% confidence")
            print("| mechanism | pairs' ε | LB | ε̂ | samples | s | DP-Sniper LB (90%) | StatDP LB |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|")
            for slug in slugs:
                m = table[slug]
                t0 = time.perf_counter()
                res = asyncio.run(audit(m, None, args.budget, args.seed, http))
                seconds = time.perf_counter() - t0
                print(f"| {slug} | {fmt(m.pair_epsilon(), 4)} | {fmt(res.lower_bound)} | {fmt(res.epsilon_hat)} | "
                      f"{res.samples_used:,} | {seconds:.1f} | {fmt(m.dpsniper_lb, 4)} | {fmt(m.statdp_lb, 4)} |",
                      flush=True)
                rows.append({"slug": slug, "lower_bound": res.lower_bound, "epsilon_hat": res.epsilon_hat,
                             "samples": res.samples_used, "seconds": seconds})
        elif args.far:
            print(f"false refutations: {args.far} audits per mechanism at a claim it satisfies, budget {args.budget:,}/db")
            print("| mechanism | claim | refuted | runs | rate | 95% interval |")
            print("|---|---:|---:|---:|---:|---|")
            total_ref = total = 0
            for slug in slugs:
                m = table[slug]
                if not math.isfinite(m.true_epsilon):
                    continue
                refuted = 0
                for seed in range(1, args.far + 1):
                    res = asyncio.run(audit(m, m.true_epsilon, args.budget, seed, http))
                    refuted += res.refuted
                lo = beta.ppf(0.025, refuted, args.far - refuted + 1) if refuted else 0.0
                hi = beta.ppf(0.975, refuted + 1, args.far - refuted) if refuted < args.far else 1.0
                total_ref += refuted
                total += args.far
                print(f"| {slug} | {m.true_epsilon:.4g} | {refuted} | {args.far} | {refuted / args.far:.3f} | "
                      f"[{lo:.3f}, {hi:.3f}] |", flush=True)
                rows.append({"slug": slug, "claim": m.true_epsilon, "refuted": refuted, "runs": args.far})
            hi = beta.ppf(0.975, total_ref + 1, total - total_ref) if total_ref < total else 1.0
            print(f"| **all** | | {total_ref} | {total} | {total_ref / max(total, 1):.4f} | [0, {hi:.4f}] |")
        else:
            print(f"budget {args.budget:,} outputs per database, α = 0.05, {'HTTP' if http else 'in process'}")
            print("| mechanism | shape | true ε | pairs' ε | claim | expected | verdict | ok | ε̂ | LB | samples | s | DP-Sniper LB | StatDP LB |")
            print("|---|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|")
            for slug in slugs:
                m = table[slug]
                pair_eps = m.pair_epsilon()
                for claim in (args.claim or claims_for(m)):
                    expected = m.expected_verdict(claim)
                    t0 = time.perf_counter()
                    res = asyncio.run(audit(m, claim, args.budget, args.seed, http))
                    seconds = time.perf_counter() - t0
                    verdict = "refute" if res.refuted else "hold"
                    ok = "yes" if expected in (verdict, "either") else "**NO**"
                    true = ("∞" if math.isinf(m.true_epsilon) else f"{m.true_epsilon:.4g}") + ("" if m.exact else " (≤)")
                    published = claim == m.epsilon
                    print(f"| {slug} | {m.shape.describe()} | {true} | {fmt(pair_eps, 4)} | {claim:g} | {expected} | "
                          f"{verdict} | {ok} | {fmt(res.epsilon_hat)} | {fmt(res.lower_bound)} | {res.samples_used:,} | "
                          f"{seconds:.1f} | {fmt(m.dpsniper_lb, 4) if published else ''} | "
                          f"{fmt(m.statdp_lb, 4) if published else ''} |", flush=True)
                    rows.append({"slug": slug, "claim": claim, "expected": expected, "verdict": verdict,
                                 "epsilon_hat": res.epsilon_hat, "lower_bound": res.lower_bound,
                                 "samples": res.samples_used, "seconds": seconds, "pair_epsilon": pair_eps,
                                 "true_epsilon": None if math.isinf(m.true_epsilon) else m.true_epsilon,
                                 "dpsniper_lb": m.dpsniper_lb, "statdp_lb": m.statdp_lb, "best": res.best and
                                 res.best["describe"]})
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
