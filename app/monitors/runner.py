"""Running one period of one monitor.

The three steps of a period (design.md, "Habits"):

1. **Plan** (short read): the monitor must be leased by this worker. Read what sampling needs.
2. **Sample** outside any transaction: n outputs on each distinct database of the checks.
   A crash here leaves nothing behind; the lease expires and another worker redoes the period.
3. **Write** in one transaction guarded by the lease (row lock + owner check + unchanged slot):
   the ``period_runs`` row (unique per monitor and slot, and per monitor, horizon and t), one
   ``period_checks`` row per check, the detectors' new state, any alarm, the outbox messages and
   the monitor's next slot. Either all of it lands or none of it does.

A period whose sampling fails (after the sampling client's retries) is recorded with its reason
and does not advance t or touch any detector.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np
import structlog
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker, undefer

from app.alarms.evidence import privacy_evidence
from app.alarms.service import (
    contract_fingerprint,
    enqueue_event,
    fire_alarm,
    fire_contract_alarm,
    monitor_event_data,
)
from app.claims.service import claim_period_step
from app.db import utcnow
from app.mechanisms.contract import (  # noqa: F401  (re-exported)
    breach_of_error,
    check_outputs,
    contract_of,
    detect_contract,
    endpoint_of,
)
from app.models.alarms import Alarm
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.monitors.detectors import needs_prefix_sums, sequential_line
from app.monitors.leases import lock_leased_monitor, release_lease
from app.monitors.outputs import (
    request_snapshot,
    scheduled_snapshot_pending,
    snapshot_params_for_alarm,
    store_outputs,
)
from app.monitors.period_plan import CheckPlan, CheckResult, PeriodPlan  # noqa: F401  (re-exported)
from app.monitors.schedule import Schedule
from app.monitors.service import check_claim, is_auto, start_horizon
from app.sampling.client import ByteBudget, SamplingClient
from app.sampling.protocol import SamplingError, database_key
from app.settings import Settings
from app.stats.claims import Claim, PureDP
from app.stats.detector import Observation
from app.stats.detector import load as load_detector
from app.stats.events import event_contains, parse_event
from app.stats.shapes import OutputShape

log = structlog.get_logger("dpwatch.runner")

#: States in which periods run. ``degraded`` keeps running: the next good period restores it.
RUNNABLE_STATES = ("active", "degraded")

#: ``dropped``: the plan went stale while sampling (paused, resumed, reset or edited): nothing of
#: the period is written, and the lease is given back at once so that the monitor's next slot is
#: not held up until the lease expires.
Outcome = Literal["ok", "alarm", "failed", "lost_lease", "not_runnable", "duplicate", "dropped"]


@dataclass(frozen=True)
class ContractCheck:
    """What a period found about the output contract: a breach, or a first detected contract."""

    breach: dict[str, Any] | None = None
    detected: tuple[OutputShape, dict[str, Any]] | None = None


@dataclass(frozen=True)
class PeriodOutcome:
    monitor_id: uuid.UUID
    outcome: Outcome
    t: int | None = None
    reason: str | None = None


def _checks(session: Session, monitor_id: uuid.UUID) -> list[Check]:
    return list(session.scalars(select(Check).where(Check.monitor_id == monitor_id).order_by(Check.position)))


def _past_prefix_sums(session: Session, monitor: Monitor, checks: list[Check]) -> dict[uuid.UUID, list[float]]:
    """S_1..S_t of each aggregator check in the current horizon, from its period rows (one query,
    through the unique index on (monitor, horizon, t); none when no check needs them)."""
    ids = [c.id for c in checks if not is_auto(c) and needs_prefix_sums(c.detector_state)]
    out: dict[uuid.UUID, list[float]] = {i: [] for i in ids}
    if not ids:
        return out
    where = (PeriodRun.monitor_id == monitor.id, PeriodRun.horizon_index == monitor.horizon_index,
             PeriodRun.t.is_not(None), PeriodCheck.check_id.in_(ids), PeriodCheck.prefix_sum.is_not(None))
    if session.get_bind().dialect.name == "postgresql":
        # One row per check with its sums as a float8[] (decoded in C by psycopg), instead of one
        # row per period: the fetch was most of the aggregator's CPU growth within a horizon.
        agg = func.array_agg(aggregate_order_by(PeriodCheck.prefix_sum, PeriodRun.t))
        for check_id, values in session.execute(
            select(PeriodCheck.check_id, agg).join(PeriodRun, PeriodRun.id == PeriodCheck.period_run_id)
            .where(*where).group_by(PeriodCheck.check_id)
        ):
            out[check_id] = [float(v) for v in values]
        return out
    rows = session.execute(
        select(PeriodCheck.check_id, PeriodCheck.prefix_sum)
        .join(PeriodRun, PeriodRun.id == PeriodCheck.period_run_id)
        .where(*where).order_by(PeriodRun.t)
    )
    for check_id, value in rows:
        out[check_id].append(float(value))
    return out


def _line_numbers(claim: Claim, a: int, b: int, n: int, line: Any, variance: str, kappa: float) -> Any:
    """p̂, q̂, D̂, σ̂, z and the line of a period for a horizon-free check (shown with the period):
    seed 002's statistic for pure ε, else the statistic of the line the detector tested."""
    from app.claims.service import ClaimStep
    from app.stats.claim_period import line_statistic
    from app.stats.claims import Line

    if isinstance(claim, PureDP):
        return claim_period_step(claim, a, b, n, None, variance=variance, kappa=kappa)
    stat = line_statistic(a, b, n, line, kappa=kappa)
    line_dict = line.to_dict() if isinstance(line, Line) else {"orientation": "upper", "slope": float(line.slope),
                                                                  "intercept": float(line.intercept)}
    return ClaimStep(float(stat.p_hat), float(stat.q_hat), float(stat.d_hat), float(stat.sigma_hat), float(stat.z),
                     line_dict, None)


def _is_routine(plan: PeriodPlan, results: list[CheckResult], contract: ContractCheck) -> bool:
    """A period that changes nothing but the numbers: the one-statement write applies."""
    t = plan.t + 1
    return (not any(r.alarm for r in results) and contract.breach is None and contract.detected is None
            and not (plan.detector == "aggregator" and t >= plan.horizon)
            and not (plan.snapshot_every and t % plan.snapshot_every == 0)
            and not (plan.rediscover_every and t % plan.rediscover_every == 0)
            and not (plan.search_every and t % plan.search_every == 0))


class _HeavyAdmission:
    """One period's pass past the heavy mark (``Settings.sampling_heavy_period_bytes``): the
    first of its requests to cross the mark takes the tenant's lock for the period, the others
    wait for that; :meth:`release` (after the period's write) gives it back. Idempotent, and
    safe to cancel: ``asyncio.Lock.acquire`` holds nothing when cancelled, and ``held`` is set
    with no await between."""

    def __init__(self, tenant_lock: asyncio.Lock) -> None:
        self._tenant = tenant_lock
        self._mine = asyncio.Lock()
        self.held = False

    async def __call__(self) -> None:
        if self.held:
            return
        async with self._mine:
            if not self.held:
                await self._tenant.acquire()
                self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._tenant.release()


class PeriodRunner:
    """Runs leased monitors' periods. Thread-safe: each call uses its own sessions.

    Heavy periods (answers past ``sampling_heavy_period_bytes``) run one at a time per tenant in
    this worker from the mark on, their write included: one tenant's large answers are parsed
    and held one period at a time, whatever the number of its monitors in flight, and the other
    tenants' periods never wait for them (docs/hardening.md, "Heavy periods")."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        client: SamplingClient,
        settings: Settings,
        *,
        on_period: Callable[[str, float], None] | None = None,
        on_alarm: Callable[[], None] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.session_factory = session_factory
        self.client = client
        self.settings = settings
        self.worker_id = settings.worker_id
        self._on_period = on_period
        self._on_alarm = on_alarm
        self.clock = clock
        self._heavy_loop: asyncio.AbstractEventLoop | None = None
        self._heavy_locks: dict[uuid.UUID | None, asyncio.Lock] = {}

    # -- step 1 ---------------------------------------------------------------------------

    def plan(self, monitor_id: uuid.UUID, now: datetime | None = None) -> PeriodPlan | PeriodOutcome:
        """One query for the monitor, its mechanism and its checks with their detector states, and
        (aggregator only, t ≥ 1) one for the horizon's past prefix sums."""
        now = now or self.clock()
        with self.session_factory() as session:
            planned = self.plan_many(session, [monitor_id], now)[monitor_id]
            session.commit()  # a lease given back (not runnable), if any
            if isinstance(planned, Exception):
                raise planned
            return planned

    def plan_many(self, session: Session, monitor_ids: list[uuid.UUID],
                  now: datetime) -> dict[uuid.UUID, PeriodPlan | PeriodOutcome | Exception]:
        """The plans of several leased monitors from one query (the worker calls it in the claim's
        transaction: one round trip for the k monitors of a claim instead of a session each).
        Leases found on monitors that cannot run are given back in ``session``; the caller commits."""
        if not monitor_ids:
            return {}
        rows = session.execute(
            select(Monitor, Mechanism, Check)
            .join(Mechanism, Mechanism.id == Monitor.mechanism_id)
            .join(Check, Check.monitor_id == Monitor.id)
            .where(Monitor.id.in_(monitor_ids))
            .order_by(Monitor.id, Check.position)
            .options(undefer(Check.detector_state))
        ).all()
        grouped: dict[uuid.UUID, list[Any]] = {}
        for row in rows:
            grouped.setdefault(row[0].id, []).append(row)
        out: dict[uuid.UUID, PeriodPlan | PeriodOutcome | Exception] = {}
        for monitor_id in monitor_ids:
            try:
                out[monitor_id] = self._plan_of(session, monitor_id, grouped.get(monitor_id), now)
            except DBAPIError:
                raise  # the claim's transaction is lost: nothing is claimed, the next tick tries again
            except Exception as exc:  # noqa: BLE001 - a bug in one monitor's plan: that period crashes (run
                out[monitor_id] = exc  # raises it), its lease expires and it is retried; the others run
        return out

    def _plan_of(self, session: Session, monitor_id: uuid.UUID, rows: list[Any] | None,
                 now: datetime) -> PeriodPlan | PeriodOutcome:
        if not rows:
            if session.get(Monitor, monitor_id) is None:
                return PeriodOutcome(monitor_id, "lost_lease")
            self._release_if_ours(session, monitor_id)
            return PeriodOutcome(monitor_id, "not_runnable")
        monitor, mechanism = rows[0][0], rows[0][1]
        if monitor.lease_owner != self.worker_id:
            return PeriodOutcome(monitor_id, "lost_lease")
        if monitor.state not in RUNNABLE_STATES or monitor.threshold is None:
            self._release_if_ours(session, monitor_id)  # paused (or else) after the claim
            return PeriodOutcome(monitor_id, "not_runnable")
        schedule = Schedule.of(monitor)
        slot, skipped = schedule.due_slot(monitor.next_run_at, now)
        databases: dict[str, Any] = {}
        checks = [row[2] for row in rows]
        prefix = _past_prefix_sums(session, monitor, checks)
        plans = []
        for check in checks:
            xk, xpk = database_key(check.x), database_key(check.x_prime)
            databases[xk], databases[xpk] = check.x, check.x_prime
            if is_auto(check):
                # Dormant (no event worth watching found yet): its databases are still sampled,
                # so that the output contract is checked and a change of shape is noticed.
                continue
            past = prefix.get(check.id) if needs_prefix_sums(check.detector_state) else None
            plans.append(CheckPlan(check.id, check.position, xk, xpk, parse_event(check.event),
                                   claim=check_claim(monitor, check), claim_state=check.claim_state,
                                   detector_state=check.detector_state,
                                   past_prefix=None if past is None else tuple(past)))
        return PeriodPlan(
            monitor_id=monitor.id, scheduled=monitor.next_run_at, slot=slot, skipped=skipped,
            horizon_index=monitor.horizon_index, t=monitor.t, n=monitor.samples_per_period,
            epsilon=monitor.epsilon, endpoint=endpoint_of(mechanism), databases=databases,
            checks=tuple(plans), mechanism_id=mechanism.id, contract=contract_of(mechanism),
            variance=monitor.variance, kappa=monitor.kappa, next_slot=schedule.slot_after(slot),
            horizon=monitor.horizon, detector=monitor.detector or "aggregator",
            outputs_window=monitor.outputs_window, snapshot_every=monitor.snapshot_every,
            rediscover_every=monitor.rediscover_every, search_every=monitor.search_every,
            tenant_id=monitor.tenant_id,
        )

    # -- step 2 ---------------------------------------------------------------------------

    def _admission(self, plan: PeriodPlan) -> _HeavyAdmission | None:
        """The period's pass past the heavy mark, on its tenant's lock in this event loop (None: off)."""
        if not self.settings.sampling_heavy_period_bytes:
            return None
        loop = asyncio.get_running_loop()
        if self._heavy_loop is not loop:  # locks belong to one loop (tests run several in turn)
            self._heavy_loop, self._heavy_locks = loop, {}
        return _HeavyAdmission(self._heavy_locks.setdefault(plan.tenant_id, asyncio.Lock()))

    async def sample(self, plan: PeriodPlan, admission: _HeavyAdmission | None = None) -> dict[str, np.ndarray]:
        keys = list(plan.databases)
        period_no = plan.t + 1
        # all of the period's answers together; past the heavy mark, one period of the tenant at a time
        budget = ByteBudget(self.settings.sampling_max_bytes) if admission is None else ByteBudget(
            self.settings.sampling_max_bytes, heavy_at=self.settings.sampling_heavy_period_bytes, admit=admission)
        results = await asyncio.gather(*(
            self.client.sample(
                plan.endpoint, plan.databases[k], plan.n, monitor_id=str(plan.monitor_id), period=period_no,
                request_id_prefix=f"{plan.monitor_id.hex[:12]}-{plan.horizon_index}-{period_no}-{i}",
                budget=budget,
            )
            for i, k in enumerate(keys)
        ))
        return dict(zip(keys, results))

    # -- step 3 ---------------------------------------------------------------------------

    def _guarded_monitor(self, session: Session, plan: PeriodPlan) -> Monitor | PeriodOutcome:
        """The monitor, row-locked, if the plan still holds; else the outcome: ``lost_lease``, or
        ``dropped`` (the lease released in this transaction, which the caller commits)."""
        monitor = lock_leased_monitor(session, plan.monitor_id, self.worker_id)
        if monitor is None:
            return PeriodOutcome(plan.monitor_id, "lost_lease")
        if (monitor.next_run_at != plan.scheduled or monitor.horizon_index != plan.horizon_index
                or monitor.t != plan.t or monitor.state not in RUNNABLE_STATES):
            # Reset, paused or edited while we sampled: drop this period, and give the lease back
            # (we hold it, so nobody else runs this monitor) so that its next slot is claimed on time.
            release_lease(monitor)
            log.info("period_dropped", monitor_id=str(plan.monitor_id), t=plan.t + 1)
            return PeriodOutcome(plan.monitor_id, "dropped")
        return monitor

    def _release_if_ours(self, session: Session, monitor_id: uuid.UUID) -> bool:
        """Give back a lease this worker holds on a monitor whose period it will not write (the
        caller commits)."""
        return session.execute(
            update(Monitor).where(Monitor.id == monitor_id, Monitor.lease_owner == self.worker_id)
            .values(lease_owner=None, lease_expires_at=None).returning(Monitor.id)
            .execution_options(synchronize_session=False)).first() is not None

    def compute(self, plan: PeriodPlan, counts: dict[uuid.UUID, tuple[int, int]]) -> list[CheckResult]:
        """Every planned check's statistic and detector step for this period's counts (pure)."""
        results = []
        for check in plan.checks:
            a, b = counts[check.id]
            claim = check.claim if check.claim is not None else PureDP(float(plan.epsilon or 0.0))
            state = check.detector_state or {}
            # The detector the state describes (its kind, through the registry of app/stats/detector.py).
            det = load_detector(state, list(check.past_prefix or ()))
            line: Any = None
            if det.horizon_free:
                line = sequential_line(state, claim)
                stat = _line_numbers(claim, a, b, plan.n, line, plan.variance, plan.kappa)
                claim_state = check.claim_state
            else:
                stat = claim_period_step(claim, a, b, plan.n, check.claim_state, variance=plan.variance,
                                         kappa=plan.kappa)
                claim_state = stat.state
            step = det.step(Observation(a=a, b=b, n=plan.n, z=stat.z, line=line))
            results.append(CheckResult(
                check_id=check.id, a=a, b=b, p_hat=stat.p_hat, q_hat=stat.q_hat, d_hat=stat.d_hat,
                sigma_hat=stat.sigma_hat, z=stat.z, statistic=step.statistic, threshold=step.threshold,
                alarm=step.alarm, lag=step.lag, max_statistic=step.max_statistic, prefix_sum=step.prefix_sum,
                claim=claim, line=stat.line, claim_state=claim_state, detector_state=step.state,
            ))
        return results

    def write_success(self, plan: PeriodPlan, outputs: dict[str, np.ndarray], started: datetime,
                      sampling_seconds: float) -> PeriodOutcome:
        counts = {}
        for check in plan.checks:
            a = int(np.count_nonzero(event_contains(check.event, outputs[check.x_key])))
            b = int(np.count_nonzero(event_contains(check.event, outputs[check.x_prime_key])))
            counts[check.id] = (a, b)
        period_no = plan.t + 1
        if plan.contract is not None:
            contract = ContractCheck(breach=check_outputs(plan.contract, outputs, plan.databases, period_no))
        else:
            contract = ContractCheck(detected=detect_contract(outputs) if outputs else None)
        results = self.compute(plan, counts)
        with self.session_factory() as session:
            try:
                if _is_routine(plan, results, contract) and session.get_bind().dialect.name == "postgresql":
                    # One statement is atomic on its own: run it in autocommit, which saves the
                    # BEGIN and COMMIT round trips (and their CPU on both sides) of every period.
                    session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
                    outcome = self._write_routine(session, plan, results, outputs, started, sampling_seconds)
                else:
                    outcome = self._write_success(session, plan, results, outputs, started, sampling_seconds,
                                                  contract)
                if outcome.outcome in ("lost_lease",):
                    session.rollback()
                else:
                    session.commit()
                return outcome
            except IntegrityError:
                session.rollback()
                return PeriodOutcome(plan.monitor_id, "duplicate")

    def _write_routine(self, session: Session, plan: PeriodPlan, results: list[CheckResult],
                       outputs: dict[str, np.ndarray], started: datetime, sampling_seconds: float) -> PeriodOutcome:
        """A period without alarm, contract event, end of horizon, snapshot or re-discovery, on
        Postgres: one statement (app/monitors/routine_write.py)."""
        from app.monitors.routine_write import write_routine_period

        t = plan.t + 1
        seq = write_routine_period(session, plan, results, outputs, started=started, finished=self.clock(),
                                   sampling_seconds=sampling_seconds, worker_id=self.worker_id)
        if seq is None:  # the guard failed: the lease is lost, or ours on a stale plan (dropped)
            if self._release_if_ours(session, plan.monitor_id):  # one statement, on this rare path only
                log.info("period_dropped", monitor_id=str(plan.monitor_id), t=t)
                return PeriodOutcome(plan.monitor_id, "dropped")
            return PeriodOutcome(plan.monitor_id, "lost_lease")
        log.debug("period_done", monitor_id=str(plan.monitor_id), t=t, horizon_index=plan.horizon_index,
                  skipped_slots=plan.skipped, alarms=0, sampling_seconds=round(sampling_seconds, 4))
        return PeriodOutcome(plan.monitor_id, "ok", t=t)

    def _write_success(self, session: Session, plan: PeriodPlan, results: list[CheckResult],
                       outputs: dict[str, np.ndarray], started: datetime, sampling_seconds: float,
                       contract: ContractCheck | None = None) -> PeriodOutcome:
        monitor = self._guarded_monitor(session, plan)
        if isinstance(monitor, PeriodOutcome):
            return monitor
        t = plan.t + 1
        monitor.last_seq = (monitor.last_seq or 0) + 1
        run = PeriodRun(
            monitor_id=monitor.id, seq=monitor.last_seq, scheduled_for=plan.slot,
            horizon_index=plan.horizon_index, t=t, status="ok", started_at=started, finished_at=self.clock(),
            sampling_seconds=sampling_seconds, worker_id=self.worker_id,
        )
        session.add(run)
        session.flush()
        alarms = []
        checks = _checks(session, monitor.id)
        by_id = {c.id: c for c in checks}
        for res in results:
            check = by_id.get(res.check_id)
            if check is None:  # deleted meanwhile (cascade with its monitor): nothing to write
                continue
            check.claim_state = res.claim_state
            check.detector_state = res.detector_state
            check.last_z, check.last_statistic = res.z, res.statistic
            check.max_statistic = res.max_statistic
            period_check = PeriodCheck(
                period_run_id=run.id, check_id=check.id, a=res.a, b=res.b, n=plan.n, p_hat=res.p_hat,
                q_hat=res.q_hat, d_hat=res.d_hat, sigma_hat=res.sigma_hat, z=res.z,
                statistic=res.statistic, threshold=res.threshold, claim=res.claim.to_dict(), line=res.line,
                prefix_sum=res.prefix_sum,
            )
            session.add(period_check)
            if res.alarm:
                alarms.append((check, period_check, res.lag))
        session.flush()
        store_outputs(session, monitor, run, outputs)
        if contract is not None:
            self._contract(session, monitor, run, plan, contract)

        monitor.t = t
        monitor.consecutive_failures = 0
        monitor.last_period_at = plan.slot
        monitor.next_run_at = Schedule.of(monitor).slot_after(plan.slot)
        release_lease(monitor)
        outcome: Outcome = "ok"
        if alarms:
            monitor.state = "alarm"
            outcome = "alarm"
            # With outputs to analyse, the alarm's webhooks wait for its MPL snapshot, so that they
            # carry the evidence; the snapshot runner sends them (also when the snapshot fails).
            snapshot = snapshot_params_for_alarm(monitor)
            for check, period_check, lag in alarms:
                evidence = privacy_evidence(session, monitor, check, plan.horizon_index, lag)
                alarm = fire_alarm(session, monitor, check, run, period_check, self.settings, notify=snapshot is None,
                                   evidence=evidence)
                if snapshot is not None:
                    request_snapshot(session, monitor, "alarm", alarm_id=alarm.id, **snapshot)
        elif t >= monitor.horizon and monitor.detector == "aggregator":
            if monitor.renew:
                start_horizon(monitor, checks, monitor.horizon_index + 1)
            else:
                monitor.state = "completed"
                enqueue_event(session, monitor.tenant_id, "monitor.completed", monitor_event_data(
                    monitor, self.settings, max_statistic=max((c.max_statistic or 0.0) for c in checks)))
        else:
            monitor.state = "active"
        if not alarms and monitor.snapshot_every and t % monitor.snapshot_every == 0 \
                and not scheduled_snapshot_pending(session, monitor.id):
            # One queued scheduled snapshot per monitor: it reads the kept window when it runs, so
            # a second one would compute the same; without this a monitor whose snapshots come
            # faster than workers compute them queued one more every period.
            request_snapshot(session, monitor, "schedule")
        if monitor.state in RUNNABLE_STATES and monitor.rediscover_every and t % monitor.rediscover_every == 0:
            from app.monitors.rediscovery import request_rediscovery

            request_rediscovery(session, monitor, trigger="schedule")
        if monitor.state in RUNNABLE_STATES and monitor.search_every and t % monitor.search_every == 0:
            from app.monitors.searches import request_search

            request_search(session, monitor)
        log.info("period_done", monitor_id=str(monitor.id), t=t, horizon_index=plan.horizon_index,
                 skipped_slots=plan.skipped, alarms=len(alarms), sampling_seconds=round(sampling_seconds, 4))
        return PeriodOutcome(plan.monitor_id, outcome, t=t)

    def write_failure(self, plan: PeriodPlan, error: SamplingError, started: datetime,
                      sampling_seconds: float) -> PeriodOutcome:
        with self.session_factory() as session:
            try:
                monitor = self._guarded_monitor(session, plan)
                if isinstance(monitor, PeriodOutcome):
                    if monitor.outcome == "dropped":
                        session.commit()  # the lease given back
                    else:
                        session.rollback()
                    return monitor
                monitor.last_seq = (monitor.last_seq or 0) + 1
                run = PeriodRun(
                    monitor_id=monitor.id, seq=monitor.last_seq, scheduled_for=plan.slot,
                    horizon_index=plan.horizon_index, t=None, status="failed", failure_reason=error.reason,
                    failure_detail=str(error.detail)[:2000], started_at=started, finished_at=self.clock(),
                    sampling_seconds=sampling_seconds, worker_id=self.worker_id,
                )
                session.add(run)
                session.flush()
                breach = breach_of_error(error, plan.contract, plan.t + 1)
                if breach is not None:  # the answers no longer read as the contract says
                    self._contract(session, monitor, run, plan, ContractCheck(breach=breach))
                monitor.consecutive_failures += 1
                monitor.next_run_at = Schedule.of(monitor).slot_after(plan.slot)
                release_lease(monitor)
                if monitor.consecutive_failures >= self.settings.degraded_after_failures and monitor.state == "active":
                    monitor.state = "degraded"
                    enqueue_event(session, monitor.tenant_id, "monitor.degraded", monitor_event_data(
                        monitor, self.settings, failure_reason=error.reason, failure_detail=str(error.detail)[:500]))
                session.commit()
            except IntegrityError:
                session.rollback()
                return PeriodOutcome(plan.monitor_id, "duplicate")
        log.warning("period_failed", monitor_id=str(plan.monitor_id), reason=error.reason,
                    detail=str(error.detail)[:300], consecutive_failures=monitor.consecutive_failures)
        return PeriodOutcome(plan.monitor_id, "failed", reason=error.reason)

    def _contract(self, session: Session, monitor: Monitor, run: PeriodRun, plan: PeriodPlan,
                  contract: ContractCheck) -> None:
        """Store a detected contract, or raise a contract alarm for a breach (once per kind until
        reset) and ask an ``auto`` monitor to look for events again."""
        if contract.detected is not None:
            mechanism = session.get(Mechanism, plan.mechanism_id)
            if mechanism is not None and mechanism.output_shape is None:
                shape, evidence = contract.detected
                mechanism.output_shape = shape.model_dump(mode="json", exclude_defaults=True)
                mechanism.output_shape_source = "detected"
                # dpwatch's own record, not a change of the registration: updated_at stays (the
                # dashboard marks a change of the mechanism at its updated_at).
                mechanism.updated_at = Mechanism.updated_at
                log.info("contract_detected", mechanism_id=str(mechanism.id), shape=shape.describe(),
                         evidence=evidence)
            return
        if contract.breach is None:
            return
        fingerprint = contract_fingerprint(monitor.id, contract.breach["breach"])
        already = session.scalar(select(Alarm.id).where(Alarm.monitor_id == monitor.id, Alarm.kind == "contract",
                                                        Alarm.fingerprint == fingerprint,
                                                        Alarm.resolved_at.is_(None)).limit(1))
        if already is not None:
            return
        fire_contract_alarm(session, monitor, run, contract.breach, self.settings)
        log.warning("contract_breach", monitor_id=str(monitor.id), breach=contract.breach["breach"],
                    detail=contract.breach["detail"][:300])
        if self._on_alarm is not None:
            self._on_alarm()
        if monitor.rediscover_every:
            from app.monitors.rediscovery import request_rediscovery

            request_rediscovery(session, monitor, trigger="shape_change",
                                detail={"breach": contract.breach["breach"], "observed_shape":
                                        contract.breach.get("observed_shape")})

    @staticmethod
    def _retrying(write: Callable[..., PeriodOutcome], *args: Any) -> PeriodOutcome:
        """``write(*args)``, once more on a fresh connection if the first one was found dead
        (SQLAlchemy invalidated it). The write is guarded: if the first attempt committed before
        its connection died, the second finds the lease released and reports ``lost_lease``."""
        try:
            return write(*args)
        except DBAPIError as error:
            if not error.connection_invalidated:
                raise
            log.warning("period_write_retried", reason="connection_invalidated")
            return write(*args)

    # -- all three ------------------------------------------------------------------------

    async def run(self, monitor_id: uuid.UUID,
                  planned: PeriodPlan | PeriodOutcome | Exception | None = None) -> PeriodOutcome:
        """Plan (unless ``planned``: the worker plans in the claim's transaction), sample and write
        one period of a monitor this worker has leased."""
        if planned is None:
            planned = await asyncio.to_thread(self.plan, monitor_id)
        if isinstance(planned, Exception):
            raise planned
        if isinstance(planned, PeriodOutcome):
            return planned
        started = self.clock()
        t0 = time.perf_counter()
        admission = self._admission(planned)
        try:
            try:
                outputs = await self.sample(planned, admission)
            except SamplingError as exc:
                outcome = await asyncio.to_thread(self._retrying, self.write_failure, planned, exc, started,
                                                  time.perf_counter() - t0)
            else:
                outcome = await asyncio.to_thread(self._retrying, self.write_success, planned, outputs, started,
                                                  time.perf_counter() - t0)
        finally:
            if admission is not None:
                admission.release()
        if self._on_period is not None and outcome.outcome in ("ok", "alarm", "failed"):
            self._on_period("failed" if outcome.outcome == "failed" else "ok", time.perf_counter() - t0)
        if self._on_alarm is not None and outcome.outcome == "alarm":
            self._on_alarm()
        return outcome

