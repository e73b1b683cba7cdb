"""Jobs: enqueue, read, list, cancel (services never commit)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api.errors import ConflictError, NotFoundError
from app.api.pagination import SortKey, paginate
from app.db import utcnow
from app.jobs.schemas import JobProgress, JobRead
from app.models.jobs import FINISHED_STATES, Job


def enqueue_job(session: Session, tenant_id: uuid.UUID, kind: str, params: dict[str, Any], *,
                mechanism_id: uuid.UUID | None = None, monitor_id: uuid.UUID | None = None,
                now: datetime | None = None) -> Job:
    """A queued job; a worker claims and runs it (app.jobs.runner)."""
    now = now or utcnow()
    job = Job(tenant_id=tenant_id, kind=kind, state="queued", mechanism_id=mechanism_id, monitor_id=monitor_id,
              params=params, progress=0.0, progress_message="queued", cancel_requested=False, attempts=0,
              created_at=now, updated_at=now)
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, tenant_id: uuid.UUID, job_id: uuid.UUID, *, for_update: bool = False) -> Job:
    stmt = select(Job).where(Job.id == job_id, Job.tenant_id == tenant_id)
    if for_update:
        stmt = stmt.with_for_update()
    job = session.scalar(stmt)
    if job is None:
        raise NotFoundError(f"Job {job_id} not found.")
    return job


def list_jobs(session: Session, tenant_id: uuid.UUID, *, kind: str | None = None, state: str | None = None,
              mechanism_id: uuid.UUID | None = None, monitor_id: uuid.UUID | None = None, limit: int,
              cursor: str | None) -> tuple[list[Job], str | None]:
    stmt = select(Job).where(Job.tenant_id == tenant_id)
    if kind is not None:
        stmt = stmt.where(Job.kind == kind)
    if state is not None:
        stmt = stmt.where(Job.state == state)
    if mechanism_id is not None:
        stmt = stmt.where(Job.mechanism_id == mechanism_id)
    if monitor_id is not None:
        stmt = stmt.where(Job.monitor_id == monitor_id)
    return paginate(session, stmt, [SortKey(Job.created_at, "datetime"), SortKey(Job.id, "uuid")], limit, cursor)


def cancel_job(session: Session, job: Job, *, now: datetime | None = None) -> Job:
    """Cancel a job: a queued job is cancelled at once; a running one is asked to stop, and stops
    at its next step (cooperative). 409 once it has finished."""
    if job.state in FINISHED_STATES:
        raise ConflictError(f"Job {job.id} has already finished ({job.state}); nothing to cancel.")
    now = now or utcnow()
    job.cancel_requested = True
    job.updated_at = now
    if job.state == "queued":
        job.state = "cancelled"
        job.finished_at = now
        job.progress_message = "cancelled before it started"
        job.failure_reason = "cancelled"
    session.flush()
    return job


def active_job(session: Session, monitor_id: uuid.UUID, kind: str) -> Job | None:
    """A queued or running job of ``kind`` for a monitor, if there is one."""
    return session.scalar(select(Job).where(Job.monitor_id == monitor_id, Job.kind == kind,
                                            Job.state.in_(("queued", "running"))).limit(1))


def _typed_result(kind: str, result: dict[str, Any] | None) -> Any:
    """The result as its kind's schema (documented in the OpenAPI), or as stored if it does not fit."""
    from pydantic import ValidationError

    from app.jobs.schemas import AuditResult, DiscoveryResult, RediscoveryResult
    from app.search.schemas import SearchResultModel

    if result is None:
        return None
    model = {"discovery": DiscoveryResult, "audit": AuditResult, "rediscovery": RediscoveryResult,
             "search": SearchResultModel}.get(kind)
    try:
        return model.model_validate(result) if model is not None else result
    except ValidationError:
        return result


def to_job_read(job: Job) -> JobRead:
    return JobRead(
        id=job.id, kind=job.kind, state=job.state, mechanism_id=job.mechanism_id,  # type: ignore[arg-type]
        monitor_id=job.monitor_id, params=job.params,
        progress=JobProgress(fraction=min(1.0, max(0.0, job.progress)), message=job.progress_message),
        result=_typed_result(job.kind, job.result), error=job.error, failure_reason=job.failure_reason,  # type: ignore[arg-type]
        cancel_requested=job.cancel_requested, attempts=job.attempts,
        created_at=job.created_at, updated_at=job.updated_at, started_at=job.started_at,
        finished_at=job.finished_at,
    )
