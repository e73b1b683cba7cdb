"""The handlers of the API's jobs: discovery (candidate checks) and audits (a claim tested once).

Each takes a :class:`~app.jobs.runner.JobContext`, reports progress through it, and returns the
JSON result stored on the job. The statistics are the engine's (``app.audit``: rounds of fresh
draws, held-out Clopper–Pearson tests, the union bound; docs/audit.md); this module wires them
to the job's mechanism, sampling client, progress and cancellation.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from app.audit.discovery import discover_checks
from app.audit.engine import (
    AuditCancelled,
    AuditSettings,
    Progress,
    Sampler,
    run_engine,
)
from app.jobs.context import JobCancelled, JobContext, load_mechanism
from app.mechanisms.contract import contract_of, endpoint_of
from app.models.mechanisms import Mechanism
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.stats.claims import dp_claim
from app.stats.mpl import table1_pairs
from app.stats.shapes import OutputShape


def mechanism_shape(mechanism: Mechanism) -> OutputShape:
    """The shape the engine samples in: the mechanism's contract, else its ``output_kind``'s."""
    return contract_of(mechanism) or OutputShape.from_output_kind(mechanism.output_kind, mechanism.dim)


def shaped_endpoint(mechanism: Mechanism, shape: OutputShape) -> MechanismEndpoint:
    return dataclasses.replace(endpoint_of(mechanism), shape=shape)


def period_sampler(client: SamplingClient, endpoint: MechanismEndpoint, *, label: str, period: int = 0) -> Sampler:
    """The engine's sampler over the service's client; requests carry ``period`` (a monitor's
    discovery sends its current period, so that an endpoint versioned by period answers as deployed)."""
    counter = {"i": 0}

    async def sample(database: Any, n: int) -> Any:
        counter["i"] += 1
        return await client.sample(endpoint, database, n, monitor_id=label, period=period,
                                   request_id_prefix=f"{label}-{counter['i']}")

    return sample


def progress_reporter(ctx: JobContext, start: float = 0.0, end: float = 1.0) -> Callable[[Progress], Awaitable[None]]:
    """The engine's progress callback: the share of the budget drawn, and its message."""

    async def report(p: Progress) -> None:
        fraction = start + (end - start) * (p.samples_used / max(1, p.budget_samples))
        lb = "" if p.lower_bound is None else f"; best lower bound so far {p.lower_bound:.3g}"
        await asyncio.to_thread(ctx.progress, fraction, f"{p.message}{lb}")

    return report




def _pairs(request: Any) -> list[tuple[Any, Any]]:
    if request.pairs is not None:
        return [(p.x, p.x_prime) for p in request.pairs]
    return [(list(p.x), list(p.xp)) for p in table1_pairs(request.queries)]


async def run_discovery_job(ctx: JobContext) -> dict[str, Any]:
    """``POST /v1/mechanisms/{id}/discover``: the engine's discovery, candidates ranked."""
    from app.jobs.schemas import DiscoverRequest

    request = DiscoverRequest.model_validate(ctx.params)
    mechanism = await asyncio.to_thread(load_mechanism, ctx)
    shape = mechanism_shape(mechanism)
    settings = AuditSettings(alpha=request.alpha, budget=request.budget, first_round=request.first_round,
                             region=request.region, learned=request.learned)
    ctx.progress(0.0, f"discovery on {len(_pairs(request))} pair(s), up to {request.budget} outputs per database",
                 force=True)
    try:
        found = await discover_checks(
            period_sampler(ctx.client, shaped_endpoint(mechanism, shape), label=f"job-{ctx.job_id.hex[:12]}"),
            _pairs(request), shape, epsilon=request.epsilon, settings=settings, progress=progress_reporter(ctx),
            cancel=ctx.cancelled)
    except AuditCancelled as exc:
        raise JobCancelled(str(exc)) from None
    found["candidates"] = found["candidates"][: request.top]
    return found


async def run_audit_job(ctx: JobContext) -> dict[str, Any]:
    """``POST /v1/mechanisms/{id}/audits``: the engine's audit of the claim, in rounds."""
    from app.jobs.schemas import AuditRequest

    request = AuditRequest.model_validate(ctx.params)
    mechanism = await asyncio.to_thread(load_mechanism, ctx)
    shape = mechanism_shape(mechanism)
    settings = AuditSettings(alpha=request.alpha, budget=request.budget, first_round=request.first_round,
                             region=request.region, learned=request.learned)
    ctx.progress(0.0, f"audit of {dp_claim(request.epsilon, request.delta).describe()}", force=True)
    try:
        result = await run_engine(
            period_sampler(ctx.client, shaped_endpoint(mechanism, shape), label=f"job-{ctx.job_id.hex[:12]}"),
            _pairs(request), shape, dp_claim(request.epsilon, request.delta), settings,
            progress=progress_reporter(ctx), cancel=ctx.cancelled)
    except AuditCancelled as exc:
        raise JobCancelled(str(exc)) from None
    from app.audit.service import (
        with_power,  # not refuted: what the audit would have caught (docs/audit.md §9)
    )

    result = await with_power(result, dp_claim(request.epsilon, request.delta))
    out = result.to_dict()
    out["refutes_claim"] = out["refuted"]
    return out
