"""The search on its corpus (app/reference/search_corpus.py): every violation found and certified?

For each entry, ``--runs`` searches with the default settings (or ``--budget``), each with its own
seed, in-process (``function_sampler``: the endpoint's checks without HTTP) or over HTTP against
``dpwatch serve-reference`` (``--http PORT`` starts one). Prints one row per entry: certified
runs, the median samples and seconds to the certificate (or to the end of the budget), the
median certified lower bound against the exact value, and the failing inputs seen.

    nice -n 10 .venv/bin/python bench/search_corpus.py --runs 3
    nice -n 10 .venv/bin/python bench/search_corpus.py --runs 1 --http 20100 --only laplace-sum
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.search_corpus import search_corpus  # noqa: E402
from app.search.domain import InputDomain  # noqa: E402
from app.search.draws import function_sampler  # noqa: E402
from app.search.run import DEFAULT_SEARCH_BUDGET, SearchSettings, run_search  # noqa: E402
from app.search.service import make_claim, search_endpoint  # noqa: E402


def _serve(port: int) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, DPWATCH_ALLOW_NETWORKS="127.0.0.0/8")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve-reference", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    secret = proc.stdout.readline().strip()  # type: ignore[union-attr]
    import httpx

    for _ in range(100):
        try:
            httpx.post(f"http://127.0.0.1:{port}/reference/laplace", json={}, timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    return proc, secret


async def one(entry, settings: SearchSettings, seed: int, http: tuple[int, str] | None):
    domain = InputDomain.model_validate(entry.domain)
    claim = make_claim(entry.claim)
    if http is None:
        return await run_search(function_sampler(entry.sample, entry.shape, seed), domain, claim, entry.shape, settings)
    from app.sampling.client import MechanismEndpoint
    from app.sampling.safe_http import SafeHttpConfig

    port, secret = http
    endpoint = MechanismEndpoint(sampling_url=f"http://127.0.0.1:{port}/reference/search/{entry.slug}", secret=secret,
                                 shape=entry.shape, timeout_seconds=120, prefer_binary=True)
    return await search_endpoint(endpoint, domain, claim, settings,
                                 http_config=SafeHttpConfig(allow_networks=("127.0.0.0/8",)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=int, default=DEFAULT_SEARCH_BUDGET)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--only", default="", help="comma-separated slugs")
    ap.add_argument("--violations-only", action="store_true")
    ap.add_argument("--http", type=int, default=None, help="serve the corpus on this port and search over HTTP")
    ap.add_argument("--json", type=Path, default=None, help="write every run's summary here")
    args = ap.parse_args()
    corpus = search_corpus()
    slugs = [s for s in (args.only.split(",") if args.only else corpus) if s]
    if args.violations_only:
        slugs = [s for s in slugs if corpus[s].violates]
    proc, http = None, None
    if args.http:
        proc, secret = _serve(args.http)
        http = (args.http, secret)
    rows, dump = [], []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    try:
        for slug in slugs:
            entry = corpus[slug]
            runs = []
            for i in range(args.runs):
                settings = SearchSettings(budget=args.budget, seed=args.seed + i)
                t = time.perf_counter()
                r = asyncio.run(one(entry, settings, args.seed + i, http))
                wall = time.perf_counter() - t
                f = r.finding
                first = r.certification.get("first_certification") or {}
                runs.append({"slug": slug, "seed": args.seed + i, "certified": r.certified,
                             "samples": r.samples["total"], "seconds": wall,
                             "first_certification_samples": first.get("samples"), "stage": first.get("stage"),
                             "stages": len(r.certification.get("stages", [])),
                             "lower_bound": None if f is None else f["lower_bound"],
                             "relation": None if f is None else f["relation"],
                             "source": None if f is None else f["source"],
                             "best_lb": r.certification.get("lower_bound"), "failing": len(r.failing_inputs),
                             "stopped": r.stopped})
                print(json.dumps(runs[-1]), flush=True)
            dump += runs
            cert = [x for x in runs if x["certified"]]
            lbs = [x["lower_bound"] for x in cert if x["lower_bound"] is not None]
            true = "∞" if math.isinf(entry.true_value) else f"{entry.true_value:.4g}"
            rows.append(f"| `{slug}` | {entry.parameter} {entry.claimed:g} | {true} | {'yes' if entry.violates else 'no'} "
                        f"| {len(cert)}/{len(runs)} | {statistics.median(x['samples'] for x in runs):,.0f} "
                        f"| {statistics.median(x['seconds'] for x in runs):.1f} "
                        f"| {'' if not lbs else f'{statistics.median(lbs):.3g}'} "
                        f"| {', '.join(sorted({x['source'] for x in cert if x['source']}))} "
                        f"| {statistics.median(x['failing'] for x in runs):.0f} |")
    finally:
        if proc is not None:
            proc.terminate()
    print(f"load average at end: {os.getloadavg()}")
    print("| entry | claim | exact value | violates | certified | median samples | median s | median LB | found by | failing inputs |")
    print("|---|---|---:|---|---:|---:|---:|---:|---|---:|")
    print("\n".join(rows))
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
