"""Is a check's event too sparse to have power? A pure function for monitor creation and status.

With n outputs per side and event probabilities p = P(A(x) ∈ E), q = P(A(x') ∈ E), a period
carries information only through its hits: with n·(p + q) ≲ 1 most periods have a = b = 0, the
statistic is z = 0, and both the false-alarm rate and the power collapse. The advice
below quantifies this for a reference violation and suggests the n that restores power
(method.md §13.7):

- the reference violation raises the event's probability on x to p₁ = min(1, (1 + margin)·(s·q + d)),
  a relative excess ``margin`` over the claim's bound (for pure ε-DP and margin 0.5, a true ratio of
  1.5·e^ε, i.e. ε + 0.41);
- one pair's expected evidence for the oracle bet is G ≈ D²/(2V) nats, D = p₁ − s·q − d,
  V = p₁(1 − p₁) + s²·q(1 − q) (the second-order expansion of max_λ E log(1 + λ(X − sY − d)),
  Shekhar & Ramdas 2023 §4; Waudby-Smith & Ramdas 2024 §5), so a period gives n·G nats and an
  alarm needs about log(1/α)/(n·G) periods: a lower bound that every detector here needs a small
  multiple of (the e-detector also pays log m for its window);
- the event is flagged sparse when n·(p₁ + q) < ``min_hits`` (most periods empty) or when that
  number of periods exceeds ``target_periods``; the suggested n is the smallest meeting both.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from app.stats.sequential import SupportingLine

DEFAULT_MARGIN = 0.5
DEFAULT_MIN_HITS = 5.0
DEFAULT_TARGET_PERIODS = 50


@dataclass(frozen=True)
class EventPowerAdvice:
    """What the service shows next to a check (all numbers per period, per side)."""

    sparse: bool
    reasons: list[str]
    n: int
    expected_hits: float  # n·(p₁ + q) under the reference violation
    p_empty_period: float  # P(a = b = 0) under the reference violation
    violation_p: float  # p₁
    gap: float  # D = p₁ − s·q − d
    nats_per_period: float  # n·G
    periods_to_detect: float | None  # log(1/α)/(n·G); None when the violation is impossible (D ≤ 0)
    suggested_n: int | None  # the smallest n that is not sparse; None when no n helps

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_probability(name: str, v: float) -> float:
    v = float(v)
    if not (0.0 <= v <= 1.0):
        raise ValueError(f"{name} must lie in [0, 1], got {v!r}")
    return v


def event_power_advice(n: int, p: float, q: float, line: SupportingLine, alpha: float = 0.05,
                       margin: float = DEFAULT_MARGIN, min_hits: float = DEFAULT_MIN_HITS,
                       target_periods: int = DEFAULT_TARGET_PERIODS) -> EventPowerAdvice:
    """Advice for a check with n outputs per side whose event has (estimated) probabilities p, q.

    ``p`` is accepted for completeness (the advice uses the violation p₁ built from q and the
    claim's line); pass estimates from a pilot or discovery sample, never from the periods the
    check will be tested on.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    _check_probability("p", p)
    q = _check_probability("q", q)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not margin > 0 or not min_hits > 0 or target_periods < 1:
        raise ValueError("margin and min_hits must be > 0 and target_periods >= 1")
    s, d = line.slope, line.intercept
    bound = s * q + d
    # With a bound of 0 (q = 0, d = 0) any hit of A(x) violates the claim: take the estimate p, or
    # one hit in n, as the violation.
    p1 = min(1.0, (1.0 + margin) * bound) if bound > 0 else max(float(p), 1.0 / n)
    gap = p1 - bound
    var = p1 * (1 - p1) + s * s * q * (1 - q)
    reasons: list[str] = []
    rate = p1 + q
    hits = n * rate
    p_empty = (1 - p1) ** n * (1 - q) ** n
    if gap <= 0:
        # The claim's bound is ≥ 1 here: no event probability can violate it.
        return EventPowerAdvice(True, ["the claim allows any probability for this event: it cannot be violated"],
                                n, hits, p_empty, p1, gap, 0.0, None, None)
    g = gap * gap / (2.0 * max(var, 1e-12))
    per_period = n * g
    need = math.log(1.0 / alpha)
    periods = need / per_period
    if hits < min_hits:
        reasons.append(f"about {hits:.2g} hits per period (n·(p₁+q)) < {min_hits:g}: most periods carry no evidence")
    if periods > target_periods:
        reasons.append(f"about {periods:.3g} periods to detect a {100 * margin:g}% excess over the claim "
                       f"(> {target_periods})")
    n_hits = math.ceil(min_hits / rate) if rate > 0 else None
    n_power = math.ceil(need / (target_periods * g))
    suggested = None if n_hits is None else max(n_hits, n_power, n)
    return EventPowerAdvice(
        sparse=bool(reasons), reasons=reasons, n=n, expected_hits=hits, p_empty_period=p_empty, violation_p=p1,
        gap=gap, nats_per_period=per_period, periods_to_detect=periods,
        suggested_n=suggested if reasons else n,
    )


# ---------------------------------------------------------------------------------------------
# Which detector for a given n and expected effect (method.md §13.9).
# ---------------------------------------------------------------------------------------------

#: Bets of the e-processes' mixture: the mixture pays at most log K nats against the best bet.
MIXTURE_BETS = 16


@dataclass(frozen=True)
class DetectorAdvice:
    """Approximate periods to detect a violation of gap D (variance V per pair) for each detector, and
    the detector with the fewest. Mean-path approximations (method.md §13.9), not measurements."""

    n: int
    gap: float
    per_period_z: float  # z̄ = √n·D/√V, the mean of one period's score z under the violation
    nats_per_period: float  # n·G, G = D²/(2V)
    periods: dict[str, float | None]  # None: the detector does not detect it (D ≤ 0)
    recommended: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detector_advice(n: int, gap: float, variance: float, alpha: float = 0.05, horizon: int = 200,
                    gamma: float = 0.25, threshold: float | None = None, change_at: int = 1) -> DetectorAdvice:
    """Which detector finds a violation of per-pair gap D = p − s·q − d (variance V = p(1 − p) + s²q(1 − q))
    soonest with n outputs per side and period (method.md §13.9):

    - naive (exact at α/T ≈ c_T = Φ⁻¹(1 − α/T)): each period alarms with probability π = Φ(z̄ − c_T),
      z̄ = √n·D/√V, so about 1/π periods;
    - aggregator (seed 002 eq. 13 on the mean path): after k periods M ≥ z̄·k^{1−γ}·T^{γ−1/2}, so
      k = (q·T^{1/2−γ}/z̄)^{1/(1−γ)} with q = q_{1−α}(T, γ) (``threshold``; the shipped table if None);
    - e-process: (log(1/α) + log K + log(1/ω_{t₀}))/(n·G) with G = D²/(2V) (§13.2, §13.3; K = 16 bets,
      t₀ = ``change_at``, the period the violation starts: the start mixture's price);
    - e-detector: (log(T/α) + log K)/(n·G) (§13.4, c = T/α).

    The e-value counts are upper bounds of the oracle's (the mixture pays at most log K), the others
    mean-path approximations; docs/sequential.md compares them with measured delays. Every count is at
    least one period. The recommendation is the smallest; the aggregator wins ties.
    Where one period carries weak evidence (z̄ small) pooling wins (the aggregator, then the e-detector);
    where one period is already strong the per-period tests and the e-values win (measured in docs/sequential.md:
    3.9 against 2.8 periods).
    """
    from scipy.stats import norm

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not variance > 0 or not math.isfinite(gap):
        raise ValueError("variance must be > 0 and gap finite")
    if not 0.0 < alpha < 1.0 or horizon < 1 or not 0 <= gamma < 0.5:
        raise ValueError("need 0 < alpha < 1, horizon >= 1 and 0 <= gamma < 1/2")
    z_bar = math.sqrt(n) * gap / math.sqrt(variance)
    g = n * gap * gap / (2.0 * variance)
    if gap <= 0:
        return DetectorAdvice(n, gap, z_bar, 0.0, dict.fromkeys(("aggregator", "naive", "e-process", "e-detector")),
                              None, "no violation: no detector finds it")
    if threshold is None:  # the shipped table only (no Monte Carlo here); off the table: no aggregator figure
        from app.stats.thresholds import threshold_from_table

        hit = threshold_from_table(horizon, gamma, alpha)
        threshold = None if hit is None else hit.value
    c_t = float(norm.isf(alpha / horizon))
    pi = float(norm.cdf(z_bar - c_t))
    if change_at < 1:
        raise ValueError("change_at must be >= 1")
    log_omega1 = math.log(2.11 * (change_at + 1) * math.log(change_at + 1.0) ** 2)
    periods = {
        "aggregator": (math.inf if threshold is None
                       else max(1.0, (threshold * horizon ** (0.5 - gamma) / z_bar) ** (1.0 / (1.0 - gamma)))),
        "naive": max(1.0, 1.0 / pi) if pi > 0 else math.inf,
        "e-process": max(1.0, (math.log(1 / alpha) + math.log(MIXTURE_BETS) + log_omega1) / g),
        "e-detector": max(1.0, (math.log(horizon / alpha) + math.log(MIXTURE_BETS)) / g),
    }
    order = ["aggregator", "e-detector", "e-process", "naive"]
    best = min(order, key=lambda k: (periods[k], order.index(k)))
    if not math.isfinite(periods[best]):
        return DetectorAdvice(n, gap, z_bar, g, {k: None for k in periods}, None, "no detector is expected to find it")
    strength = "weak" if z_bar < c_t else "strong"
    reason = (f"one period carries {strength} evidence (z̄ = {z_bar:.2g} against the naive per-period critical value "
              f"{c_t:.2g}); about {periods[best]:.3g} periods for the {best}")
    return DetectorAdvice(n, gap, z_bar, g, {k: (None if not math.isfinite(v) else v) for k, v in periods.items()},
                          best, reason)
