"""The search for inputs that break a claim: generators, screening, refinement, certification
(docs/search.md).

``run_search(sampler, domain, claim, shape, settings)`` is black-box: it sees the mechanism only
through ``await sampler(database, n)`` (over HTTP in app.search.service; a Python function in the
benches). Four replaceable parts, after DP-Auditorium's split (generators / testers), of which only
the last speaks for α (called through ``app.search.protocols.PairTester``):

1. **generators** (app.search.generators): candidate pairs from the domain at no sample cost;
2. **screening** (app.search.screening): successive halving with the engine's ranking score;
3. **refinement** (app.search.refine): Optuna's TPE moves the best pairs' coordinates, with
   DP-Finder's objective (the estimated lower bound);
4. **certification** (app.search.certify), in stages: after every screening rung (the probe rung
   included) the best pairs' best events are tested on fresh outputs when their choosing data
   predict a refutation (the s-th stage that tests at α·2^−(s+1)); after refinement the audit
   engine certifies the finalists on fresh samples at α/2. The search stops at the first
   certification (``stop_at_first``). The union bound keeps the total level below α.

The budget is the number of outputs drawn in all (every database, every phase); by default 35% goes
to screening, 15% to refinement, at most 20% to the staged tests, and the rest to the final
certification, which also gets whatever the others leave. A violation is reported only when certification refutes the claim; otherwise the
result says that none was found within the budget, which never means that the claim holds.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from app.audit.engine import AuditResult
from app.audit.power import power_rows, power_sentence
from app.reporting.text import number, shorten
from app.sampling.timing import (
    DeadlineReached,
    RateMeasurement,
    RequestTimedOut,
    TimedSampler,
    budget_estimate,
    format_duration,
    measure_rate,
)
from app.search.certify import (
    FINAL_SHARE,
    EngineCertification,
    StagedTests,
    StageResult,
    findings_from,
)
from app.search.domain import InputDomain
from app.search.draws import EndpointUnusable, SearchCancelled, SearchDraws
from app.search.generators import DEFAULT_LIMIT, CandidatePair, candidate_pairs
from app.search.protocols import PairTester
from app.search.refine import RefineSettings, refine_pair
from app.search.screening import (
    ScreenedPair,
    Screening,
    ScreeningSettings,
    successive_halving,
)
from app.search.severity import severity_statement, sharpen
from app.search.sizes import bisect_sizes
from app.stats.candidates import ProposalSettings
from app.stats.claims import Claim, claimed_delta, claimed_epsilon
from app.stats.shapes import OutputShape

__all__ = ["DEFAULT_SEARCH_BUDGET", "EndpointUnusable", "SearchCancelled", "SearchProgress", "SearchResult",
           "SearchSettings", "run_search"]

#: Seconds kept after the last draw for the verdict, its power and the report.
TIME_RESERVE = 4.0
#: Share of (rate × time left) the run plans to draw: the rest absorbs computing and a slower endpoint.
TIME_USABLE = 0.85
#: The least budget a time limit sizes a run down to.
MIN_TIMED_BUDGET = 4_000

#: Fresh outputs per database of a staged test at least.
STAGE_MIN = 500

DEFAULT_SEARCH_BUDGET = 8_000_000
"""Outputs drawn in all by default: screening ~2.8 M, refinement ~1.2 M, certification ~4 M."""


@dataclass(frozen=True)
class SearchSettings:
    alpha: float = 0.05
    budget: int = DEFAULT_SEARCH_BUDGET
    time_limit: float | None = None  # seconds, whole search
    seed: int = 0
    max_candidates: int = DEFAULT_LIMIT
    families: tuple[str, ...] = ("statdp", "edge", "halton")
    screening_share: float = 0.35
    refine_share: float = 0.15
    first_rung: int = 1_000
    finalists: int = 3  # screened pairs certified
    refine_pairs: int = 2  # screened pairs refined
    refine_trials: int = 24
    refine_samples: int = 4_000
    refine: bool = True
    probe: int = 200  # outputs per database of the probe rung (0: none; see screening.py)
    staged: bool = True  # staged tests after every screening rung (certify.staged_test)
    stage_pairs: int = 3  # pairs a stage tests at most (its level is α_s / stage_pairs)
    stage_share: float = 0.2  # the staged tests' outputs, in all, at most this share of the budget
    stop_at_first: bool = True  # stop at the first certification (False: the full search and report)
    concurrency: int = 4
    severity: bool = True  # sharpen the bound on a certified pair (app.search.severity)
    severity_share: float = 0.9  # of the budget, at most (and never more than is left), for sharpening
    measure_rate: bool = True  # time the endpoint first and size the budget to the time limit
    size_probe: int = 100  # outputs per database of the size bisection (app.search.sizes; 0: off)
    size_probe_share: float = 0.02  # its outputs, in all, at most this share of the budget (and 60 000)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must lie in (0, 1)")
        if self.budget < 20_000:
            raise ValueError("the budget must be at least 20000 outputs (screening and certification need some)")
        if self.time_limit is not None and not self.time_limit > 0:
            raise ValueError("the time limit must be positive")
        if not (0 <= self.screening_share < 1 and 0 <= self.refine_share < 1
                and self.screening_share + self.refine_share < 0.9):
            raise ValueError("screening_share + refine_share must stay below 0.9")
        if self.finalists < 1 or self.max_candidates < 1 or self.stage_pairs < 1:
            raise ValueError("finalists, max_candidates and stage_pairs must be >= 1")
        if not 0 <= self.stage_share < 0.5:
            raise ValueError("stage_share must lie in [0, 0.5)")
        if not set(self.families) <= {"statdp", "edge", "halton"} or not self.families:
            raise ValueError("families: one or more of statdp, edge, halton")


@dataclass
class SearchProgress:
    """What the progress callback receives."""

    phase: str
    samples_used: int
    budget: int
    seconds: float
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResult:
    certified: bool
    verdict: str
    statement: str
    claim: str
    claim_json: dict[str, Any]
    parameter: str
    claimed_value: float | None
    alpha: float
    domain: dict[str, Any]
    shape: dict[str, Any]
    finding: dict[str, Any] | None
    findings: list[dict[str, Any]]
    failing_inputs: list[dict[str, Any]]
    candidates: dict[str, Any]
    screening: dict[str, Any]
    refinement: list[dict[str, Any]]
    certification: dict[str, Any]
    samples: dict[str, int]
    budget: int
    seconds: dict[str, float]
    stopped: str
    settings: dict[str, Any] = field(default_factory=dict)
    severity: dict[str, Any] | None = None  # the sharpened bound on the certified pair (app.search.severity)
    power: list[dict[str, Any]] | None = None  # when nothing is certified: what the run would have caught
    rate: dict[str, Any] | None = None  # the endpoint's measured rate (app.sampling.timing)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Sampler = Callable[[Any, int], Awaitable[Any]]


def _claim_info(claim: Claim) -> tuple[str, float | None, dict[str, Any]]:
    return claim.parameter, claim.value, claim.to_dict()


async def run_search(sampler: Sampler, domain: InputDomain, claim: Claim, shape: OutputShape,
                     settings: SearchSettings | None = None, *,
                     progress: Callable[[SearchProgress], Any] | None = None, cancel: Any = None,
                     pairs: list[CandidatePair] | None = None, measured: RateMeasurement | None = None) -> SearchResult:
    """Search ``domain`` for a pair and an event that break ``claim`` (module docstring).

    ``pairs`` replaces the generators (the baselines use it); ``measured``: the endpoint's rate,
    measured before (app.sampling.timing.endpoint_rate), not measured again. Raises :class:`SearchCancelled`
    when ``cancel`` is set and :class:`EndpointUnusable` when every first database fails."""
    s = settings or SearchSettings()
    started = time.monotonic()
    # the verdict, its power and the report need a moment after the last draw
    deadline = None if s.time_limit is None else started + max(0.5 * s.time_limit, s.time_limit - TIME_RESERVE)
    budget = s.budget  # sized down to what the time limit allows once the endpoint's rate is known
    timed = TimedSampler(sampler, rate=math.inf, deadline=deadline)
    parameter, claimed, claim_json = _claim_info(claim)
    phase = {"name": "generating"}
    last = {"t": 0.0}

    async def report(message: str, force: bool = False) -> None:
        if progress is None:
            return
        now = time.monotonic()
        if not force and now - last["t"] < 0.2:
            return
        last["t"] = now
        if measured is not None and phase["name"] not in ("rate", "done"):
            left = max(0, budget - draws.total) / max(timed.rate, 1e-9)
            if deadline is not None:
                left = min(left, max(0.0, deadline - now))
            message = f"{message} · {now - started:.0f} s elapsed, at most {format_duration(left)} left"
        out = progress(SearchProgress(phase["name"], draws.total, budget, round(now - started, 3), message))
        if hasattr(out, "__await__"):
            await out

    draws = SearchDraws(timed, concurrency=s.concurrency, cancel=cancel)
    draws.on_draw = lambda: report(f"{phase['name']}: {draws.total:,} outputs drawn")
    seconds: dict[str, float] = {}

    # 1. generators ---------------------------------------------------------------------------
    t0 = time.monotonic()
    candidates = pairs if pairs is not None else candidate_pairs(domain, s.max_candidates, s.seed, s.families)
    candidates = [p for p in candidates if domain.relation(p.x, p.x_prime) is not None]
    if not candidates:
        raise ValueError("the domain yields no neighbouring pair")
    by_source: dict[str, int] = {}
    for p in candidates:
        by_source[p.source] = by_source.get(p.source, 0) + 1
    seconds["generators"] = round(time.monotonic() - t0, 3)

    # the endpoint's rate, and the budget the time limit allows (app.sampling.timing) -----------
    if s.measure_rate or measured is not None:
        phase["name"] = "rate"
        try:
            if measured is None:
                measured = await measure_rate(sampler, candidates[0].x, max_outputs=20_000)
        except (asyncio.CancelledError, SearchCancelled):
            raise
        except Exception:  # noqa: BLE001 - the draws below record the failing input as a finding
            measured = None
        if measured is not None:
            timed.rate = measured.rate
            usable = math.inf
            if deadline is not None:
                usable = measured.rate * max(0.0, deadline - time.monotonic()) * TIME_USABLE
                budget = int(max(MIN_TIMED_BUDGET, min(s.budget, usable)))
            await report(budget_estimate(measured, s.budget, s.time_limit, usable=usable), force=True)

    search_deadline = None if s.time_limit is None else started + 0.5 * s.time_limit  # None iff deadline is

    # 1b. sizes: bisect where the outputs change character (app.search.sizes; choosing draws only)
    size_probe: dict[str, Any] | None = None
    if pairs is None and s.size_probe:
        phase["name"] = "sizes"
        t0 = time.monotonic()
        found = await bisect_sizes(draws, domain, probe=s.size_probe,
                                   budget=min(60_000, int(budget * s.size_probe_share)), deadline=search_deadline)
        keys = {p.key for p in candidates}
        new = [p for p in found.pairs if p.key not in keys and domain.relation(p.x, p.x_prime) is not None]
        candidates = new + candidates
        for p in new:
            by_source["sizes"] = by_source.get("sizes", 0) + 1
        size_probe = found.to_dict() | {"new_pairs": len(new)}
        seconds["sizes"] = round(time.monotonic() - t0, 3)

    claim_eps = claimed_epsilon(claim)
    delta = claimed_delta(claim)
    cert_budget_guess = budget * (1 - s.screening_share - s.refine_share)
    proposal = ProposalSettings(n_test=max(1_000, int(cert_budget_guess / 12)), level=s.alpha / 40, delta=delta,
                                target=claim_eps if parameter == "ε" else None, learned=True, seed=s.seed)

    # staged certification (app.search.certify.StagedTests) -------------------------------------
    staged_tests = StagedTests(shape, claim, s.alpha, proposal, s.stage_pairs, n_min=STAGE_MIN)
    staged: PairTester[StageResult] = staged_tests
    stages = staged_tests.stages
    stage_budget = int(budget * s.stage_share) if s.staged else 0
    first: dict[str, Any] | None = None
    all_pairs = list(candidates)

    async def stage(after: str, ranked_pairs: list[CandidatePair]) -> bool:
        """Run the next staged test on ``ranked_pairs``; True when it certified and the search stops."""
        nonlocal first
        left = stage_budget - sum(st.samples for st in stages)
        # a stage may spend half of what is left for stages (all of it once that is small)
        room = min(left if left < 8 * STAGE_MIN else left // 2, budget - draws.total)
        if not ranked_pairs or room < 2 * STAGE_MIN or (search_deadline is not None and time.monotonic() >= search_deadline):
            return False
        previous = phase["name"]
        phase["name"] = "certification"
        st = await staged.test(draws, ranked_pairs, max_outputs=room, after=after)
        phase["name"] = previous
        if st is None:
            return False
        await report(f"staged test {st.stage} after {after}: {len(st.tests)} pair(s) tested"
                     + (", certified" if st.refuted else ""), force=True)
        if st.refuted and first is None:
            first = {"stage": st.stage, "after": after, "samples": draws.total,
                     "seconds": round(time.monotonic() - started, 3)}
        return st.refuted and s.stop_at_first

    async def after_rung(r: int, alive: list[ScreenedPair]) -> bool:
        return await stage(f"screening rung {r}", [e.pair for e in alive])

    # 2. screening ----------------------------------------------------------------------------
    phase["name"] = "screening"
    await report(f"screening {len(candidates)} candidate pairs", force=True)
    screen_budget = int(budget * s.screening_share)
    time_stop: str | None = None
    try:
        screening = await successive_halving(
            draws, candidates, shape, proposal,
            ScreeningSettings(first_rung=s.first_rung, survivors=max(s.finalists, s.refine_pairs),
                              probe=s.probe),
            budget=screen_budget, deadline=search_deadline, progress=lambda m: report(m, force=True),
            after_rung=after_rung if s.staged else None)
    except DeadlineReached as exc:  # the rate fell far below the measured one: stop with what was tested
        time_stop = _time_stop(exc)
        screening = Screening(ranked=[], rungs=[], stopped=time_stop, seconds=round(time.monotonic() - t0, 3))
    seconds["screening"] = screening.seconds
    ranked = screening.ranked
    draws.forget(set())
    done = first is not None and s.stop_at_first

    # 3. refinement ---------------------------------------------------------------------------
    refined: list[dict[str, Any]] = []
    finalists: list[CandidatePair] = [e.pair for e in ranked[: s.finalists]]
    t0 = time.monotonic()
    if s.refine and ranked and s.refine_share > 0 and not done and time_stop is None:
        phase["name"] = "refinement"
        per_pair = int(budget * s.refine_share) // max(1, min(s.refine_pairs, len(ranked)))
        for e in ranked[: s.refine_pairs]:
            await report(f"refining the pair from {e.pair.source} ({e.pair.note})", force=True)
            try:
                ref = await refine_pair(draws, domain, e.pair, shape, proposal,
                                        RefineSettings(trials=s.refine_trials, samples_per_trial=s.refine_samples,
                                                       seed=s.seed + len(refined)),
                                        budget=per_pair, deadline=search_deadline)
            except DeadlineReached as exc:
                time_stop = _time_stop(exc)
                break
            if ref is None:
                continue
            refined.append(ref.to_dict())
            if ref.best is not None and all(ref.best.key != f.key for f in finalists):
                finalists.append(ref.best)
                all_pairs.append(ref.best)
    seconds["refinement"] = round(time.monotonic() - t0, 3)

    # 4. final certification ------------------------------------------------------------------
    phase["name"] = "certification"
    finalists = [f for f in finalists if not draws.failed(f.x) and not draws.failed(f.x_prime)]
    cert_budget = max(0, budget - draws.total)
    final_alpha = s.alpha * FINAL_SHARE if s.staged else s.alpha
    result = None
    cert_error: dict[str, Any] | None = None
    t0 = time.monotonic()
    stopped = "budget"
    if done:
        stopped = "certified"
    elif time_stop is not None:
        stopped = time_stop
    elif finalists and cert_budget >= 4 * 100 * len(finalists):
        final: PairTester[AuditResult] = EngineCertification(shape, claim, final_alpha, seed=s.seed,
                                                             progress=lambda m: report(m), deadline=deadline)
        await report(f"certifying {len(finalists)} finalist(s) on fresh samples", force=True)
        try:
            result = await final.test(draws, finalists, max_outputs=cert_budget, after="refinement")
        except (SearchCancelled, EndpointUnusable):
            raise
        except Exception as exc:  # noqa: BLE001 - the endpoint failed on a finalist it answered before
            from app.search.draws import failure_of

            cert_error = failure_of(exc)
            stopped = f"certification failed ({cert_error['reason']}): nothing certified"
        else:
            if result is not None and result.refuted and first is None:
                first = {"stage": "final", "after": "refinement", "samples": draws.total,
                         "seconds": round(time.monotonic() - started, 3)}
            if first is not None:
                stopped = "certified"
            elif result is not None and result.stopped.startswith(("time limit", "a request timed out")):
                stopped = result.stopped
    elif not finalists:
        if draws.failures:
            # Nothing was tested: the endpoint answered too few of the inputs (often the empty table
            # only, which has no row to fail on) for a single pair. An error, not "none found".
            fails = list(draws.failures.values())
            first = fails[0]
            raise EndpointUnusable(
                f"no pair of the domain could be sampled: the endpoint failed on {len(fails)} input(s) and answered "
                f"{draws.successes} (the first failure: {first['reason']}: {first['detail'][:200]}; on "
                f"{shorten(first['database'], 120)})")
        stopped = "no pair could be sampled"
    else:
        stopped = "certified" if first is not None else "no budget left for certification"
    if screening.stopped == "time limit" and stopped == "budget":
        stopped = "time limit"
    if stopped == "budget" and budget < s.budget:
        stopped = "budget sized to the time limit"
    seconds["certification"] = round(time.monotonic() - t0, 3)

    findings = findings_from(result, finalists, claimed, claim_json, stages, all_pairs)
    certified = first is not None
    finding = findings[0] if findings and certified else None
    severity = None
    if finding is not None and s.severity:
        phase["name"] = "severity"
        t0 = time.monotonic()
        severity = await sharpen(draws, finding, shape, claim, alpha=s.alpha, deadline=deadline, seed=s.seed,
                                 outputs=min(budget - draws.total, int(s.severity_share * budget)),
                                 progress=lambda m: report(m, force=True))
        seconds["severity"] = round(time.monotonic() - t0, 3)
    seconds["total"] = round(time.monotonic() - started, 3)
    await report("done", force=True)
    failing = list(draws.failures.values())
    lbs = [t["held_out"]["lower_bound"] for st in stages for t in st.tests if t["held_out"]["lower_bound"] is not None]
    if result is not None and result.lower_bound is not None:
        lbs.append(result.lower_bound)
    best_lb = max(lbs) if lbs else None
    cert_summary: dict[str, Any] = {
        "finalists": [f.to_dict() for f in finalists], "error": cert_error, "lower_bound": best_lb,
        "first_certification": first, "stages": [st.to_dict() for st in stages],
        "alpha": {"stages": [st.alpha for st in stages], "final": final_alpha,
                  "spent_at_most": sum(st.alpha for st in stages) + (final_alpha if result is not None else 0.0)}}
    if result is not None:
        cert_summary.update({
            "final_lower_bound": result.lower_bound, "epsilon_hat": result.epsilon_hat, "rounds": result.rounds,
            "tests": len(result.tests), "stopped": result.stopped, "note": result.note,
            "engine_settings": result.settings, "mpl": result.mpl})
    statement = _statement(certified, finding, parameter, claimed, s.alpha, draws.total, seconds["total"],
                           len(candidates), best_lb, failing, stopped)
    if severity is not None:
        statement += " " + severity_statement(severity, parameter, claimed)
    power = None
    if not certified:
        tested = [t for st in stages for t in st.tests] + (list(result.tests) if result is not None else [])
        try:
            power = await asyncio.to_thread(power_rows, tested, claim)
        except ValueError:
            power = None
        if power is not None:
            tried = {frozenset((json.dumps(t["x"], sort_keys=True), json.dumps(t["x_prime"], sort_keys=True)))
                     for t in tested}
            statement += " " + power_sentence(power, untested_pairs=max(0, len(candidates) - len(tried)))
    return SearchResult(
        certified=certified,
        verdict="violation certified" if certified else "no violation certified",
        statement=statement, claim=claim.describe(), claim_json=claim_json, parameter=parameter,
        claimed_value=claimed, alpha=s.alpha, domain=domain.model_dump(mode="json", exclude_none=True),
        shape=shape.model_dump(mode="json", exclude_defaults=True), finding=finding, findings=findings[:10],
        failing_inputs=failing,
        candidates={"generated": len(candidates), "by_source": by_source,
                    "scored": sum(1 for e in ranked), "finalists": len(finalists), "size_bisection": size_probe},
        screening={"rungs": screening.rungs, "stopped": screening.stopped,
                   "top": [e.to_dict() for e in ranked[:10]]},
        refinement=refined, certification=cert_summary,
        samples={**draws.used, "total": draws.total}, budget=s.budget, seconds=seconds, stopped=stopped,
        settings={k: v for k, v in asdict(s).items() if k != "families"} | {"families": list(s.families),
                                                                            "budget_used_as": budget},
        severity=severity, power=power, rate=None if measured is None else {
            **measured.to_dict(), "outputs_per_second_at_end": round(timed.rate, 1) if math.isfinite(timed.rate) else None,
            "budget_sized_to_time_limit": budget if budget != s.budget else None},
    )


def _time_stop(exc: Exception) -> str:
    return "a request timed out (the endpoint is too slow; no input failed)" if isinstance(exc, RequestTimedOut) \
        else "time limit"




def _statement(certified: bool, finding: dict[str, Any] | None, parameter: str, claimed: float | None,
               alpha: float, samples: int, seconds: float, tried: int, best_lb: float | None,
               failing: list[dict[str, Any]], stopped: str) -> str:
    conf = f"{100 * (1 - alpha):g}%"
    fails = (f" The endpoint failed on {len(failing)} input(s), listed as findings." if failing else "")
    if certified and finding is not None:
        h = finding["held_out"]
        return (f"Violation certified: on x = {shorten(finding['x'], 120)} and x′ = {shorten(finding['x_prime'], 120)} "
                f"({finding['relation'] or 'neighbours'}), the event {finding['describe']} held {h['a']}/{h['n_x']} "
                f"outputs against {h['b']}/{h['n_xp']} on fresh samples: {parameter} ≥ {number(finding['lower_bound'])} "
                f"at {conf} confidence, above the claimed {parameter} = {number(claimed)}." + fails)
    below = ("" if best_lb is None else
             f" The largest lower bound on {parameter} certified on fresh samples was {number(best_lb)}, not above "
             f"the claim.")
    return (f"No violation was certified within the budget ({samples:,} outputs, {seconds:.0f} s; stopped: {stopped})."
            f" This does not show that the mechanism satisfies its claim: the search tried {tried} candidate pairs of "
            f"the domain, and a violation on other inputs, or one too small to certify with this budget, may remain."
            + below + fails)
