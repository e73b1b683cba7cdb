"""What one period works from and what it produces: the plan read before sampling
(:class:`PeriodPlan`, :class:`CheckPlan`) and each check's numbers (:class:`CheckResult`).

Shared by the runner (app.monitors.runner), which builds them, and the one-statement write of a
routine period (app.monitors.routine_write), which stores them; neither imports the other's code
for them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.sampling.client import MechanismEndpoint
from app.stats.claims import Claim
from app.stats.events import Event
from app.stats.shapes import OutputShape


@dataclass(frozen=True)
class CheckPlan:
    id: uuid.UUID
    position: int
    x_key: str
    x_prime_key: str
    event: Event
    # What the write step needs, read with the plan (a period's results are computed before its
    # write transaction; the write's guard, t unchanged under our lease, keeps them current).
    claim: Claim | None = None
    claim_state: dict[str, Any] | None = None
    detector_state: dict[str, Any] | None = None
    past_prefix: tuple[float, ...] | None = None  # S_1..S_t of the aggregator in this horizon


@dataclass(frozen=True)
class CheckResult:
    """One check's numbers in one period, computed from the plan and the counts."""

    check_id: uuid.UUID
    a: int
    b: int
    p_hat: float
    q_hat: float
    d_hat: float
    sigma_hat: float
    z: float
    statistic: float
    threshold: float
    alarm: bool
    lag: int
    max_statistic: float
    prefix_sum: float | None
    claim: Claim
    line: dict[str, Any] | None
    claim_state: dict[str, Any] | None
    detector_state: dict[str, Any]


@dataclass(frozen=True)
class PeriodPlan:
    monitor_id: uuid.UUID
    scheduled: datetime  # the monitor's next_run_at when planned (the write guard compares it)
    slot: datetime  # the slot this period stands for (latest due; see schedule.py)
    skipped: int
    horizon_index: int
    t: int
    n: int
    epsilon: float | None
    endpoint: MechanismEndpoint
    databases: dict[str, Any]
    checks: tuple[CheckPlan, ...]
    mechanism_id: uuid.UUID | None = None
    contract: OutputShape | None = None  # None: detect it from this period's outputs
    variance: str = "score"
    kappa: float = 1e-6
    next_slot: datetime | None = None  # the slot after ``slot`` (the schedule cannot change under the guard)
    horizon: int = 0
    detector: str = "aggregator"
    outputs_window: int = 0
    snapshot_every: int | None = None
    rediscover_every: int = 0
    search_every: int = 0
    tenant_id: uuid.UUID | None = None  # heavy periods run one at a time per tenant in a worker
