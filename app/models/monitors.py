"""Monitors, their checks, and the record of every period.

A monitor runs horizons of T periods. Each period it samples the mechanism n times on x and on
x' of every check, feeds z_t to the check's ``WeightedAggregator`` (``checks.detector_state``)
and writes one ``period_runs`` row with one ``period_checks`` row per check.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, JSONType, new_uuid, utcnow

MONITOR_STATES = ("calibrating", "active", "alarm", "completed", "paused", "degraded")
VARIANCES = ("score", "wald")
DETECTORS = ("aggregator", "e-process", "e-detector")
PERIOD_STATUSES = ("ok", "failed")


class Monitor(Base):
    __tablename__ = "monitors"
    __table_args__ = (
        CheckConstraint("state IN ('calibrating', 'active', 'alarm', 'completed', 'paused', 'degraded')", name="state"),
        CheckConstraint("variance IN ('score', 'wald')", name="variance"),
        CheckConstraint("detector IN ('aggregator', 'e-process', 'e-detector')", name="detector"),
        CheckConstraint("(period_seconds IS NULL) <> (cron IS NULL)", name="one_schedule"),
        CheckConstraint("epsilon > 0", name="epsilon_positive"),
        CheckConstraint("alpha > 0 AND alpha < 1", name="alpha_range"),
        CheckConstraint("gamma >= 0 AND gamma < 0.5", name="gamma_range"),
        CheckConstraint("horizon >= 2", name="horizon_min"),
        CheckConstraint("samples_per_period >= 1", name="samples_positive"),
        # The scheduler's claim query: WHERE state IN (...) AND next_run_at <= now.
        Index("ix_monitors_state_next_run_at", "state", "next_run_at"),
        Index("ix_monitors_tenant_id_created_at", "tenant_id", "created_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    mechanism_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("mechanisms.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))

    # The claimed ε of a pure-ε or (ε, δ) claim; None for μ-GDP and ρ-zCDP claims.
    epsilon: Mapped[float | None]
    # The monitor's default claim (app/claims): {"epsilon": e}, {"epsilon": e, "delta": d},
    # {"gdp_mu": m} or {"zcdp_rho": r}. None on monitors made before claims: {"epsilon": epsilon}.
    claim: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    alpha: Mapped[float] = mapped_column(default=0.05)
    gamma: Mapped[float] = mapped_column(default=0.25)
    horizon: Mapped[int]
    samples_per_period: Mapped[int]
    period_seconds: Mapped[int | None]
    cron: Mapped[str | None] = mapped_column(String(200))
    variance: Mapped[str] = mapped_column(String(8), default="score")
    kappa: Mapped[float] = mapped_column(default=1e-6)
    symmetric: Mapped[bool] = mapped_column(default=False)
    renew: Mapped[bool] = mapped_column(default=False)
    # Which sequential test each check runs (app/monitors/detectors.py): the horizon-T aggregator,
    # or a horizon-free e-process / e-detector (method.md §13), which never renew.
    detector: Mapped[str] = mapped_column(String(16), default="aggregator", server_default="aggregator")
    # The horizon H an e-process monitor was created with: its checks run the horizon-tuned design
    # for H (method.md §13.3d), valid for ever. None: no horizon was given (``horizon`` then holds
    # the default window and the checks run the design without one), or another detector.
    design_horizon: Mapped[int | None]

    # Raw outputs are kept for the last ``outputs_window`` periods (0 keeps none) for MPL
    # snapshots; a snapshot runs every ``snapshot_every`` periods (None: never on a schedule) and
    # on every alarm, then with ``alarm_snapshot_samples`` fresh outputs per database for the bound.
    outputs_window: Mapped[int] = mapped_column(default=20, server_default="20")
    snapshot_every: Mapped[int | None]
    alarm_snapshot_samples: Mapped[int] = mapped_column(default=50000, server_default="50000")

    # Events that follow the deployment (app.monitors.rediscovery): with ``auto`` checks,
    # discovery runs again every ``rediscover_every`` periods (0: never) and when the outputs
    # break their contract; ``rediscoveries`` counts the checks it added in this horizon, and
    # sets the level of the next one (α_j·2^−(r+1)). Discovery sizes default to the settings.
    rediscover_every: Mapped[int] = mapped_column(default=0, server_default="0")
    rediscoveries: Mapped[int] = mapped_column(default=0, server_default="0")
    discovery_samples: Mapped[int | None]
    discovery_fresh_samples: Mapped[int | None]
    # The search (app.search, app.monitors.research): every ``search_every`` periods (0: never) a
    # search job explores the mechanism's input domain with ``search_budget`` outputs (None: the
    # settings' default); a new pair it finds becomes a check with its own share of α, counted in
    # ``rediscoveries`` with the checks re-discovery adds.
    search_every: Mapped[int] = mapped_column(default=0, server_default="0")
    search_budget: Mapped[int | None]

    state: Mapped[str] = mapped_column(String(16))
    paused_from_state: Mapped[str | None] = mapped_column(String(16))
    horizon_index: Mapped[int] = mapped_column(default=1)
    horizon_alpha: Mapped[float]
    threshold: Mapped[float | None]
    threshold_std_error: Mapped[float | None]
    threshold_source: Mapped[str | None] = mapped_column(String(16))
    t: Mapped[int] = mapped_column(default=0)
    # seq of the monitor's latest period_runs row (ok or failed): the next period takes last_seq + 1
    # from this row, which the write step locks anyway (no SELECT max(seq)).
    last_seq: Mapped[int] = mapped_column(default=0, server_default="0")
    consecutive_failures: Mapped[int] = mapped_column(default=0)
    # Failed attempts at the current calibration and the last one's reason (app/monitors/calibration.py):
    # out of attempts, or over a memory or time limit, the monitor is paused with the reason kept here.
    calibration_attempts: Mapped[int] = mapped_column(default=0, server_default="0")
    calibration_error: Mapped[str | None] = mapped_column(Text)
    # When its latest calibration attempt was claimed: a tenant's latest over its monitors is when its
    # calibrations were last served, which fair calibration claims order by (app/monitors/leases.py).
    calibration_claimed_at: Mapped[datetime | None]

    # Period slots are schedule_anchor + k·period_seconds (or the cron's fire times); the anchor
    # is start_at (or the creation time) so that slots, and so period_runs.scheduled_for, are
    # reproducible across replicas.
    schedule_anchor: Mapped[datetime]
    next_run_at: Mapped[datetime]
    last_period_at: Mapped[datetime | None]
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None]

    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Check(Base):
    """One (x, x', E) triple of a monitor, with its detector state."""

    __tablename__ = "checks"
    __table_args__ = (UniqueConstraint("monitor_id", "position"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    monitor_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    position: Mapped[int]
    x: Mapped[Any] = mapped_column(JSONType)
    x_prime: Mapped[Any] = mapped_column(JSONType)
    event: Mapped[dict[str, Any]] = mapped_column(JSONType)
    # True for the (x', x) copy that ``symmetric`` adds next to each (x, x').
    reversed: Mapped[bool] = mapped_column(default=False)
    # The detector's O(1) state (app/monitors/detectors.py): a few numbers whatever t is (the
    # aggregator's past prefix sums live in period_checks.prefix_sum). None while calibrating.
    detector_state: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # For an "auto" event: what discovery found (pair orientation, ε̂, t̂, LB, samples used).
    discovery: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # The check's claim (None: the monitor's), and for claims other than pure ε the counts of the
    # last periods that choose the next period's line, with that line (app/claims/service.py).
    claim: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    claim_state: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # ``given`` (the user's event), ``auto`` (discovered while calibrating) or ``rediscovery``
    # (added during a horizon at period ``joined_t``, with its own level and threshold).
    origin: Mapped[str] = mapped_column(String(16), default="given", server_default="given")
    joined_t: Mapped[int] = mapped_column(default=0, server_default="0")
    # The check's false-alarm level in this horizon (α_j/m, α_j/(2m) or α_j·2^−(r+1)).
    level: Mapped[float | None]
    last_z: Mapped[float | None]
    last_statistic: Mapped[float | None]
    max_statistic: Mapped[float | None]


class PeriodRun(Base):
    """One period of one monitor: a slot that was sampled, tested, and recorded (or failed)."""

    __tablename__ = "period_runs"
    __table_args__ = (
        # A slot is drawn at most once, even when two replicas race (ON CONFLICT DO NOTHING).
        UniqueConstraint("monitor_id", "scheduled_for"),
        # A horizon's period t is counted at most once; failed periods have t NULL.
        UniqueConstraint("monitor_id", "horizon_index", "t"),
        UniqueConstraint("monitor_id", "seq"),
        CheckConstraint("status IN ('ok', 'failed')", name="status"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    monitor_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    seq: Mapped[int]
    scheduled_for: Mapped[datetime]
    horizon_index: Mapped[int]
    t: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(8))
    failure_reason: Mapped[str | None] = mapped_column(String(64))
    failure_detail: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    sampling_seconds: Mapped[float | None]
    worker_id: Mapped[str | None] = mapped_column(String(200))


class PeriodCheck(Base):
    """The numbers of one check in one period (seed 002 eqs. 7-13)."""

    __tablename__ = "period_checks"
    __table_args__ = (UniqueConstraint("period_run_id", "check_id"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    period_run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("period_runs.id", ondelete="CASCADE"))
    check_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("checks.id", ondelete="CASCADE"), index=True)
    a: Mapped[int]
    b: Mapped[int]
    n: Mapped[int]
    p_hat: Mapped[float]
    q_hat: Mapped[float]
    d_hat: Mapped[float]
    sigma_hat: Mapped[float]
    z: Mapped[float]
    statistic: Mapped[float]
    threshold: Mapped[float]
    # The claim tested and the supporting line cp·p + cq·q ≤ c0 of its region that D̂ refers to
    # (method.md §10.3); None on periods recorded before claims.
    claim: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    line: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # The aggregator's prefix sum S_t = z_1 + … + z_t of this check in its horizon (eq. 13), read
    # back by the next periods of the horizon; None for the e-process and the e-detector.
    prefix_sum: Mapped[float | None]
