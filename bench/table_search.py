"""The search on tabular pipelines (docs/search.md §8.5): violations certified with their honest
domain and no pair given, threshold rules found at every t, false certifications on correct
pipelines with the 95% Clopper–Pearson upper bound.

    nice -n 10 .venv/bin/python bench/table_search.py violations --runs 2 --budget 500000 --out FILE
    nice -n 10 .venv/bin/python bench/table_search.py thresholds --tmin 2 --tmax 50 --budget 300000 --out FILE
    nice -n 10 .venv/bin/python bench/table_search.py false --runs 43 --budget 300000 --seed 60000 --out FILE
    .venv/bin/python bench/table_search.py summarise FILE [FILE ...]

In-process (``function_sampler``: the endpoint's output checks without HTTP). One JSON line per
search, written as it ends (a run cut short keeps what it did); ``summarise`` prints the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.table_corpus import table_corpus  # noqa: E402
from app.search.domain import InputDomain  # noqa: E402
from app.search.draws import function_sampler  # noqa: E402
from app.search.run import SearchSettings, run_search  # noqa: E402
from app.search.service import make_claim  # noqa: E402

THRESHOLD_ENTRIES = ("counts-zero-below-t", "mean-zero-below-t", "records-mean-zero-below-t", "small-cells-suppressed")


def _units(domain: InputDomain, db: list) -> int:
    if domain.table is None or domain.table.privacy_unit is None:
        return len(db)
    return len({json.dumps(r[domain.table.privacy_unit]) for r in db})


async def one(slug: str, t: int, seed: int, budget: int) -> dict:
    e = table_corpus(t)[slug]
    domain = InputDomain.model_validate(e.domain)
    started = time.time()
    r = await run_search(function_sampler(e.sample, e.shape, seed), domain, make_claim(e.claim), e.shape,
                         SearchSettings(budget=budget, seed=seed))
    f = r.finding
    out = {"entry": slug, "t": t, "seed": seed, "budget": budget, "violates": e.violates, "true": e.true_value,
           "certified": r.certified, "lower_bound": r.certification["lower_bound"], "stopped": r.stopped,
           "samples": r.samples["total"], "seconds": round(time.time() - started, 2),
           "first": r.certification.get("first_certification"),
           "boundaries": (r.candidates.get("size_bisection") or {}).get("boundaries", []),
           "load": round(os.getloadavg()[0], 1)}
    sev = getattr(r, "severity", None) or {}
    if sev.get("lower_bound") is not None:  # the sharpened bound on the certified pair (app/search/severity.py)
        out |= {"severity_lower_bound": sev["lower_bound"], "severity_event": str(sev.get("describe", ""))[:120],
                "never_seen": bool(sev.get("never_seen"))}
    if f is not None:
        rel = domain.relation(f["x"], f["x_prime"])
        out |= {"relation": f["relation"], "checked_relation": rel, "event": f["describe"][:120],
                "x_units": _units(domain, f["x"]), "xp_units": _units(domain, f["x_prime"]),
                "x_rows": len(f["x"]), "xp_rows": len(f["x_prime"]), "source": f.get("source")}
    return out


def _write(path: str | None, row: dict) -> None:
    line = json.dumps(row, default=lambda v: None if isinstance(v, float) and not math.isfinite(v) else str(v))
    print(line, flush=True)
    if path:
        with open(path, "a") as fh:
            fh.write(line + "\n")


async def main(args: argparse.Namespace) -> None:
    corpus = table_corpus()
    if args.mode == "violations":
        wanted = set(args.entries.split(",")) if args.entries else None
        for slug, e in corpus.items():
            if e.violates and (wanted is None or slug in wanted):
                for i in range(args.runs):
                    _write(args.out, await one(slug, args.t, args.seed + i, args.budget))
    elif args.mode == "thresholds":
        entries = args.entries.split(",") if args.entries else THRESHOLD_ENTRIES
        for t in range(args.tmin, args.tmax + 1):
            for slug in entries:
                _write(args.out, await one(slug, t, args.seed + t, args.budget))
    elif args.mode == "false":
        correct = [s for s, e in corpus.items() if not e.violates]
        if args.entries:
            correct = args.entries.split(",")
        for i in range(args.runs):
            for slug in correct:
                _write(args.out, await one(slug, args.t, args.seed + i, args.budget))


def _fmt(x) -> str:
    if x is None:
        return "–"
    return "∞" if isinstance(x, float) and math.isinf(x) else f"{x:.3g}"


def summarise(paths: list[str]) -> None:
    from scipy.stats import beta

    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["entry"], []).append(r)
    print("| entry | true ε | t | searches | certified | certified LB (each) | relation checked | pair (units) | "
          "median samples | median s |")
    print("|---|---:|---:|---:|---:|---|---|---|---:|---:|")
    for slug, rs in by.items():
        if not rs[0]["violates"]:
            continue
        ts = sorted({r["t"] for r in rs})
        if len(ts) > 1:
            continue
        ok = [r for r in rs if r["certified"]]
        rels = sorted({str(r.get("checked_relation")) for r in ok})
        pairs = sorted({f"{r.get('x_units')}/{r.get('xp_units')}" for r in ok})
        samples = sorted(r["samples"] for r in rs)
        secs = sorted(r["seconds"] for r in rs)
        print(f"| `{slug}` | {_fmt(float(rs[0]['true']) if rs[0]['true'] is not None else math.inf)} | {ts[0]} | "
              f"{len(rs)} | {len(ok)} | {', '.join(_fmt(r['lower_bound']) for r in ok)} | {', '.join(rels)} | "
              f"{', '.join(pairs[:3])} | {samples[len(samples) // 2]:,} | {secs[len(secs) // 2]} |")
    thr = [r for r in rows if r["violates"] and len({x["t"] for x in by[r["entry"]]}) > 1]
    if thr:
        print("\n| threshold entry | thresholds | found (certified) | at the boundary t−1/t | misses | median samples |")
        print("|---|---|---:|---:|---|---:|")
        for slug in sorted({r["entry"] for r in thr}):
            rs = sorted((r for r in thr if r["entry"] == slug), key=lambda r: r["t"])
            ok = [r for r in rs if r["certified"]]
            at = [r for r in ok if sorted((r.get("x_units"), r.get("xp_units"))) == [r["t"] - 1, r["t"]]]
            miss = [r["t"] for r in rs if not r["certified"]]
            samples = sorted(r["samples"] for r in rs)
            print(f"| `{slug}` | {rs[0]['t']}–{rs[-1]['t']} | {len(ok)}/{len(rs)} | {len(at)} | {miss or 'none'} | "
                  f"{samples[len(samples) // 2]:,} |")
    corr = [r for r in rows if not r["violates"]]
    if corr:
        print("\n| correct entry | searches | false certifications | largest certified LB | mean s |")
        print("|---|---:|---:|---:|---:|")
        for slug in sorted({r["entry"] for r in corr}):
            rs = [r for r in corr if r["entry"] == slug]
            lbs = [r["lower_bound"] for r in rs if r["lower_bound"] is not None]
            print(f"| `{slug}` | {len(rs)} | {sum(r['certified'] for r in rs)} | {_fmt(max(lbs) if lbs else None)} | "
                  f"{sum(r['seconds'] for r in rs) / len(rs):.1f} |")
        n, k = len(corr), sum(r["certified"] for r in corr)
        upper = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
        one_sided = 1.0 if k == n else float(beta.ppf(0.95, k + 1, n - k))
        print(f"\nall correct entries: {k} false certifications in {n} searches; Clopper–Pearson 95% upper bound "
              f"{upper:.4f} (two-sided interval), {one_sided:.4f} (one-sided); budgets {sorted({r['budget'] for r in corr})}; "
              f"load {min(r['load'] for r in corr)}–{max(r['load'] for r in corr)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["violations", "thresholds", "false", "summarise"])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--budget", type=int, default=500_000)
    ap.add_argument("--seed", type=int, default=50_000)
    ap.add_argument("--t", type=int, default=10, help="the threshold of the threshold rules (violations, false)")
    ap.add_argument("--tmin", type=int, default=2)
    ap.add_argument("--tmax", type=int, default=50)
    ap.add_argument("--entries", default="", help="comma-separated slugs (default: all of the mode)")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.mode == "summarise":
        summarise(a.files)
    else:
        asyncio.run(main(a))
