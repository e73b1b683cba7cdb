"""The handlers of the API's jobs: discovery (candidate checks) and audits (a claimed ε tested once).

Each takes a :class:`~app.jobs.runner.JobContext`, reports progress through it, and returns the
JSON result stored on the job. The statistics are the engine's (``app.snapshots.discovery``,
``app.audit``); this module only wires them to the job's mechanism, sampling client and
progress.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from sqlalchemy import select

from app.jobs.runner import JobContext, JobFailed
from app.jobs.schemas import AuditRequest
from app.mechanisms.models import Mechanism
from app.monitors.runner import endpoint_of
from app.sampling.client import MechanismEndpoint
from app.snapshots.discovery import DiscoveryOptions, draw_pairs, rank_candidates, table1_candidates
from app.snapshots.schemas import DiscoverRequest


def _mechanism(ctx: JobContext) -> tuple[MechanismEndpoint, str]:
    with ctx.session_factory() as session:
        mechanism = session.scalar(select(Mechanism).where(Mechanism.id == ctx.mechanism_id,
                                                           Mechanism.tenant_id == ctx.tenant_id))
        if mechanism is None:
            raise JobFailed(f"mechanism {ctx.mechanism_id} no longer exists")
        return endpoint_of(mechanism), mechanism.output_kind


def _distinct_databases(pairs: list[tuple[Any, Any]]) -> int:
    return len({json.dumps(db, sort_keys=True) for pair in pairs for db in pair})


async def run_discovery_job(ctx: JobContext) -> dict[str, Any]:
    """``POST /v1/mechanisms/{id}/discover``: draw, run MPL on every pair, rank candidate checks."""
    request = DiscoverRequest.model_validate(ctx.params)
    endpoint, output_kind = await asyncio.to_thread(_mechanism, ctx)
    pairs = ([(p.x, p.x_prime) for p in request.pairs] if request.pairs is not None
             else table1_candidates(request.queries))
    options = DiscoveryOptions(samples=request.samples, fresh_samples=request.fresh_samples, alpha=request.alpha,
                               epsilon=request.epsilon)
    started = time.perf_counter()
    ctx.progress(0.0, f"drawing {options.samples + options.fresh_samples} outputs on each of "
                      f"{_distinct_databases(pairs)} databases", force=True)
    samples = await draw_pairs(ctx.client, endpoint, pairs, options, label=f"job-{ctx.job_id.hex[:12]}",
                               progress=ctx.steps(0.0, 0.8, _distinct_databases(pairs)))
    ctx.progress(0.8, f"MPL on {len(pairs)} pairs", force=True)
    result = await asyncio.to_thread(rank_candidates, samples, output_kind, options)
    result["candidates"] = result["candidates"][: request.top]
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


async def run_audit_job(ctx: JobContext) -> dict[str, Any]:
    """``POST /v1/mechanisms/{id}/audits``: the engine's one-shot audit of the claimed ε."""
    from app.audit import run_audit
    from app.stats.mpl import MPLParams

    request = AuditRequest.model_validate(ctx.params)
    endpoint, output_kind = await asyncio.to_thread(_mechanism, ctx)
    pairs = ([(p.x, p.x_prime) for p in request.pairs] if request.pairs is not None
             else table1_candidates(request.queries))
    overrides = {k: v for k, v in {"n": request.samples, "N": request.fresh_samples, "tau": request.tau,
                                   "alpha": request.alpha}.items() if v is not None}
    params = MPLParams.for_output_kind(output_kind, **overrides)
    ctx.progress(0.0, "starting the audit", force=True)
    # The engine reports its steps in words: one per database drawn, plus a few per phase.
    steps = ctx.steps(0.0, 0.95, _distinct_databases(pairs) + 4)
    result = await run_audit(endpoint, pairs, params, allow_networks=list(ctx.settings.allow_networks),
                             epsilon=request.epsilon, progress=steps)
    return result
