"""The worker of one process: an APScheduler ticker on the asyncio loop, claiming work in the database.

APScheduler is used as a *local* ticker only (its job stores must not be shared between
processes, as its FAQ says). Each tick claims due work through leases in the database
(``app.monitors.leases``), so any number of replicas can run a worker against one Postgres:

- ``periods``: claim due monitors and run their periods (up to ``max_in_flight`` at once);
- ``calibration``: claim monitors in ``calibrating`` fairly across tenants (``claim_calibrations``) and
  run up to ``max_calibrations_in_flight``: discover their ``auto`` events and compute their
  thresholds off the table, each in a child process with the jobs' limits
  (app/monitors/calibration.py); the result is written here, under the monitor's lease;
- ``outbox``: deliver due webhook messages;
- ``jobs``: claim queued jobs (discovery, audits, re-discovery, searches) fairly across tenants and run up
  to ``max_jobs_in_flight``, each in a child process with its limits (app/jobs/isolation.py);
- ``retention``: delete old periods (app/quotas/retention.py) every ``retention_every_seconds``.

A worker's ``roles`` choose its ticks: ``periods`` (periods, calibration, outbox, snapshots,
retention) and ``jobs``. ``dpwatch worker --no-jobs`` runs the first only, ``dpwatch jobs`` the
second only, so that job runners can live on hosts of their own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy.orm import Session, sessionmaker

from app import observability as obs
from app.alarms.delivery import WebhookDeliverer
from app.db import utcnow
from app.jobs.context import Handler
from app.jobs.runner import JobRunner, default_handlers, job_sampling_client
from app.monitors.calibration import CALIBRATION_LEASE_SECONDS, Calibrator
from app.monitors.leases import claim_calibrations, claim_monitors
from app.monitors.runner import RUNNABLE_STATES, PeriodOutcome, PeriodPlan, PeriodRunner
from app.sampling.client import SamplingClient, SamplingClientConfig
from app.sampling.safe_http import SafeAsyncClient
from app.settings import Settings
from app.snapshots.runner import SnapshotRunner

log = structlog.get_logger("dpwatch.worker")

#: How long :meth:`Worker.stop` waits for ticker runs under way before cancelling them.
STOP_TICK_SECONDS = 10.0


def job_handlers() -> dict[str, Handler]:
    """Every job kind the worker runs: app/jobs' own (discovery, audit) and the monitors' (re-discovery of a
    monitor's events, the scheduled search for violating inputs), wired here, above both rooms."""
    from app.monitors.rediscovery import run_rediscovery_job
    from app.monitors.searches import run_search_job

    return {**default_handlers(), "rediscovery": run_rediscovery_job, "search": run_search_job}


ROLES = ("periods", "jobs")


async def _cancel(tasks: set[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait until each has ended."""
    for task in list(tasks):
        task.cancel()
    if tasks:
        await asyncio.gather(*list(tasks), return_exceptions=True)


async def _drain(tasks: set[asyncio.Task[None]]) -> None:
    """Wait until ``tasks`` (a set that finished tasks leave and new ones may join) is empty."""
    while tasks:
        await asyncio.gather(*list(tasks), return_exceptions=True)


class Worker:
    def __init__(self, settings: Settings, session_factory: sessionmaker[Session], *, max_in_flight: int | None = None,
                 clock: Callable[[], datetime] = utcnow, roles: tuple[str, ...] | None = None) -> None:
        self.settings = settings
        if roles is None:
            roles = ROLES if settings.worker_runs_jobs else ("periods",)
        unknown = set(roles) - set(ROLES)
        if unknown or not roles:
            raise ValueError(f"a worker's roles are among {ROLES}, not {sorted(unknown) or 'none'}")
        self.roles = tuple(roles)
        self.session_factory = session_factory
        self.max_in_flight = max_in_flight or settings.max_in_flight
        self._claiming = asyncio.Lock()
        self._stopping = False
        self.clock = clock  # injectable for tests; the scheduler itself always uses real time
        self._in_flight: set[asyncio.Task[None]] = set()
        self._started: dict[asyncio.Task[None], float] = {}  # loop time each period in flight started
        self._claim_again = False  # a slot freed while a claim ran: claim once more after it
        self._jobs_in_flight: set[asyncio.Task[None]] = set()
        self._calibrations_in_flight: set[asyncio.Task[None]] = set()
        self._ticks: set[asyncio.Task[object]] = set()  # ticker runs under way (stop waits for them)
        self._scheduler: AsyncIOScheduler | None = None
        self.http: SafeAsyncClient | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> None:
        """Build the clients and the runners (without starting the ticker)."""
        s = self.settings
        self.http = SafeAsyncClient(s.safe_http_config())
        # Sampling, retries included, must end well inside the lease, or another replica may
        # claim the monitor and draw the same period again.
        sampling = SamplingClient(
            http=self.http,
            config=SamplingClientConfig(deadline_seconds=max(1.0, 0.6 * s.lease_seconds),
                                        max_response_bytes=s.sampling_max_bytes,
                                        max_keys=s.sampling_max_keys, max_key_length=s.sampling_max_key_length,
                                        max_call_keys=s.sampling_max_keys,
                                        max_attempts=s.sampling_max_attempts,
                                        backoff_initial=s.sampling_backoff_seconds),
            on_request=obs.observe_sampling_request,
        )
        self.runner = PeriodRunner(self.session_factory, sampling, s, on_period=obs.observe_period,
                                   on_alarm=obs.observe_alarm, clock=self.clock)
        self.deliverer = WebhookDeliverer(self.session_factory, self.http, s, on_delivery=obs.observe_delivery)
        self.calibrator = Calibrator(self.session_factory, s, sampling, clock=self.clock)
        self.snapshots = SnapshotRunner(self.session_factory, sampling, s, clock=self.clock)
        # Jobs run in child processes with clients of their own; inline jobs (tests) use this one.
        self.jobs = JobRunner(self.session_factory, job_sampling_client(s, self.http), s, handlers=job_handlers(),
                              clock=self.clock)

    async def start(self) -> None:
        """Open, then tick: claim and run due work every ``tick_seconds``."""
        await self.open()
        s = self.settings
        sched = AsyncIOScheduler(timezone=UTC, event_loop=asyncio.get_running_loop())
        now = datetime.now(UTC)
        common = dict(trigger="interval", max_instances=1, coalesce=True, next_run_time=now,
                      misfire_grace_time=None)
        if "periods" in self.roles:
            sched.add_job(self._tracked(self.tick_periods), id="periods", seconds=s.tick_seconds, **common)
            sched.add_job(self._tracked(self.tick_outbox), id="outbox", seconds=max(s.tick_seconds, 1.0), **common)
            sched.add_job(self._tracked(self.start_calibrations), id="calibration",
                          seconds=max(s.tick_seconds, 2.0), **common)
            sched.add_job(self._tracked(self.tick_snapshots), id="snapshots", seconds=max(s.tick_seconds, 1.0),
                          **common)
            sched.add_job(self._tracked(self.tick_retention), id="retention", seconds=s.retention_every_seconds,
                          **common)
        if "jobs" in self.roles:
            sched.add_job(self._tracked(self.tick_jobs), id="jobs", seconds=max(s.tick_seconds, 1.0), **common)
        sched.start()
        self._scheduler = sched
        log.info("worker_started", worker_id=s.worker_id, tick_seconds=s.tick_seconds, lease_seconds=s.lease_seconds,
                 roles=list(self.roles))

    def _tracked(self, tick: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[int]]:
        """``tick`` as a ticker job whose runs :meth:`stop` waits for (instead of leaving them to be
        cancelled with the loop, which APScheduler reports as a failed job with a traceback)."""
        async def run() -> int:
            task = asyncio.current_task()
            assert task is not None
            self._ticks.add(task)
            try:
                return await tick()
            except asyncio.CancelledError:
                if not self._stopping:
                    raise
                return 0  # cancelled by the shutdown: nothing went wrong, nothing to report
            finally:
                self._ticks.discard(task)

        run.__name__ = run.__qualname__ = f"Worker.{tick.__name__}"
        return run

    async def stop(self) -> None:
        self._stopping = True  # no new claims, including those a finishing period would start
        if self._scheduler is not None:
            # Shutting APScheduler's executor down cancels the runs under way (and it reports each
            # as a failed job): pause it, let them end, then shut it down.
            self._scheduler.pause()
            await asyncio.sleep(0)  # runs just submitted take their first step and register
            if self._ticks or self._calibrations_in_flight:  # claims are short; a calibration may not be
                await asyncio.wait(self._ticks | self._calibrations_in_flight, timeout=STOP_TICK_SECONDS)
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        # A calibration's child is killed and a job is stopped; their leases expire and another
        # worker takes them. Periods in flight finish.
        await _cancel(self._calibrations_in_flight)
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        await _cancel(self._jobs_in_flight)
        if self.http is not None:
            await self.http.aclose()
            self.http = None
        log.info("worker_stopped", worker_id=self.settings.worker_id)

    async def run_forever(self) -> None:
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    # -- ticks ----------------------------------------------------------------------------

    def _claim_and_plan(self, limit: int) -> list[tuple[uuid.UUID, PeriodPlan | PeriodOutcome | Exception]]:
        """Claim up to ``limit`` due monitors and read their plans in the same transaction: one
        session, one connection checkout and one thread hop for the k monitors of a claim."""
        s = self.settings
        with self.session_factory() as session:
            now = self.clock()
            ids = claim_monitors(session, worker_id=s.worker_id, states=RUNNABLE_STATES, now=now,
                                 lease_seconds=s.lease_seconds, limit=limit, due_only=True,
                                 max_per_tenant=s.max_inflight_per_tenant,
                                 max_per_mechanism=s.max_inflight_per_mechanism)
            plans = self.runner.plan_many(session, ids, now)
            session.commit()
            return [(monitor_id, plans[monitor_id]) for monitor_id in ids]

    async def tick_periods(self) -> int:
        """Claim due monitors up to the free capacity and start their periods; once more if a slot
        freed (and asked for a claim) while this claim ran."""
        async with self._claiming:  # the ticker and finished periods may both ask for work
            total = 0
            while True:
                self._claim_again = False
                free = self.max_in_flight - len(self._in_flight)
                if free <= 0 or self._stopping:
                    return total
                claimed = await asyncio.to_thread(self._claim_and_plan, free)
                loop = asyncio.get_running_loop()
                for monitor_id, planned in claimed:
                    task = asyncio.create_task(self._run_period(monitor_id, planned))
                    self._in_flight.add(task)
                    self._started[task] = loop.time()
                    task.add_done_callback(self._period_done)
                total += len(claimed)
                if not self._claim_again:
                    return total

    def _period_done(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self._started.pop(task, None)

    def _reclaim_at(self) -> int:
        """How many free slots make a finishing period claim again, before the next tick.

        Half of the slots that periods of ordinary length use: waiting for half keeps claims
        batched (one claim per period cost 8% of a worker), and periods running for more than a
        tick (a slow or hanging endpoint) are left out of the count, so that they cannot make the
        other tenants' monitors wait for the ticker (measured before this rule: a healthy tenant ran 54% of
        its periods beside hanging ones, with 6 of 8 slots held and claims once per tick)."""
        now = asyncio.get_running_loop().time()
        long = sum(1 for t0 in self._started.values() if now - t0 > self.settings.tick_seconds)
        return max(1, (self.max_in_flight - long) // 2)

    async def _run_period(self, monitor_id: uuid.UUID, planned: PeriodPlan | PeriodOutcome | Exception | None = None) -> None:
        try:
            await self.runner.run(monitor_id, planned)
        except Exception:  # a bug must not kill the ticker; the lease expires and the period is retried
            log.exception("period_crashed", monitor_id=str(monitor_id))
        finally:
            # Claim again as soon as enough slots are free (``_reclaim_at``), rather than at the
            # next tick; a claim under way then runs once more instead.
            free = self.max_in_flight - (len(self._in_flight) - 1)  # this period's slot included
            if self._scheduler is not None and not self._stopping and free >= self._reclaim_at():
                if self._claiming.locked():
                    self._claim_again = True
                else:
                    asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.tick_periods()))

    async def drain(self) -> None:
        """Wait for the periods in flight (tests and benchmarks)."""
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def tick_outbox(self) -> int:
        try:
            return await self.deliverer.deliver_due()
        except Exception:
            log.exception("outbox_tick_failed")
            return 0

    async def tick_snapshots(self) -> int:
        """Compute pending snapshots, one at a time (MPL is CPU-bound)."""
        ids = await asyncio.to_thread(self.snapshots.claim, 1)
        for snapshot_id in ids:
            try:
                await self.snapshots.run(snapshot_id)
            except Exception:
                log.exception("snapshot_crashed", snapshot_id=str(snapshot_id))
        return len(ids)

    async def tick_jobs(self) -> int:
        """Claim queued jobs up to the free capacity and start them."""
        free = self.settings.max_jobs_in_flight - len(self._jobs_in_flight)
        if free <= 0 or self._stopping:
            return 0
        ids = await asyncio.to_thread(self.jobs.claim, free)
        for job_id in ids:
            task = asyncio.create_task(self._run_job(job_id))
            self._jobs_in_flight.add(task)
            task.add_done_callback(self._jobs_in_flight.discard)
        return len(ids)

    async def _run_job(self, job_id: uuid.UUID) -> None:
        try:
            await self.jobs.run(job_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not kill the ticker; the lease expires and the job is retried
            log.exception("job_crashed", job_id=str(job_id))

    async def drain_jobs(self) -> None:
        """Wait for the jobs in flight (tests and benchmarks)."""
        await _drain(self._jobs_in_flight)

    async def tick_retention(self) -> int:
        """Delete old periods (app/quotas/retention.py), in short statements off the loop."""
        from app.quotas.retention import sweep

        try:
            swept = await asyncio.to_thread(sweep, self.session_factory, self.settings, self.clock())
            return swept.periods
        except Exception:
            log.exception("retention_failed")
            return 0

    def _claim_calibrations(self, limit: int) -> list[uuid.UUID]:
        with self.session_factory() as session:
            ids = claim_calibrations(session, worker_id=self.settings.worker_id, now=self.clock(),
                                     lease_seconds=CALIBRATION_LEASE_SECONDS, limit=limit)
            session.commit()
            return ids

    async def start_calibrations(self) -> int:
        """Claim monitors in ``calibrating`` up to the free calibration slots, fairly across tenants
        (``claim_calibrations``), and start their calibrations.

        Discovery and a Monte-Carlo threshold can take minutes: a long lease keeps other replicas
        from starting the same work meanwhile. The work runs in a child process with limits
        (``calibration_isolation``); this loop only polls it, so periods go on meanwhile."""
        free = self.settings.max_calibrations_in_flight - len(self._calibrations_in_flight)
        if free <= 0 or self._stopping:
            return 0
        ids = await asyncio.to_thread(self._claim_calibrations, free)
        for monitor_id in ids:
            task = asyncio.create_task(self._calibrate(monitor_id))
            self._calibrations_in_flight.add(task)
            task.add_done_callback(self._calibrations_in_flight.discard)
        return len(ids)

    async def _calibrate(self, monitor_id: uuid.UUID) -> None:
        try:
            await self.calibrator.calibrate(monitor_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not kill the ticker; the lease expires and the calibration is tried again
            log.exception("calibration_failed", monitor_id=str(monitor_id))

    async def tick_calibration(self) -> int:
        """Start calibrations (``start_calibrations``) and wait until every calibration in flight has
        ended (tests, tools); the ticker only starts them."""
        started = await self.start_calibrations()
        await self.drain_calibrations()
        return started

    async def drain_calibrations(self) -> None:
        """Wait for the calibrations in flight (tests and benchmarks)."""
        await _drain(self._calibrations_in_flight)
