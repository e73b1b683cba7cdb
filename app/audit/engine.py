"""The audit engine: sample in rounds until a claim is refuted at level α or the budget is spent
(docs/audit.md §4).

Round 0 (the pilot) draws ``first_round`` outputs on every database of the candidate pairs; they
only choose. Round r = 1, 2, … R draws ``first_round·2^(r−1)`` **fresh** outputs per database of
the pairs still in play:

1. on everything drawn before round r (the choosing data), rank the pairs and their candidate
   events (app.stats.candidates: projections, lattice point sets, tails, MPL's t̂, learned
   events), keep the ``keep_pairs`` best pairs and the ``events_per_round`` best events; with
   ``rescore_late`` (the default) the late rounds re-rank the candidates on older outputs that did
   not choose them (at most ``RESCORE_BYTES`` of them), beside the events tested before (on their
   held-out counts), and prune the pairs on that ranking (:func:`_rescored`);
2. test each event on round r's fresh outputs only (app.stats.heldout.test_claim) at level
   α_r / K, where α_r = α·2^(r−1)/(2^R − 1) (so Σ_r α_r = α: more level where there are more
   samples);
3. stop as soon as a test refutes the claim; else round r's outputs join the choosing data.

No event is ever tested on the samples that chose it, and the union bound over events and rounds
keeps the probability of any false refutation ≤ α, whenever the engine stops (early stopping
included). The reported LB, the largest bound over all tests, is a 1 − α lower confidence bound
on ε. MPL's ε̂ (seed 003, Algorithm 3) on all the chosen pair's outputs is the point estimate.

The engine is quiet (``logging`` only), reports progress through a callback, and checks a
cancellation flag between draws and rounds, so the service can run it as a job.
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
import json
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from app.sampling.timing import DeadlineReached
from app.stats.candidates import Candidate, ProposalSettings, propose, ranking_score
from app.stats.claims import Claim, PureDP, claimed_delta, claimed_epsilon
from app.stats.events import count_many, event_contains
from app.stats.heldout import Counts, test_claim
from app.stats.shapes import (
    KeyedSamples,
    ListSamples,
    OutputShape,
    concat_outputs,
    n_outputs,
    outputs_nbytes,
    own_outputs,
    take_outputs,
)

__all__ = ["AuditCancelled", "AuditResult", "AuditSettings", "Progress", "Sampler", "run_engine", "round_schedule"]

log = logging.getLogger("dpwatch.audit")

#: ``await sampler(database, n)`` → n outputs in the canonical form of the shape.
Sampler = Callable[[Any, int], Awaitable[Any]]
#: A flag the engine polls: an ``asyncio.Event``/``threading.Event`` (set = cancel) or a callable.
CancelFlag = Any

DEFAULT_BUDGET = 4_096_000
"""Outputs per database at most (the pilot plus all rounds): 2 000·2¹¹, eleven rounds. Flagrant
violations stop after one or two rounds (a few thousand outputs); violations of 10–20× the
claim's loss on rare events need the last rounds."""
#: Choosing outputs per database before pairs are pruned to ``keep_pairs``.
PRUNE_AFTER = 60_000
#: Outputs per sampler call while drawing a held-out round.
CHUNK = 250_000
DEFAULT_FIRST_ROUND = 2_000
#: Choosing data kept per database (the most recent), to bound memory and selection time.
MAX_CHOOSING = 100_000
#: Bytes of outputs kept, beside the choosing data, to re-rank the candidates on (the ones drawn
#: just before the choosing data, which did not choose the events they rank): in all, split evenly
#: over the databases in play, the most recent kept (SVT 3's vectors of 10 floats, 80 bytes each:
#: about 200 000 per database while its 10 databases are in play, 500 000 once 4 are). With it,
#: SVT 3's audit peaks at about 510 MiB resident, within the jobs' 768 MiB (docs/benchmarks.md).
RESCORE_BYTES = 160 * 2**20
#: Re-ranking starts once every database in play holds this many such outputs.
RESCORE_MIN = 100_000
#: Candidates per pair re-ranked: the best of each (statistic, family) first, then by their score.
RESCORE_TOP = 48
#: Outputs per side on which MPL's ε̂ is computed at the end.
MPL_SAMPLES = 100_000


class AuditCancelled(Exception):
    """The audit was cancelled between two draws or rounds."""


class _OutOfTime(Exception):
    """The deadline passed: the engine stops and reports the tests it completed."""


@dataclass(frozen=True)
class AuditSettings:
    alpha: float = 0.05
    budget: int = DEFAULT_BUDGET  # outputs per database, pilot included
    first_round: int = DEFAULT_FIRST_ROUND
    events_per_round: int = 4
    keep_pairs: int = 3
    region: tuple[float, float] | None = None
    learned: bool = True
    stop_when_refuted: bool = True
    #: late re-ranking (on by default): keep up to ``RESCORE_BYTES`` of the outputs drawn before the
    #: choosing data (over the databases in play), re-rank the candidates on them from the first
    #: round that has ``RESCORE_MIN`` of them per database (:func:`_rescored`) and prune the pairs
    #: only then (on held-apart halves at ``PRUNE_AFTER`` when the bytes cannot hold that many).
    #: Off: pruning at ``PRUNE_AFTER`` choosing outputs on held-apart halves, the engine before it
    #: (the search's certification, whose budget split assumes it). docs/audit.md §4,
    #: docs/benchmarks.md "Late re-ranking".
    rescore_late: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must lie in (0, 1)")
        if self.first_round < 100:
            raise ValueError("first_round must be at least 100")
        if self.budget < 2 * self.first_round:
            raise ValueError(f"the budget ({self.budget}) must hold at least the pilot and one round "
                             f"(2 × first_round = {2 * self.first_round} outputs per database)")
        if self.events_per_round < 1 or self.keep_pairs < 1:
            raise ValueError("events_per_round and keep_pairs must be >= 1")
        if self.region is not None:
            lo, hi = self.region
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError("region must be (low, high) with low < high, both finite")


def round_schedule(settings: AuditSettings) -> list[tuple[int, float]]:
    """``[(n_r, α_r)]`` for r = 1..R: fresh outputs per database and level of each round.

    The pilot draws n₀ = first_round; round r draws n₀·2^(r−1), so that after round r every
    database has n₀·2^r outputs; R is the largest with n₀·2^R ≤ budget. α_r ∝ n_r, Σ α_r = α."""
    n0 = settings.first_round
    rounds = int(math.floor(math.log2(settings.budget / n0)))
    sizes = [n0 * 2 ** (r - 1) for r in range(1, rounds + 1)]
    total = sum(sizes)
    return [(n, settings.alpha * n / total) for n in sizes]


@dataclass
class Progress:
    """What the progress callback receives after each draw and round."""

    round: int
    rounds: int
    samples_used: int
    budget_samples: int
    lower_bound: float | None
    seconds: float
    message: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AuditResult:
    claim: str
    claimed_epsilon: float | None
    alpha: float
    shape: dict[str, Any]
    refuted: bool
    lower_bound: float | None
    epsilon_hat: float | None
    mpl: dict[str, Any] | None
    best: dict[str, Any] | None
    rounds: list[dict[str, Any]]
    tests: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    samples_used: int
    samples_per_database: dict[str, int]
    seconds: float
    stopped: str
    note: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    power: list[dict[str, Any]] | None = None  # not refuted: what the run would have caught (app.audit.power)

    @property
    def verdict(self) -> str:
        return "refuted" if self.refuted else "not refuted"

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["verdict"] = self.verdict
        return out


def _freed_arrays_leave() -> None:
    """Ask glibc to map every allocation of 1 MB or more on its own, so that freeing it returns it
    to the system. By default glibc raises that threshold to the largest block freed so far (up to
    32 MB), after which the engine's chunks of outputs (250 000 SVT 3 vectors: 20 MB) and the
    proposal's temporaries come from heap arenas that stay resident once freed: about 300 MiB of
    SVT 3's peak (docs/benchmarks.md, "Late re-ranking as the default"). It sets a process-wide
    allocator option and costs page faults (system time); elsewhere than glibc it does nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _key(db: Any) -> str:
    return json.dumps(db, sort_keys=True, separators=(",", ":"))


def _cancelled(flag: CancelFlag) -> bool:
    if flag is None:
        return False
    if callable(flag):
        return bool(flag())
    is_set = getattr(flag, "is_set", None)
    return bool(is_set()) if is_set is not None else False


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _cap(outputs: Any, limit: int) -> Any:
    """The last ``limit`` outputs, as a copy when some are dropped (a view would keep them alive)."""
    n = n_outputs(outputs)
    return outputs if n <= limit else own_outputs(take_outputs(outputs, slice(n - limit, n)))


def _count(event: Any, outputs: Any) -> int:
    return int(np.count_nonzero(event_contains(event, outputs)))


def _count_chunks(events: Sequence[Any], chunks: Sequence[Any]) -> list[int]:
    """The count of each event in all the chunks (:func:`app.stats.events.count_many`)."""
    total = [0] * len(events)
    for chunk in chunks:
        total = [t + c for t, c in zip(total, count_many(events, chunk))]
    return total


def _n_chunks(chunks: Sequence[Any]) -> int:
    return sum(n_outputs(c) for c in chunks)


def _store(chunks: list[Any], pushed: Any, cap: int) -> None:
    """Append ``pushed`` (a copy of its own) to a database's older outputs (oldest first) and drop
    the oldest until they hold at most ``cap`` bytes."""
    chunks.append(own_outputs(pushed))
    total = sum(outputs_nbytes(c) for c in chunks)
    while chunks and total > cap:
        first = chunks[0]
        size, n = outputs_nbytes(first), n_outputs(first)
        if n == 0 or total - size >= cap:
            chunks.pop(0)
            total -= size
        else:
            drop = min(n, math.ceil((total - cap) * n / size))
            chunks[0] = own_outputs(take_outputs(first, slice(drop, n)))
            total += outputs_nbytes(chunks[0]) - size


def _held_apart_score(x: Any, y: Any, shape: OutputShape, prop: ProposalSettings, top: int,
                      region: tuple[float, float] | None) -> float:
    """A pair's score for pruning, free of the winner's curse: the candidates are proposed on one
    half of the choosing outputs (even positions) and the best ``top`` of them are scored
    (:func:`app.stats.candidates.ranking_score`) on the other half, whose counts did not choose
    them; the pair's score is the best of those. (Ranked on the same outputs that chose them, the
    narrow interval events of some pairs looked better than they were, and the pairs whose events
    carry the loss left play; docs/benchmarks.md, SVT 3.)"""
    nx, ny = n_outputs(x), n_outputs(y)
    hx, hy = np.arange(nx) % 2 == 0, np.arange(ny) % 2 == 0
    ax, ay, bx, by = take_outputs(x, hx), take_outputs(y, hy), take_outputs(x, ~hx), take_outputs(y, ~hy)
    cands = propose(ax, ay, shape, prop, mpl_event=_mpl_neighbourhood(ax, ay, shape, region))[:top]
    nbx, nby = n_outputs(bx), n_outputs(by)
    best = -math.inf
    for cand in cands:
        cx, cy = _count(cand.event, bx), _count(cand.event, by)
        a, na, b, nb = (cx, nbx, cy, nby) if cand.x_first else (cy, nby, cx, nbx)
        best = max(best, float(ranking_score(a, na, b, nb, prop)))
    return best


def _event_key(cand: Candidate) -> str:
    return json.dumps([cand.event.model_dump(mode="json"), cand.x_first], sort_keys=True)


def _rescored(cands: Sequence[Candidate], carried: Sequence[tuple[Candidate, int, int, int, int]],
              x: Sequence[Any], y: Sequence[Any], prop: ProposalSettings) -> list[Candidate]:
    """The pair's candidates re-ranked on outputs that did not choose them, best first: the best
    proposed candidate of each (statistic, family), then the next best, up to ``RESCORE_TOP``, each
    scored (:func:`ranking_score`, in its orientation) on its counts in ``x``, ``y`` (each a list
    of chunks of outputs, counted chunk by chunk); and the
    events ``carried`` from the pair's earlier tests ``(candidate, a, na, b, nb)``, scored on the
    held-out counts of those tests (a/na on the likelier side). Only these are returned: the other
    candidates' scores come from the outputs that chose them and are not comparable.

    The choosing data are the latest ``MAX_CHOOSING`` outputs; ``x`` and ``y`` are the ones drawn
    before them (at most ``RESCORE_BYTES`` over the databases in play), so the count of a proposed candidate there is free of the
    winner's curse of its choice among thousands. They may have chosen the carried events (chosen
    in earlier rounds), which is why those are scored on their held-out counts instead. (SVT 3's
    late rounds tested narrow intervals chosen on 100 000 outputs whose held-out bounds were ≈ 0,
    while a first-entry event that had reached LB 0.094 on 10⁶ fresh outputs was never tested
    again; docs/benchmarks.md, SVT 3.)"""
    pool: list[Candidate] = []
    seen: set[str] = set()

    def add(c: Candidate) -> None:
        key = _event_key(c)
        if key not in seen:
            seen.add(key)
            pool.append(c)

    groups: set[tuple[str, str]] = set()
    for c in cands:
        if (c.statistic, c.family) not in groups and len(pool) < RESCORE_TOP:
            groups.add((c.statistic, c.family))
            add(c)
    for c in cands:
        if len(pool) >= RESCORE_TOP:
            break
        add(c)
    nx, ny = _n_chunks(x), _n_chunks(y)
    counted: list[tuple[Candidate, int, int, int, int]] = []
    events = [c.event for c in pool]
    for c, cx, cy in zip(pool, _count_chunks(events, x), _count_chunks(events, y)):
        counted.append((c, *((cx, nx, cy, ny) if c.x_first else (cy, ny, cx, nx))))
    for c, a, na, b, nb in carried:
        if (key := _event_key(c)) not in seen:
            seen.add(key)
            counted.append((c, a, na, b, nb))
    out: list[Candidate] = []
    for c, a, na, b, nb in counted:
        score = float(ranking_score(a, na, b, nb, prop))
        if math.isfinite(score):
            out.append(replace(c, p_hat=a / na, q_hat=b / nb, predicted=score,
                               extra={**c.extra, "ranked_on": int(min(na, nb))}))
    out.sort(key=lambda c: c.predicted, reverse=True)
    return out


def _mpl_neighbourhood(x: Any, y: Any, shape: OutputShape, region: tuple[float, float] | None) -> Any:
    """The event ``t̂ ± h`` around MPL's t̂ (seed 003 §IV: the loss peaks at t̂) for real scalars,
    from DPL (Algorithm 3) on at most 20 000 choosing outputs per side; ``None`` otherwise."""
    from app.stats.events import Interval
    from app.stats.mpl import MPLParams, dpl

    if shape.container != "scalar" or shape.values != "real" or shape.lattice is not None:
        return None
    sx, sy = np.asarray(x, dtype=np.float64)[-20_000:], np.asarray(y, dtype=np.float64)[-20_000:]
    sx, sy = sx[np.isfinite(sx)], sy[np.isfinite(sy)]
    if sx.size < 100 or sy.size < 100:
        return None
    try:
        res = dpl(sx, sy, "continuous", MPLParams(n=min(sx.size, sy.size), N=2, region=region))
    except (ValueError, FloatingPointError):
        return None
    h = max(res.bandwidth_x or 0.0, res.bandwidth_xp or 0.0)
    t = float(res.t_hat)
    return Interval(low=t - h, high=t + h) if h > 0 else None


def _mpl_estimate(x: Any, y: Any, shape: OutputShape, region: tuple[float, float] | None,
                  best: Candidate | None) -> dict[str, Any] | None:
    """MPL's ε̂ (seed 003, Algorithm 3) on the chosen pair: TDDE for discrete outputs (integers,
    labels, a lattice, atoms), TKDE for real scalars; for vectors and lists, on the statistic of
    the best event (a projection), since a vector of reals is not a table row."""
    from app.stats.mpl import MPLParams, dpl

    x = _cap(x, MPL_SAMPLES)
    y = _cap(y, MPL_SAMPLES)
    if shape.container == "keyed":
        return _mpl_keyed(x, y)
    try:
        if shape.container == "scalar":
            sx, sy = np.asarray(x), np.asarray(y)
            on = "output"
        else:
            proj = getattr(getattr(best, "event", None), "projection", None)
            if proj is None:
                return None
            sx, sy = proj.apply(x), proj.apply(y)
            sx, sy = sx[~np.isnan(sx)], sy[~np.isnan(sy)]
            on = proj.describe()
            if sx.size < 100 or sy.size < 100:
                return None
        if sx.dtype == object or shape.values in ("integer", "label", "discrete"):
            kind, data = "discrete", (sx, sy)
        elif shape.lattice is not None and shape.container == "scalar":
            kind = "discrete"
            data = (shape.lattice.index(sx).astype(np.int64), shape.lattice.index(sy).astype(np.int64))
        else:
            sxf, syf = sx.astype(np.float64), sy.astype(np.float64)
            pooled = np.concatenate([sxf, syf])
            _, counts = np.unique(pooled, return_counts=True)
            atoms = counts[counts > 1].sum() / pooled.size >= 0.5
            integral = bool(np.all(pooled == np.round(pooled)))
            if atoms or integral:
                kind, data = "discrete", (sxf, syf)
            else:
                kind, data = "continuous", (sxf, syf)
        n = min(data[0].shape[0], data[1].shape[0])
        outcomes = None
        if kind == "discrete" and data[0].dtype != object:
            # the bounded region C for discrete outputs: the outcomes inside the central range of the
            # pooled sample (or the given region); the far tails' frequencies are mostly noise
            pooled = np.concatenate([data[0][:n], data[1][:n]]).astype(np.float64)
            lo, hi = region if region is not None and shape.container == "scalar" and shape.lattice is None \
                else np.quantile(pooled, [0.005, 0.995])
            if shape.lattice is not None and region is not None and shape.container == "scalar":
                lo, hi = shape.lattice.index(region[0]), shape.lattice.index(region[1])
            values, counts = np.unique(pooled[(pooled >= lo) & (pooled <= hi)], return_counts=True)
            # and among them those seen often enough that ℓ̂ is not mostly noise: the max over
            # hundreds of rare outcomes' log-ratios is far above ε (sd of ℓ̂ ≈ √(2/count))
            for floor in (1000, 100, 1):
                if np.count_nonzero(counts >= floor) >= 2:
                    values = values[counts >= floor]
                    break
            if values.size >= 2:
                outcomes = values.astype(data[0].dtype).tolist()
        params = MPLParams(n=max(2, n), N=2, tau=1e-4 if n >= 50_000 else 1e-3, outcomes=outcomes,
                           region=region if (kind == "continuous" and shape.container == "scalar") else None)
        res = dpl(data[0][:n], data[1][:n], kind, params)
        return {"epsilon_hat": float(res.epsilon_hat), "kind": kind, "on": on,
                "t_hat": res.to_dict(include_curve=False)["t_hat"], "samples": int(n)}
    except (ValueError, FloatingPointError) as exc:
        log.info("mpl estimate skipped: %s", exc)
        return None


def _mpl_keyed(x: KeyedSamples, y: KeyedSamples) -> dict[str, Any] | None:
    """MPL's ε̂ on keyed outputs: on the statistic (key set, count, one key) with the largest ε̂
    (app.stats.mpl.dpl_best_keyed)."""
    from app.stats.mpl import MPLParams, dpl_best_keyed

    n = min(len(x), len(y))
    if n < 100:
        return None
    try:
        stat, res = dpl_best_keyed(x[:n], y[:n], MPLParams(n=max(2, n), N=2, tau=1e-4 if n >= 50_000 else 1e-3))
    except (ValueError, FloatingPointError) as exc:
        log.info("mpl estimate skipped: %s", exc)
        return None
    return {"epsilon_hat": float(res.epsilon_hat), "kind": stat.estimator, "on": stat.describe(),
            "t_hat": res.to_dict(include_curve=False)["t_hat"], "samples": int(n)}


async def run_engine(sampler: Sampler, pairs: Sequence[tuple[Any, Any]], shape: OutputShape,
                     claim: Claim | None = None, settings: AuditSettings | None = None, *,
                     progress: Callable[[Progress], Any] | None = None,
                     cancel: CancelFlag = None, deadline: float | None = None) -> AuditResult:
    """Audit a mechanism (``sampler``) on neighbouring ``pairs`` for ``claim`` (module docstring).

    Without a claim the engine spends its whole budget and reports the largest ε lower bound.
    ``deadline`` (a ``time.monotonic()`` value): past it the engine stops before its next draw,
    drops the unfinished round, and reports the tests it completed (``stopped: "time limit"``);
    stopping early keeps the union bound valid. Raises :class:`AuditCancelled` when ``cancel`` is
    set, ``ValueError`` for bad input."""
    settings = settings or AuditSettings()
    if not pairs:
        raise ValueError("give at least one pair of neighbouring databases")
    _freed_arrays_leave()
    pairs = [(x, xp) for x, xp in pairs]
    claim_used: Claim = claim if claim is not None else PureDP(0.0)
    schedule = round_schedule(settings)
    started = time.perf_counter()
    keys: dict[str, Any] = {}
    for x, xp in pairs:
        keys.setdefault(_key(x), x)
        keys.setdefault(_key(xp), xp)
    data: dict[str, Any] = {}
    # the outputs drawn just before each database's choosing data, in chunks, oldest first (at most
    # RESCORE_BYTES over the databases in play): they re-rank the candidates that the choosing data
    # proposed (_rescored)
    older: dict[str, list[Any]] = {}
    # per pair and event, the events tested so far with their held-out counts summed over their tests
    # (likelier side first: a, na, b, nb), re-ranked with the proposed candidates
    tested: dict[int, dict[str, tuple[Candidate, int, int, int, int]]] = {}
    drawn: dict[str, int] = {k: 0 for k in keys}
    best_lb = -math.inf
    best: dict[str, Any] | None = None
    best_candidate: Candidate | None = None
    best_pair: int | None = None
    rounds_out: list[dict[str, Any]] = []
    tests_out: list[dict[str, Any]] = []
    budget_samples = settings.budget * len(keys)
    refuted = False
    stopped = "budget"

    async def report(r: int, message: str) -> None:
        if progress is None:
            return
        p = Progress(round=r, rounds=len(schedule), samples_used=sum(drawn.values()), budget_samples=budget_samples,
                     lower_bound=_finite(best_lb), seconds=round(time.perf_counter() - started, 3), message=message)
        out = progress(p)
        if inspect.isawaitable(out):
            await out

    def check_time() -> None:
        if deadline is not None and time.monotonic() >= deadline:
            raise _OutOfTime()

    def databases_of(indices: Sequence[int]) -> list[str]:
        """The databases (keys of ``data``) of the pairs ``indices``, each once."""
        return sorted({_key(db) for i in indices for db in pairs[i]})

    async def draw(needed: list[str], n: int, r: int) -> dict[str, Any]:
        fresh: dict[str, Any] = {}
        for i, k in enumerate(needed):
            if _cancelled(cancel):
                raise AuditCancelled("cancelled")
            check_time()
            out = await sampler(keys[k], n)
            if n_outputs(out) != n:
                raise ValueError(f"the sampler returned {n_outputs(out)} outputs instead of {n}")
            fresh[k] = out
            drawn[k] += n
            await report(r, f"round {r}: drew {n} outputs on database {i + 1}/{len(needed)}")
        return fresh

    def keep(k: str, out: Any, cap: int) -> None:
        """Round outputs join the choosing data; with ``rescore_late`` the ones they push out of it
        go to ``older`` (at most ``cap`` bytes for this database)."""
        both = concat_outputs([data[k], out])
        data[k] = _cap(both, MAX_CHOOSING)
        n = n_outputs(both)
        if settings.rescore_late and n > MAX_CHOOSING:
            _store(older.setdefault(k, []), take_outputs(both, slice(0, n - MAX_CHOOSING)), cap)

    async def _held_out_draws(needed: list[str], n_r: int, r: int, chosen: list[tuple[int, Candidate]],
                              hits: list[list[int]]) -> None:
        """Round r's held-out draw, in chunks: count the chosen events as the outputs arrive, then
        keep the outputs as choosing data for the next rounds (memory stays bounded)."""
        for d, k in enumerate(needed):
            remaining = n_r
            while remaining > 0:
                if _cancelled(cancel):
                    raise AuditCancelled("cancelled")
                check_time()
                size = min(CHUNK, remaining)
                out = await sampler(keys[k], size)
                if n_outputs(out) != size:
                    raise ValueError(f"the sampler returned {n_outputs(out)} outputs instead of {size}")
                drawn[k] += size
                remaining -= size
                for j, (i, cand) in enumerate(chosen):
                    for side, db in enumerate(pairs[i]):
                        if _key(db) == k:
                            hits[j][side] += _count(cand.event, out)
                keep(k, out, RESCORE_BYTES // len(needed))
                await report(r, f"round {r}: {drawn[k]:,} outputs on database {d + 1}/{len(needed)}")

    log.info("audit: %d pairs, %d databases, %d rounds, claim %s", len(pairs), len(keys), len(schedule),
             claim_used.describe())
    try:
        pilot = await draw(list(keys), settings.first_round, 0)
    except (_OutOfTime, DeadlineReached) as exc:
        pilot, schedule, stopped = {}, [], _time_stop(exc)
    data.update(pilot)
    active = list(range(len(pairs)))
    # the choice of round r sees first_round·2^(r−1) outputs per database (the pilot and rounds < r)
    prune_on_store = settings.rescore_late and any(
        settings.first_round * 2 ** (r - 1) - MAX_CHOOSING >= RESCORE_MIN for r in range(1, len(schedule) + 1))
    nothing_varies = False  # no event could be chosen in the latest round
    for r, (n_r, alpha_r) in enumerate(schedule, start=1):
        if _cancelled(cancel):
            raise AuditCancelled("cancelled")
        if deadline is not None and time.monotonic() >= deadline:
            stopped = "time limit"
            break
        k_events = settings.events_per_round
        level = alpha_r / k_events
        prop = ProposalSettings(n_test=n_r, level=level, delta=claimed_delta(claim_used),
                                target=claimed_epsilon(claim),
                                region=settings.region, learned=settings.learned, seed=settings.seed + r)

        def choose() -> tuple[list[tuple[int, Candidate]], list[int], int | None]:
            found: list[tuple[int, Candidate]] = []
            per_pair: list[tuple[float, int]] = []
            in_play = databases_of(active)
            rescore = settings.rescore_late and all(_n_chunks(older.get(k, [])) >= RESCORE_MIN for k in in_play)
            # the pairs wait for re-ranking to be pruned only if the store can hold RESCORE_MIN outputs
            # of every database in play (outputs are as large as the choosing data's); else they are
            # pruned on held-apart halves as without it
            wait = prune_on_store and all(
                outputs_nbytes(data[k]) * RESCORE_MIN <= (RESCORE_BYTES // len(in_play)) * n_outputs(data[k])
                for k in in_play)
            for i in active:
                x, xp = pairs[i]
                cands = propose(data[_key(x)], data[_key(xp)], shape, prop,
                                mpl_event=_mpl_neighbourhood(data[_key(x)], data[_key(xp)], shape, settings.region))
                if rescore:
                    cands = _rescored(cands, list(tested.get(i, {}).values()), older[_key(x)], older[_key(xp)],
                                      prop)
                if cands:
                    per_pair.append((cands[0].predicted, i))
                    found.extend((i, c) for c in cands[: 2 * k_events])
            # prune only once the choosing data can tell the pairs apart: on a few thousand outputs
            # every pair's predicted bound is ≤ 0 and the ranking would be a coin toss
            if wait or rescore:
                # every pair's candidates are ranked on outputs that did not choose them
                informative = rescore
            else:
                informative = min(n_outputs(data[_key(db)]) for i in active for db in pairs[i]) >= PRUNE_AFTER
            if informative and not rescore and len(per_pair) > settings.keep_pairs:
                # the pairs that leave play now never come back: rank them on held-apart halves
                per_pair = [(_held_apart_score(data[_key(pairs[i][0])], data[_key(pairs[i][1])], shape, prop,
                                               2 * k_events, settings.region), i) for _, i in per_pair]
            per_pair.sort(reverse=True)
            keep = {i for _, i in (per_pair[: settings.keep_pairs] if informative else per_pair)}
            found = [(i, c) for i, c in found if i in keep]
            found.sort(key=lambda ic: ic[1].predicted, reverse=True)
            chosen: list[tuple[int, Candidate]] = []
            # the best event of each kept pair first, then one per (pair, statistic), then the rest:
            # many statistics encode the same thing (SVT's position of the first ⊤), and testing
            # four copies of one event spends the level for nothing
            for key in (lambda i, c: i, lambda i, c: (i, c.statistic), lambda i, c: id(c)):
                seen = {key(i, c) for i, c in chosen}
                for i, c in found:
                    if len(chosen) >= k_events:
                        break
                    if key(i, c) not in seen and not any(c is cc for _, cc in chosen):
                        chosen.append((i, c))
                        seen.add(key(i, c))
            return chosen, sorted(keep), min(_n_chunks(older[k]) for k in in_play) if rescore else None

        chosen, kept, older_outputs = await asyncio.to_thread(choose)
        if not chosen:
            # Nothing varies in the choosing data yet. A rare event (a key a release leaks once in
            # 10⁴ outputs) shows only in more outputs: draw this round's as choosing data (nothing is
            # tested, so its α_r is left unspent) and choose again in the next round.
            nothing_varies = True
            needed = databases_of(active)
            if any(drawn[k] + n_r > settings.budget for k in needed):
                break
            try:
                await _held_out_draws(needed, n_r, r, [], [])  # no events to count: the outputs only join
            except (_OutOfTime, DeadlineReached) as exc:
                stopped = _time_stop(exc)
                break
            await report(r, f"round {r}: no event varies yet; drew {n_r:,} more outputs per database to choose from")
            continue
        nothing_varies = False
        active = kept  # the kept pairs stay in play (their draws keep choosing), tested or not
        needed = databases_of(active)
        for k in list(older):
            if k not in needed:
                del older[k]  # a pair that left play never comes back
        if any(drawn[k] + n_r > settings.budget for k in needed):
            break
        hits = [[0, 0] for _ in chosen]
        try:
            await _held_out_draws(needed, n_r, r, chosen, hits)
        except (_OutOfTime, DeadlineReached) as exc:  # the round is unfinished: none of its events is tested
            stopped = _time_stop(exc)
            break
        round_tests = []
        for (i, cand), (a, b) in zip(chosen, hits):
            counts = Counts(a, n_r, b, n_r) if cand.x_first else Counts(b, n_r, a, n_r)
            res = test_claim(claim_used, counts, level)
            entry = {"round": r, "pair": i, **cand.to_dict(), "ranked_on": cand.extra.get("ranked_on"),
                     "held_out": res.to_dict(),
                     "x": pairs[i][0] if cand.x_first else pairs[i][1],
                     "x_prime": pairs[i][1] if cand.x_first else pairs[i][0]}
            round_tests.append(entry)
            tests_out.append(entry)
            if settings.rescore_late:  # the held-out counts re-rank the event in later rounds (_rescored)
                key = _event_key(cand)
                old = tested.setdefault(i, {}).get(key, (cand, 0, 0, 0, 0))
                tested[i][key] = (old[0], old[1] + counts.a, old[2] + counts.n_x, old[3] + counts.b,
                                  old[4] + counts.n_xp)
            if res.lower_bound > best_lb:
                best_lb, best, best_candidate, best_pair = res.lower_bound, entry, cand, i
            if claim is not None and res.refutes:
                refuted = True
        rounds_out.append({"round": r, "n_per_database": n_r, "alpha": alpha_r, "level_per_event": level,
                           "pairs": active, "databases": len(needed), "older_outputs": older_outputs,
                           "lower_bound": _finite(max((t["held_out"]["lower_bound"] or -math.inf) for t in round_tests))})
        await report(r, f"round {r}/{len(schedule)} tested {len(chosen)} events; LB so far {best_lb:.4g}")
        log.info("audit round %d: n=%d, LB so far %.4g", r, n_r, best_lb)
        if refuted and settings.stop_when_refuted:
            stopped = "refuted"
            break
    if stopped == "budget" and nothing_varies:
        unvaried = min(drawn[k] for k in databases_of(active))
        stopped = f"no candidate event (the outputs did not vary in {unvaried:,} outputs per database)"
    mpl = None
    # MPL's point estimate is descriptive: past the time limit it is skipped so that the run ends on time
    if best_pair is not None and (deadline is None or time.monotonic() < deadline):
        x, xp = pairs[best_pair]
        mpl = await asyncio.to_thread(_mpl_estimate, data[_key(x)], data[_key(xp)], shape, settings.region,
                                      best_candidate)
    eps_hat = None if mpl is None else mpl["epsilon_hat"]
    note = _compare(best_lb, eps_hat, claim)
    seconds = round(time.perf_counter() - started, 3)
    return AuditResult(
        claim=claim_used.describe() if claim is not None else "none (estimate only)",
        claimed_epsilon=claimed_epsilon(claim), alpha=settings.alpha, shape=shape.model_dump(mode="json"),
        refuted=refuted, lower_bound=_finite(best_lb), epsilon_hat=eps_hat, mpl=mpl, best=best, rounds=rounds_out,
        tests=tests_out, pairs=[{"x": x, "x_prime": xp} for x, xp in pairs], samples_used=sum(drawn.values()),
        samples_per_database={k: v for k, v in drawn.items()}, seconds=seconds, stopped=stopped, note=note,
        settings={"budget": settings.budget, "first_round": settings.first_round, "rounds": len(schedule),
                  "events_per_round": settings.events_per_round, "keep_pairs": settings.keep_pairs,
                  "rescore_late": settings.rescore_late, "prune_on_store": prune_on_store,
                  "rescore_bytes": RESCORE_BYTES if settings.rescore_late else None,
                  "region": settings.region})


def _time_stop(exc: Exception) -> str:
    from app.sampling.timing import RequestTimedOut

    return "a request timed out (the endpoint is too slow; no input failed)" if isinstance(exc, RequestTimedOut) \
        else "time limit"


def _compare(lb: float, eps_hat: float | None, claim: Claim | None) -> str:
    """Say which estimator is the weaker one when they disagree."""
    if eps_hat is None or not math.isfinite(lb):
        return ""
    claimed = claimed_epsilon(claim)
    if lb > eps_hat + 1e-9:
        return (f"the held-out bound LB = {lb:.3g} exceeds MPL's point estimate ε̂ = {eps_hat:.3g}: MPL is the "
                "weaker estimator here (its density estimate or region misses part of the loss)")
    if claimed is not None and eps_hat > claimed and lb <= claimed:
        return (f"MPL's ε̂ = {eps_hat:.3g} is above the claim, but ε̂ is a point estimate without a confidence "
                "level, not a test; the held-out test did not refute the claim at level α with these pairs and this "
                "budget, which does not show that the claim holds")
    return ""


def local_sampler(function: Callable[[Any, int, np.random.Generator], Any], seed: int | None = None) -> Sampler:
    """A sampler for a Python function ``f(database, n, rng)`` (tests, benchmarks), run in a thread."""
    rng = np.random.default_rng(seed)

    async def sample(database: Any, n: int) -> Any:
        out = await asyncio.to_thread(function, database, n, rng)
        return out if isinstance(out, (ListSamples, KeyedSamples)) else np.asarray(out)

    return sample
