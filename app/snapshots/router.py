"""/v1/monitors/{id}/snapshots and /v1/snapshots/{id}."""

from __future__ import annotations

import time
import uuid

from fastapi import APIRouter, Body, Response, status
from sqlalchemy import select

from app.api.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.api.errors import InvalidInputError, NotFoundError, ProblemError, problem_responses
from app.api.pagination import CursorQuery, LimitQuery, Page, SortKey, paginate
from app.mechanisms.service import get_mechanism
from app.monitors.runner import endpoint_of
from app.monitors.service import get_monitor
from app.sampling.client import SamplingClient, SamplingClientConfig
from app.sampling.protocol import SamplingError
from app.snapshots.discovery import DiscoveryOptions, discover, table1_candidates
from app.snapshots.models import Snapshot
from app.snapshots.schemas import DiscoverRequest, DiscoverResponse, SnapshotRead, SnapshotRequest, SnapshotSummary
from app.snapshots.service import request_snapshot

router = APIRouter(tags=["snapshots"])


def _summary(snap: Snapshot, model: type[SnapshotSummary] = SnapshotSummary) -> SnapshotSummary:
    result = snap.result or {}
    extra = {"lower_bound": result.get("lower_bound"), "epsilon_hat": result.get("epsilon_hat"),
             "statement": result.get("statement")}
    if model is SnapshotRead:
        extra["result"] = snap.result
    return model.model_validate({**{f: getattr(snap, f) for f in SnapshotSummary.model_fields if f not in extra},
                                 **extra})


@router.post(
    "/monitors/{monitor_id}/snapshots",
    response_model=SnapshotSummary,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Take an MPL snapshot",
    description="Queues an MPL snapshot of the monitor's pairs (seed 003, Algorithm 4) and answers with the job: "
    "poll `GET /v1/snapshots/{id}` (the `Location` header) until `status` is `done` or `failed`.",
    responses=problem_responses(401, 404, 422),
)
def create_snapshot(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep, response: Response,
                    body: SnapshotRequest = Body(default_factory=SnapshotRequest)) -> SnapshotSummary:
    monitor = get_monitor(session, principal.tenant_id, monitor_id)
    snap = request_snapshot(session, monitor, "on_demand", extra_samples=body.extra_samples, alpha=body.alpha)
    response.headers["Location"] = f"/v1/snapshots/{snap.id}"
    return _summary(snap)


@router.get(
    "/monitors/{monitor_id}/snapshots",
    response_model=Page[SnapshotSummary],
    summary="List a monitor's snapshots",
    description="Newest first, without their curves.",
    responses=problem_responses(401, 404, 422),
)
def list_snapshots(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep,
                   limit: LimitQuery = 50, cursor: CursorQuery = None) -> Page[SnapshotSummary]:
    get_monitor(session, principal.tenant_id, monitor_id)
    stmt = select(Snapshot).where(Snapshot.monitor_id == monitor_id, Snapshot.tenant_id == principal.tenant_id)
    items, next_cursor = paginate(session, stmt, [SortKey(Snapshot.created_at, "datetime"),
                                                  SortKey(Snapshot.id, "uuid")], limit, cursor)
    return Page[SnapshotSummary](items=[_summary(s) for s in items], next_cursor=next_cursor)


@router.get(
    "/snapshots/{snapshot_id}",
    response_model=SnapshotRead,
    summary="Get a snapshot with its curves",
    responses=problem_responses(401, 404, 422),
)
def get_snapshot(snapshot_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> SnapshotRead:
    snap = session.scalar(select(Snapshot).where(Snapshot.id == snapshot_id,
                                                 Snapshot.tenant_id == principal.tenant_id))
    if snap is None:
        raise NotFoundError(f"Snapshot {snapshot_id} not found.")
    return _summary(snap, SnapshotRead)  # type: ignore[return-value]


@router.post(
    "/mechanisms/{mechanism_id}/discover",
    response_model=DiscoverResponse,
    tags=["mechanisms"],
    summary="Find the events worth watching",
    description="Draws `samples` + `fresh_samples` outputs on each database of the candidate pairs, runs MPL "
    "(seed 003, Algorithms 3-4) and answers with ranked candidate checks: the pair, a small event around t̂, "
    "ε̂ and the lower bound LB. Synchronous: with the defaults and 8 pairs, expect seconds to a minute. "
    "502 if the endpoint fails.",
    responses=problem_responses(401, 404, 422, 502),
)
async def discover_events(mechanism_id: uuid.UUID, body: DiscoverRequest, principal: CurrentPrincipal,
                          session: SessionDep, settings: SettingsDep) -> DiscoverResponse:
    mechanism = get_mechanism(session, principal.tenant_id, mechanism_id)
    endpoint = endpoint_of(mechanism)
    session.close()  # release the connection while sampling
    pairs = ([(p.x, p.x_prime) for p in body.pairs] if body.pairs is not None else table1_candidates(body.queries))
    options = DiscoveryOptions(samples=body.samples, fresh_samples=body.fresh_samples, alpha=body.alpha,
                               epsilon=body.epsilon)
    started = time.perf_counter()
    try:
        async with SamplingClient(config=SamplingClientConfig(deadline_seconds=300,
                                                              max_response_bytes=settings.sampling_max_bytes),
                                  http_config=settings.safe_http_config()) as client:
            result = await discover(client, endpoint, mechanism.output_kind, pairs, options,
                                    label=f"discover-{mechanism_id.hex[:12]}")
    except SamplingError as exc:
        raise ProblemError(f"Sampling the mechanism failed ({exc.reason}): {exc.detail}", status=502,
                           slug="sampling-failed") from exc
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from exc
    result["candidates"] = result["candidates"][: body.top]
    return DiscoverResponse(**result, seconds=round(time.perf_counter() - started, 3))
