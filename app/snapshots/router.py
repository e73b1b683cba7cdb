"""/v1/monitors/{id}/snapshots and /v1/snapshots/{id}. (Discovery is a job: app.jobs.router.)"""

from __future__ import annotations

import uuid
from typing import TypeVar

from fastapi import APIRouter, Body, Response, status
from sqlalchemy import select

from app.alarms.verdict import snapshot_verdict
from app.api.deps import CurrentPrincipal, SessionDep
from app.api.errors import NotFoundError, problem_responses
from app.api.pagination import CursorQuery, LimitQuery, Page, SortKey, paginate
from app.models.snapshots import Snapshot
from app.monitors.outputs import request_snapshot
from app.monitors.service import get_monitor
from app.snapshots.schemas import (
    SNAPSHOT_STATE,
    SnapshotRead,
    SnapshotRequest,
    SnapshotSummary,
)

router = APIRouter(tags=["snapshots"])


_Summary = TypeVar("_Summary", bound=SnapshotSummary)


def _summary(snap: Snapshot, model: type[_Summary]) -> _Summary:
    result = snap.result or {}
    extra = {"lower_bound": result.get("lower_bound"), "epsilon_hat": result.get("epsilon_hat"),
             "statement": result.get("statement"), "state": SNAPSHOT_STATE[snap.status],
             "verdict": snapshot_verdict(snap.result, status=snap.status)}
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
    "poll `GET /v1/snapshots/{id}` (the `Location` header) until `state` is `succeeded` or `failed` (`status`, "
    "its deprecated alias, says `done` or `failed`).",
    responses=problem_responses(401, 404, 422),
)
def create_snapshot(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep, response: Response,
                    body: SnapshotRequest = Body(default_factory=SnapshotRequest)) -> SnapshotSummary:
    monitor = get_monitor(session, principal.tenant_id, monitor_id)
    snap = request_snapshot(session, monitor, "on_demand", extra_samples=body.extra_samples, alpha=body.alpha)
    response.headers["Location"] = f"/v1/snapshots/{snap.id}"
    return _summary(snap, SnapshotSummary)


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
    return Page[SnapshotSummary](items=[_summary(s, SnapshotSummary) for s in items], next_cursor=next_cursor)


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
    return _summary(snap, SnapshotRead)
