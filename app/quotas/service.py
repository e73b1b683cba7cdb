"""Quotas per tenant: what a tenant may have, and the checks the API runs before it saves.

Five quotas, each a deployment default (``DPWATCH_QUOTA_*``, app/settings.py) that a row of
``tenant_quotas`` may override for one tenant (``dpwatch quota set``); 0 means no limit:

- ``max_monitors``: monitors (429 over it);
- ``max_concurrent_jobs``: jobs running at once across all workers (fair claims leave the rest
  queued, app/jobs/runner.py);
- ``max_queued_jobs``: jobs queued or running (429 on a new job over it);
- ``max_outputs_per_day``: outputs drawn per day, *as committed*: each runnable monitor's periods
  per day × n × its distinct databases, plus the outputs the tenant's jobs of the last 24 hours may
  draw (their budgets). Counting what is committed rather than what was drawn keeps the period's
  write free of bookkeeping and refuses the request that would go over, before it draws anything;
- ``max_stored_output_bytes``: raw outputs kept for MPL snapshots: outputs_window × n × databases
  × bytes per output (4 for a real output, 4·dim for a vector, :data:`KEYED_BYTES_PER_OUTPUT` for
  a keyed one), summed over the tenant's monitors.

A request that alone exceeds a quota can never succeed: 422 (slug ``quota-exceeds-limit``). One
that exceeds it with what the tenant already has is a 429 (slug ``quota-exceeded``) with
``Retry-After``: it fits once the tenant deletes, pauses or waits.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.api.errors import ProblemError, field_problem
from app.db import utcnow
from app.models.quotas import TenantQuota
from app.settings import Settings

QUOTA_NAMES = ("max_monitors", "max_concurrent_jobs", "max_queued_jobs", "max_outputs_per_day",
               "max_stored_output_bytes")
#: A keyed output's stored size is not known before it is drawn; this is the estimate quotas use
#: (16 keys of an int32 index and a float32 value, with the row's share of the header).
KEYED_BYTES_PER_OUTPUT = 160
#: A cron schedule is counted as one period a minute (the most a cron can fire).
CRON_PERIOD_SECONDS = 60
#: ``Retry-After`` of a 429 for a quota.
QUOTA_RETRY_AFTER = 60
#: Monitors that draw (periods) or may draw again (paused keep their quota share).
COUNTED_STATES = ("calibrating", "active", "degraded", "paused")


@dataclass(frozen=True)
class Quotas:
    max_monitors: int
    max_concurrent_jobs: int
    max_queued_jobs: int
    max_outputs_per_day: int
    max_stored_output_bytes: int

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in QUOTA_NAMES}


def defaults(settings: Settings) -> Quotas:
    return Quotas(**{name: getattr(settings, f"quota_{name}") for name in QUOTA_NAMES})


def quotas_of(session: Session, tenant_id: uuid.UUID, settings: Settings) -> Quotas:
    base = defaults(settings)
    row = session.get(TenantQuota, tenant_id)
    if row is None:
        return base
    return Quotas(**{name: getattr(row, name) if getattr(row, name) is not None else getattr(base, name)
                     for name in QUOTA_NAMES})


def concurrent_job_caps(session: Session, tenant_ids: list[uuid.UUID], settings: Settings) -> dict[uuid.UUID, int]:
    """Each tenant's ``max_concurrent_jobs`` (0: no cap), one query for all of them."""
    default = settings.quota_max_concurrent_jobs
    caps = {t: default for t in tenant_ids}
    if tenant_ids:
        for tenant_id, value in session.execute(
                select(TenantQuota.tenant_id, TenantQuota.max_concurrent_jobs)
                .where(TenantQuota.tenant_id.in_(tenant_ids), TenantQuota.max_concurrent_jobs.is_not(None))):
            caps[tenant_id] = value
    return caps


def set_quotas(session: Session, tenant_id: uuid.UUID, values: dict[str, int | None]) -> TenantQuota:
    unknown = set(values) - set(QUOTA_NAMES)
    if unknown:
        raise ValueError(f"unknown quota(s): {', '.join(sorted(unknown))}")
    row = session.get(TenantQuota, tenant_id) or TenantQuota(tenant_id=tenant_id)
    for name, value in values.items():
        if value is not None and value < 0:
            raise ValueError(f"{name} must be ≥ 0 (0: no limit)")
        setattr(row, name, value)
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return row


# ------------------------------------------------------------------------------------ usage


def bytes_per_output(output_kind: str, dim: int | None) -> int:
    if output_kind == "vector":
        return 4 * max(1, dim or 1)
    if output_kind == "keyed":
        return KEYED_BYTES_PER_OUTPUT
    return 4


def _distinct_databases(pairs: list[tuple[Any, Any]]) -> int:
    return len({json.dumps(db, sort_keys=True) for pair in pairs for db in pair}) or 1


@dataclass(frozen=True)
class MonitorLoad:
    monitor_id: uuid.UUID
    outputs_per_day: int
    stored_bytes: int


def monitor_loads(session: Session, tenant_id: uuid.UUID) -> list[MonitorLoad]:
    """Each counted monitor's outputs per day and kept raw-output bytes (one query for monitors,
    one for their checks)."""
    from app.models.mechanisms import Mechanism
    from app.models.monitors import Check, Monitor

    rows = session.execute(
        select(Monitor.id, Monitor.samples_per_period, Monitor.period_seconds, Monitor.outputs_window,
               Monitor.state, Mechanism.output_kind, Mechanism.dim)
        .join(Mechanism, Mechanism.id == Monitor.mechanism_id)
        .where(Monitor.tenant_id == tenant_id, Monitor.state.in_(COUNTED_STATES))).all()
    if not rows:
        return []
    pairs: dict[uuid.UUID, list[tuple[Any, Any]]] = {}
    for monitor_id, x, x_prime in session.execute(
            select(Check.monitor_id, Check.x, Check.x_prime).where(Check.monitor_id.in_([r[0] for r in rows]))):
        pairs.setdefault(monitor_id, []).append((x, x_prime))
    out = []
    for monitor_id, n, period_seconds, window, state, kind, dim in rows:
        databases = _distinct_databases(pairs.get(monitor_id, []))
        per_day = 0 if state == "paused" else n * databases * (86_400 // max(1, period_seconds or CRON_PERIOD_SECONDS))
        out.append(MonitorLoad(monitor_id, per_day, window * n * databases * bytes_per_output(kind, dim)))
    return out


def job_outputs(kind: str, params: dict[str, Any]) -> int:
    """What a job may draw at most: a search's budget is its total; discovery and audits draw up to
    ``budget`` per database of each pair."""
    budget = int(params.get("budget") or 0)
    if kind == "search":
        return budget
    pairs = len(params.get("pairs") or []) or 1
    return budget * 2 * pairs


def jobs_outputs_last_day(session: Session, tenant_id: uuid.UUID, now: datetime) -> int:
    from app.models.jobs import Job

    total = 0
    for kind, params in session.execute(select(Job.kind, Job.params).where(
            Job.tenant_id == tenant_id, Job.created_at >= now - timedelta(days=1),
            Job.state.in_(("queued", "running", "succeeded")))):
        total += job_outputs(kind, params or {})
    return total


def usage(session: Session, tenant_id: uuid.UUID, now: datetime | None = None) -> dict[str, int]:
    """The tenant's usage of each quota (and the raw-output bytes actually stored)."""
    from app.models.jobs import Job
    from app.models.monitors import Monitor
    from app.models.snapshots import PeriodOutputs

    now = now or utcnow()
    loads = monitor_loads(session, tenant_id)
    monitors = session.scalar(select(func.count()).select_from(Monitor).where(Monitor.tenant_id == tenant_id)) or 0
    running = session.scalar(select(func.count()).select_from(Job).where(
        Job.tenant_id == tenant_id, Job.state == "running")) or 0
    queued = session.scalar(select(func.count()).select_from(Job).where(
        Job.tenant_id == tenant_id, Job.state.in_(("queued", "running")))) or 0
    stored = session.scalar(select(func.coalesce(func.sum(func.length(PeriodOutputs.data)), 0))
                            .join(Monitor, Monitor.id == PeriodOutputs.monitor_id)
                            .where(Monitor.tenant_id == tenant_id)) or 0
    return {"monitors": int(monitors), "running_jobs": int(running), "queued_jobs": int(queued),
            "outputs_per_day": sum(x.outputs_per_day for x in loads) + jobs_outputs_last_day(session, tenant_id, now),
            "stored_output_bytes_committed": sum(x.stored_bytes for x in loads),
            "stored_output_bytes_measured": int(stored)}


# ------------------------------------------------------------------------------------ checks


class QuotaExceeded(ProblemError):
    """Over a quota with what the tenant already has (429, Retry-After)."""

    status = 429
    slug = "quota-exceeded"

    def __init__(self, detail: str, *, quota: str) -> None:
        super().__init__(detail, headers={"Retry-After": str(QUOTA_RETRY_AFTER)},
                         errors=[field_problem(["quota", quota], detail, "quota_exceeded")])


class QuotaExceedsLimit(ProblemError):
    """A request that alone is over a quota (422): it can never be accepted as it is."""

    status = 422
    slug = "quota-exceeds-limit"

    def __init__(self, detail: str, *, field: list[str | int], quota: str) -> None:
        super().__init__(detail, errors=[field_problem(field, detail, f"quota_{quota}")])


def check_monitor(session: Session, tenant_id: uuid.UUID, monitor_id: uuid.UUID, settings: Settings, *,
                  creating: bool) -> None:
    """After a monitor is created or changed (flushed, not committed): raise if the tenant is now
    over a quota. The router's transaction then rolls back."""
    from app.models.monitors import Monitor

    q = quotas_of(session, tenant_id, settings)
    if creating and q.max_monitors:
        count = session.scalar(select(func.count()).select_from(Monitor).where(Monitor.tenant_id == tenant_id)) or 0
        if count > q.max_monitors:
            raise QuotaExceeded(f"this tenant has {count - 1} monitors, its quota is {q.max_monitors}: delete one "
                                "first, or ask for a larger quota", quota="max_monitors")
    loads = monitor_loads(session, tenant_id)
    mine = next((x for x in loads if x.monitor_id == monitor_id), None)
    if mine is None:
        return
    if q.max_outputs_per_day:
        if mine.outputs_per_day > q.max_outputs_per_day:
            raise QuotaExceedsLimit(
                f"this monitor alone draws {mine.outputs_per_day:,} outputs a day (n × databases × periods a day), "
                f"over the tenant's quota of {q.max_outputs_per_day:,}: lower samples_per_period or lengthen "
                "period_seconds", field=["body", "samples_per_period"], quota="max_outputs_per_day")
        total = sum(x.outputs_per_day for x in loads) + jobs_outputs_last_day(session, tenant_id, utcnow())
        if total > q.max_outputs_per_day:
            raise QuotaExceeded(
                f"with this monitor the tenant would draw {total:,} outputs a day (its monitors and the last 24 "
                f"hours of jobs), over its quota of {q.max_outputs_per_day:,}", quota="max_outputs_per_day")
    if q.max_stored_output_bytes:
        if mine.stored_bytes > q.max_stored_output_bytes:
            raise QuotaExceedsLimit(
                f"this monitor alone keeps {mine.stored_bytes:,} bytes of raw outputs (outputs_window × n × "
                f"databases × bytes per output), over the tenant's quota of {q.max_stored_output_bytes:,}: lower "
                "outputs_window", field=["body", "outputs_window"], quota="max_stored_output_bytes")
        total = sum(x.stored_bytes for x in loads)
        if total > q.max_stored_output_bytes:
            raise QuotaExceeded(
                f"with this monitor the tenant's monitors would keep {total:,} bytes of raw outputs, over its quota "
                f"of {q.max_stored_output_bytes:,}", quota="max_stored_output_bytes")


def check_new_job(session: Session, tenant_id: uuid.UUID, kind: str, params: dict[str, Any],
                  settings: Settings) -> None:
    """Before a job is queued over the API: the queued-jobs and outputs-per-day quotas."""
    from app.models.jobs import Job

    q = quotas_of(session, tenant_id, settings)
    if q.max_queued_jobs:
        open_jobs = session.scalar(select(func.count()).select_from(Job).where(
            Job.tenant_id == tenant_id, Job.state.in_(("queued", "running")))) or 0
        if open_jobs >= q.max_queued_jobs:
            raise QuotaExceeded(f"this tenant has {open_jobs} jobs queued or running, its quota is "
                                f"{q.max_queued_jobs}: wait for one to finish or cancel one", quota="max_queued_jobs")
    if q.max_outputs_per_day:
        mine = job_outputs(kind, params)
        if mine > q.max_outputs_per_day:
            raise QuotaExceedsLimit(f"this job may draw {mine:,} outputs, over the tenant's quota of "
                                    f"{q.max_outputs_per_day:,} a day: lower its budget", field=["body", "budget"],
                                    quota="max_outputs_per_day")
        total = (mine + sum(x.outputs_per_day for x in monitor_loads(session, tenant_id))
                 + jobs_outputs_last_day(session, tenant_id, utcnow()))
        if total > q.max_outputs_per_day:
            raise QuotaExceeded(f"with this job the tenant would draw {total:,} outputs a day (its monitors and the "
                                f"last 24 hours of jobs), over its quota of {q.max_outputs_per_day:,}",
                                quota="max_outputs_per_day")
