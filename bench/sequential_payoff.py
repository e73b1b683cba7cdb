"""Per-sample against per-period betting in the e-process (method.md §13.2, docs/sequential.md).

    python bench/sequential_payoff.py

A violation from the first period on (no stable run before it), R = 200 runs of 300 periods,
pure ε = 1, the plain product (``starts="first"``) so that only the payoff differs. Prints the
median number of periods to W ≥ 1/α and the fraction of runs that reach it within 300 periods.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from app.stats.sequential import SupportingLine, e_process_paths


def main() -> int:
    line = SupportingLine.pure(1.0)
    rng = np.random.default_rng(8)
    print("| n | p | q | D = p − e·q | payoff | median periods to alarm | detected within 300 |")
    print("|---|---|---|---|---|---|---|")
    for n, (p, q) in [(200, (0.5, 0.1646)), (1000, (0.5, 0.1646)), (200, (0.0786, 0.0169)), (1000, (0.0786, 0.0169))]:
        a = rng.binomial(n, p, (200, 300))
        b = rng.binomial(n, q, (200, 300))
        for payoff in ("per-sample", "per-period"):
            hit = e_process_paths(a, b, n, line, payoff=payoff, starts="first") >= math.log(20)
            first = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, np.inf)
            med = np.median(first)
            print(f"| {n} | {p} | {q} | {p - math.e * q:.4f} | {payoff} | {'never' if math.isinf(med) else int(med)} "
                  f"| {hit.any(axis=1).mean():.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
