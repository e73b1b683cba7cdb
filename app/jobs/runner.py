"""Running jobs: claim under a lease, run the kind's handler with progress and cancellation, write
the outcome.

- **Claim** (``JobRunner.claim``): ``SELECT … WHERE state = 'queued' OR (state = 'running' AND the
  lease expired) … FOR UPDATE SKIP LOCKED``, then ``UPDATE … RETURNING`` guarded by the same
  condition, so a job is handed to one worker even on SQLite. A job taken again after its
  worker died counts one more attempt; past ``max_attempts`` it fails instead of running again.
- **Run**: the handler gets a :class:`JobContext`. ``ctx.progress(fraction, message)`` stores
  the progress (at most every ``PROGRESS_EVERY`` seconds) and raises :class:`JobCancelled`
  once a cancel was asked. A heartbeat renews the lease every third of it while the job runs,
  also through long computations, and cancels the handler's task when a cancel is asked (so a
  job waiting on sampling stops at once).
- **Finish**: one ``UPDATE`` guarded by the lease: ``succeeded`` with the result, ``failed`` with
  the error, or ``cancelled``. A worker that lost the lease writes nothing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.db import utcnow
from app.jobs.models import Job
from app.sampling.client import SamplingClient
from app.settings import Settings
from app.jobs.context import (  # noqa: F401  (re-exported)
    PROGRESS_EVERY,
    Handler,
    JobCancelled,
    JobContext,
    JobFailed,
    JobLeaseLost,
)

log = structlog.get_logger("dpwatch.jobs")



def json_safe(value: Any) -> Any:
    """A result as strict JSON (Postgres JSONB refuses NaN and infinities): numpy scalars and arrays
    become Python values, non-finite floats become null, tuples lists, other objects strings."""
    import math

    import numpy as np

    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def default_handlers() -> dict[str, Handler]:
    """The jobs this room runs by itself (discovery, audit). The monitors' jobs (re-discovery, search)
    are added by the worker that wires both (app.scheduler.worker.job_handlers): app/jobs sits
    below app/monitors and does not import it."""
    from app.jobs.handlers import run_audit_job, run_discovery_job

    return {"discovery": run_discovery_job, "audit": run_audit_job}


class JobRunner:
    def __init__(self, session_factory: sessionmaker[Session], client: SamplingClient, settings: Settings, *,
                 handlers: dict[str, Handler] | None = None, clock: Callable[[], datetime] = utcnow) -> None:
        self.session_factory = session_factory
        self.client = client
        self.settings = settings
        self.worker_id = settings.worker_id
        self.lease_seconds = settings.job_lease_seconds
        self.handlers = handlers if handlers is not None else default_handlers()
        self.clock = clock

    # -- claim ----------------------------------------------------------------------------

    def _ready(self, now: datetime):  # type: ignore[no-untyped-def]
        return or_(Job.state == "queued",
                   and_(Job.state == "running", or_(Job.lease_expires_at.is_(None), Job.lease_expires_at < now)))

    def claim(self, limit: int = 1) -> list[uuid.UUID]:
        """Lease up to ``limit`` jobs (oldest first); jobs out of attempts fail instead."""
        if limit <= 0:
            return []
        now = self.clock()
        with self.session_factory() as session:
            ready = self._ready(now)
            ids = list(session.scalars(select(Job.id).where(ready).order_by(Job.created_at).limit(limit)
                                       .with_for_update(skip_locked=True)))
            if not ids:
                return []
            rows = session.execute(
                update(Job).where(Job.id.in_(ids), ready)
                .values(state="running", attempts=Job.attempts + 1, lease_owner=self.worker_id,
                        lease_expires_at=now + timedelta(seconds=self.lease_seconds), updated_at=now)
                .returning(Job.id, Job.attempts, Job.max_attempts, Job.cancel_requested, Job.started_at)
                .execution_options(synchronize_session=False)).all()
            claimed = []
            for job_id, attempts, max_attempts, cancel, started_at in rows:
                if cancel:  # asked to stop while its worker was gone
                    self._finish(session, job_id, "cancelled", message="cancelled")
                elif attempts > max_attempts:
                    self._finish(session, job_id, "failed", error=(
                        f"the job was started {max_attempts} times and its worker stopped each time "
                        "(lease expired); giving up"))
                else:
                    if started_at is None:
                        session.execute(update(Job).where(Job.id == job_id).values(started_at=now)
                                        .execution_options(synchronize_session=False))
                    claimed.append(job_id)
            session.commit()
            return claimed

    # -- progress, heartbeat --------------------------------------------------------------

    def write_progress(self, job_id: uuid.UUID, fraction: float, message: str | None) -> str:
        """Store progress and renew the lease. Returns ``ok``, ``cancel`` or ``lost``."""
        now = self.clock()
        values: dict[str, Any] = {"progress": fraction, "updated_at": now,
                                  "lease_expires_at": now + timedelta(seconds=self.lease_seconds)}
        if message is not None:
            values["progress_message"] = message[:500]
        with self.session_factory() as session:
            row = session.execute(
                update(Job).where(Job.id == job_id, Job.lease_owner == self.worker_id, Job.state == "running")
                .values(**values).returning(Job.cancel_requested)
                .execution_options(synchronize_session=False)).first()
            session.commit()
        if row is None:
            return "lost"
        return "cancel" if row[0] else "ok"

    def renew(self, job_id: uuid.UUID) -> str:
        now = self.clock()
        with self.session_factory() as session:
            row = session.execute(
                update(Job).where(Job.id == job_id, Job.lease_owner == self.worker_id, Job.state == "running")
                .values(lease_expires_at=now + timedelta(seconds=self.lease_seconds))
                .returning(Job.cancel_requested).execution_options(synchronize_session=False)).first()
            session.commit()
        if row is None:
            return "lost"
        return "cancel" if row[0] else "ok"

    async def _heartbeat(self, ctx: JobContext, task: asyncio.Task[dict[str, Any]]) -> None:
        interval = max(0.2, self.lease_seconds / 3)
        while not task.done():
            await asyncio.sleep(interval)
            if task.done():
                return
            state = await asyncio.to_thread(self.renew, ctx.job_id)
            if state in ("cancel", "lost"):
                if state == "cancel":
                    ctx.cancelled.set()
                task.cancel()
                return

    # -- finish ---------------------------------------------------------------------------

    def _finish(self, session: Session, job_id: uuid.UUID, state: str, *, result: dict[str, Any] | None = None,
                error: str | None = None, message: str | None = None, owner_guard: bool = False) -> bool:
        now = self.clock()
        values: dict[str, Any] = {"state": state, "finished_at": now, "updated_at": now, "lease_owner": None,
                                  "lease_expires_at": None}
        if result is not None:
            values["result"] = result
        if error is not None:
            values["error"] = error[:4000]
        if state == "succeeded":
            values["progress"] = 1.0
            values["progress_message"] = message or "done"
        elif message is not None:
            values["progress_message"] = message[:500]
        stmt = update(Job).where(Job.id == job_id)
        if owner_guard:
            stmt = stmt.where(Job.lease_owner == self.worker_id, Job.state == "running")
        done = session.execute(stmt.values(**values).returning(Job.id)
                               .execution_options(synchronize_session=False)).first()
        return done is not None

    def finish(self, job_id: uuid.UUID, state: str, **kwargs: Any) -> bool:
        if kwargs.get("result") is not None:
            kwargs["result"] = json_safe(kwargs["result"])
        with self.session_factory() as session:
            ok = self._finish(session, job_id, state, owner_guard=True, **kwargs)
            session.commit()
            return ok

    # -- run ------------------------------------------------------------------------------

    def _context(self, job_id: uuid.UUID) -> JobContext | None:
        with self.session_factory() as session:
            job = session.get(Job, job_id)
            if job is None or job.lease_owner != self.worker_id or job.state != "running":
                return None
            return JobContext(job_id=job.id, tenant_id=job.tenant_id, kind=job.kind, params=dict(job.params),
                              mechanism_id=job.mechanism_id, monitor_id=job.monitor_id, attempt=job.attempts,
                              runner=self, client=self.client, settings=self.settings)

    async def run(self, job_id: uuid.UUID) -> str:
        """Run a job this worker has claimed; returns the state it ended in (or ``lost``)."""
        ctx = await asyncio.to_thread(self._context, job_id)
        if ctx is None:
            return "lost"
        handler = self.handlers.get(ctx.kind)
        started = time.perf_counter()
        bound = log.bind(job_id=str(job_id), kind=ctx.kind, attempt=ctx.attempt)
        if handler is None:
            await asyncio.to_thread(self.finish, job_id, "failed", error=f"no handler for jobs of kind {ctx.kind!r}")
            return "failed"
        bound.info("job_started")
        task: asyncio.Task[dict[str, Any]] = asyncio.ensure_future(handler(ctx))
        heartbeat = asyncio.ensure_future(self._heartbeat(ctx, task))
        state, kwargs = "failed", {}
        try:
            result = await task
            state, kwargs = "succeeded", {"result": result}
        except (JobCancelled, asyncio.CancelledError):
            if not ctx.cancelled.is_set():  # the lease was lost, or the worker is stopping
                heartbeat.cancel()
                if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                bound.warning("job_lease_lost")
                return "lost"
            state, kwargs = "cancelled", {"message": "cancelled"}
        except JobLeaseLost:
            heartbeat.cancel()
            bound.warning("job_lease_lost")
            return "lost"
        except JobFailed as exc:
            kwargs = {"error": str(exc)}
        except Exception as exc:  # a handler's failure is the job's, not the worker's
            reason = getattr(exc, "reason", None)
            detail = getattr(exc, "detail", None)
            text = f"{reason}: {detail}" if reason and detail else f"{type(exc).__name__}: {exc}"
            kwargs = {"error": text}
            if not isinstance(exc, ValueError) and reason is None:
                bound.exception("job_crashed")
        finally:
            heartbeat.cancel()
        written = await asyncio.to_thread(self.finish, job_id, state, **kwargs)
        bound.info("job_finished", state=state, written=written, seconds=round(time.perf_counter() - started, 3),
                   error=kwargs.get("error"))
        return state if written else "lost"
