"""How much the first-entry events could give on a corpus mechanism with vector outputs, from large samples.

For each pair, N outputs per side give (almost exactly) the probabilities of every event "the first
non-null entry is at a position in [k₁, k₂] and its value is ≤ t (or ≥ t)", t on a grid of 86
pooled quantiles; the script prints, for single positions (k₁ = k₂: with one answer, as in SVT 3,
that is the coordinate event o[k] ≤ t the engine already searches) and for wider ranges, the best
expected held-out lower bound ℓ − z·se at ``--n-test`` outputs per side (z = 2.7, about the
engine's per-event level in its last rounds). An upper bound on what selection can reach, not an
audit: the events are chosen on the same samples that score them.

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/first_entry_oracle.py svt3-values 10000000 4 7
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.corpus import corpus  # noqa: E402

CHUNK = 1_000_000


def first_entries(sample, db, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(position, value) of the first non-null entry of n outputs (−1, NaN when none), in chunks."""
    ks, vs = [], []
    for start in range(0, n, CHUNK):
        o = np.asarray(sample(db, min(CHUNK, n - start), rng), dtype=np.float64)
        present = ~np.isnan(o)
        has, first = present.any(axis=1), present.argmax(axis=1)
        ks.append(np.where(has, first, -1).astype(np.int16))
        vs.append(np.where(has, o[np.arange(o.shape[0]), first], np.nan))
    return np.concatenate(ks), np.concatenate(vs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slug")
    ap.add_argument("n", type=int, help="outputs per side")
    ap.add_argument("pairs", type=int, nargs="+")
    ap.add_argument("--n-test", type=int, default=2_000_000)
    ap.add_argument("--z", type=float, default=2.7)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    m = corpus()[args.slug]
    rng = np.random.default_rng(args.seed)
    print(f"{args.slug}: {args.n:,} outputs per side; expected held-out LB at {args.n_test:,} per side, z = {args.z}")
    for p in args.pairs:
        x, xp = m.pairs[p]
        (kx, vx), (ky, vy) = first_entries(m.sample, x, args.n, rng), first_entries(m.sample, xp, args.n, rng)
        width = int(max(kx.max(), ky.max())) + 1
        pooled = np.concatenate([vx[kx >= 0], vy[ky >= 0]])
        tails = [1e-4, 3e-4, 1e-3, 3e-3, 1 - 1e-3, 1 - 1e-4]
        grid = np.unique(np.quantile(pooled, np.concatenate([np.linspace(0, 1, 80), tails])))
        best: dict[str, tuple] = {}
        for k1 in range(width):
            for k2 in range(k1, width):
                if k1 == 0 and k2 == width - 1:
                    continue
                mx, my = (kx >= k1) & (kx <= k2), (ky >= k1) & (ky <= k2)
                le_x = np.searchsorted(np.sort(vx[mx]), grid, "right") / args.n
                le_y = np.searchsorted(np.sort(vy[my]), grid, "right") / args.n
                for side, px, py in (("≤", le_x, le_y), ("≥", mx.mean() - le_x, my.mean() - le_y)):
                    for a, b, first in ((px, py, "x"), (py, px, "x′")):
                        with np.errstate(all="ignore"):
                            ell = np.log(a) - np.log(b)
                            lb = np.nan_to_num(ell - args.z * np.sqrt((1 - a) / (args.n_test * a)
                                                                      + (1 - b) / (args.n_test * b)), nan=-np.inf)
                        t = int(lb.argmax())
                        kind = "single position" if k1 == k2 else "range of positions"
                        if kind not in best or lb[t] > best[kind][0]:
                            best[kind] = (float(lb[t]), k1, k2, side, float(grid[t]), float(a[t]), float(b[t]),
                                          float(ell[t]), first)
        for kind, (lb, k1, k2, side, t, a, b, ell, first) in best.items():
            print(f"pair {p} {kind}: k ∈ [{k1}, {k2}], v {side} {t:.4g}, likelier under {first}: "
                  f"p {a:.3g}, q {b:.3g}, ln(p/q) {ell:.3f}, expected LB {lb:.4f}", flush=True)


if __name__ == "__main__":
    main()
