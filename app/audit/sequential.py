"""A sequential audit of one pair over HTTP: bet pair by pair, stop at the first rejection.

``dpwatch audit --sequential`` (docs/audit.md §"One pair, sequentially"). The audit draws the
mechanism's outputs on x and x' in batches, then bets on them **one pair at a time** with the
one-pair e-process of ``app.stats.onepair`` (method.md §13.10: a predictable soft payoff and a
constant bet). It rejects the claim at the first pair t with W_t ≥ 1/α. By Ville's
inequality P(ever reject | the claim holds) ≤ α, at every number of pairs, so the audit may stop
as soon as it rejects, and "not rejected within the budget" is all that a budget that ran out can
say (it never shows that the claim holds).

Outputs drawn in a batch beyond the rejecting pair were drawn but not read: the result reports both
``pairs_used`` (the pairs the test read) and ``pairs_drawn`` (the outputs per database it cost).
Scalar real outputs only: the soft payoff's witness is a function of one number.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.safe_http import SafeHttpConfig
from app.stats.claims import ApproxDP, Claim, PureDP, parse_claim, supporting_line
from app.stats.onepair import LineOrTangent, OnePairAuditor
from app.stats.sequential import SupportingLine

__all__ = ["SequentialAuditResult", "claim_line", "sequential_pair_audit"]


def claim_line(claim: dict[str, Any]) -> tuple[LineOrTangent, str]:
    """The line a one-pair audit bets against (method.md §13.1), and the claim in words.

    ε and (ε, δ): the fixed line p ≤ e^ε q + δ; μ-GDP and ρ-zCDP: the tangent of the claim's
    boundary p = h(q) at the audit's predictable estimate of q (``app.stats.claims.supporting_line``),
    which lies above the boundary, so every event obeys it.
    """
    c: Claim = parse_claim(claim)
    if isinstance(c, (PureDP, ApproxDP)):
        delta = c.delta if isinstance(c, ApproxDP) else 0.0
        return SupportingLine(math.exp(c.epsilon), delta), c.describe()

    def tangent(q0: float) -> SupportingLine:
        line = supporting_line(c, c.upper(q0), q0, orientation="upper")
        return SupportingLine(max(float(-line.cq), 0.0), max(float(line.c0), 0.0))

    return tangent, c.describe()


@dataclass
class SequentialAuditResult:
    """What a sequential audit found. ``rejected``: the claim is refuted at level α (anytime-valid)."""

    claim: str
    alpha: float
    rejected: bool
    pairs_used: int
    pairs_drawn: int
    max_pairs: int
    log_wealth: float
    log_threshold: float
    max_log_wealth: float
    seconds: float
    statement: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _scalar(outputs: Any, side: str) -> np.ndarray:
    arr = np.asarray(outputs, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"the sequential audit needs one real number per output; the outputs on {side} have shape "
                         f"{tuple(arr.shape[1:])}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"the outputs on {side} hold a non-finite number")
    return arr


def statement(result: SequentialAuditResult) -> str:
    pct = f"{100 * (1 - result.alpha):g}%"
    if result.rejected:
        return (f"Refuted: the claim {result.claim} is rejected after {result.pairs_used:,} pairs (wealth "
                f"{math.exp(min(result.log_wealth, 700)):.3g} ≥ 1/α = {1 / result.alpha:g}), a level-{result.alpha:g} "
                "test valid at every number of pairs (one-pair e-process, method.md §13.10).")
    return (f"Not refuted: {result.pairs_used:,} pairs did not reject the claim {result.claim} at level {result.alpha:g} "
            f"(largest wealth {math.exp(min(result.max_log_wealth, 700)):.3g} against 1/α = {1 / result.alpha:g}). "
            f"This does not show that the claim holds: other pairs, or more of this one, may; it is not a {pct} "
            "statement that the mechanism is private.")


async def sequential_pair_audit(endpoint: MechanismEndpoint, x: Any, x_prime: Any, claim: dict[str, Any], *,
                                alpha: float = 0.05, max_pairs: int = 10_000, batch: int = 100,
                                http_config: SafeHttpConfig,
                                progress: Callable[[int, float], Any] | None = None,
                                sample: Callable[[Any, int], Any] | None = None) -> SequentialAuditResult:
    """Bet on (M(x), M(x')) one pair at a time; stop at the first rejection or after ``max_pairs``.

    ``sample(database, n)`` (async) draws outputs; by default through the safe sampling client.
    ``progress(pairs_used, log_wealth)`` is called after every batch.
    """
    if not 0 < alpha < 1:
        raise ValueError("alpha must lie in (0, 1)")
    if max_pairs < 3 or batch < 1:
        raise ValueError("max_pairs must be at least 3 and batch at least 1")
    line, words = claim_line(claim)
    auditor = OnePairAuditor(alpha, line)
    started = time.perf_counter()
    drawn = 0
    max_log_w = 0.0

    async def run(draw: Callable[[Any, int], Any]) -> None:
        nonlocal drawn, max_log_w
        while auditor.rejected_at is None and drawn < max_pairs:
            k = min(batch, max_pairs - drawn)
            xs, ys = _scalar(await draw(x, k), "x"), _scalar(await draw(x_prime, k), "x'")
            if xs.size != k or ys.size != k:
                raise ValueError(f"asked for {k} outputs per database, got {xs.size} and {ys.size}")
            drawn += k
            for a, b in zip(xs, ys):
                auditor.update(float(a), float(b))
                max_log_w = max(max_log_w, auditor.log_w)
                if auditor.rejected_at is not None:
                    break
            if progress is not None:
                progress(auditor.t, auditor.log_w)

    if sample is not None:
        await run(sample)
    else:
        async with SamplingClient(config=SamplingClientConfig(deadline_seconds=600), http_config=http_config) as client:
            counter = {"i": 0}

            async def draw(database: Any, n: int) -> Any:
                counter["i"] += 1
                return await client.sample(endpoint, database, n, monitor_id="sequential-audit", period=0,
                                           request_id_prefix=f"sequential-{counter['i']}")

            await run(draw)
    result = SequentialAuditResult(
        claim=words, alpha=alpha, rejected=auditor.rejected_at is not None,
        pairs_used=auditor.rejected_at if auditor.rejected_at is not None else auditor.t, pairs_drawn=drawn,
        max_pairs=max_pairs, log_wealth=float(auditor.log_w), log_threshold=float(auditor.threshold),
        max_log_wealth=float(max_log_w), seconds=time.perf_counter() - started, statement="")
    result.statement = statement(result)
    return result
