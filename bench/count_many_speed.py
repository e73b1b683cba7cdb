"""count_many against count_in, one event at a time: the candidates proposed for SVT 3's pair 4
counted on fresh outputs (docs/benchmarks.md, "Late re-ranking as the default").

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/count_many_speed.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.corpus import corpus  # noqa: E402
from app.stats.candidates import ProposalSettings, propose  # noqa: E402
from app.stats.events import count_in, count_many  # noqa: E402


def main() -> None:
    m = corpus()["svt3-values"]
    rng = np.random.default_rng(0)
    x, y = m.pairs[4]
    prop = ProposalSettings(n_test=100_000, level=0.001, target=0.1, learned=True, seed=1)
    events = [c.event for c in propose(m.sample(x, 60_000, rng), m.sample(y, 60_000, rng), m.shape, prop)][:200]
    sample = m.sample(x, 300_000, rng)
    t0 = time.perf_counter()
    one = [count_in(e, sample) for e in events]
    t1 = time.perf_counter()
    many = count_many(events, sample)
    t2 = time.perf_counter()
    print(f"{len(events)} events on 300,000 outputs: count_in one by one {t1 - t0:.2f} s, count_many {t2 - t1:.2f} s "
          f"({(t1 - t0) / (t2 - t1):.1f}x), same counts: {one == many}")


if __name__ == "__main__":
    main()
