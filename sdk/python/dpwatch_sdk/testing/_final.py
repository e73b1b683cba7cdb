"""The fixed-sample test on the last batch: where the sequential test spends the rest of α.

The sequential test (``_sequential``) stops as soon as its e-value reaches 1/α_seq, which makes a
clear violation fail fast. Its guarantee comes from Ville's inequality, which is tight only for
a wealth that bets steadily on the boundary of the claim; on a mechanism at the boundary the
cautious bets rarely bet at all, so at the budget its false-failure rate is about a tenth of its
level (docs/sdk.md §4.6). Most of α would go unspent. So the test splits α:

- ``α_seq = SEQUENTIAL_SHARE · α`` for the sequential e-value, at any batch;
- ``α_final = α − α_seq`` for one fixed-sample test per (pair, orientation) on the **last batch**,
  on an event and a line of the claim chosen from the outputs drawn before it (never from the
  batch it is tested on), with a Bonferroni share ``α_final / K`` each (K = 2 × pairs).

By the union bound, a mechanism that satisfies its claim fails with probability ≤ α_seq + α_final
= α. The final test is exact at every sample size, and nearly exact on the boundary, so the test's
false-failure rate at the boundary is close to α instead of far below it.

**The final test.** On the last batch, m fresh outputs per database: A of them fall in E on the
first database and B on the second; A ~ Bin(m, p) and B ~ Bin(m, q) are independent. The claim
implies p ≤ s·q + c for the line (s, c) (a supporting line of its trade-off curve, chosen before
the batch), so the null is H₀: p − s·q − c ≤ 0. The statistic is

    Z = (A − s·B − m·c) / √V(B),   V(b) = m·(p̃(1 − p̃) + s²·q̃(1 − q̃)),
    q̃ = (b + ½)/(m + 1),  p̃ = min(1, s·q̃ + c)                                                (TS)

(a difference of proportions scaled by its standard deviation on the boundary, so that its
distribution hardly depends on q there). For fixed B = b, Z ≥ z is A ≥ s·b + m·c + z·√V(b), so
for fixed q its tail P(Z ≥ z) grows with p: the largest tail under H₀ is on the boundary
p = min(1, s·q + c), and the p-value maximises over the nuisance q. Berger & Boos (*P values
maximised over a confidence set for the nuisance parameter*, JASA 1994) restrict the maximum to a
(1 − γ) Clopper–Pearson interval C_γ(B) for q and add γ:

    p-value = γ + sup_{q ∈ C_γ(B)} Σ_b P(B = b) · P(A ≥ ⌈s·b + m·c + z·√V(b)⌉),  p = min(1, s·q + c)   (BB)

which is valid (P(p-value ≤ u) ≤ u under H₀) at every m. The sum runs over the b of probability
above 10⁻¹³ on either side; the mass left out is added, so the truncation only makes the p-value
larger. The supremum over C_γ is taken on a grid and refined around its best point (as exact
unconditional tests such as Barnard's and Boschloo's are computed). When the tail at q̂ alone is
already ≥ ½, the search is skipped and that value (a lower bound of the supremum) is returned:
no level below ½ could reject.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

from ._claims import ClaimModel
from ._events import Candidates, Event

__all__ = ["GAMMA_SHARE", "SEQUENTIAL_SHARE", "FinalChoice", "FinalResult", "choose_final", "p_value"]

#: The share of α the sequential e-value gets; the rest goes to the final fixed-sample test. A
#: tenth costs the sequential test log 10 ≈ 2.3 nats of evidence (a few percent more outputs on a
#: clear violation) and leaves nine tenths of α to the test that can use it at the budget.
SEQUENTIAL_SHARE = 0.1
#: γ of (BB) as a share of the final test's level per event.
GAMMA_SHARE = 0.01
#: Outputs of the last batch an event must be expected to hold on each side to be tested there.
MIN_COUNT = 100
#: Tail mass of B below and above the summed range (added back to the p-value).
_TAIL = 1e-13
#: Grid points of q over the confidence interval before the refinement.
_GRID = 16


@dataclass(frozen=True)
class FinalChoice:
    """The event and line of one (pair, orientation), chosen before the last batch."""

    pair: int
    x_first: bool
    event: Event
    line: tuple[float, float]


@dataclass(frozen=True)
class FinalResult:
    """The final test of one (pair, orientation): counts on the last batch and the p-value of (BB)."""

    pair: int
    x_first: bool
    event: str
    first_in: int
    second_in: int
    n: int
    line: tuple[float, float]
    p_value: float


def choose_final(claim: ClaimModel, cands: Candidates, m: int, x_first: bool, pair: int) -> FinalChoice | None:
    """The candidate with the largest predicted z-score of T on a batch of m outputs per database,
    read at the point estimates of its counts on the outputs drawn so far, tested against the
    claim's line at q̂ (``ClaimModel.line_at``). Nothing of the batch it will be tested on is seen."""
    if len(cands) == 0:
        return None
    a, na, b, nb = (cands.a, cands.na, cands.b, cands.nb) if x_first else (cands.b, cands.nb, cands.a, cands.na)
    p = (np.asarray(a, dtype=np.float64) + 0.5) / (na + 1.0)
    q = (np.asarray(b, dtype=np.float64) + 0.5) / (nb + 1.0)
    s, c = claim.line_at(q)
    sd = np.sqrt((p * (1 - p) + s * s * q * (1 - q)) / m)
    z = (p - s * q - c) / np.maximum(sd, 1e-12)
    # Events expected to hold fewer than MIN_COUNT of the batch's outputs on either side are left to
    # the sequential part: among hundreds of rare atoms the largest z is mostly the noise that chose
    # it, and on a few dozen counts the exact test is conservative (its level would go unspent).
    z = np.where(np.minimum(p, q) * m >= MIN_COUNT, z, -np.inf)
    if not np.isfinite(z).any():
        return None
    k = int(np.argmax(z))
    return FinalChoice(pair, x_first, cands.event(k), (float(s[k]), float(c[k])))


def _scale(b: NDArray[np.float64] | float, m: int, s: float, c: float) -> NDArray[np.float64]:
    """√V(b): the standard deviation of A − s·B on the boundary, read at q̃ = (b + ½)/(m + 1)."""
    q = (np.asarray(b, dtype=np.float64) + 0.5) / (m + 1.0)
    p = np.minimum(1.0, s * q + c)
    return np.sqrt(m * (p * (1 - p) + s * s * q * (1 - q)))


def _statistic(a: int, b: int, m: int, s: float, c: float) -> float:
    """Z = (A − s·B − m·c) / √V(B) (TS)."""
    return float((a - s * b - m * c) / _scale(b, m, s, c))


def _tail(z: float, m: int, q: float, s: float, c: float) -> float:
    """P(Z ≥ z) for A ~ Bin(m, min(1, s·q + c)), B ~ Bin(m, q), plus the B-mass left out."""
    p = min(1.0, s * q + c)
    if q <= 0.0:
        lo = hi = 0
        left_out = 0.0
    else:
        lo = int(stats.binom.ppf(_TAIL, m, q))
        hi = int(stats.binom.isf(_TAIL, m, q))
        left_out = float(stats.binom.cdf(lo - 1, m, q) + stats.binom.sf(hi, m, q))
    bs = np.arange(lo, hi + 1, dtype=np.float64)
    # Z ≥ z ⇔ A ≥ s·b + m·c + z·√V(b); the 1e-9 keeps the observed point inside the tail
    need = np.ceil(s * bs + m * c + z * _scale(bs, m, s, c) - 1e-9)
    weights = stats.binom.pmf(bs, m, q) if q > 0.0 else np.ones(1)
    total = float(np.dot(weights, stats.binom.sf(need - 1, m, p)))
    return min(1.0, total + left_out)


def p_value(first_in: int, second_in: int, m: int, s: float, c: float, gamma: float) -> float:
    """The p-value (BB) of H₀: p ≤ s·q + c from A = ``first_in`` and B = ``second_in`` of m each."""
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must lie in (0, 1), got {gamma!r}")
    t = _statistic(first_in, second_in, m, s, c)
    b = second_in
    q_lo = 0.0 if b == 0 else float(stats.beta.ppf(gamma / 2, b, m - b + 1))
    q_hi = 1.0 if b == m else float(stats.beta.ppf(1 - gamma / 2, b + 1, m - b))
    if q_hi <= q_lo:
        return min(1.0, gamma + _tail(t, m, q_lo, s, c))
    at_estimate = _tail(t, m, min(max((b + 0.5) / (m + 1.0), q_lo), q_hi), s, c)
    if at_estimate >= 0.5:  # the supremum is larger still: no level below ½ can reject; skip the search
        return min(1.0, gamma + at_estimate)
    grid: NDArray[np.float64] = np.linspace(q_lo, q_hi, _GRID)
    values = np.array([_tail(t, m, float(q), s, c) for q in grid])
    k = int(np.argmax(values))
    best = float(values[k])
    low, high = float(grid[max(k - 1, 0)]), float(grid[min(k + 1, _GRID - 1)])
    if high > low:
        res = optimize.minimize_scalar(lambda q: -_tail(t, m, float(q), s, c), bounds=(low, high), method="bounded",
                                       options={"xatol": (high - low) * 1e-3})
        best = max(best, -float(res.fun))
    return min(1.0, gamma + best)
