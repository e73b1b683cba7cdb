"""The sequential DP test behind ``assert_dp``: batches of fresh outputs, events re-chosen before
each batch from the outputs drawn before it, one e-process per (pair, orientation, rank), and a
stop as soon as their mean reaches 1/α_seq; on the last batch, a fixed-sample test per (pair,
orientation) spends the rest of α (``_final``).

**Validity.** Each slot's wealth is a product of batch e-values (``_betting``) whose event, line
and bet were fixed before the batch was drawn; so it is a test supermartingale under the claim,
and so is the mean over slots (they share one filtration: the batches). By Ville's inequality the
sequential part fails a mechanism that satisfies the claim with probability at most
α_seq = ``_final.SEQUENTIAL_SHARE``·α, whenever it stops: after the first batch, at the budget,
or at a time limit. The final tests fail it with probability at most α − α_seq (exact p-values,
a Bonferroni share each), so the whole test with probability at most α. No output is ever tested
on the event it chose: a batch chooses nothing for itself, and only later batches are tested on
what it helped choose.

**Reproducible.** Every batch of every database draws from its own generator,
``numpy.random.default_rng(SeedSequence(seed, spawn_key=(0, pair, side, batch)))``, so the same
seed gives the same outputs (for a sampler that draws from the generator it is given) and the same
verdict, whatever else runs.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..protocol import Output
from . import _betting as betting
from . import _final as final
from ._claims import ClaimModel
from ._events import Batch, Candidates, Event, Featurizer, Pool, propose

__all__ = ["Plan", "PowerPoint", "PowerStatement", "SequentialOutcome", "SlotReport", "plan_batches",
           "power_statement", "run_sequential"]

#: Events per orientation of each pair that hold a slot.
SLOTS_PER_ORIENTATION = 2
#: Simulated tests per step of the power search, and the power it states.
POWER_RUNS = 400
POWER_LEVEL = 0.9


def generator(seed: int, *key: int) -> np.random.Generator:
    """The generator of one draw: a child of the run's seed by a fixed key (NumPy's SeedSequence)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(key)))


@dataclass(frozen=True)
class Plan:
    """Outputs per database: the pilot (choosing only), then batches that double."""

    pilot: int
    batches: tuple[int, ...]

    @property
    def total(self) -> int:
        return self.pilot + sum(self.batches)


def plan_batches(budget: int, pilot: int | None = None) -> Plan:
    """Pilot max(500, min(2 000, budget/16)) outputs per database, then batches of pilot·2^k until
    ``budget`` outputs per database are drawn."""
    if budget < 200:
        raise ValueError(f"budget must be at least 200 outputs per database, got {budget}")
    first = pilot or max(500, min(2_000, budget // 16))
    first = min(first, budget // 2)
    sizes: list[int] = []
    left = budget - first
    size = first
    while left > 0:
        take = min(size, left)
        if left - take < first // 2:  # no tiny last batch
            take = left
        sizes.append(take)
        left -= take
        size *= 2
    return Plan(first, tuple(sizes))


@dataclass
class Slot:
    pair: int
    x_first: bool
    rank: int
    log_wealth: NDArray[np.float64] = field(default_factory=lambda: np.zeros(betting.FRACTIONS.size))
    event: Event | None = None
    line: tuple[float, float] = (1.0, 0.0)
    lam: float = 0.0
    tested: tuple[int, int, int] = (0, 0, 0)  # this event's last batch: in E on the first side, on the second, n


@dataclass(frozen=True)
class SlotReport:
    pair: int
    x_first: bool
    event: str
    log_evalue: float
    first_in: int
    second_in: int
    n: int


#: Event probabilities (on the less likely side) at which the power is stated.
POWER_MASSES = (0.3, 0.1, 0.01, 1e-3, 1e-4)


@dataclass(frozen=True)
class PowerPoint:
    """Had one event of probability ``q`` (on the database where it is less likely) had the
    probability the claim with parameter ``theta`` allows on the other database, the test would
    have failed with probability ≥ the statement's level. ``theta`` is None when no such violation
    is caught within the plan (up to 64 times the claim)."""

    q: float
    theta: float | None


@dataclass(frozen=True)
class PowerStatement:
    """What the run would have caught (a property of its plan: pilot, batches, α, claim, slots)."""

    level: float
    points: tuple[PowerPoint, ...]

    @property
    def smallest(self) -> PowerPoint | None:
        found = [p for p in self.points if p.theta is not None]
        return min(found, key=lambda p: p.theta) if found else None  # type: ignore[arg-type, return-value]


@dataclass
class SequentialOutcome:
    rejected: bool
    log_evalue: float
    log_threshold: float      # log(1/α_seq), α_seq = SEQUENTIAL_SHARE·α (``_final``)
    max_log_evalue: float     # the largest after any batch: the sequential part fails at α iff it reaches log(1/α_seq)
    drawn: int                # outputs per database
    plan: Plan
    batches_run: int
    seconds: float
    best: SlotReport | None
    power: PowerStatement
    slots: int
    budget_cut: str | None = None
    #: The final fixed-sample tests on the last batch (empty when the sequential part stopped
    #: earlier), and the smallest p-value times their number K (Bonferroni): the final part
    #: fails at α iff ``final_p_adjusted`` ≤ α − α_seq.
    final: tuple[final.FinalResult, ...] = ()
    final_p_adjusted: float = 1.0
    rejected_by: str | None = None  # "sequential" or "final"


Sampler = Callable[[Any, int, np.random.Generator], Any]


def _draw(sample: Sampler, featurizer: Featurizer, database: Any, n: int, rng: np.random.Generator) -> Batch:
    return featurizer.extract(sample(database, n, rng), n)


def _choose(claim: ClaimModel, pool_x: Pool, pool_y: Pool, slots: list[Slot]) -> Candidates | None:
    """Give each of one pair's slots its event, line and bet for the next batch (from the pools
    only); return the candidates (None when there are none)."""
    cands = propose(pool_x, pool_y)
    for x_first in (True, False):
        mine = sorted((s for s in slots if s.x_first is x_first), key=lambda s: s.rank)
        if len(cands) == 0:
            for slot in mine:
                slot.event, slot.lam = None, 0.0
            continue
        a, na, b, nb = (cands.a, cands.na, cands.b, cands.nb) if x_first else (cands.b, cands.nb, cands.a, cands.na)
        p_lo, q_hi = betting.cautious(a, na, b, nb)
        s, c = claim.line_at(q_hi)
        g = betting.growth(p_lo, q_hi, s, c)
        order = np.argsort(-g, kind="stable")[:len(mine)]
        for slot, k in zip(mine, order.tolist(), strict=False):
            slot.event = cands.event(k)
            slot.line = (float(s[k]), float(c[k]))
            slot.lam = float(betting.bet(p_lo[k], q_hi[k], s[k], c[k]))
    return cands if len(cands) else None


def _log_mean_exp(values: NDArray[np.float64]) -> float:
    top = float(values.max())
    return top + math.log(float(np.exp(values - top).mean()))


def run_sequential(sample: Sampler, output: Output, claim: ClaimModel, pairs: list[tuple[Any, Any]], *, alpha: float,
                   budget: int, seed: int, time_limit: float | None, pilot: int | None = None,
                   progress: Callable[[str], None] | None = None) -> SequentialOutcome:
    started = time.monotonic()
    plan = plan_batches(budget, pilot)
    featurizers = [Featurizer(output) for _ in pairs]
    pools = [(Pool(), Pool()) for _ in pairs]
    slots = [Slot(i, x_first, r) for i in range(len(pairs)) for x_first in (True, False)
             for r in range(SLOTS_PER_ORIENTATION)]
    alpha_seq = final.SEQUENTIAL_SHARE * alpha
    log_threshold = math.log(1 / alpha_seq)
    for i, (x, x_prime) in enumerate(pairs):
        pools[i][0].add(_draw(sample, featurizers[i], x, plan.pilot, generator(seed, 0, i, 0, 0)))
        pools[i][1].add(_draw(sample, featurizers[i], x_prime, plan.pilot, generator(seed, 0, i, 1, 0)))
    drawn = plan.pilot
    budget_cut = None
    batches = list(plan.batches)
    if time_limit is not None:
        per_output = (time.monotonic() - started) / max(1, drawn)
        affordable = int(time_limit / max(per_output, 1e-9) * 0.8) - drawn
        if sum(batches) > affordable:
            kept: list[int] = []
            for size in batches:
                if sum(kept) + size > affordable:
                    break
                kept.append(size)
            if not kept:
                kept = [max(min(batches[0], affordable), 100)]
            budget_cut = (f"the budget was cut from {plan.total:,} to {plan.pilot + sum(kept):,} outputs per database "
                          f"to finish within the time limit ({time_limit:.0f} s left; the pilot took "
                          f"{per_output * 1e6 * len(pairs):.0f} µs per output pair)")
            batches = kept
            plan = Plan(plan.pilot, tuple(kept))
    rejected = False
    rejected_by: str | None = None
    log_e = max_log_e = -math.inf
    run = 0
    tests = 2 * len(pairs)  # K of the final test's Bonferroni share
    final_level = (alpha - alpha_seq) / tests
    results: list[final.FinalResult] = []
    for t, size in enumerate(batches, start=1):
        last = t == len(batches)
        choices: list[final.FinalChoice] = []
        for i in range(len(pairs)):
            cands = _choose(claim, pools[i][0], pools[i][1], [s for s in slots if s.pair == i])
            if last and cands is not None:
                choices += [c for c in (final.choose_final(claim, cands, size, x_first, i) for x_first in (True, False))
                            if c is not None]
        for i, (x, x_prime) in enumerate(pairs):
            bx = _draw(sample, featurizers[i], x, size, generator(seed, 0, i, 0, t))
            by = _draw(sample, featurizers[i], x_prime, size, generator(seed, 0, i, 1, t))
            for choice in (c for c in choices if c.pair == i):
                in_x, in_y = choice.event.mask(bx), choice.event.mask(by)
                first, second = (in_x, in_y) if choice.x_first else (in_y, in_x)
                a_in, b_in = int(np.count_nonzero(first)), int(np.count_nonzero(second))
                s_line, c_line = choice.line
                pv = final.p_value(a_in, b_in, size, s_line, c_line, final.GAMMA_SHARE * final_level)
                results.append(final.FinalResult(i, choice.x_first, choice.event.describe(featurizers[i]), a_in, b_in,
                                                 size, choice.line, pv))
            for slot in (s for s in slots if s.pair == i):
                if slot.event is None:
                    continue
                in_x, in_y = slot.event.mask(bx), slot.event.mask(by)
                first, second = (in_x, in_y) if slot.x_first else (in_y, in_x)
                n11 = float(np.count_nonzero(first & second))
                n10 = float(np.count_nonzero(first)) - n11
                n01 = float(np.count_nonzero(second)) - n11
                n00 = size - n10 - n01 - n11
                s, c = slot.line
                slot.log_wealth = slot.log_wealth + betting.log_evalues(
                    n10, n01, n11, n00, slot.lam * betting.FRACTIONS, np.float64(s), np.float64(c))
                slot.tested = (int(n10 + n11), int(n01 + n11), size)
            pools[i][0].add(bx)
            pools[i][1].add(by)
        drawn += size
        run = t
        log_e = _log_mean_exp(np.concatenate([s.log_wealth for s in slots]))
        max_log_e = max(max_log_e, log_e)
        if progress is not None:
            progress(f"batch {t}/{len(batches)}: {drawn:,} outputs per database, "
                     f"e-value {math.exp(min(log_e, 700)):.3g}")
        if log_e >= log_threshold:
            rejected, rejected_by = True, "sequential"
            break
    final_p = min((r.p_value for r in results), default=1.0)
    final_p_adjusted = min(1.0, final_p * tests)
    if not rejected and results and final_p <= final_level:
        rejected, rejected_by = True, "final"
    best_slot = max(slots, key=lambda s: _log_mean_exp(s.log_wealth))
    fz = featurizers[best_slot.pair]
    best = None if best_slot.event is None else SlotReport(
        best_slot.pair, best_slot.x_first, best_slot.event.describe(fz), _log_mean_exp(best_slot.log_wealth),
        *best_slot.tested)
    power = power_statement(claim, plan, log_threshold + math.log(len(slots)))
    return SequentialOutcome(rejected, log_e, log_threshold, max_log_e, drawn, plan, run, time.monotonic() - started,
                             best, power, len(slots), budget_cut, tuple(results), final_p_adjusted, rejected_by)


def _detects(claim: ClaimModel, *, theta: float, q: float, s: float, c: float, plan: Plan, log_threshold: float,
             rng: np.random.Generator) -> bool:
    """Whether the plan's test catches the boundary violation of the claim at ``theta`` on an event
    of probability ``q``, tested against the line (s, c), with probability ≥ POWER_LEVEL."""
    p = float(claim.with_theta(theta).upper(q))
    if p <= s * q + c:
        return False
    return betting.simulate_rejections(p, q, s, c, plan.pilot, list(plan.batches), log_threshold, POWER_RUNS,
                                       rng) >= POWER_LEVEL


@functools.lru_cache(maxsize=128)
def power_statement(claim: ClaimModel, plan: Plan, log_threshold: float,
                    masses: tuple[float, ...] = POWER_MASSES) -> PowerStatement:
    """For each event probability q, the smallest claim parameter θ′ such that an event with
    probabilities (h_θ′(q), q), on the boundary of the claim at θ′, would make this plan's test fail
    with probability ≥ POWER_LEVEL: simulated (``_betting.simulate_rejections``) with the plan's
    pilot and batches, the test's bets against the claim's own line at q, and the slot's share of
    the threshold. It assumes the test bets on that event from the pilot on, which it does when
    that event is the most visible violation among its candidates. The simulation has a fixed seed:
    the statement is a function of the plan (and cached)."""
    rng = np.random.default_rng(np.random.SeedSequence(20_251_128))
    points = []
    for q in masses:
        s, c = (float(v) for v in claim.line_at(np.array(q)))
        low, high = claim.theta, claim.theta * 1.25
        found = True
        while not _detects(claim, theta=high, q=q, s=s, c=c, plan=plan, log_threshold=log_threshold, rng=rng):
            low, high = high, high * 2
            if high > claim.theta * 64:
                found = False
                break
        if found:
            for _ in range(14):
                if high - low < 0.005 * claim.theta:
                    break
                mid = (low + high) / 2
                if _detects(claim, theta=mid, q=q, s=s, c=c, plan=plan, log_threshold=log_threshold, rng=rng):
                    high = mid
                else:
                    low = mid
        points.append(PowerPoint(q, high if found else None))
    return PowerStatement(POWER_LEVEL, tuple(points))
