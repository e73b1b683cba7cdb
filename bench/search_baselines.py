"""The search against three baselines on the same sample budget (docs/search.md §6.3).

Every violating entry of the search corpus, ``--runs`` times each, with ``--budget`` outputs in all
per run and method:

- **search**: dpwatch's search (generators, successive halving with a staged test on fresh samples
  after every rung, Optuna refinement, the audit engine's final certification), stopping at the
  first certification; its lines record the certifying stage;
- **statdp**: StatDP's patterns alone (app.search.generators.statdp_patterns: the eight patterns
  for answer vectors, the single-entry ones for records, as DP-Sniper's PatternGenerator);
- **uniform**: uniform random pairs over the domain (app.search.generators.uniform_pair), as
  DP-Auditorium's runner draws its trials;
- **optuna**: random search driven by Optuna's default sampler (TPE) over the coordinates of a
  pair (the template of app.search.refine, started from a uniform pair), as DP-Auditorium's
  Vizier generator, with the trial's held-out bound as the objective.

The three baselines share DP-Auditorium's runner: ``--trials`` trials, each spending an equal part
of the budget on its pair (half of the outputs choose the event, with the engine's candidate
families, half test it with the held-out test at level α/trials: Bonferroni over the trials), and
the run stops at the first trial that refutes the claim. So all four methods certify with the same
test and level; they differ in how they choose the pairs. Reported per method: violations
certified, and the median samples drawn until the first certification (over the certified runs).

    nice -n 10 .venv/bin/python bench/search_baselines.py --runs 3 --budget 2000000 --out results.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.search_corpus import search_corpus  # noqa: E402
from app.sampling.protocol import database_key  # noqa: E402
from app.search.domain import InputDomain  # noqa: E402
from app.search.draws import SearchDraws, function_sampler  # noqa: E402
from app.search.generators import statdp_patterns, uniform_pair  # noqa: E402
from app.search.pairs import CandidatePair  # noqa: E402
from app.search.refine import template_for  # noqa: E402
from app.search.run import SearchSettings, run_search  # noqa: E402
from app.search.service import make_claim  # noqa: E402
from app.stats.candidates import ProposalSettings, propose  # noqa: E402
from app.stats.events import event_contains  # noqa: E402
from app.stats.heldout import Counts, test_claim  # noqa: E402
from app.stats.shapes import take_outputs  # noqa: E402

METHODS = ("search", "statdp", "uniform", "optuna")


async def trial(draws: SearchDraws, pair: CandidatePair, shape, claim, n: int, level: float, seed: int) -> float | None:
    """One DP-Auditorium trial: n outputs per database, half choose the event, half test it; the
    held-out bound (None if the pair failed or no event), and whether the claim is refuted."""
    out = await draws.draw([pair.x, pair.x_prime], n, "screening")
    kx, ky = database_key(pair.x), database_key(pair.x_prime)
    if kx not in out or ky not in out:
        return None, False
    h = n // 2
    x, y = out[kx], out[ky]
    cx, cy = take_outputs(x, slice(0, h)), take_outputs(y, slice(0, h))
    tx, ty = take_outputs(x, slice(h, n)), take_outputs(y, slice(h, n))
    prop = ProposalSettings(n_test=n - h, level=level, delta=float(getattr(claim, "delta", 0.0) or 0.0),
                            target=getattr(claim, "epsilon", None), learned=True, seed=seed)
    try:
        cands = await asyncio.to_thread(propose, cx, cy, shape, prop)
    except ValueError:
        return None, False
    if not cands:
        return None, False
    best = cands[0]
    a = int(np.count_nonzero(event_contains(best.event, tx)))
    b = int(np.count_nonzero(event_contains(best.event, ty)))
    counts = Counts(a, n - h, b, n - h) if best.x_first else Counts(b, n - h, a, n - h)
    res = test_claim(claim, counts, level)
    return res.lower_bound, res.refutes


async def runner(entry, method: str, budget: int, trials: int, alpha: float, seed: int) -> dict:
    domain = InputDomain.model_validate(entry.domain)
    claim = make_claim(entry.claim)
    sampler = function_sampler(entry.sample, entry.shape, seed)
    if method == "search":
        r = await run_search(sampler, domain, claim, entry.shape, SearchSettings(budget=budget, seed=seed))
        first = r.certification.get("first_certification") or {}
        return {"certified": r.certified, "samples": first.get("samples", r.samples["total"]),
                "samples_total": r.samples["total"], "stage": first.get("stage"), "after": first.get("after"),
                "stages": len(r.certification.get("stages", [])),
                "lower_bound": None if r.finding is None else r.finding["lower_bound"]}
    draws = SearchDraws(sampler)
    rng = np.random.default_rng(seed)
    n = max(200, budget // (2 * trials))
    level = alpha / trials
    if method == "statdp":
        pats = statdp_patterns(domain)
        pairs = [pats[i % len(pats)] for i in range(trials)]
    elif method == "uniform":
        pairs = [uniform_pair(domain, rng) for _ in range(trials)]
    if method in ("statdp", "uniform"):
        for t, pair in enumerate(pairs):
            _, refuted = await trial(draws, pair, entry.shape, claim, n, level, seed + t)
            if refuted:
                return {"certified": True, "samples": draws.total, "trial": t + 1}
        return {"certified": False, "samples": draws.total}
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    template = None
    while template is None:
        template = template_for(domain, uniform_pair(domain, rng))
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    dists = template.distributions()
    for t in range(trials):
        tr = study.ask(dists)
        pair = template.build(tr.params)
        if pair is None:
            study.tell(tr, state=optuna.trial.TrialState.PRUNED)
            continue
        lb, refuted = await trial(draws, pair, entry.shape, claim, n, level, seed + t)
        if refuted:
            return {"certified": True, "samples": draws.total, "trial": t + 1}
        study.tell(tr, -100.0 if lb is None or not math.isfinite(lb) else float(lb))
    return {"certified": False, "samples": draws.total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=int, default=2_000_000)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=20_000)
    ap.add_argument("--only", default="")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", type=Path, default=None, help="append one JSON line per run here")
    ap.add_argument("--summarise", type=Path, default=None, help="only print the table of these JSON lines")
    args = ap.parse_args()
    if args.summarise:
        lines = [json.loads(x) for x in args.summarise.read_text().splitlines() if x.strip()]
        res: dict[str, dict[str, list[dict]]] = {}
        for x in lines:
            res.setdefault(x["method"], {}).setdefault(x["slug"], []).append(x)
        table(res, [m for m in METHODS if m in res], list(dict.fromkeys(x["slug"] for x in lines)))
        return
    methods = [m for m in args.methods.split(",") if m]
    corpus = {k: v for k, v in search_corpus().items() if v.violates}
    if args.only:
        corpus = {k: corpus[k] for k in args.only.split(",")}
    print(f"load average at start: {os.getloadavg()}", flush=True)
    started = time.time()
    results: dict[str, dict[str, list[dict]]] = {m: {} for m in methods}
    for slug, entry in corpus.items():
        for method in methods:
            runs = []
            for i in range(args.runs):
                t = time.perf_counter()
                r = asyncio.run(runner(entry, method, args.budget, args.trials, args.alpha, args.seed + i))
                r["seconds"] = round(time.perf_counter() - t, 2)
                runs.append(r)
                line = json.dumps({"slug": slug, "method": method, "seed": args.seed + i, **r})
                print(line, flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(line + "\n")
            results[method][slug] = runs
    print(f"load average at end: {os.getloadavg()}; {time.time() - started:.0f} s")
    table(results, methods, list(corpus))


def table(results: dict[str, dict[str, list[dict]]], methods: list[str], slugs: list[str]) -> None:
    """The markdown table: per entry and method, certified runs and the median samples to the first
    certification (over the certified runs); the search's certifying stages last."""
    header = "| entry | " + " | ".join(f"{m}: certified | {m}: median samples" for m in methods) + " |"
    print(header)
    print("|---|" + "---:|---:|" * len(methods))
    for slug in slugs:
        cells = []
        for m in methods:
            runs = results[m][slug]
            cert = [r for r in runs if r["certified"]]
            med = f"{statistics.median(r['samples'] for r in cert):,.0f}" if cert else "–"
            cells += [f"{len(cert)}/{len(runs)}", med]
        print(f"| `{slug}` | " + " | ".join(cells) + " |")
    cells = []
    for m in methods:
        runs = [r for rs in results[m].values() for r in rs]
        cert = [r for r in runs if r["certified"]]
        med = f"{statistics.median(r['samples'] for r in cert):,.0f}" if cert else "–"
        cells += [f"**{len(cert)}/{len(runs)}**", f"**{med}**"]
    print("| **all** | " + " | ".join(cells) + " |")
    if "search" in results:
        stages = [r.get("stage") for rs in results["search"].values() for r in rs if r["certified"]]
        counts: dict[str, int] = {}
        for st in stages:
            counts[str(st)] = counts.get(str(st), 0) + 1
        print("search: certifying stage (run count): " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
