"""The sequential test's arithmetic: an e-value per batch of paired outputs, the bet, and the power.

One event E is tested against one line p ≤ s·q + c of the claim (``_claims``) on n fresh pairs
(X_i, Y_i), X_i = 1[A(x)_i ∈ E] and Y_i = 1[A(x′)_i ∈ E], independent. For a bet
λ ∈ [0, 1/(s + c)), chosen before the batch is drawn,

    F(λ) = Π_i (1 + λ·(X_i − s·Y_i − c))

has mean (1 + λ·(p − s·q − c))^n ≤ 1 under the claim: an e-value, and the product of the batches'
e-values is a test supermartingale (the betting form of Waudby-Smith & Ramdas, *Estimating means
of bounded random variables by betting*, JRSS-B 2024, and Shekhar & Ramdas, *Nonparametric
two-sample testing by betting*, IEEE Trans. Inf. Theory 2023). By Ville's inequality the
probability that it ever reaches 1/α is at most α, whenever the test stops (docs/method.md §13 of
the service describes the same payoff for its monitors).

F depends on the pairs through four counts: n₁₀ (X = 1, Y = 0), n₀₁, n₁₁ and n₀₀:

    log F(λ) = n₁₀·log(1 + λ(1 − c)) + n₀₁·log(1 − λ(s + c)) + n₁₁·log(1 + λ(1 − s − c)) + n₀₀·log(1 − λc)

The bet is aGRAPA (Waudby-Smith & Ramdas 2024, §5.1): λ = μ̂/(σ̂² + μ̂²), with μ̂ = p̂ − s·q̂ − c and
σ̂² = p̂(1 − p̂) + s²·q̂(1 − q̂) from the outputs drawn before the batch, read at cautious values of
p̂ and q̂ (a lower bound of p, an upper bound of q) because the same outputs chose the event; the
test mixes a few fractions of it (:data:`FRACTIONS`), which costs log of their number in evidence
and keeps a misjudged bet from wasting a batch.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["CAP", "FRACTIONS", "Z_CAUTION", "cautious", "bet", "growth", "log_evalues", "simulate_rejections"]

#: The largest bet, as a fraction of 1/(s + c): every factor stays ≥ 1 − CAP.
CAP = 0.8
#: Fractions of the aGRAPA bet that the test mixes with equal weights.
FRACTIONS = np.array([1.0, 0.5, 0.25])
#: Standard errors by which the chosen event's p̂ is lowered and q̂ raised before betting and
#: ranking (the winner's curse of choosing among many events on the same outputs).
Z_CAUTION = 1.5


def _f(x: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=np.float64)


def cautious(a: ArrayLike, na: ArrayLike, b: ArrayLike, nb: ArrayLike,
             z: float = Z_CAUTION) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(p_lo, q_hi): smoothed proportions (k + ½)/(n + 1) moved z standard errors against a violation."""
    n_a, n_b = _f(na) + 1.0, _f(nb) + 1.0
    p = (_f(a) + 0.5) / n_a
    q = (_f(b) + 0.5) / n_b
    p_lo = np.clip(p - z * np.sqrt(p * (1 - p) / n_a), 0.0, 1.0)
    q_hi = np.clip(q + z * np.sqrt(q * (1 - q) / n_b), 0.0, 1.0)
    return p_lo, q_hi


def bet(p: ArrayLike, q: ArrayLike, s: ArrayLike, c: ArrayLike) -> NDArray[np.float64]:
    """The aGRAPA bet λ for the payoff X − sY − c at (p, q), in [0, CAP/(s + c)]."""
    p, q, s, c = _f(p), _f(q), _f(s), _f(c)
    mu = p - s * q - c
    var = p * (1 - p) + s * s * q * (1 - q)
    lam = np.where(mu > 0, mu / np.maximum(var + mu * mu, 1e-300), 0.0)
    return np.clip(lam, 0.0, CAP / (s + c))


def _log_factors(lam: ArrayLike, s: ArrayLike, c: ArrayLike) -> tuple[NDArray[np.float64], ...]:
    lam, s, c = _f(lam), _f(s), _f(c)
    return (np.log1p(lam * (1 - c)), np.log1p(-lam * (s + c)), np.log1p(lam * (1 - s - c)), np.log1p(-lam * c))


def log_evalues(n10: ArrayLike, n01: ArrayLike, n11: ArrayLike, n00: ArrayLike, lam: ArrayLike, s: ArrayLike,
                c: ArrayLike) -> NDArray[np.float64]:
    """log F(λ) of one batch from its four counts (all arguments broadcast)."""
    f10, f01, f11, f00 = _log_factors(lam, s, c)
    return _f(n10) * f10 + _f(n01) * f01 + _f(n11) * f11 + _f(n00) * f00


def growth(p: ArrayLike, q: ArrayLike, s: ArrayLike, c: ArrayLike) -> NDArray[np.float64]:
    """Expected log F per pair at the aGRAPA bet, if the event's probabilities were (p, q): how
    fast the test would gather evidence on it (0 when it would not bet)."""
    lam = bet(p, q, s, c)
    f10, f01, f11, f00 = _log_factors(lam, s, c)
    p, q = _f(p), _f(q)
    return p * (1 - q) * f10 + (1 - p) * q * f01 + p * q * f11 + (1 - p) * (1 - q) * f00


def simulate_rejections(p: float, q: float, s: float, c: float, pilot: int, batches: list[int], log_threshold: float,
                        runs: int, rng: np.random.Generator) -> float:
    """The fraction of ``runs`` simulated tests of one fixed event with probabilities (p, q) that
    reach the threshold: the pilot's counts start the bets, then each batch bets like the real test
    (the same cautious aGRAPA fractions, from all counts before it) and adds its e-value. The
    slot's wealth is the mean over the fractions; it must reach ``exp(log_threshold)`` alone (the
    other slots' wealth, which is never negative, is left out: the power stated is a lower bound)."""
    a = rng.binomial(pilot, p, runs).astype(np.float64)
    b = rng.binomial(pilot, q, runs).astype(np.float64)
    n = float(pilot)
    log_w = np.zeros((runs, FRACTIONS.size))
    rejected = np.zeros(runs, dtype=bool)
    cells = np.array([p * (1 - q), (1 - p) * q, p * q, (1 - p) * (1 - q)])
    cells = np.clip(cells, 0.0, None) / max(cells.sum(), 1e-300)
    log_k = math.log(FRACTIONS.size)
    for size in batches:
        p_lo, q_hi = cautious(a, n, b, n)
        lam = bet(p_lo, q_hi, np.float64(s), np.float64(c))[:, None] * FRACTIONS[None, :]
        counts = rng.multinomial(size, cells, runs).astype(np.float64)
        n10, n01, n11, n00 = (counts[:, k:k + 1] for k in range(4))
        log_w += log_evalues(n10, n01, n11, n00, lam, np.float64(s), np.float64(c))
        top = log_w.max(axis=1)
        mean = top + np.log(np.exp(log_w - top[:, None]).sum(axis=1)) - log_k
        rejected |= mean >= log_threshold
        a += counts[:, 0] + counts[:, 2]
        b += counts[:, 1] + counts[:, 2]
        n += size
    return float(rejected.mean())
