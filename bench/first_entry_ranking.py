"""Where the engine's proposal ranks first-entry events against the other families, and what they give held out.

For pairs of a corpus mechanism: ``propose`` on n_choose outputs per side (the choosing data of a late
round), then the candidates in rank order, up to the third first-entry event (the two best
first-entry events and every other candidate ranked above them, at most 8), tested on n_test
fresh outputs per side at the level of the engine's round 10 of 11 at the default budget
(α·2⁹/(2¹¹ − 1)/4):

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/first_entry_ranking.py svt3-values 1000000 1000000 --pairs 4 7
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.corpus import corpus  # noqa: E402
from app.stats.candidates import ProposalSettings, propose  # noqa: E402
from app.stats.claims import PureDP  # noqa: E402
from app.stats.events import event_contains  # noqa: E402
from app.stats.heldout import Counts, test_claim  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slug")
    ap.add_argument("n_choose", type=int)
    ap.add_argument("n_test", type=int)
    ap.add_argument("--pairs", type=int, nargs="+", required=True)
    ap.add_argument("--claim", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    m = corpus()[args.slug]
    rng = np.random.default_rng(args.seed)
    level = 0.05 * 2**9 / (2**11 - 1) / 4
    print(f"{args.slug}: choose on {args.n_choose:,}, test on {args.n_test:,} per side, claim {args.claim:g}, "
          f"level {level:.3g}")
    for p in args.pairs:
        x, xp = m.pairs[p]
        cx, cy = m.sample(x, args.n_choose, rng), m.sample(xp, args.n_choose, rng)
        cands = propose(cx, cy, m.shape, ProposalSettings(n_test=args.n_test, level=level, target=args.claim))
        tx, ty = m.sample(x, args.n_test, rng), m.sample(xp, args.n_test, rng)
        first_entry = 0
        for rank, c in enumerate(cands):
            joint = c.family.startswith("first entry")
            if rank >= 8 and not joint:
                continue
            first_entry += joint
            if first_entry > 2 or rank >= 200:
                break
            a, b = int(event_contains(c.event, tx).sum()), int(event_contains(c.event, ty).sum())
            res = test_claim(PureDP(args.claim), Counts(a, args.n_test, b, args.n_test) if c.x_first
                             else Counts(b, args.n_test, a, args.n_test), level)
            print(f"pair {p} rank {rank} {c.family}: predicted {c.predicted:.2f}, held-out LB {res.lower_bound:.4f}, "
                  f"{c.event.describe()}", flush=True)


if __name__ == "__main__":
    main()
