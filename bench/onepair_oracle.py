"""Oracle growth per pair of the one-pair audit at the four non-private cells (method.md §13.10).

    python bench/onepair_oracle.py

In units of 1/ε: P = M(x) = Lap(0, 2) (or N(0, 2²)), Q = M(x') = 0.5ε + Lap(0, 1) (or N(0.5ε, 1)),
discretised into 300 bins on [−25, 25] (Laplace) or [−10, 10] (Gaussian), outer bins unbounded.
Prints, in nats per pair and as pairs to reach log(1/α) = log 20:
  event   the best symmetric two-sided tail event with its exact Kelly bet;
  soft    the best h ∈ [0, 1] with its bet (max over g = λh of E log(1 + g(X) − s g(Y)), concave);
  OP3     the witness (OP3) with the true likelihood ratio, g = min(c/s, k·(r − s)₊/(r + s²)),
          the best c ∈ {0.5, …, 0.99}, k on a grid.
"""

from __future__ import annotations

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


def main() -> None:
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
