"""The search with ``stop_at_first=False`` (the full report) on the given corpus entries at 2 000 000
outputs, seed 20 000: the first certification, the largest certified bound, the final certification's
bound and the α spent, one JSON line per entry (docs/search.md §6.1).

    .venv/bin/python bench/search_full_report_check.py empty-returns-zero,hist-linf
"""

from __future__ import annotations

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


def main() -> None:
    corpus = search_corpus()
    print("load", os.getloadavg())
    for slug in sys.argv[1].split(","):
        e = corpus[slug]
        t = time.time()
        r = asyncio.run(run_search(function_sampler(e.sample, e.shape, 20000), InputDomain.model_validate(e.domain),
                                   make_claim(e.claim), e.shape,
                                   SearchSettings(budget=2_000_000, seed=20000, stop_at_first=False)))
        c = r.certification
        print(json.dumps({"slug": slug, "certified": r.certified, "first": c["first_certification"],
                          "best_lb": c["lower_bound"], "final_lb": c.get("final_lower_bound"),
                          "samples": r.samples["total"], "stages": len(c["stages"]),
                          "alpha_spent_at_most": c["alpha"]["spent_at_most"], "seconds": round(time.time() - t, 1)}))
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
