"""Size of the fair naive test: the plain exact test and the randomised one, per period.

For each claim's line and n, the critical value at α/T, the plain test's size (sup over the null,
q ≤ the claim's vertex) and the randomised test's, as multiples of α/T; and the old critical value
(sup over the whole line) for comparison.

    .venv/bin/python bench/naive_size.py
"""

from __future__ import annotations

from app.stats import exact_naive
from app.stats.exact_naive import exact_naive_test
from app.stats.sequential import SupportingLine


def old_threshold(n: int, line: SupportingLine, level: float) -> float:
    """The critical value with the supremum over the whole line (the old critical value)."""
    saved = exact_naive.null_q_max
    try:
        exact_naive.null_q_max = lambda ln: min(1.0, (1.0 - ln.intercept) / ln.slope)  # type: ignore[assignment]
        exact_naive.exact_naive_test.cache_clear()
        return exact_naive_test(n, line, level).threshold
    finally:
        exact_naive.null_q_max = saved  # type: ignore[assignment]
        exact_naive.exact_naive_test.cache_clear()


def main() -> None:
    alpha, horizon = 0.05, 100
    level = alpha / horizon
    print(f"α = {alpha}, T = {horizon}: per-period level α/T = {level:g}")
    print("| claim | n | critical value (null up to the vertex) | whole line (before) | plain size / (α/T) | "
          "randomised size / (α/T) | γ |")
    print("|---|---|---|---|---|---|---|")
    for eps, delta in ((0.1, 0.0), (1.0, 0.0), (3.0, 0.0), (1.0, 1e-5), (1.0, 1e-2)):
        line = SupportingLine.approximate(eps, delta)
        for n in (50, 200):
            t = exact_naive_test(n, line, level)
            old = old_threshold(n, line, level)
            print(f"| ({eps:g}, {delta:g}) | {n} | {t.threshold:.3f} | {old:.3f} | {t.size / level:.3f} | "
                  f"{t.randomized_size / level:.4f} | {t.gamma:.3f} |", flush=True)


if __name__ == "__main__":
    main()
