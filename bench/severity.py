"""Severity on the search corpus: the certified bound before and after sharpening (docs/search.md §3.5).

For each entry whose certified bound understates the bug (the mean divided by the true count,
10 // n, a forgotten composition, a median with local sensitivity, and any ``--only`` slugs), runs
``--runs`` searches with the default budget (or ``--budget``), in-process (``function_sampler``),
each with its own seed, and prints: claim, true value, the certified bound (the first
certification's), the sharpened bound (app.search.severity) and its event, whether x′ never
produced the output, samples and seconds. Targets: ∞ → sharpened ≥ 5 × claim; finite → at least
halfway from the claim to the truth.

    nice -n 10 .venv/bin/python bench/severity.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.search_corpus import search_corpus  # noqa: E402
from app.search.domain import InputDomain  # noqa: E402
from app.search.draws import function_sampler  # noqa: E402
from app.search.run import DEFAULT_SEARCH_BUDGET, SearchSettings, run_search  # noqa: E402
from app.search.service import make_claim  # noqa: E402

DEFAULT = "mean-n-from-data,ten-div-n,composition-forgotten,median-local-sensitivity"


def target(claimed: float, truth: float) -> float:
    return 5 * claimed if math.isinf(truth) else claimed + (truth - claimed) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=int, default=DEFAULT_SEARCH_BUDGET)
    ap.add_argument("--seed", type=int, default=2000)
    ap.add_argument("--only", default=DEFAULT)
    args = ap.parse_args()
    corpus = search_corpus()
    print(f"budget {args.budget:,} outputs, {args.runs} seeds from {args.seed}")
    print(f"{'entry':26} {'claim':>5} {'true':>6} {'target':>6} {'seed':>5} {'certified':>9} {'sharpened':>9} "
          f"{'met':>4} {'x′ never':>8} {'outputs':>10} {'s':>6}  event")
    for slug in args.only.split(","):
        e = corpus[slug]
        tgt = target(e.claimed, e.true_value)
        met = []
        for r in range(args.runs):
            seed = args.seed + r
            res = asyncio.run(run_search(function_sampler(e.sample, e.shape, seed), InputDomain.model_validate(e.domain),
                                         make_claim(e.claim), e.shape, SearchSettings(budget=args.budget, seed=seed)))
            cert = res.finding["lower_bound"] if res.finding else None
            sev = res.severity or {}
            lb = sev.get("lower_bound")
            ok = lb is not None and lb >= tgt
            met.append(ok)
            truth = "∞" if math.isinf(e.true_value) else f"{e.true_value:.3g}"
            print(f"{slug:26} {e.claimed:5.3g} {truth:>6} {tgt:6.3g} {seed:5d} "
                  f"{'—' if cert is None else f'{cert:.3f}':>9} {'—' if lb is None else f'{lb:.3f}':>9} "
                  f"{'yes' if ok else 'no':>4} {('yes' if sev.get('never_seen') else 'no') if sev else '—':>8} "
                  f"{res.samples['total']:>10,} {res.seconds['total']:6.1f}  {sev.get('describe', '—')[:60]}",
                  flush=True)
        print(f"{slug:26} target met in {sum(met)}/{len(met)} runs")


if __name__ == "__main__":
    main()
