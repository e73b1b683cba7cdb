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
- **Isolation** (``settings.job_isolation == "process"``, the default): the handler runs in a child
  process with a memory, CPU-time and wall-time limit (app/jobs/isolation.py); the worker's loop
  only polls it, renews the lease every second and kills it when a cancel is asked. A child over a
  limit ends the job ``failed`` with ``failure_reason`` ``memory limit`` or ``time limit`` (not
  retried: it would hit the limit again); a child that dies without an answer is ``crashed`` and
  queued again until ``max_attempts``. ``inline`` runs handlers on the loop (tests that inject
  closures, single-process tools).
- **Fair claims**: the next job is the oldest ready job of the tenant with the fewest running jobs,
  one tenant after another, and no tenant runs more than its ``max_concurrent_jobs`` quota at once
  (app/quotas); on Postgres claims are serialised by a transaction-level advisory lock so that two
  workers never both see the same counts.
- **Finish**: one ``UPDATE`` guarded by the lease: ``succeeded`` with the result, ``failed`` with
  the error and its ``failure_reason``, or ``cancelled``. A worker that lost the lease writes nothing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.db import make_engine, make_session_factory, utcnow
from app.jobs.child import Limits, resolve_ref
from app.jobs.context import (  # noqa: F401  (re-exported)
    PROGRESS_EVERY,
    Handler,
    JobCancelled,
    JobContext,
    JobFailed,
    JobLeaseLost,
)
from app.models.jobs import Job
from app.sampling.client import SamplingClient
from app.settings import Settings

log = structlog.get_logger("dpwatch.jobs")

#: Key of the transaction-level advisory lock that serialises fair job claims (Postgres).
JOB_CLAIM_LOCK_KEY = 0x6470_6A6F_6273  # "dpjobs"


def job_sampling_client(settings: Settings, http: Any = None) -> SamplingClient:
    """The sampling client of jobs: they draw tens of thousands of outputs per database, so their
    deadline is their own (the job's lease is renewed while it runs), not a period's. With ``http``
    (a worker's safe client) it shares that client's pools; otherwise it owns one."""
    from app import observability as obs
    from app.sampling.client import SamplingClientConfig

    config = SamplingClientConfig(deadline_seconds=300, max_response_bytes=settings.sampling_max_bytes,
                                  max_keys=settings.sampling_max_keys, max_key_length=settings.sampling_max_key_length,
                                  max_attempts=settings.sampling_max_attempts,
                                  backoff_initial=settings.sampling_backoff_seconds)
    if http is not None:
        return SamplingClient(http=http, config=config, on_request=obs.observe_sampling_request)
    return SamplingClient(http_config=settings.safe_http_config(), config=config,
                          on_request=obs.observe_sampling_request)


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

    def _ready(self, now: datetime) -> ColumnElement[bool]:
        return or_(Job.state == "queued",
                   and_(Job.state == "running", or_(Job.lease_expires_at.is_(None), Job.lease_expires_at < now)))

    def _tenant_caps(self, session: Session, tenant_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
        from app.quotas.service import concurrent_job_caps

        return concurrent_job_caps(session, tenant_ids, self.settings)

    def _pick_fair(self, session: Session, now: datetime, limit: int) -> list[uuid.UUID]:
        """Up to ``limit`` ready jobs, one tenant after another: each time the oldest ready job of
        the tenant with the fewest running jobs (the oldest head first among equals), skipping
        tenants at their concurrent-jobs quota. Locked rows (another claim) are skipped."""
        ready = self._ready(now)
        running = dict(session.execute(
            select(Job.tenant_id, func.count()).where(Job.state == "running", Job.lease_expires_at >= now)
            .group_by(Job.tenant_id)).all())
        heads = dict(session.execute(select(Job.tenant_id, func.min(Job.created_at)).where(ready)
                                     .group_by(Job.tenant_id)).all())
        if not heads:
            return []
        caps = self._tenant_caps(session, list(heads))
        picked: list[uuid.UUID] = []
        while len(picked) < limit and heads:
            tenant = min(heads, key=lambda t: (running.get(t, 0), heads[t]))
            if caps.get(tenant, 0) and running.get(tenant, 0) >= caps[tenant]:
                del heads[tenant]
                continue
            job_id = session.scalar(select(Job.id).where(ready, Job.tenant_id == tenant, Job.id.not_in(picked))
                                    .order_by(Job.created_at).limit(1).with_for_update(skip_locked=True))
            if job_id is None:
                del heads[tenant]
                continue
            picked.append(job_id)
            running[tenant] = running.get(tenant, 0) + 1
        return picked

    def claim(self, limit: int = 1) -> list[uuid.UUID]:
        """Lease up to ``limit`` jobs, fairly across tenants (``_pick_fair``); jobs out of attempts
        fail instead."""
        if limit <= 0:
            return []
        now = self.clock()
        with self.session_factory() as session:
            if session.get_bind().dialect.name == "postgresql":
                session.execute(select(func.pg_advisory_xact_lock(JOB_CLAIM_LOCK_KEY)))
            ready = self._ready(now)
            ids = self._pick_fair(session, now, limit)
            if not ids:
                session.commit()
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
                    self._finish(session, job_id, "cancelled", message="cancelled", failure_reason="cancelled")
                elif attempts > max_attempts:
                    self._finish(session, job_id, "failed", failure_reason="crashed", error=(
                        f"the job was started {max_attempts} times and its worker or process stopped each time "
                        "(lease expired or crashed); giving up"))
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
                error: str | None = None, message: str | None = None, owner_guard: bool = False,
                failure_reason: str | None = None) -> bool:
        now = self.clock()
        values: dict[str, Any] = {"state": state, "finished_at": now, "updated_at": now, "lease_owner": None,
                                  "lease_expires_at": None}
        if state != "succeeded":
            values["failure_reason"] = failure_reason or ("cancelled" if state == "cancelled" else "error")
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

    def requeue(self, job_id: uuid.UUID, message: str) -> bool:
        """Put a job whose process crashed back in the queue (its attempts are counted by the claim)."""
        with self.session_factory() as session:
            done = session.execute(
                update(Job).where(Job.id == job_id, Job.lease_owner == self.worker_id, Job.state == "running")
                .values(state="queued", lease_owner=None, lease_expires_at=None, updated_at=self.clock(),
                        progress_message=message[:500])
                .returning(Job.id).execution_options(synchronize_session=False)).first()
            session.commit()
            return done is not None

    async def execute(self, job_id: uuid.UUID) -> tuple[str, dict[str, Any]]:
        """Run a claimed job's handler here (on this loop); returns ``(state, kwargs)`` for
        :meth:`finish`, or ``("lost", {})``. A child process calls this (app/jobs/child.py); so does
        :meth:`run` when jobs run inline."""
        ctx = await asyncio.to_thread(self._context, job_id)
        if ctx is None:
            return "lost", {}
        handler = self.handlers.get(ctx.kind)
        bound = log.bind(job_id=str(job_id), kind=ctx.kind, attempt=ctx.attempt)
        if handler is None:
            return "failed", {"error": f"no handler for jobs of kind {ctx.kind!r}", "failure_reason": "error"}
        task: asyncio.Task[dict[str, Any]] = asyncio.ensure_future(handler(ctx))
        heartbeat = asyncio.ensure_future(self._heartbeat(ctx, task))
        try:
            result = await task
            return "succeeded", {"result": result}
        except (JobCancelled, asyncio.CancelledError):
            if not ctx.cancelled.is_set():  # the lease was lost, or the worker is stopping
                heartbeat.cancel()
                if (current := asyncio.current_task()) is not None and current.cancelling():
                    raise
                bound.warning("job_lease_lost")
                return "lost", {}
            return "cancelled", {"message": "cancelled", "failure_reason": "cancelled"}
        except JobLeaseLost:
            heartbeat.cancel()
            bound.warning("job_lease_lost")
            return "lost", {}
        except JobFailed as exc:
            return "failed", {"error": str(exc), "failure_reason": "error"}
        except MemoryError:
            return "failed", {"error": "the job went over its memory limit", "failure_reason": "memory limit"}
        except Exception as exc:  # a handler's failure is the job's, not the worker's
            reason = getattr(exc, "reason", None)
            detail = getattr(exc, "detail", None)
            text = f"{reason}: {detail}" if reason and detail else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, ValueError) and reason is None:
                bound.exception("job_crashed")
            return "failed", {"error": text, "failure_reason": "error"}
        finally:
            heartbeat.cancel()

    def limits(self) -> Limits:
        s = self.settings
        return Limits(memory_bytes=s.job_memory_mb * 2**20, cpu_seconds=s.job_cpu_seconds,
                      wall_seconds=float(s.job_wall_seconds))

    async def _in_child(self, ctx: JobContext, ref: str) -> tuple[str, dict[str, Any]]:
        from app.jobs.isolation import run_job_in_child

        async def poll() -> str:
            return await asyncio.to_thread(self.renew, ctx.job_id)

        outcome = await run_job_in_child(str(ctx.job_id), self.settings, ctx.kind, ref, self.limits(), poll)
        log.info("job_process_ended", job_id=str(ctx.job_id), state=outcome.state,
                 failure_reason=outcome.failure_reason, peak_rss_mb=round(outcome.peak_rss / 2**20, 1),
                 seconds=round(outcome.seconds, 3))
        return outcome.state, outcome.kwargs

    async def run(self, job_id: uuid.UUID) -> str:
        """Run a job this worker has claimed (in a child process unless jobs run inline); returns
        the state it ended in, ``queued`` when its process crashed and it may be tried again, or
        ``lost``."""
        from app.jobs.isolation import handler_ref

        ctx = await asyncio.to_thread(self._context, job_id)
        if ctx is None:
            return "lost"
        started = time.perf_counter()
        bound = log.bind(job_id=str(job_id), kind=ctx.kind, attempt=ctx.attempt)
        handler = self.handlers.get(ctx.kind)
        ref = handler_ref(handler) if handler is not None else None
        bound.info("job_started", isolated=bool(ref and self.settings.job_isolation == "process"))
        if ref is not None and self.settings.job_isolation == "process":
            state, kwargs = await self._in_child(ctx, ref)
        else:
            state, kwargs = await self.execute(job_id)
        if state == "lost":
            return "lost"
        crashed = state == "failed" and kwargs.get("failure_reason") == "crashed"
        if crashed and ctx.attempt < await asyncio.to_thread(self._max_attempts, job_id):
            again = await asyncio.to_thread(self.requeue, job_id, f"{kwargs.get('error')}; queued again "
                                            f"(attempt {ctx.attempt} ended)")
            bound.warning("job_process_crashed", error=kwargs.get("error"), requeued=again)
            return "queued" if again else "lost"
        written = await asyncio.to_thread(self.finish, job_id, state, **kwargs)
        bound.info("job_finished", state=state, written=written, seconds=round(time.perf_counter() - started, 3),
                   error=kwargs.get("error"), failure_reason=kwargs.get("failure_reason"))
        return state if written else "lost"

    def _max_attempts(self, job_id: uuid.UUID) -> int:
        with self.session_factory() as session:
            return session.scalar(select(Job.max_attempts).where(Job.id == job_id)) or 1


def run_job_here(job_id: str, settings: Settings, kind: str, handler_ref: str) -> tuple[str, dict[str, Any]]:
    """Run one claimed job in this process (a job's child process, app/jobs/child.py): the handler
    named by ``handler_ref`` on this process's own event loop, database engine and sampling client;
    returns ``(state, kwargs)`` for the parent to write."""
    handler = resolve_ref(handler_ref)

    async def main() -> tuple[str, dict[str, Any]]:
        engine = make_engine(settings.database_url)
        client = job_sampling_client(settings)
        try:
            runner = JobRunner(make_session_factory(engine), client, settings, handlers={kind: handler})
            return await runner.execute(uuid.UUID(job_id))
        finally:
            await client.aclose()
            engine.dispose()

    return asyncio.run(main())
