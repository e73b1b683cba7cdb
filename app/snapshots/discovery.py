"""Finding the events worth watching (seed 003 §IV: the privacy loss peaks at t̂).

For each candidate pair (x, x'), draw ``samples`` outputs per side to run DPL, which gives ε̂
and t̂, and ``fresh_samples`` more to bound the loss at t̂ (LB, eq. 26). Each pair becomes a
candidate check: the pair, oriented so that the event is likelier under x (a check tests
p − e^ε q > 0), and a small event around t̂. Candidates are ranked by LB, then by ε̂.

The draws used here are never reused by a monitor's detector: discovery samples are separate
requests, so the detector's false-alarm guarantee is untouched by the choice of event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.sampling.client import MechanismEndpoint, SamplingClient
from app.snapshots.compute import PairSamples, compute_snapshot
from app.stats.mpl import table1_pairs

#: Limits that keep a synchronous discovery request within seconds to a minute.
MAX_PAIRS = 20
MAX_SAMPLES = 200_000
MAX_FRESH_SAMPLES = 1_000_000


@dataclass(frozen=True)
class DiscoveryOptions:
    samples: int = 20_000  # seed 003's n
    fresh_samples: int = 50_000  # seed 003's N
    alpha: float = 0.05
    epsilon: float | None = None  # a claimed ε, to flag candidates whose LB exceeds it

    def __post_init__(self) -> None:
        if not 2 <= self.samples <= MAX_SAMPLES:
            raise ValueError(f"samples must lie in [2, {MAX_SAMPLES}]")
        if not 2 <= self.fresh_samples <= MAX_FRESH_SAMPLES:
            raise ValueError(f"fresh_samples must lie in [2, {MAX_FRESH_SAMPLES}]")


def table1_candidates(k: int) -> list[tuple[Any, Any]]:
    """The query-vector pairs of seed 003 Table I for k queries (StatDP's patterns)."""
    return [(list(p.x), list(p.xp)) for p in table1_pairs(k)]


async def draw_pairs(client: SamplingClient, endpoint: MechanismEndpoint, pairs: Sequence[tuple[Any, Any]],
                     options: DiscoveryOptions, *, label: str,
                     progress: Callable[[str], None] | None = None, period: int = 0) -> list[PairSamples]:
    """n + N outputs on each distinct database of ``pairs``, split into choosing and bounding parts.

    ``period`` is sent with the requests: a monitor's discovery sends its current period, so that
    an endpoint that versions its deployment by period answers with the current one."""
    if not 1 <= len(pairs) <= MAX_PAIRS:
        raise ValueError(f"give between 1 and {MAX_PAIRS} pairs")

    keys = {}
    for x, xp in pairs:
        for db in (x, xp):
            keys.setdefault(json.dumps(db, sort_keys=True), db)
    total = options.samples + options.fresh_samples
    drawn: dict[str, np.ndarray] = {}

    async def one(i: int, key: str) -> None:
        drawn[key] = await client.sample(endpoint, keys[key], total, monitor_id=label, period=period,
                                         request_id_prefix=f"{label}-{i}")
        if progress:
            progress(f"drew {total} outputs on database {i + 1}/{len(keys)}")

    await asyncio.gather(*(one(i, k) for i, k in enumerate(keys)))
    out = []
    n = options.samples
    for x, xp in pairs:
        ax, axp = drawn[json.dumps(x, sort_keys=True)], drawn[json.dumps(xp, sort_keys=True)]
        out.append(PairSamples({"x": x, "x_prime": xp}, ax[:n], axp[:n], ax[n:], axp[n:]))
    return out


def rank_candidates(pairs: list[PairSamples], output_kind: str, options: DiscoveryOptions) -> dict[str, Any]:
    """Run MPL on every pair and turn each into a candidate check, best first."""
    result = compute_snapshot(pairs, output_kind, alpha=options.alpha,
                              epsilon=options.epsilon if options.epsilon is not None else float("inf"))
    candidates = []
    for row in result["pairs"]:
        x, xp = row["x"], row["x_prime"]
        if not row["x_denser_at_t_hat"]:
            x, xp = xp, x  # the event must be likelier under the check's x
        candidates.append({
            "x": x, "x_prime": xp, "event": row["suggested_event"], "epsilon_hat": row["epsilon_hat"],
            "t_hat": row["t_hat"], "lower_bound": row["lower_bound"],
            "exceeds_claim": None if options.epsilon is None else bool(row["lower_bound"] > options.epsilon),
            "samples": row["samples"],
        })
    candidates.sort(key=lambda c: (c["lower_bound"], c["epsilon_hat"]), reverse=True)
    for i, c in enumerate(candidates, start=1):
        c["rank"] = i
    return {"candidates": candidates, "alpha": options.alpha, "samples": options.samples,
            "fresh_samples": options.fresh_samples, "kind": result["kind"]}


async def discover(client: SamplingClient, endpoint: MechanismEndpoint, output_kind: str,
                   pairs: Sequence[tuple[Any, Any]], options: DiscoveryOptions, *, label: str = "discovery",
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    samples = await draw_pairs(client, endpoint, pairs, options, label=label, progress=progress)
    return await asyncio.to_thread(rank_candidates, samples, output_kind, options)
