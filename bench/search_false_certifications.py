"""False certifications of the search on correct mechanisms (docs/search.md §6.2).

Every correct entry of the search corpus (app/reference/search_corpus.py: Laplace sums with
add/remove and with replace-one under asymmetric bounds, a mean with public n, category histograms
under replace-one, answer vectors under linf and l1 for histograms, report noisy max and sparse
vector, vector records, integers with a clamp, and Gaussian mechanisms under μ-GDP, ρ-zCDP and an
exactly tight (ε, δ) claim) is searched ``--runs`` times, each with its own seed, in-process
(``function_sampler``), with ``--budget`` outputs per search. A certification on any of them is
false: their claims hold. Prints one row per entry and the total with its exact one-sided 95%
upper bound (Clopper–Pearson; 1 − 0.05^(1/N) when none of N is false).

The seeds start at ``--seed`` (10 000 by default), which the development never used.

    nice -n 10 .venv/bin/python bench/search_false_certifications.py --runs 15 --budget 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.search_corpus import search_corpus  # noqa: E402
from app.search.domain import InputDomain  # noqa: E402
from app.search.draws import function_sampler  # noqa: E402
from app.search.run import SearchSettings, run_search  # noqa: E402
from app.search.service import make_claim  # noqa: E402
from app.stats.heldout import clopper_pearson_upper  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--budget", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=10_000)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", type=Path, default=None, help="append one JSON line per search here")
    ap.add_argument("--summarise", type=Path, default=None,
                    help="only print the table of the JSON lines in this file (runs split over processes)")
    args = ap.parse_args()
    if args.summarise:
        summarise(args.summarise)
        return
    corpus = {k: v for k, v in search_corpus().items() if not v.violates}
    if args.only:
        corpus = {k: corpus[k] for k in args.only.split(",")}
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows, total, false, started = [], 0, 0, time.time()
    for slug, entry in corpus.items():
        domain, claim = InputDomain.model_validate(entry.domain), make_claim(entry.claim)
        n_false, lbs, secs = 0, [], []
        for i in range(args.runs):
            seed = args.seed + 1000 * list(corpus).index(slug) + i
            t = time.perf_counter()
            r = asyncio.run(run_search(function_sampler(entry.sample, entry.shape, seed), domain, claim, entry.shape,
                                       SearchSettings(budget=args.budget, seed=seed)))
            secs.append(time.perf_counter() - t)
            n_false += int(r.certified)
            lb = r.certification.get("lower_bound")
            lbs.append(lb)
            stages = r.certification.get("stages", [])
            first = r.certification.get("first_certification") or {}
            line = {"slug": slug, "seed": seed, "certified": r.certified, "lower_bound": lb,
                    "samples": r.samples["total"], "seconds": round(secs[-1], 2), "stopped": r.stopped,
                    "stages": len(stages), "stage_tests": sum(st["tests"] for st in stages),
                    "stage_samples": sum(st["samples"] for st in stages),
                    "stage_lower_bound": max((st["lower_bound"] for st in stages if st["lower_bound"] is not None),
                                             default=None),
                    "final_lower_bound": r.certification.get("final_lower_bound"),
                    "certifying_stage": first.get("stage"), "tests": r.certification.get("tests", 0)
                    + sum(st["tests"] for st in stages)}
            print(json.dumps(line), flush=True)
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(json.dumps(line) + "\n")
        total += args.runs
        false += n_false
        finite = [x for x in lbs if x is not None]
        rows.append(f"| `{slug}` | {', '.join(domain.neighbours)} | {entry.parameter} = {entry.claimed:g} | {args.runs} "
                    f"| {n_false} | {max(finite):.3g} | {sum(secs) / len(secs):.1f} |" if finite else
                    f"| `{slug}` | {', '.join(domain.neighbours)} | {entry.parameter} = {entry.claimed:g} | {args.runs} "
                    f"| {n_false} | – | {sum(secs) / len(secs):.1f} |")
    upper = float(clopper_pearson_upper(false, total, 0.05))
    print(f"load average at end: {os.getloadavg()}; {time.time() - started:.0f} s")
    print("| correct entry | neighbours | claim | searches | false certifications | largest certified LB | mean s |")
    print("|---|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"| **all** | | | **{total}** | **{false}** | | |")
    print(f"false-certification rate {false}/{total} = {false / total:.4f}; exact one-sided 95% upper bound {upper:.4f}")


def summarise(path: Path) -> None:
    corpus = search_corpus()
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by: dict[str, list[dict]] = {}
    for line in lines:
        by.setdefault(line["slug"], []).append(line)
    print("| correct entry | neighbours | claim | searches | false certifications | largest certified LB | mean s |")
    print("|---|---|---|---:|---:|---:|---:|")
    total = false = 0
    for slug, runs in by.items():
        entry = corpus[slug]
        n_false = sum(r["certified"] for r in runs)
        lbs = [r["lower_bound"] for r in runs if r["lower_bound"] is not None]
        total += len(runs)
        false += n_false
        print(f"| `{slug}` | {', '.join(entry.domain['neighbours'])} | {entry.parameter} = {entry.claimed:g} "
              f"| {len(runs)} | {n_false} | {max(lbs):.3g} | {sum(r['seconds'] for r in runs) / len(runs):.1f} |"
              if lbs else f"| `{slug}` | | | {len(runs)} | {n_false} | – | |")
    upper = float(clopper_pearson_upper(false, total, 0.05))
    print(f"| **all** | | | **{total}** | **{false}** | | |")
    staged = [r for r in lines if "stages" in r]
    if staged:
        print(f"searches that ran a staged test: {sum(r['stages'] > 0 for r in staged)}/{len(staged)}; staged tests "
              f"{sum(r['stage_tests'] for r in staged)}, final-certification tests "
              f"{sum(r['tests'] - r['stage_tests'] for r in staged)}")
    print(f"false-certification rate {false}/{total} = {false / total:.4f}; exact one-sided 95% upper bound {upper:.4f}")


if __name__ == "__main__":
    main()
