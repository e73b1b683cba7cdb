"""Oracle growth per pair of the one-pair audit at the four non-private cells (method.md §13.10).

    python bench/onepair_oracle.py [--wider]

In units of 1/ε: P = M(x) = Lap(0, 2) (or N(0, 2²)), Q = M(x') = 0.5ε + Lap(0, 1) (or N(0.5ε, 1)),
discretised into 300 bins on [−25, 25] (Laplace) or [−10, 10] (Gaussian), outer bins unbounded.
Prints, in nats per pair and as pairs to reach log(1/α) = log 20:
  event   the best symmetric two-sided tail event with its exact Kelly bet;
  soft    the best h ∈ [0, 1] with its bet (max over g = λh of E log(1 + g(X) − s g(Y)), concave);
  OP3     the witness (OP3) with the true likelihood ratio, g = min(c/s, k·(r − s)₊/(r + s²)),
          the best c ∈ {0.5, …, 0.99}, k on a grid.

``--wider`` asks whether a wider family of e-values than the soft payoffs h(X) − s·h(Y) − d raises
the oracle: the swap payoff A(X, Y) − τ with A antisymmetric (A(x, y) = −A(y, x)) in [−1, 1], valid
because the swapped pair (Y, X) ~ Q⊗P and (X, Y) ~ P⊗Q are (2ε, 2δ)-indistinguishable (basic
composition), so E A ≤ τ = tanh ε + 4δ/(1 + e^{2ε}); alone (its best A pointwise, best bet), and
with the soft payoff in one factor 1 + g(X) − s·g(Y) − d + λ₂(A − τ) (both parts ≤ 0 in mean under
the claim; 80 bins, λ₂ on a grid, g and A by L-BFGS).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.stats import laplace, norm


def cell(kind: str, eps: float, bins: int = 300) -> tuple[np.ndarray, np.ndarray]:
    lim = 25.0 if kind == "laplace" else 10.0
    edges = np.linspace(-lim, lim, bins + 1)
    edges[0], edges[-1] = -np.inf, np.inf
    dist = laplace if kind == "laplace" else norm
    return np.diff(dist.cdf(edges, 0.0, 2.0)), np.diff(dist.cdf(edges, 0.5 * eps, 1.0))


def best_event(p_bins: np.ndarray, q_bins: np.ndarray, s: float, d: float) -> float:
    best, c = 0.0, p_bins.size // 2
    for k in range(1, c):
        ev = np.zeros(p_bins.size)
        ev[: c - k] = ev[c + k:] = 1.0
        p, q = float(p_bins @ ev), float(q_bins @ ev)

        def neg(lam: float) -> float:
            return -(p * (1 - q) * math.log(1 + lam * (1 - d)) + p * q * math.log(1 + lam * (1 - s - d))
                     + (1 - p) * q * math.log(1 - lam * (s + d)) + (1 - p) * (1 - q) * math.log(1 - lam * d))

        best = max(best, -minimize_scalar(neg, bounds=(0, 0.999 / (s + d)), method="bounded").fun)
    return best


def growth(g: np.ndarray, p_bins: np.ndarray, q_bins: np.ndarray, s: float) -> float:
    return float(p_bins @ np.log(1 + g[:, None] - s * g[None, :]) @ q_bins)


def best_soft(p_bins: np.ndarray, q_bins: np.ndarray, s: float) -> float:
    def obj(g: np.ndarray) -> tuple[float, np.ndarray]:
        m = 1 + g[:, None] - s * g[None, :]
        w = 1 / m
        return -float(p_bins @ np.log(m) @ q_bins), -(p_bins * (w @ q_bins) - s * q_bins * (p_bins @ w))

    res = minimize(obj, np.full(p_bins.size, 0.1), jac=True, method="L-BFGS-B", bounds=[(0, 0.999 / s)] * p_bins.size)
    return -float(res.fun)


def best_op3(p_bins: np.ndarray, q_bins: np.ndarray, s: float) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = p_bins / q_bins
        base = np.where(np.isfinite(r), np.clip(r - s, 0, None) / (r + s * s), 1.0)
    return max(growth(np.minimum(c / s, k * base), p_bins, q_bins, s)
               for c in (0.5, 0.7, 0.8, 0.9, 0.95, 0.99) for k in np.linspace(0.2, 3.0, 29))


def swap_growth(p_bins: np.ndarray, q_bins: np.ndarray, eps: float, delta: float) -> float:
    """The best swap payoff A(X, Y) − τ with its bet: A pointwise optimal for each unordered pair of bins."""
    tau = math.tanh(eps) + 4 * delta / (1 + math.exp(2 * eps))
    joint = p_bins[:, None] * q_bins[None, :]
    iu = np.triu_indices(p_bins.size, 1)
    a, b, tied = joint[iu], joint.T[iu], float(np.trace(joint))

    def value(lam: float) -> float:
        # a/(1 + λ(A − τ)) = b/(1 − λ(A + τ)) at the optimum, clipped to [−1, 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            big_a = np.clip(np.where(a + b > 0, (a - b) * (1 - lam * tau) / (lam * (a + b)), 0.0), -1, 1)
        return float(np.sum(a * np.log1p(lam * (big_a - tau))) + np.sum(b * np.log1p(-lam * (big_a + tau)))
                     + tied * math.log1p(-lam * tau))

    return -float(minimize_scalar(lambda lam: -value(lam), bounds=(1e-6, 0.999 / (1 + tau)), method="bounded").fun)


def soft_and_swap(p_bins: np.ndarray, q_bins: np.ndarray, eps: float, delta: float) -> float:
    """The best factor 1 + g(X) − s·g(Y) − d + λ₂(A(X, Y) − τ) over g ≥ 0, A antisymmetric in [−1, 1]
    and λ₂ on a grid (λ₂ = 0 is the soft payoff alone)."""
    s, k = math.exp(eps), p_bins.size
    tau = math.tanh(eps) + 4 * delta / (1 + math.exp(2 * eps))
    joint = p_bins[:, None] * q_bins[None, :]
    iu = np.triu_indices(k, 1)
    best = 0.0
    for lam2 in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5):
        def obj(v: np.ndarray, lam2: float = lam2) -> tuple[float, np.ndarray]:
            g, big_a = v[:k], np.zeros((k, k))
            big_a[iu] = v[k:]
            big_a = big_a - big_a.T
            m = 1 + g[:, None] - s * g[None, :] - delta + lam2 * (big_a - tau)
            if np.any(m <= 1e-9):
                return 1e9, np.zeros_like(v)
            w = joint / m
            return -float(np.sum(joint * np.log(m))), np.concatenate([-(w.sum(1) - s * w.sum(0)), -lam2 * (w - w.T)[iu]])

        bounds = [(0.0, (1 - lam2 * (1 + tau)) * 0.999 / (s + delta))] * k + [(-1.0, 1.0)] * iu[0].size
        res = minimize(obj, np.concatenate([np.full(k, 0.05), np.zeros(iu[0].size)]), jac=True, method="L-BFGS-B",
                       bounds=bounds, options={"maxiter": 3000})
        best = max(best, -float(res.fun))
    return best


def wider() -> None:
    print("| cell | soft h (400 bins) | swap payoff | soft h (80 bins) | soft h + swap (80 bins) |")
    print("|---|---|---|---|---|")
    for kind in ("laplace", "gaussian"):
        for eps in (0.01, 0.1):
            delta = 0.0 if kind == "laplace" else 1e-5
            s = math.exp(eps)
            p_bins, q_bins = cell(kind, eps, 400)
            p80, q80 = cell(kind, eps, 80)
            vals = [best_soft(p_bins, q_bins, s), swap_growth(p_bins, q_bins, eps, delta), best_soft(p80, q80, s),
                    soft_and_swap(p80, q80, eps, delta)]
            print(f"| {kind} ε={eps} | " + " | ".join(f"{v:.4f} ({math.log(20) / v:.1f})" for v in vals) + " |",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wider", action="store_true", help="the swap payoff and its combination with the soft one")
    if ap.parse_args().wider:
        wider()
        return
    print("| cell | event: nats/pair (pairs) | soft h | OP3 with the true ratio |")
    print("|---|---|---|---|")
    for kind in ("laplace", "gaussian"):
        for eps in (0.01, 0.1):
            p_bins, q_bins = cell(kind, eps)
            s = math.exp(eps)
            vals = [best_event(p_bins, q_bins, s, 0.0 if kind == "laplace" else 1e-5),
                    best_soft(p_bins, q_bins, s), best_op3(p_bins, q_bins, s)]
            print(f"| {kind} ε={eps} | " + " | ".join(f"{v:.4f} ({math.log(20) / v:.0f})" for v in vals) + " |")


if __name__ == "__main__":
    main()
