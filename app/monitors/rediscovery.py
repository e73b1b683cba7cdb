"""Events that follow the deployment: a monitor with ``auto`` checks looks for better events again.

When (the trigger):

- every ``rediscover_every`` periods (K; default ⌈T/10⌉, at least 5), and
- when a period's outputs break the mechanism's output contract (the shape changed),

the period's transaction enqueues a ``rediscovery`` job (one at a time per monitor). The job runs
the engine's discovery (app.audit.discovery: rounds of fresh draws, candidate events for the
output's shape chosen on some draws and tested on others) on the auto checks' pairs, with
requests sent with the monitor's current period (so an endpoint that versions its deployment by
period answers with the current deployment); then

1. a candidate the engine found **informative** (its held-out bound above 0, its event holding
   some but not all held-out outputs) is compared with the existing checks on its pair on
   **fresh** comparison draws: each event is counted there and gets an exact Clopper–Pearson
   lower bound on ε (app.stats.evidence);
2. it is **better** when that bound is above 0 and above every existing check's bound on the
   same draws, and no check watches the same event.
3. the best better candidate, if any, is adopted:
   - for a dormant ``auto`` check (no informative candidate was found while calibrating), it
     becomes that check's event, at the level the check was given at the horizon's start;
   - otherwise it becomes a **new check** at level α_j·2^−(r+1) (the r-th added in this
     horizon), whose detector runs over the remaining T − t periods with the threshold
     q(T − t, γ, α_j·2^−(r+1)) (app.stats.multiple, method.md §12).

No event is ever tested on the draws that chose it: the detector only sees periods drawn after
the check joins. A candidate whose held-out bound is ≤ 0, or whose event holds no output, is
never adopted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import utcnow
from app.jobs.context import JobContext
from app.jobs.service import active_job, enqueue_job
from app.models.alarms import Alarm
from app.models.jobs import Job
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor
from app.monitors.detectors import initial_state
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.stats.events import event_contains, parse_event
from app.stats.evidence import event_bound
from app.stats.multiple import rediscovery_alpha
from app.stats.shapes import OutputShape, n_outputs
from app.stats.thresholds import threshold_for

log = structlog.get_logger("dpwatch.rediscovery")

RUNNABLE_STATES = ("active", "degraded")
#: A check needs at least this many periods left in the horizon to be worth adding.
MIN_REMAINING_PERIODS = 2
#: Checks per monitor, all origins (as at creation).
MAX_CHECKS = 64


def _pair_key(x: Any, xp: Any) -> tuple[str, str]:
    a, b = json.dumps(x, sort_keys=True), json.dumps(xp, sort_keys=True)
    return (a, b) if a <= b else (b, a)


def auto_pairs(checks: list[Check]) -> list[tuple[Any, Any]]:
    """The distinct pairs (either orientation) of the monitor's ``auto`` checks."""
    seen: dict[tuple[str, str], tuple[Any, Any]] = {}
    for check in checks:
        if check.origin == "auto":
            seen.setdefault(_pair_key(check.x, check.x_prime), (check.x, check.x_prime))
    return list(seen.values())


def request_rediscovery(session: Session, monitor: Monitor, *, trigger: str,
                        detail: dict[str, Any] | None = None) -> Job | None:
    """Enqueue a re-discovery job for the monitor, unless one is queued or running already or the
    monitor has no ``auto`` checks. Called inside the period's transaction."""
    if active_job(session, monitor.id, "rediscovery") is not None:
        return None
    has_auto = session.scalar(select(func.count()).select_from(Check)
                              .where(Check.monitor_id == monitor.id, Check.origin == "auto")) or 0
    if not has_auto:
        return None
    job = enqueue_job(session, monitor.tenant_id, "rediscovery",
                      {"trigger": trigger, "t": monitor.t, "horizon_index": monitor.horizon_index,
                       **({"detail": detail} if detail else {})},
                      mechanism_id=monitor.mechanism_id, monitor_id=monitor.id)
    log.info("rediscovery_requested", monitor_id=str(monitor.id), trigger=trigger, t=monitor.t, job_id=str(job.id))
    return job


# ---------------------------------------------------------------------------------- assessment


def held_out(event: dict[str, Any], x_out: Any, xp_out: Any, alpha: float) -> dict[str, Any]:
    """An event's counts on held-out draws (x side, x' side) and its Clopper–Pearson bound on ε."""
    parsed = parse_event(event)
    a = int(np.count_nonzero(event_contains(parsed, x_out)))
    b = int(np.count_nonzero(event_contains(parsed, xp_out)))
    bound = event_bound(a, b, n_outputs(x_out), n_outputs(xp_out), alpha=alpha)
    return {"a": a, "b": b, "n_x": n_outputs(x_out), "n_xp": n_outputs(xp_out), "p_hat": bound.p_hat,
            "q_hat": bound.q_hat, "epsilon_lower_bound": bound.to_dict()["lower_bound"]}


def _bound_value(h: dict[str, Any]) -> float:
    value = h.get("epsilon_lower_bound")
    return -np.inf if value is None and h["a"] == 0 else (np.inf if value is None else float(value))


def _sides(draws: dict[str, Any], x: Any, xp: Any) -> tuple[Any, Any]:
    return draws[json.dumps(x, sort_keys=True)], draws[json.dumps(xp, sort_keys=True)]


def assess_candidates(candidates: list[dict[str, Any]], draws: dict[str, Any] | None, alpha: float,
                      existing: list[dict[str, Any]],
                      limit: int = 8) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The engine's candidates with, when ``draws`` (fresh comparison outputs by database) are
    given, their bound and the existing checks' bounds on those draws, and whether each is
    **better** (module docstring). Without draws (calibration: nothing to compare with), a
    candidate is better when the engine found it informative. Returns (candidates, existing)."""
    assessed_existing = []
    if draws is not None:
        for item in existing:
            try:
                x_out, xp_out = _sides(draws, item["x"], item["x_prime"])
            except KeyError:
                continue
            try:
                h = held_out(item["event"], x_out, xp_out, alpha)
            except ValueError:  # the event no longer fits the outputs (their shape changed)
                h = {"a": 0, "b": 0, "n_x": n_outputs(x_out), "n_xp": n_outputs(xp_out), "epsilon_lower_bound": None,
                     "error": "the event does not apply to the current outputs"}
            assessed_existing.append({**item, "held_out": h, "_pair": _pair_key(item["x"], item["x_prime"])})
    out = []
    for cand in candidates:
        base = {**cand, "comparison": None, "better": False, "best_existing_bound": None}
        if not cand.get("informative"):
            out.append({**base, "why": cand.get("reason") or "not informative"})
            continue
        if draws is None:
            out.append({**base, "better": True, "why": "informative (held-out bound above 0)"})
            continue
        if len([c for c in out if c["comparison"] is not None]) >= limit:
            out.append({**base, "why": "not compared (only the best few are)"})
            continue
        key = _pair_key(cand["x"], cand["x_prime"])
        x_out, xp_out = _sides(draws, cand["x"], cand["x_prime"])
        h = held_out(cand["event"], x_out, xp_out, alpha)
        value = _bound_value(h)
        rivals = [e for e in assessed_existing if e["_pair"] == key]
        best_rival = max((_bound_value(e["held_out"]) for e in rivals), default=-np.inf)
        duplicate = any(e["event"] == cand["event"] for e in rivals)
        if not h["a"] + h["b"]:
            why = "its event holds no output of the comparison draws"
        elif value <= 0:
            why = "its lower bound on the comparison draws is not above 0"
        elif duplicate:
            why = "a check already watches this event"
        elif value <= best_rival:
            why = f"an existing check's bound on the same draws ({best_rival:.3g}) is at least as high"
        else:
            why = "informative, and better than the existing checks on its pair"
        better = bool(h["a"] + h["b"] > 0 and value > 0 and value > best_rival and not duplicate)
        out.append({**base, "comparison": h, "better": better, "why": why,
                    "best_existing_bound": None if not np.isfinite(best_rival) else float(best_rival)})
    out.sort(key=lambda c: (c["better"], _bound_value(c["comparison"]) if c["comparison"] else
                            (c.get("lower_bound") if c.get("lower_bound") is not None else -np.inf)), reverse=True)
    for item in assessed_existing:
        item.pop("_pair", None)
    return out, assessed_existing


async def discover_and_assess(client: SamplingClient, endpoint: MechanismEndpoint, shape: OutputShape,
                              pairs: list[tuple[Any, Any]], existing: list[dict[str, Any]], *,
                              epsilon: float | None, alpha: float, budget: int, fresh: int, label: str, period: int,
                              compare: bool, progress: Any = None, cancel: Any = None,
                              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The engine's discovery on ``pairs``, then (``compare``) fresh comparison draws (module docstring)."""
    from app.audit.discovery import discover_checks
    from app.audit.engine import AuditSettings
    from app.jobs.handlers import period_sampler

    sampler = period_sampler(client, endpoint, label=label, period=period)
    first_round = max(100, min(2_000, budget // 8))
    # Without a claim the engine spends its budget instead of stopping at the first event that
    # refutes the claim: a monitor wants the strongest event, not the first sufficient one (a
    # large set barely above the claim refutes it early, and is a weak check).
    found = await discover_checks(sampler, pairs, shape, epsilon=None,
                                  settings=AuditSettings(alpha=alpha, budget=budget, first_round=first_round),
                                  progress=progress, cancel=cancel)
    for cand in found["candidates"]:
        lb = cand.get("lower_bound")
        cand["exceeds_claim"] = None if lb is None or epsilon is None else bool(lb > epsilon)
    draws = None
    if compare and any(c.get("informative") for c in found["candidates"]):
        databases = {json.dumps(db, sort_keys=True): db for pair in pairs for db in pair}
        draws = {}
        for key, db in databases.items():
            draws[key] = await sampler(db, fresh)
    candidates, assessed = assess_candidates(found["candidates"], draws, alpha, existing)
    summary = {k: found.get(k) for k in ("samples_used", "seconds", "epsilon_hat", "lower_bound", "refuted",
                                         "shape", "informative")}
    summary["comparison_samples"] = 0 if draws is None else fresh
    return candidates, assessed, summary


def current_shape(mechanism: Mechanism, breach: dict[str, Any] | None) -> OutputShape:
    """The shape discovery samples in: after a contract breach the shape observed then, otherwise
    the contract (or the output kind's)."""
    from app.jobs.handlers import mechanism_shape

    observed = (breach or {}).get("observed_shape")
    if observed is not None:  # {} is a real scalar (every field at its default)
        try:
            return OutputShape.model_validate(observed)
        except ValueError:
            pass
    return mechanism_shape(mechanism)


# ---------------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class RediscoveryPlan:
    monitor_id: uuid.UUID
    horizon_index: int
    t: int
    horizon: int
    gamma: float
    alpha: float
    horizon_alpha: float
    epsilon: float | None
    r: int
    endpoint: MechanismEndpoint
    shape: OutputShape
    pairs: list[tuple[Any, Any]]
    existing: list[dict[str, Any]]
    dormant: list[dict[str, Any]]
    samples: int
    fresh_samples: int
    checks_count: int


def _plan(ctx: JobContext) -> RediscoveryPlan | str:
    from app.mechanisms.contract import endpoint_of

    with ctx.session_factory() as session:
        monitor = session.get(Monitor, ctx.monitor_id)
        if monitor is None:
            return "the monitor no longer exists"
        if monitor.state not in RUNNABLE_STATES:
            return f"the monitor is {monitor.state}"
        checks = list(session.scalars(select(Check).where(Check.monitor_id == monitor.id).order_by(Check.position)))
        mechanism = session.get(Mechanism, monitor.mechanism_id)
        pairs = auto_pairs(checks)
        if not pairs:
            return "the monitor has no auto checks"
        existing = [{"id": str(c.id), "x": c.x, "x_prime": c.x_prime, "event": c.event} for c in checks
                    if c.event.get("kind") != "auto"]
        dormant = [{"id": str(c.id), "x": c.x, "x_prime": c.x_prime} for c in checks
                   if c.event.get("kind") == "auto"]
        s = ctx.settings
        breach = (ctx.params.get("detail") or {}) if ctx.params.get("trigger") == "shape_change" else None
        if breach is None:  # a scheduled run after a breach: sample in the shape observed then
            alarm = session.scalar(select(Alarm).where(Alarm.monitor_id == monitor.id, Alarm.kind == "contract",
                                                       Alarm.resolved_at.is_(None))
                                   .order_by(Alarm.created_at.desc()).limit(1))
            breach = ((alarm.evidence or {}).get("contract") if alarm is not None else None)
        shape = current_shape(mechanism, breach)
        return RediscoveryPlan(
            monitor_id=monitor.id, horizon_index=monitor.horizon_index, t=monitor.t, horizon=monitor.horizon,
            gamma=monitor.gamma, alpha=monitor.alpha, horizon_alpha=monitor.horizon_alpha, epsilon=monitor.epsilon,
            r=monitor.rediscoveries + 1, endpoint=dataclasses.replace(endpoint_of(mechanism), shape=shape),
            shape=shape, pairs=pairs, existing=existing, dormant=dormant,
            samples=monitor.discovery_samples or s.discovery_samples,
            fresh_samples=monitor.discovery_fresh_samples or s.discovery_fresh_samples, checks_count=len(checks))


async def run_rediscovery_job(ctx: JobContext) -> dict[str, Any]:
    plan = await asyncio.to_thread(_plan, ctx)
    if isinstance(plan, str):
        return {"adopted": False, "reason": plan, "candidates": []}
    from app.audit.engine import AuditCancelled
    from app.jobs.context import JobCancelled
    from app.jobs.handlers import progress_reporter

    trigger = ctx.params.get("trigger", "schedule")
    ctx.progress(0.0, f"re-discovery ({trigger}) after period {plan.t}: up to {plan.samples} outputs per database, "
                      f"then {plan.fresh_samples} to compare", force=True)
    try:
        candidates, assessed, found = await discover_and_assess(
            ctx.client, plan.endpoint, plan.shape, plan.pairs, plan.existing, epsilon=plan.epsilon, alpha=plan.alpha,
            budget=plan.samples, fresh=plan.fresh_samples, label=f"rediscover-{plan.monitor_id.hex[:12]}",
            period=plan.t + 1, compare=True, progress=progress_reporter(ctx, 0.0, 0.7), cancel=ctx.cancelled)
    except AuditCancelled as exc:
        raise JobCancelled(str(exc)) from None
    ctx.progress(0.75, "choosing among the candidates", force=True)
    summary = {"trigger": trigger, "t": plan.t, "horizon_index": plan.horizon_index, "budget": plan.samples,
               "comparison_samples": found["comparison_samples"], "samples_used": found["samples_used"],
               "shape": found["shape"], "candidates": [_public(c) for c in candidates[:20]],
               "existing": [{"check_id": e["id"], "held_out": e["held_out"]} for e in assessed]}
    chosen = next((c for c in candidates if c["better"]), None)
    if chosen is None:
        return {"adopted": False, "reason": "no candidate is informative and better than the existing checks",
                **summary}
    dormant = next((d for d in plan.dormant if _pair_key(d["x"], d["x_prime"]) == _pair_key(chosen["x"],
                                                                                             chosen["x_prime"])), None)
    remaining = plan.horizon - plan.t
    if dormant is None:
        if remaining < MIN_REMAINING_PERIODS:
            return {"adopted": False, "reason": f"only {remaining} period(s) left in the horizon", **summary}
        if plan.checks_count >= MAX_CHECKS:
            return {"adopted": False, "reason": f"the monitor already has {MAX_CHECKS} checks", **summary}
        level = rediscovery_alpha(plan.horizon_alpha, plan.r)
        ctx.progress(0.8, f"threshold for T={remaining}, level {level:.3g}", force=True)
        estimate = await asyncio.to_thread(threshold_for, remaining, plan.gamma, level)
    else:
        level, estimate = None, None
    ctx.progress(0.95, "adding the check", force=True)
    written = await asyncio.to_thread(_adopt, ctx, plan, chosen, dormant, level, estimate, remaining)
    return {**written, **summary}


def initial_choice(candidates: list[dict[str, Any]], x: Any, found: dict[str, Any], when: str) -> dict[str, Any]:
    """What calibration records for an ``auto`` check: the best informative candidate, adopted, or
    the reason none was (the check then stays dormant)."""
    chosen = next((c for c in candidates if c["better"]), None)
    common = {"discovered_at": when, "samples_used": found.get("samples_used"), "shape": found.get("shape")}
    if chosen is None:
        return {"adopted": False, "reason": "no candidate holds outputs with a held-out lower bound above 0 "
                "(the check stays auto; re-discovery keeps looking)",
                "candidates": [_public(c) for c in candidates[:10]], **common}
    return {**_public(chosen), "adopted": True,
            "swapped": json.dumps(chosen["x"], sort_keys=True) != json.dumps(x, sort_keys=True), **common}


def claim_choice(result: dict[str, Any], x: Any, when: str) -> dict[str, Any]:
    """What calibration records for an ``auto`` check under a claim other than pure ε
    (app/claims/events.py): the best claim-aware event, adopted when it holds outputs on both sides
    of the bounding samples (otherwise the check stays dormant and re-discovery keeps looking)."""
    best = result["candidates"][0] if result["candidates"] else None
    common = {"discovered_at": when, "samples_used": 2 * (result["samples"] + result["fresh_samples"]),
              "method": "claim_tail_events"}
    if best is None or not (0.0 < best["p_hat"] + best["q_hat"]) or best["p_hat"] == best["q_hat"]:
        return {"adopted": False, "reason": "no claim-aware event separates x from x' on the bounding samples "
                "(the check stays auto; re-discovery keeps looking)", **common}
    return {**best, "adopted": True,
            "swapped": json.dumps(best["x"], sort_keys=True) != json.dumps(x, sort_keys=True), **common}


def _public(candidate: dict[str, Any]) -> dict[str, Any]:
    keys = ("x", "x_prime", "event", "describe", "epsilon_hat", "lower_bound", "held_out", "informative",
            "comparison", "better", "why", "best_existing_bound", "samples")
    return {k: candidate.get(k) for k in keys}


def add_check(session: Session, monitor: Monitor, chosen: dict[str, Any], info: dict[str, Any], level: float,
              estimate: Any, remaining: int, *, origin: str, claim: dict[str, Any] | None = None) -> Check:
    """A check added during a horizon (by re-discovery or a search): ``chosen``'s pair and event, at
    ``level`` (its share α_j·2^−(r+1)), with its own detector over the ``remaining`` periods and the
    threshold ``estimate``; counts one more in ``monitor.rediscoveries``. The caller holds the
    monitor's row lock and commits."""
    position = (session.scalar(select(func.max(Check.position)).where(Check.monitor_id == monitor.id)) or 0) + 1
    info = {**info, "level": level, "threshold": estimate.value, "threshold_std_error": estimate.std_error,
            "threshold_source": estimate.source, "detector_horizon": remaining}
    check = Check(monitor_id=monitor.id, position=position, x=chosen["x"], x_prime=chosen["x_prime"],
                  event=chosen["event"], reversed=False, origin=origin, joined_t=monitor.t, level=level,
                  discovery=info, claim=claim,
                  detector_state=initial_state("aggregator", horizon=remaining, gamma=monitor.gamma,
                                               threshold=estimate.value, level=level, claim={}))
    session.add(check)
    monitor.rediscoveries += 1
    return check


def _adopt(ctx: JobContext, plan: RediscoveryPlan, chosen: dict[str, Any], dormant: dict[str, Any] | None,
           level: float | None, estimate: Any, remaining: int) -> dict[str, Any]:
    with ctx.session_factory() as session:
        monitor = session.scalars(select(Monitor).where(Monitor.id == plan.monitor_id).with_for_update()
                                  .execution_options(populate_existing=True)).one_or_none()
        if monitor is None or monitor.horizon_index != plan.horizon_index or monitor.state not in RUNNABLE_STATES:
            session.rollback()
            return {"adopted": False, "reason": "the monitor moved on (new horizon, alarm or pause) meanwhile"}
        if monitor.t >= monitor.horizon:
            session.rollback()
            return {"adopted": False, "reason": "the horizon ended meanwhile"}
        info = {**_public(chosen), "job_id": str(ctx.job_id), "discovered_at": utcnow().isoformat(),
                "found_after_t": plan.t, "joined_t": monitor.t, "adopted": True,
                "swapped": False}
        if dormant is not None:
            check = session.get(Check, uuid.UUID(dormant["id"]))
            if check is None or check.event.get("kind") != "auto" or monitor.threshold is None:
                session.rollback()
                return {"adopted": False, "reason": "the dormant check changed meanwhile"}
            info["swapped"] = json.dumps(chosen["x"], sort_keys=True) != json.dumps(check.x, sort_keys=True)
            info.update(level=check.level, threshold=monitor.threshold, detector_horizon=monitor.horizon)
            check.x, check.x_prime, check.event = chosen["x"], chosen["x_prime"], chosen["event"]
            check.discovery = info
            check.joined_t = monitor.t
            # Its share of α was set at the horizon's start; a detector over the horizon that
            # starts late sees a subset of its periods, so its level still holds.
            check.detector_state = initial_state("aggregator", horizon=monitor.horizon, gamma=monitor.gamma,
                                                 threshold=monitor.threshold, level=check.level, claim={})
            session.commit()
            log.info("rediscovery_filled_dormant_check", monitor_id=str(monitor.id), check_id=str(check.id),
                     t=monitor.t)
            return {"adopted": True, "reason": "filled a dormant auto check", "check_id": str(check.id),
                    "level": check.level, "threshold": monitor.threshold}
        if monitor.rediscoveries != plan.r - 1:
            session.rollback()
            return {"adopted": False, "reason": "another re-discovery added a check meanwhile"}
        info.update(r=plan.r)
        # The new check tests the claim of the auto check whose pair it watches (None: the monitor's).
        key = _pair_key(chosen["x"], chosen["x_prime"])
        claim = next((c.claim for c in session.scalars(select(Check).where(Check.monitor_id == monitor.id))
                      if c.origin == "auto" and _pair_key(c.x, c.x_prime) == key), None)
        check = add_check(session, monitor, chosen, info, level, estimate, remaining, origin="rediscovery", claim=claim)
        session.commit()
        log.info("rediscovery_added_check", monitor_id=str(monitor.id), check_id=str(check.id), t=monitor.t,
                 level=level, threshold=estimate.value)
        return {"adopted": True, "reason": "a better event; added as a new check", "check_id": str(check.id),
                "level": level, "threshold": estimate.value}
