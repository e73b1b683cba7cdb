"""Screening: successive halving over the candidate pairs (docs/search.md §3.2).

Successive halving (Jamieson & Talwalkar, AISTATS 2016, Algorithm 1; the halving of Hyperband,
Li et al., JMLR 2018): every pair in play gets ``n_r`` outputs per database, is scored, and the
best ``1/η`` go on to the next rung with ``η`` times more outputs, until ``survivors`` remain or
the screening budget is spent. Outputs drawn for a database at one rung are kept for the next,
and a database shared by several pairs (a Halton base and its neighbours) is drawn once.

The cheap score is the audit engine's own ranking criterion (app.stats.candidates.ranking_score:
the normal approximation of the held-out test's power to refute the claim, with the winner's-
curse penalty), of the best candidate event of the pair on its outputs so far: DP-Sniper's
thresholded classifier once few pairs remain, the interval/tail/set families before.

Screening samples only choose. They are never used to certify (app.search.certify draws fresh
ones), so the scores need no level and the halving needs no correction. After every rung (the
probe rung included) ``after_rung`` may run a staged test of the best pairs on fresh outputs
(app.search.certify.staged_test); when it certifies, screening stops (``stopped: "certified"``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from app.sampling.protocol import database_key
from app.search.draws import SearchDraws
from app.search.pairs import CandidatePair
from app.stats.candidates import Candidate, ProposalSettings, propose
from app.stats.shapes import OutputShape, n_outputs

__all__ = ["ScreenedPair", "ScreeningSettings", "pair_score", "successive_halving"]


@dataclass(frozen=True)
class ScreeningSettings:
    first_rung: int = 1_000
    eta: int = 2
    survivors: int = 4
    max_per_database: int = 64_000
    #: learned events (a classifier per pair) once at most this many pairs remain
    learned_below: int = 4
    #: quantiles of the interval and tail events while screening (the engine uses 48): a coarser
    #: grid ranks pairs nearly as well at a quarter of the cost on vector outputs
    grid: int = 16
    #: a probe rung of this many outputs per database before the halving (0: none); it eliminates
    #: nothing, and a violation that is already clear there is certified by the first staged test
    probe: int = 200

    def __post_init__(self) -> None:
        if self.first_rung < 100 or self.eta < 2 or self.survivors < 1:
            raise ValueError("first_rung >= 100, eta >= 2 and survivors >= 1")
        if self.probe and not 50 <= self.probe < self.first_rung:
            raise ValueError("probe must be 0 or in [50, first_rung)")


@dataclass
class ScreenedPair:
    pair: CandidatePair
    score: float = -math.inf
    rung: int = -1
    n: int = 0
    event: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.pair.to_dict(), "score": self.score if math.isfinite(self.score) else None,
                "rung": self.rung, "n_per_database": self.n, "event": self.event}


def pair_score(x: Any, y: Any, shape: OutputShape, settings: ProposalSettings) -> tuple[float, Candidate | None]:
    """The best candidate event of a pair on its outputs, and its ranking score (−inf if none)."""
    try:
        cands = propose(x, y, shape, settings)
    except (ValueError, FloatingPointError):
        return -math.inf, None
    if not cands:
        return -math.inf, None
    return float(cands[0].predicted), cands[0]


@dataclass
class Screening:
    ranked: list[ScreenedPair]
    rungs: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = "survivors"
    seconds: float = 0.0


async def successive_halving(draws: SearchDraws, pairs: list[CandidatePair], shape: OutputShape,
                             proposal: ProposalSettings, settings: ScreeningSettings, *, budget: int,
                             deadline: float | None = None,
                             progress: Callable[[str], Any] | None = None,
                             after_rung: Callable[[int, list[ScreenedPair]], Awaitable[bool]] | None = None
                             ) -> Screening:
    """Rank ``pairs`` by successive halving within ``budget`` outputs (module docstring).

    ``await after_rung(r, ranked_pairs_in_play)`` (optional) runs after every rung's scoring (the
    staged certification); when it answers True, screening stops there (``stopped: "certified"``).
    Its draws are not screening draws and do not count against ``budget``."""
    started = time.perf_counter()
    entries = [ScreenedPair(p) for p in pairs]
    alive = list(entries)
    rungs: list[dict[str, Any]] = []
    probing = bool(settings.probe)
    n = settings.probe if probing else settings.first_rung
    spent0 = draws.used["screening"]
    stopped = "survivors"
    r = 0
    while alive:
        draws.check_cancelled()
        if deadline is not None and time.monotonic() >= deadline:
            stopped = "time limit"
            break
        dbs = {database_key(db): db for e in alive for db in (e.pair.x, e.pair.x_prime)}
        have = {k: (n_outputs(draws.store[k]) if k in draws.store else 0) for k in dbs}
        cost = sum(max(0, n - h) for k, h in have.items() if not draws.failed(dbs[k]))
        left = budget - (draws.used["screening"] - spent0)
        if cost > left:
            if r > 0:
                stopped = "budget"
                break
            # the first rung must fit: fewer outputs per database (at least 100), else fewer pairs
            n = max(100, left // max(1, len(dbs)))
            if n * len(dbs) > left:
                keep = max(1, int(left // (2 * n)))
                alive = alive[:keep]
                dbs = {database_key(db): db for e in alive for db in (e.pair.x, e.pair.x_prime)}
        await draws.top_up(list(dbs.values()), n, "screening", settings.max_per_database)
        alive = [e for e in alive if not draws.failed(e.pair.x) and not draws.failed(e.pair.x_prime)]
        if not alive:
            stopped = "every pair failed"
            break
        prop = replace(proposal, learned=proposal.learned and len(alive) <= settings.learned_below,
                       seed=proposal.seed + r, grid=min(proposal.grid, settings.grid))

        def score_all() -> None:
            for e in alive:
                x, y = draws.store[database_key(e.pair.x)], draws.store[database_key(e.pair.x_prime)]
                e.score, cand = pair_score(x, y, shape, prop)
                e.rung, e.n = r, min(n_outputs(x), n_outputs(y))
                e.event = None if cand is None else cand.event.describe()

        await asyncio.to_thread(score_all)
        alive.sort(key=lambda e: e.score, reverse=True)
        best = alive[0]
        rungs.append({"rung": r, "pairs": len(alive), "databases": len(dbs), "n_per_database": n,
                      "best_score": best.score if math.isfinite(best.score) else None,
                      "best_event": best.event, "best_pair_source": best.pair.source})
        if progress is not None:
            out = progress(f"screening rung {r}: {len(alive)} pairs at {n:,} outputs per database")
            if asyncio.iscoroutine(out):
                await out
        if after_rung is not None and await after_rung(r, [e for e in alive if math.isfinite(e.score)]):
            stopped = "certified"
            rungs[-1]["certified"] = True
            break
        if probing:
            probing = False
            n = settings.first_rung
            r += 1
            continue
        if len(alive) <= settings.survivors:
            break
        alive = alive[: max(settings.survivors, math.ceil(len(alive) / settings.eta))]
        draws.forget({database_key(db) for e in alive for db in (e.pair.x, e.pair.x_prime)})
        n *= settings.eta
        r += 1
    ranked = sorted(entries, key=lambda e: (e.rung, e.score), reverse=True)
    ranked = [e for e in ranked if e.rung >= 0]
    return Screening(ranked=ranked, rungs=rungs, stopped=stopped, seconds=round(time.perf_counter() - started, 3))
