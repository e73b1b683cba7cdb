"""Computing snapshot jobs: claim under a lease, gather samples, run MPL, write the result.

An alarm's snapshot also finishes the alarm: its evidence is stored on the alarm and the
``alarm.firing`` webhooks are enqueued with it. When the snapshot fails, the webhooks go out
without evidence, so that an alarm is never silenced by its snapshot.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import structlog
from sqlalchemy import case, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.alarms.evidence import (
    check_evidence_claim,
    evidence_claim,
    with_confirmation,
    with_snapshot,
)
from app.alarms.service import notify_alarm
from app.claims.service import effective_claim
from app.db import utcnow
from app.mechanisms.contract import endpoint_of
from app.models.alarms import Alarm
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor
from app.models.snapshots import Snapshot
from app.monitors.outputs import database_digest, load_window
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.sampling.protocol import SamplingError, database_key
from app.settings import Settings
from app.snapshots.compute import PairSamples, compute_snapshot, split_periods
from app.stats.events import event_contains, parse_event
from app.stats.shapes import concat_outputs

log = structlog.get_logger("dpwatch.snapshots")

#: A snapshot's lease; it covers drawing fresh samples and the MPL computation.
SNAPSHOT_LEASE_SECONDS = 300
#: Drawing a snapshot's fresh samples may take this share of its lease, every attempt together
#: (the rest is for MPL and the write).
SAMPLING_SHARE_OF_LEASE = 0.7
#: Attempts at drawing them: a timeout, a connection error, a 5xx or a 429 is tried again.
SAMPLING_ATTEMPTS = 3
#: A claim ranks tenants by their snapshots started this recently (the rest count as never served).
SERVED_WINDOW_SECONDS = 3600


def sampling_deadline(extra_samples: int, databases: int) -> float:
    """Seconds one attempt at a snapshot's fresh samples may take: 20 s, plus 1 ms per output to
    draw (``extra_samples`` on each of ``databases``: 50 000 on 2 -> 120 s), within its lease.
    A deadline fixed in seconds left an alarm's snapshot without its samples on a busy machine
    (50 000 outputs per database against the period's 6 s)."""
    return min(SAMPLING_SHARE_OF_LEASE * SNAPSHOT_LEASE_SECONDS, 20.0 + 0.001 * extra_samples * max(1, databases))


@dataclass(frozen=True)
class SnapshotPlan:
    snapshot_id: uuid.UUID
    monitor_id: uuid.UUID
    epsilon: float | None
    alpha: float
    extra_samples: int
    output_kind: str
    endpoint: MechanismEndpoint
    period: int
    pairs: list[dict[str, Any]]  # label, x, x_prime, and their window series
    databases: dict[str, Any]
    #: For an alarm's snapshot: the alarm's check (event, x_key, xp_key), whose event the fresh
    #: outputs are counted in for the confirmation; None otherwise.
    confirm: dict[str, Any] | None = None


class SnapshotRunner:
    def __init__(self, session_factory: sessionmaker[Session], client: SamplingClient, settings: Settings,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.session_factory = session_factory
        self.client = client
        self.settings = settings
        self.clock = clock

    def claim(self, limit: int = 1) -> list[uuid.UUID]:
        """Lease up to ``limit`` ready snapshots, tenants in turns: each tenant's next snapshot
        (its alarms' before its scheduled ones, then the oldest) counts its snapshots running
        now; among the tenants' next ones, alarms first, then the tenant served least recently
        (its latest ``started_at``), then the oldest. Oldest first overall let one tenant's
        scheduled snapshots (``snapshot_every: 1`` on many monitors queues them faster than a
        worker computes them) hold back another tenant's alarm snapshot, and with it the alarm's
        webhooks, which wait for its evidence."""
        now = self.clock()
        with self.session_factory() as session:
            ready = or_(Snapshot.status == "pending",
                        (Snapshot.status == "running") & (Snapshot.lease_expires_at < now))
            not_alarm = case((Snapshot.trigger == "alarm", 0), else_=1)
            ranked = select(
                Snapshot.id, Snapshot.tenant_id, Snapshot.created_at, not_alarm.label("not_alarm"),
                func.row_number().over(partition_by=Snapshot.tenant_id,
                                       order_by=(not_alarm, Snapshot.created_at, Snapshot.id)).label("rank"),
            ).where(ready).subquery()
            live = (Snapshot.status == "running") & (Snapshot.lease_expires_at >= now)
            tenants = select(
                Snapshot.tenant_id,
                func.count().filter(live).label("running"),
                func.max(Snapshot.started_at).label("served"),
            ).where(Snapshot.started_at >= now - timedelta(seconds=SERVED_WINDOW_SECONDS)) \
                .group_by(Snapshot.tenant_id).subquery()  # served longer ago counts as never
            turn = ranked.c.rank + func.coalesce(tenants.c.running, 0)
            order = [row.id for row in session.execute(
                select(ranked.c.id).outerjoin(tenants, tenants.c.tenant_id == ranked.c.tenant_id)
                .order_by(turn, ranked.c.not_alarm, tenants.c.served.is_not(None), tenants.c.served,
                          ranked.c.created_at, ranked.c.id)
                .limit(4 * limit))]
            if not order:
                return []
            # Row locks cannot go with a window function: lock the chosen rows in a second step,
            # skipping those another worker holds; the guarded UPDATE below settles any race.
            locked = set(session.scalars(select(Snapshot.id).where(Snapshot.id.in_(order), ready)
                                         .with_for_update(skip_locked=True)))
            ids = [i for i in order if i in locked][:limit]
            if not ids:
                return []
            claimed = list(session.scalars(
                update(Snapshot).where(Snapshot.id.in_(ids), ready)
                .values(status="running", started_at=now, lease_owner=self.settings.worker_id,
                        lease_expires_at=now + timedelta(seconds=SNAPSHOT_LEASE_SECONDS))
                .returning(Snapshot.id).execution_options(synchronize_session=False)))
            session.commit()
            return claimed

    def plan(self, snapshot_id: uuid.UUID) -> SnapshotPlan:
        with self.session_factory() as session:
            snap = session.get(Snapshot, snapshot_id)
            monitor = session.get(Monitor, snap.monitor_id)
            mechanism = session.get(Mechanism, monitor.mechanism_id)
            window = load_window(session, monitor.id, **self._alarm_segment(session, snap))
            pairs, databases = [], {}
            checks = session.scalars(select(Check).where(Check.monitor_id == monitor.id).order_by(Check.position))
            for check in checks:
                if check.reversed:  # the loss |ln f_x − ln f_x'| is symmetric: (x', x) adds nothing
                    continue
                xk, xpk = database_key(check.x), database_key(check.x_prime)
                databases[xk], databases[xpk] = check.x, check.x_prime
                pairs.append({"label": {"check_id": str(check.id), "position": check.position,
                                        "x": check.x, "x_prime": check.x_prime,
                                        "claim": effective_claim(check.claim, monitor.claim, monitor.epsilon)},
                              "x_key": xk, "xp_key": xpk,
                              "x_series": window.get(database_digest(xk), []),
                              "xp_series": window.get(database_digest(xpk), [])})
            confirm = None
            if snap.trigger == "alarm" and snap.alarm_id is not None:
                alarm = session.get(Alarm, snap.alarm_id)
                check = session.get(Check, alarm.check_id) if alarm is not None and alarm.check_id else None
                if check is not None and check.event is not None:
                    xk, xpk = database_key(check.x), database_key(check.x_prime)
                    databases[xk], databases[xpk] = check.x, check.x_prime
                    confirm = {"event": check.event, "x_key": xk, "xp_key": xpk}
            return SnapshotPlan(snapshot_id, monitor.id, monitor.epsilon, float(snap.params.get("alpha", 0.05)),
                                int(snap.params.get("extra_samples", 0)), mechanism.output_kind,
                                endpoint_of(mechanism), monitor.t, pairs, databases, confirm)

    @staticmethod
    def _alarm_segment(session: Session, snap: Snapshot) -> dict[str, int]:
        """For an alarm's snapshot, the periods the detector pooled when it fired (the maximising
        lag k of eq. 13): its own estimate of how long the mechanism has been in violation.
        Choosing t̂ there keeps pre-change outputs from diluting the estimate."""
        if snap.trigger != "alarm" or snap.alarm_id is None:
            return {}
        alarm = session.get(Alarm, snap.alarm_id)
        check = session.get(Check, alarm.check_id) if alarm is not None and alarm.check_id is not None else None
        if alarm is None or check is None or not check.detector_state:
            return {}
        from app.stats.detector import state_lag, state_t

        # The check's detector counts from when it joined (joined_t), the alarm from the horizon's start.
        lag = state_lag(check.detector_state)
        if lag is None or state_t(check.detector_state) + (check.joined_t or 0) != alarm.t:
            return {}  # the monitor was reset or went on meanwhile
        return {"horizon_index": alarm.horizon_index, "min_t": alarm.t - lag + 1}

    async def draw(self, plan: SnapshotPlan) -> dict[str, np.ndarray]:
        """The fresh samples of every database, with a deadline that follows their number, tried
        again (up to ``SAMPLING_ATTEMPTS``) after a transient failure while the lease's sampling
        share lasts."""
        keys = list(plan.databases)
        per_attempt = sampling_deadline(plan.extra_samples, len(keys))
        ends = time.monotonic() + SAMPLING_SHARE_OF_LEASE * SNAPSHOT_LEASE_SECONDS
        for attempt in range(1, SAMPLING_ATTEMPTS + 1):
            budget = min(per_attempt, ends - time.monotonic())
            try:
                drawn = await asyncio.gather(*(
                    self.client.sample(plan.endpoint, plan.databases[k], plan.extra_samples,
                                       monitor_id=str(plan.monitor_id), period=plan.period,
                                       request_id_prefix=f"snap-{plan.snapshot_id.hex[:12]}-{attempt}-{i}",
                                       deadline_seconds=budget)
                    for i, k in enumerate(keys)))
                return dict(zip(keys, drawn))
            except SamplingError as exc:
                left = ends - time.monotonic()
                if not exc.retryable or attempt == SAMPLING_ATTEMPTS or left < 5.0:
                    raise
                log.warning("snapshot_sampling_retry", snapshot_id=str(plan.snapshot_id), attempt=attempt,
                            reason=exc.reason, detail=exc.detail[:300], seconds_left=round(left, 1))
        raise AssertionError("unreachable")  # pragma: no cover

    async def gather(self, plan: SnapshotPlan) -> list[PairSamples]:
        fresh: dict[str, np.ndarray] = {}
        if plan.extra_samples > 0:
            fresh = await self.draw(plan)
        return self.pair_samples(plan, fresh)

    @staticmethod
    def confirmation_counts(plan: SnapshotPlan, fresh: dict[str, np.ndarray]) -> tuple[int, int, int] | None:
        """(a, b, n): the fresh outputs (drawn after the alarm, never seen by the detector) in the
        alarm's event, for the confirmation (app.stats.evidence.confirmation)."""
        if plan.confirm is None or not fresh:
            return None
        fx, fxp = fresh[plan.confirm["x_key"]], fresh[plan.confirm["xp_key"]]
        n = min(len(fx), len(fxp))
        if n < 1:
            return None
        event = parse_event(plan.confirm["event"])
        a = int(np.count_nonzero(event_contains(event, fx[:n])))
        b = int(np.count_nonzero(event_contains(event, fxp[:n])))
        return a, b, n

    @staticmethod
    def pair_samples(plan: SnapshotPlan, fresh: dict[str, np.ndarray]) -> list[PairSamples]:
        out = []
        for pair in plan.pairs:
            window_x = [a for _, a in pair["x_series"]]
            window_xp = [a for _, a in pair["xp_series"]]
            if fresh:
                # Half the fresh draws bound the loss; the other half, with the kept outputs,
                # choose t̂ (the two parts are independent draws).
                half = plan.extra_samples // 2
                fx, fxp = fresh[pair["x_key"]], fresh[pair["xp_key"]]
                choose_x, choose_xp = concat_outputs([*window_x, fx[:half]]), concat_outputs([*window_xp, fxp[:half]])
                bound_x, bound_xp = fx[half:], fxp[half:]
            else:
                if not window_x or not window_xp:
                    raise ValueError("no outputs are kept for this monitor yet and no extra samples were asked for")
                choose_x, bound_x = split_periods(pair["x_series"])
                choose_xp, bound_xp = split_periods(pair["xp_series"])
            out.append(PairSamples(pair["label"], choose_x, choose_xp, bound_x, bound_xp))
        return out

    def finish(self, plan: SnapshotPlan, result: dict[str, Any] | None, error: str | None,
               confirm_counts: tuple[int, int, int] | None = None) -> None:
        with self.session_factory() as session:
            snap = session.get(Snapshot, plan.snapshot_id, with_for_update=True)
            if snap is None or snap.lease_owner != self.settings.worker_id or snap.status != "running":
                session.rollback()
                return
            snap.status = "done" if result is not None else "failed"
            snap.result, snap.error = result, error
            snap.finished_at = self.clock()
            snap.lease_owner = snap.lease_expires_at = None
            snap.params = {**snap.params, "period": plan.period}
            if snap.trigger == "alarm" and snap.alarm_id is not None:
                alarm = session.get(Alarm, snap.alarm_id)
                if alarm is not None:
                    monitor = session.get(Monitor, alarm.monitor_id)
                    check = session.get(Check, alarm.check_id) if alarm.check_id is not None else None
                    if result is not None:
                        claim = (evidence_claim(alarm.claim) if alarm.claim
                                 else check_evidence_claim(monitor, check) if check is not None
                                 else evidence_claim({"epsilon": monitor.epsilon}))
                        alarm.evidence = with_snapshot(alarm.evidence, result, str(snap.id), claim)
                    if confirm_counts is not None:
                        claim = (evidence_claim(alarm.claim) if alarm.claim
                                 else check_evidence_claim(monitor, check) if check is not None
                                 else evidence_claim({"epsilon": monitor.epsilon}))
                        alarm.evidence = with_confirmation(alarm.evidence, *confirm_counts, claim, float(plan.alpha))
                    notify_alarm(session, alarm, monitor, check, self.settings)
            session.commit()

    async def compute(self, pairs: list[PairSamples], plan: SnapshotPlan) -> dict[str, Any]:
        """MPL over the pairs: in a child process with the jobs' memory and CPU limits (app/jobs/isolation.py),
        so that a large snapshot neither blocks nor grows the worker; in a thread when ``snapshot_isolation`` is
        ``inline``."""
        if self.settings.snapshot_isolation == "inline":
            return await asyncio.to_thread(compute_snapshot, pairs, plan.output_kind, alpha=plan.alpha,
                                           epsilon=plan.epsilon)
        from app.jobs.child import Limits
        from app.jobs.isolation import call_in_child

        s = self.settings
        limits = Limits(memory_bytes=s.job_memory_mb * 2**20, cpu_seconds=min(s.job_cpu_seconds, SNAPSHOT_LEASE_SECONDS),
                        wall_seconds=float(min(s.job_wall_seconds, SNAPSHOT_LEASE_SECONDS)))
        return await call_in_child("app.snapshots.compute:compute_snapshot", (pairs, plan.output_kind), limits,
                                   alpha=plan.alpha, epsilon=plan.epsilon)

    async def run(self, snapshot_id: uuid.UUID) -> str:
        plan = await asyncio.to_thread(self.plan, snapshot_id)
        counts = None
        try:
            fresh: dict[str, np.ndarray] = await self.draw(plan) if plan.extra_samples > 0 else {}
            counts = self.confirmation_counts(plan, fresh)
            pairs = self.pair_samples(plan, fresh)
            result = await self.compute(pairs, plan)
        except Exception as exc:  # sampling failures, too little data, numerical refusals
            reason = getattr(exc, "reason", type(exc).__name__)
            await asyncio.to_thread(self.finish, plan, None, f"{reason}: {exc}"[:2000], counts)
            log.warning("snapshot_failed", snapshot_id=str(snapshot_id), error=str(exc)[:300])
            return "failed"
        await asyncio.to_thread(self.finish, plan, result, None, counts)
        log.info("snapshot_done", snapshot_id=str(snapshot_id), lower_bound=result["lower_bound"],
                 epsilon_hat=result["epsilon_hat"])
        return "done"
