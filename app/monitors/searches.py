"""Search jobs (docs/search.md §2, §5): a user's search of a mechanism, a monitor's search every K
periods, and a finding turned into a monitor's check.

One job kind, ``search``, in three modes (``params["mode"]``):

- absent: ``POST /v1/mechanisms/{id}/searches`` (a :class:`app.search.schemas.SearchRequest`): the
  search (app.search.run) over the mechanism's endpoint, its input domain (or the request's) and
  the claim; progress is the share of the budget drawn, and a cancel stops it between two draws;
- ``"monitor"``: enqueued by a monitor's period every ``search_every`` periods (like
  re-discovery, app.monitors.rediscovery): the search with the monitor's claim, sent with the
  monitor's current period; the best informative finding on a pair no check watches yet becomes a
  **new check** with its own share of α;
- ``"adopt"``: ``POST /v1/monitors/{id}/checks/from-search``: a finished search's finding becomes
  a new check of the monitor, the same way.

**Spending α.** A monitor that searches (``search_every`` > 0) or re-discovers reserves half of
each horizon's level α_j for checks added during the horizon (app.stats.multiple): its initial
checks share α_j/2, and the r-th check added in the horizon, by re-discovery, a search or an
adoption, runs at α_j·2^−(r+1) over the remaining periods, with its own threshold
q(T − t, γ, α_j·2^−(r+1)). The added check's pair and event were chosen on the search's samples,
which its detector never sees, so its level holds conditionally on them, and by the union bound
the horizon's false-alarm probability stays ≤ α_j however many checks are added. A monitor that
reserved nothing cannot take a finding (409): it would spend α it does not have.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.jobs.context import JobCancelled, JobContext, JobFailed, load_mechanism
from app.jobs.service import active_job, enqueue_job
from app.models.jobs import Job
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor
from app.monitors.rediscovery import (
    MAX_CHECKS,
    MIN_REMAINING_PERIODS,
    RUNNABLE_STATES,
    _pair_key,
    add_check,
)

log = structlog.get_logger("dpwatch.search")

#: Outputs a monitor's search draws in all when the monitor does not say (``search_budget``).
DEFAULT_MONITOR_SEARCH_BUDGET = 2_000_000


def adoption_problem(monitor: Monitor) -> str | None:
    """Why a check cannot be added to ``monitor`` now, or None."""
    from app.monitors.service import rediscovers

    if (monitor.detector or "aggregator") != "aggregator":
        return f"checks are added during a horizon with the aggregator only, not the {monitor.detector}"
    if not rediscovers(monitor):
        return ("the monitor reserved no share of α for added checks: create it with `search_every` > 0 (on a "
                "mechanism with an `input_domain`), or with an `auto` check and `rediscover_every` > 0 "
                "(`rediscover_every` is ignored without one), or watch the finding with a new monitor (the "
                "search's `findings[i].check`)")
    if monitor.state not in RUNNABLE_STATES:
        return f"the monitor is {monitor.state}"
    if monitor.horizon - monitor.t < MIN_REMAINING_PERIODS:
        return f"only {monitor.horizon - monitor.t} period(s) left in the horizon"
    return None


def request_search(session: Session, monitor: Monitor, *, trigger: str = "schedule") -> Job | None:
    """Enqueue a monitor's search (inside the period's transaction), unless one is queued or running
    or the mechanism declares no input domain."""
    if active_job(session, monitor.id, "search") is not None:
        return None
    mechanism = session.get(Mechanism, monitor.mechanism_id)
    if mechanism is None or mechanism.input_domain is None:
        return None
    job = enqueue_job(session, monitor.tenant_id, "search",
                      {"mode": "monitor", "trigger": trigger, "t": monitor.t, "horizon_index": monitor.horizon_index},
                      mechanism_id=monitor.mechanism_id, monitor_id=monitor.id)
    log.info("search_requested", monitor_id=str(monitor.id), t=monitor.t, job_id=str(job.id))
    return job


def informative_findings(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A search result's findings worth watching (held-out bound above 0, an event that holds some
    outputs), best first."""
    return [f for f in result.get("findings") or [] if f.get("informative")]


# ------------------------------------------------------------------------------------- running


async def run_search_job(ctx: JobContext) -> dict[str, Any]:
    mode = ctx.params.get("mode")
    if mode == "adopt":
        return await _adopt_job(ctx)
    if mode == "monitor":
        return await _monitor_search(ctx)
    return await _user_search(ctx)


async def _search(ctx: JobContext, mechanism: Mechanism, domain: Any, claim_spec: dict[str, Any], settings: Any, *,
                  label: str, period: int, start: float = 0.0, end: float = 1.0) -> Any:
    """The search over the mechanism's endpoint with a client of the search's own (fewer retries:
    an input that fails twice is a finding), progress and cancellation wired to the job."""
    from app.jobs.handlers import mechanism_shape, shaped_endpoint
    from app.sampling.client import SamplingClient
    from app.search.run import EndpointUnusable, SearchCancelled, run_search
    from app.search.service import (
        endpoint_search_sampler,
        make_claim,
        search_client_config,
    )

    shape = mechanism_shape(mechanism)
    endpoint = shaped_endpoint(mechanism, shape)

    async def progress(p: Any) -> None:
        fraction = start + (end - start) * min(1.0, p.samples_used / max(1, p.budget))
        await asyncio.to_thread(ctx.progress, fraction, p.message[:400])

    config = dataclasses.replace(search_client_config(300.0), max_response_bytes=ctx.settings.sampling_max_bytes)
    async with SamplingClient(config=config, http_config=ctx.settings.safe_http_config()) as client:
        sampler = endpoint_search_sampler(client, endpoint, label=label, period=period)
        try:
            return await run_search(sampler, domain, make_claim(claim_spec), shape, settings, progress=progress,
                                    cancel=ctx.cancelled)
        except SearchCancelled as exc:
            raise JobCancelled(str(exc)) from None
        except EndpointUnusable as exc:
            raise JobFailed(str(exc)) from None




async def _user_search(ctx: JobContext) -> dict[str, Any]:
    from app.search.domain import InputDomain
    from app.search.run import SearchSettings
    from app.search.schemas import SearchRequest

    request = SearchRequest.model_validate(ctx.params)
    mechanism = await asyncio.to_thread(load_mechanism, ctx)
    domain = request.domain or (InputDomain.model_validate(mechanism.input_domain)
                                if mechanism.input_domain is not None else None)
    if domain is None:
        raise JobFailed("the mechanism declares no input_domain and the request gave none")
    settings = SearchSettings(alpha=request.alpha, budget=request.budget, time_limit=request.time_limit_seconds,
                              seed=request.seed, max_candidates=request.candidates,
                              stop_at_first=not request.full_report)
    ctx.progress(0.0, f"search of {domain.describe()} for {request.claim.to_claim().describe()}", force=True)
    result = await _search(ctx, mechanism, domain, request.claim.to_dict(), settings,
                           label=f"search-{ctx.job_id.hex[:12]}", period=0)
    return result.to_dict()


# ------------------------------------------------------------------------------------- monitors


@dataclass(frozen=True)
class MonitorPlan:
    monitor_id: uuid.UUID
    horizon_index: int
    t: int
    horizon: int
    gamma: float
    horizon_alpha: float
    r: int
    alpha: float
    claim: dict[str, Any]
    budget: int
    watched: frozenset[tuple[str, str]]
    checks_count: int


def _monitor_plan(ctx: JobContext, *, need_domain: bool = True) -> tuple[MonitorPlan, Mechanism] | str:
    from app.claims.service import effective_claim

    with ctx.session_factory() as session:
        monitor = session.get(Monitor, ctx.monitor_id)
        if monitor is None:
            return "the monitor no longer exists"
        problem = adoption_problem(monitor)
        if problem:
            return problem
        mechanism = session.get(Mechanism, monitor.mechanism_id)
        if mechanism is None:
            return "the mechanism no longer exists"
        if need_domain and mechanism.input_domain is None:
            return "the mechanism declares no input_domain"
        checks = list(session.scalars(select(Check).where(Check.monitor_id == monitor.id)))
        session.expunge(mechanism)
        plan = MonitorPlan(
            monitor_id=monitor.id, horizon_index=monitor.horizon_index, t=monitor.t, horizon=monitor.horizon,
            gamma=monitor.gamma, horizon_alpha=monitor.horizon_alpha, r=monitor.rediscoveries + 1, alpha=monitor.alpha,
            claim=effective_claim(None, monitor.claim, monitor.epsilon),
            budget=monitor.search_budget or DEFAULT_MONITOR_SEARCH_BUDGET,
            watched=frozenset(_pair_key(c.x, c.x_prime) for c in checks), checks_count=len(checks))
        return plan, mechanism


async def _monitor_search(ctx: JobContext) -> dict[str, Any]:
    from app.search.domain import InputDomain
    from app.search.run import SearchSettings

    planned = await asyncio.to_thread(_monitor_plan, ctx)
    if isinstance(planned, str):
        return {"adopted": False, "reason": planned, "certified": False, "findings": []}
    plan, mechanism = planned
    domain = InputDomain.model_validate(mechanism.input_domain)
    # a monitor's search spends its whole budget (no stop at the first certification): it adopts the
    # best informative finding on a pair no check watches yet, so more tested findings serve it better
    settings = SearchSettings(alpha=plan.alpha, budget=plan.budget, seed=plan.t, stop_at_first=False)
    ctx.progress(0.0, f"the monitor's search after period {plan.t}: up to {plan.budget:,} outputs", force=True)
    result = (await _search(ctx, mechanism, domain, plan.claim, settings, label=f"msearch-{plan.monitor_id.hex[:12]}",
                            period=plan.t + 1, end=0.85)).to_dict()
    chosen = next((f for f in informative_findings(result)
                   if _pair_key(f["x"], f["x_prime"]) not in plan.watched), None)
    summary = {k: result[k] for k in ("certified", "verdict", "statement", "claim", "finding", "findings",
                                      "failing_inputs", "samples", "seconds", "candidates", "stopped")}
    if chosen is None:
        return {"adopted": False, "reason": "no informative finding on a pair the monitor does not watch yet",
                **summary}
    written = await _add(ctx, plan, chosen, source={"job_id": str(ctx.job_id), "trigger": ctx.params.get("trigger")})
    return {**written, **summary}


async def _add(ctx: JobContext, plan: MonitorPlan, finding: dict[str, Any], *, source: dict[str, Any]) -> dict[str, Any]:
    """Compute the new check's level and threshold, then add it under the monitor's row lock."""
    from app.stats.multiple import rediscovery_alpha
    from app.stats.thresholds import threshold_for

    if plan.checks_count >= MAX_CHECKS:
        return {"adopted": False, "reason": f"the monitor already has {MAX_CHECKS} checks"}
    remaining = plan.horizon - plan.t
    level = rediscovery_alpha(plan.horizon_alpha, plan.r)
    ctx.progress(0.9, f"threshold for T={remaining}, level {level:.3g}", force=True)
    estimate = await asyncio.to_thread(threshold_for, remaining, plan.gamma, level)
    ctx.progress(0.97, "adding the check", force=True)
    return await asyncio.to_thread(_write_check, ctx, plan, finding, level, estimate, remaining, source)


def _write_check(ctx: JobContext, plan: MonitorPlan, finding: dict[str, Any], level: float, estimate: Any,
                 remaining: int, source: dict[str, Any]) -> dict[str, Any]:
    from app.db import utcnow

    with ctx.session_factory() as session:
        monitor = session.scalars(select(Monitor).where(Monitor.id == plan.monitor_id).with_for_update()
                                  .execution_options(populate_existing=True)).one_or_none()
        if monitor is None or monitor.horizon_index != plan.horizon_index or monitor.state not in RUNNABLE_STATES:
            session.rollback()
            return {"adopted": False, "reason": "the monitor moved on (new horizon, alarm or pause) meanwhile"}
        if monitor.rediscoveries != plan.r - 1 or monitor.horizon - monitor.t < MIN_REMAINING_PERIODS:
            session.rollback()
            return {"adopted": False, "reason": "another check was added, or the horizon ran out, meanwhile"}
        key = _pair_key(finding["x"], finding["x_prime"])
        if any(_pair_key(c.x, c.x_prime) == key and c.event == finding["event"]
               for c in session.scalars(select(Check).where(Check.monitor_id == monitor.id))):
            session.rollback()
            return {"adopted": False, "reason": "a check already watches this pair and event"}
        info = {"origin": "search", **source, "found_after_t": plan.t, "joined_t": monitor.t,
                "discovered_at": utcnow().isoformat(), "r": plan.r,
                **{k: finding.get(k) for k in ("x", "x_prime", "event", "describe", "lower_bound", "held_out",
                                               "relation", "source", "note", "exceeds_claim")}}
        # The threshold was computed for the periods left when the job planned; a check that joins
        # later sees fewer of them, a subset, so its level still holds.
        check = add_check(session, monitor, finding, info, level, estimate, plan.horizon - plan.t, origin="search")
        session.commit()
        log.info("search_added_check", monitor_id=str(monitor.id), check_id=str(check.id), t=monitor.t, level=level)
        return {"adopted": True, "reason": "a new pair from the search; added as a new check",
                "check_id": str(check.id), "level": level, "threshold": estimate.value}


def adoption_source(session: Session, tenant_id: uuid.UUID, monitor: Monitor, job_id: uuid.UUID,
                    finding: int) -> dict[str, Any]:
    """The finding a ``from-search`` call adopts, checked now so that the call fails fast:
    ``ValueError`` (422) or ``LookupError`` (409) with the reason."""
    job = session.scalar(select(Job).where(Job.id == job_id, Job.tenant_id == tenant_id))
    if job is None or job.kind != "search":
        raise ValueError(f"job {job_id} is not a search job of this tenant")
    if job.state != "succeeded" or not job.result:
        raise ValueError(f"job {job_id} has not succeeded (state {job.state})")
    if job.mechanism_id != monitor.mechanism_id:
        raise ValueError("the search ran on another mechanism than the monitor's")
    usable = informative_findings(job.result)
    if not 1 <= finding <= len(usable):
        raise ValueError(f"the search has {len(usable)} informative finding(s); finding {finding} does not exist")
    problem = adoption_problem(monitor)
    if problem:
        raise LookupError(problem)
    count = session.scalar(select(func.count()).select_from(Check).where(Check.monitor_id == monitor.id)) or 0
    if count >= MAX_CHECKS:
        raise LookupError(f"the monitor already has {MAX_CHECKS} checks")
    return usable[finding - 1]


async def _adopt_job(ctx: JobContext) -> dict[str, Any]:
    def plan_and_finding() -> tuple[MonitorPlan, dict[str, Any]] | str:
        with ctx.session_factory() as session:
            monitor = session.get(Monitor, ctx.monitor_id)
            if monitor is None:
                return "the monitor no longer exists"
            try:
                finding = adoption_source(session, ctx.tenant_id, monitor, uuid.UUID(ctx.params["job_id"]),
                                          int(ctx.params.get("finding", 1)))
            except (ValueError, LookupError) as exc:
                return str(exc)
        planned = _monitor_plan(ctx, need_domain=False)
        if isinstance(planned, str):
            return planned
        return planned[0], finding

    got = await asyncio.to_thread(plan_and_finding)
    if isinstance(got, str):
        return {"adopted": False, "reason": got}
    plan, finding = got
    written = await _add(ctx, plan, finding, source={"search_job_id": ctx.params["job_id"],
                                                     "finding": ctx.params.get("finding", 1)})
    return {**written, "finding": finding}
