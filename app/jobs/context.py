"""What a job handler sees: its context, its progress reports, and the ways it stops.

:class:`app.jobs.runner.JobRunner` builds a :class:`JobContext` for each job it runs; handlers
(app.jobs.handlers, app.monitors.rediscovery) import only this module, never the runner.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.models.mechanisms import Mechanism
from app.sampling.client import SamplingClient
from app.settings import Settings


class ProgressSink(Protocol):
    """The part of the job runner a context talks to (app.jobs.runner.JobRunner)."""

    session_factory: sessionmaker[Session]

    def write_progress(self, job_id: uuid.UUID, fraction: float, message: str | None) -> str: ...


#: Progress is written at most this often (seconds); the last update of a step always lands.
PROGRESS_EVERY = 0.5


class JobCancelled(Exception):
    """Raised inside a job when a cancel was asked."""


class JobLeaseLost(Exception):
    """Raised inside a job when another worker has taken it (this one's lease expired)."""


class JobFailed(Exception):
    """A handler's way to fail with a message meant for the user (no traceback in the log)."""


@dataclass
class JobContext:
    """What a handler sees of its job, and how it reports progress."""

    job_id: uuid.UUID
    tenant_id: uuid.UUID
    kind: str
    params: dict[str, Any]
    mechanism_id: uuid.UUID | None
    monitor_id: uuid.UUID | None
    attempt: int
    runner: ProgressSink
    client: SamplingClient
    settings: Settings
    cancelled: threading.Event = field(default_factory=threading.Event)
    _last_write: float = 0.0
    _fraction: float = 0.0

    @property
    def session_factory(self) -> sessionmaker[Session]:
        return self.runner.session_factory

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def progress(self, fraction: float | None = None, message: str | None = None, *, force: bool = False) -> None:
        """Record progress (``fraction`` in [0, 1], never going back) and stop if cancelled.

        Safe to call from the event loop or from a worker thread; writes are throttled."""
        self.check_cancelled()
        if fraction is not None:
            self._fraction = max(self._fraction, min(1.0, max(0.0, float(fraction))))
        now = time.monotonic()
        if not force and now - self._last_write < PROGRESS_EVERY:
            return
        self._last_write = now
        state = self.runner.write_progress(self.job_id, self._fraction, message)
        if state == "lost":
            raise JobLeaseLost(f"job {self.job_id} is no longer leased by this worker")
        if state == "cancel":
            self.cancelled.set()
            raise JobCancelled(f"job {self.job_id} was cancelled")


Handler = Callable[[JobContext], Awaitable[dict[str, Any]]]


def load_mechanism(ctx: JobContext) -> Mechanism:
    """The job's mechanism, detached from its session (the tenant's own; JobFailed once deleted)."""
    with ctx.session_factory() as session:
        mechanism = session.scalar(select(Mechanism).where(Mechanism.id == ctx.mechanism_id,
                                                           Mechanism.tenant_id == ctx.tenant_id))
        if mechanism is None:
            raise JobFailed(f"mechanism {ctx.mechanism_id} no longer exists")
        session.expunge(mechanism)
        return mechanism
