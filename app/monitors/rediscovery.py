"""Events that follow the deployment: a monitor with ``auto`` checks looks for better events again.

When (the trigger):

- every ``rediscover_every`` periods (K; default ⌈T/10⌉, at least 5), and
- when a period's outputs break the mechanism's output contract (the shape changed),

the period's transaction enqueues a ``rediscovery`` job (one at a time per monitor). The job runs
discovery on the auto checks' pairs with **fresh** draws, sent with the monitor's current period
(so an endpoint that versions its deployment by period answers with the current deployment):

1. half of the draws (n per database) choose a candidate event per pair (MPL's t̂, seed 003);
2. the other half (N per database) are held out: each candidate's event, and each existing
   check's event on the same pair, is counted there, and gets an exact Clopper–Pearson lower
   bound on ε (app.stats.evidence). A candidate is **informative** when its event holds outputs
   and its held-out bound is above 0; it is **better** when its bound is also above every
   existing check's bound on the same held-out draws.
3. the best better candidate, if any, is adopted:
   - for a dormant ``auto`` check (no informative candidate was found while calibrating), it
     becomes that check's event, at the level the check was given at the horizon's start;
   - otherwise it becomes a **new check** at level α_j·2^−(r+1) (the r-th added in this
     horizon), whose detector runs over the remaining T − t periods with the threshold
     q(T − t, γ, α_j·2^−(r+1)) (app.stats.multiple, method.md §10).

No event is ever tested on the draws that chose it: the detector only sees periods drawn after
the check joins. A candidate whose held-out bound is ≤ 0, or whose event holds no output, is
never adopted.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import utcnow
from app.jobs.models import Job
from app.jobs.runner import JobContext
from app.jobs.service import active_job, enqueue_job
from app.mechanisms.models import Mechanism
from app.monitors.models import Check, Monitor
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.snapshots.compute import PairSamples
from app.snapshots.discovery import DiscoveryOptions, draw_pairs, rank_candidates
from app.stats.aggregator import WeightedAggregator
from app.stats.events import event_contains, parse_event
from app.stats.evidence import event_bound
from app.stats.multiple import rediscovery_alpha
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


def held_out(event: dict[str, Any], x_out: np.ndarray, xp_out: np.ndarray, alpha: float) -> dict[str, Any]:
    """An event's counts on held-out draws (x side, x' side) and its Clopper–Pearson bound on ε."""
    parsed = parse_event(event)
    a = int(np.count_nonzero(event_contains(parsed, x_out)))
    b = int(np.count_nonzero(event_contains(parsed, xp_out)))
    bound = event_bound(a, b, len(x_out), len(xp_out), alpha=alpha)
    return {"a": a, "b": b, "n_x": len(x_out), "n_xp": len(xp_out), "p_hat": bound.p_hat, "q_hat": bound.q_hat,
            "epsilon_lower_bound": bound.to_dict()["epsilon_lower_bound"]}


def _bound_value(h: dict[str, Any]) -> float:
    value = h.get("epsilon_lower_bound")
    return -np.inf if value is None and h["a"] == 0 else (np.inf if value is None else float(value))


def assess_candidates(samples: list[PairSamples], ranked: dict[str, Any], alpha: float,
                      existing: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each candidate with its held-out bound and whether it is informative and better than the
    existing checks on its pair (module docstring, step 2). ``existing``: dicts with ``x``,
    ``x_prime``, ``event`` (and an ``id``). Returns (candidates, existing with their bounds)."""
    by_pair = {_pair_key(p.label["x"], p.label["x_prime"]): p for p in samples}
    assessed_existing = []
    for item in existing:
        pair = by_pair.get(_pair_key(item["x"], item["x_prime"]))
        if pair is None:
            continue
        same = json.dumps(item["x"], sort_keys=True) == json.dumps(pair.label["x"], sort_keys=True)
        x_out, xp_out = (pair.bound_x, pair.bound_xp) if same else (pair.bound_xp, pair.bound_x)
        try:
            h = held_out(item["event"], x_out, xp_out, alpha)
        except ValueError:  # the event no longer fits the outputs (their shape changed)
            h = {"a": 0, "b": 0, "n_x": len(x_out), "n_xp": len(xp_out), "epsilon_lower_bound": None,
                 "error": "the event does not apply to the current outputs"}
        assessed_existing.append({**item, "held_out": h, "_pair": _pair_key(item["x"], item["x_prime"])})
    out = []
    for cand in ranked["candidates"]:
        key = _pair_key(cand["x"], cand["x_prime"])
        pair = by_pair[key]
        same = json.dumps(cand["x"], sort_keys=True) == json.dumps(pair.label["x"], sort_keys=True)
        x_out, xp_out = (pair.bound_x, pair.bound_xp) if same else (pair.bound_xp, pair.bound_x)
        h = held_out(cand["event"], x_out, xp_out, alpha)
        value = _bound_value(h)
        informative = h["a"] + h["b"] > 0 and value > 0
        rivals = [e for e in assessed_existing if e["_pair"] == key]
        best_rival = max((_bound_value(e["held_out"]) for e in rivals), default=-np.inf)
        duplicate = any(e["event"] == cand["event"] for e in rivals)
        better = informative and value > best_rival and not duplicate
        if not h["a"] + h["b"]:
            why = "its event holds no held-out output"
        elif value <= 0:
            why = "its held-out lower bound on ε is not above 0"
        elif duplicate:
            why = "a check already watches this event"
        elif not better:
            why = f"an existing check's held-out bound ({best_rival:.3g}) is at least as high"
        else:
            why = "informative and better than the existing checks on its pair"
        out.append({**cand, "held_out": h, "informative": bool(informative), "better": bool(better), "why": why,
                    "best_existing_bound": None if not np.isfinite(best_rival) else float(best_rival)})
    out.sort(key=lambda c: _bound_value(c["held_out"]), reverse=True)
    for item in assessed_existing:
        item.pop("_pair", None)
    return out, assessed_existing


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
    epsilon: float
    r: int
    endpoint: MechanismEndpoint
    output_kind: str
    pairs: list[tuple[Any, Any]]
    existing: list[dict[str, Any]]
    dormant: list[dict[str, Any]]
    samples: int
    fresh_samples: int
    checks_count: int


def _plan(ctx: JobContext) -> RediscoveryPlan | str:
    from app.monitors.runner import endpoint_of

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
        return RediscoveryPlan(
            monitor_id=monitor.id, horizon_index=monitor.horizon_index, t=monitor.t, horizon=monitor.horizon,
            gamma=monitor.gamma, alpha=monitor.alpha, horizon_alpha=monitor.horizon_alpha, epsilon=monitor.epsilon,
            r=monitor.rediscoveries + 1, endpoint=endpoint_of(mechanism), output_kind=mechanism.output_kind,
            pairs=pairs, existing=existing, dormant=dormant,
            samples=monitor.discovery_samples or s.discovery_samples,
            fresh_samples=monitor.discovery_fresh_samples or s.discovery_fresh_samples, checks_count=len(checks))


async def discover_and_assess(client: SamplingClient, plan_endpoint: MechanismEndpoint, output_kind: str,
                              pairs: list[tuple[Any, Any]], options: DiscoveryOptions,
                              existing: list[dict[str, Any]], *, label: str, period: int,
                              progress: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict]:
    """Fresh draws, MPL candidates on one half, held-out bounds on the other (steps 1-2)."""
    samples = await draw_pairs(client, plan_endpoint, pairs, options, label=label, progress=progress, period=period)
    ranked = await asyncio.to_thread(rank_candidates, samples, output_kind, options)
    candidates, assessed = await asyncio.to_thread(assess_candidates, samples, ranked, options.alpha, existing)
    return candidates, assessed, ranked


async def run_rediscovery_job(ctx: JobContext) -> dict[str, Any]:
    plan = await asyncio.to_thread(_plan, ctx)
    if isinstance(plan, str):
        return {"adopted": False, "reason": plan, "candidates": []}
    trigger = ctx.params.get("trigger", "schedule")
    options = DiscoveryOptions(samples=plan.samples, fresh_samples=plan.fresh_samples, alpha=plan.alpha,
                               epsilon=plan.epsilon)
    n_db = len({json.dumps(db, sort_keys=True) for pair in plan.pairs for db in pair})
    ctx.progress(0.0, f"re-discovery ({trigger}) after period {plan.t}: drawing "
                      f"{plan.samples + plan.fresh_samples} outputs on each of {n_db} databases", force=True)
    candidates, assessed, ranked = await discover_and_assess(
        ctx.client, plan.endpoint, plan.output_kind, plan.pairs, options, plan.existing,
        label=f"rediscover-{plan.monitor_id.hex[:12]}", period=plan.t + 1, progress=ctx.steps(0.0, 0.7, n_db))
    ctx.progress(0.75, "choosing among the candidates", force=True)
    summary = {"trigger": trigger, "t": plan.t, "horizon_index": plan.horizon_index, "samples": plan.samples,
               "fresh_samples": plan.fresh_samples, "kind": ranked.get("kind"),
               "candidates": [_public(c) for c in candidates],
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


def initial_choice(candidates: list[dict[str, Any]], x: Any, ranked: dict[str, Any], when: str) -> dict[str, Any]:
    """What calibration records for an ``auto`` check: the best informative candidate, adopted, or
    the reason none was (the check then stays dormant)."""
    chosen = next((c for c in candidates if c["informative"]), None)
    common = {"discovered_at": when, "fresh_samples": ranked.get("fresh_samples"), "alpha": ranked.get("alpha"),
              "kind": ranked.get("kind")}
    if chosen is None:
        return {"adopted": False, "reason": "no candidate holds outputs with a held-out lower bound above 0 "
                "(the check stays auto; re-discovery keeps looking)",
                "candidates": [_public(c) for c in candidates], **common}
    return {**_public(chosen), "adopted": True,
            "swapped": json.dumps(chosen["x"], sort_keys=True) != json.dumps(x, sort_keys=True), **common}


def _public(candidate: dict[str, Any]) -> dict[str, Any]:
    keys = ("x", "x_prime", "event", "epsilon_hat", "t_hat", "lower_bound", "held_out", "informative", "better",
            "why", "best_existing_bound", "samples")
    return {k: candidate.get(k) for k in keys}


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
            check.detector_state = WeightedAggregator(monitor.horizon, monitor.gamma, monitor.threshold).to_state()
            session.commit()
            log.info("rediscovery_filled_dormant_check", monitor_id=str(monitor.id), check_id=str(check.id),
                     t=monitor.t)
            return {"adopted": True, "reason": "filled a dormant auto check", "check_id": str(check.id),
                    "level": check.level, "threshold": monitor.threshold}
        if monitor.rediscoveries != plan.r - 1:
            session.rollback()
            return {"adopted": False, "reason": "another re-discovery added a check meanwhile"}
        position = (session.scalar(select(func.max(Check.position)).where(Check.monitor_id == monitor.id)) or 0) + 1
        info.update(level=level, threshold=estimate.value, threshold_std_error=estimate.std_error,
                    threshold_source=estimate.source, detector_horizon=remaining, r=plan.r)
        check = Check(monitor_id=monitor.id, position=position, x=chosen["x"], x_prime=chosen["x_prime"],
                      event=chosen["event"], reversed=False, origin="rediscovery", joined_t=monitor.t, level=level,
                      discovery=info,
                      detector_state=WeightedAggregator(remaining, monitor.gamma, estimate.value).to_state())
        session.add(check)
        monitor.rediscoveries += 1
        session.commit()
        log.info("rediscovery_added_check", monitor_id=str(monitor.id), check_id=str(check.id), t=monitor.t,
                 level=level, threshold=estimate.value)
        return {"adopted": True, "reason": "a better event; added as a new check", "check_id": str(check.id),
                "level": level, "threshold": estimate.value}
