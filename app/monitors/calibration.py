"""Calibrating a monitor: events to discover, and thresholds off the shipped table.

Both take seconds to minutes, so they run outside any transaction, on a monitor this worker has
leased; the result is written under the lease like a period.

- A check with ``{"kind": "auto"}`` runs the engine's discovery (app.audit.discovery) on its
  pair: fresh draws in rounds, candidate events chosen on some and tested on others. The best
  candidate the engine found informative (held-out lower bound above 0, an event that holds some
  outputs) becomes the check's event, oriented so that it is likelier under x. Otherwise the
  check stays ``auto``, dormant, and re-discovery keeps looking (app.monitors.rediscovery). What was found is recorded in ``checks.discovery``. The draws are
  separate from the detector's periods.
- The threshold q(T, γ, α_j/m) by Monte Carlo when the table does not have it (method.md §3).

**Where it runs.** The parent (the worker) reads the plan and writes the result under the lease;
the work between (the discovery's draws and candidate choice, the Monte-Carlo threshold) runs in a
child process with the jobs' memory, CPU-time and wall-time limits (app/jobs/isolation.py
``call_in_child``), with a sampling client of its own, so that it neither holds the worker's GIL
nor grows its memory. ``calibration_isolation = "inline"`` runs it on the worker's loop (tests
that inject a client, tools).

**Failures.** A calibration that fails (a limit, a crash, a sampling error) records its reason on
the monitor (``calibration_error``), counts one more ``calibration_attempts`` and leaves the lease
to expire after a back-off (``calibration_retry_seconds`` × 2^(attempts−1)) so that it is tried
again later. A memory or time limit is not tried again (it would hit the limit again); after
``calibration_max_attempts`` the monitor is ``paused`` (``paused_from_state: calibrating``) with
the reason; ``resume`` tries again from the first attempt.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy.orm import Session, sessionmaker

from app.claims.events import discover_for_claim
from app.db import utcnow
from app.models.mechanisms import Mechanism
from app.models.monitors import Monitor
from app.monitors.leases import lock_leased_monitor, release_lease
from app.monitors.rediscovery import claim_choice, discover_and_assess, initial_choice
from app.monitors.service import (
    activate,
    awaits_discovery,
    check_alpha,
    check_claim,
    get_checks,
)
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.settings import Settings
from app.stats.claims import Claim, PureDP
from app.stats.shapes import OutputShape
from app.stats.thresholds import ThresholdEstimate, threshold_for

if TYPE_CHECKING:
    from app.jobs.child import Limits

log = structlog.get_logger("dpwatch.calibration")

#: Lease of a monitor being calibrated (event discovery, Monte-Carlo thresholds).
CALIBRATION_LEASE_SECONDS = 900
#: The child's wall-time limit ends this long before the lease, so that the result is written under it.
WRITE_MARGIN_SECONDS = 60
#: The computation a calibration's child runs (``module:function``; tests point it elsewhere).
COMPUTE_REF = "app.monitors.calibration:compute_here"
#: Failure reasons that are not tried again: the same work would hit the same limit.
FINAL_REASONS = ("memory limit", "time limit")


@dataclass(frozen=True)
class CalibrationPlan:
    """What a calibration computes from (read under the lease; sent to the child as is)."""

    monitor_id: uuid.UUID
    horizon_index: int
    design: tuple[int, float, float]  # (T, γ, α_j/m)
    known: ThresholdEstimate | None  # the threshold when the table had it
    auto: list[tuple[uuid.UUID, Any, Any, Claim]]  # (check id, x, x', claim) of the checks to discover
    endpoint: MechanismEndpoint
    shape: OutputShape
    epsilon: float | None
    alpha: float
    budget: int
    t: int


@dataclass(frozen=True)
class CalibrationResult:
    estimate: ThresholdEstimate
    found: dict[uuid.UUID, dict[str, Any]]  # check id -> what discovery recorded (``discovered_at`` unset)


class CalibrationFailed(Exception):
    """A calibration ended without a result; ``reason`` is ``memory limit``, ``time limit``,
    ``crashed`` or ``error`` (app/jobs/isolation.py's reasons)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


async def compute(plan: CalibrationPlan, client: SamplingClient | None) -> CalibrationResult:
    """Discover the events of the plan's ``auto`` checks and compute its threshold (no database)."""
    found: dict[uuid.UUID, dict[str, Any]] = {}
    if plan.auto and client is None:
        raise RuntimeError("event discovery needs a sampling client")
    for check_id, x, xp, claim in plan.auto:
        assert client is not None
        log.info("discovery_started", monitor_id=str(plan.monitor_id), check_id=str(check_id))
        label = f"discover-{check_id.hex[:12]}"
        if not isinstance(claim, PureDP):  # (ε, δ), GDP, zCDP: claim-aware tail events (app/claims/events.py)
            result = await discover_for_claim(client, plan.endpoint, plan.shape, [(x, xp)], claim,
                                              budget=plan.budget, alpha=plan.alpha, label=label, period=plan.t + 1)
            found[check_id] = claim_choice(result, x, "")
            continue
        candidates, _, summary = await discover_and_assess(
            client, plan.endpoint, plan.shape, [(x, xp)], [], epsilon=plan.epsilon, alpha=plan.alpha,
            budget=plan.budget, fresh=0, label=label, period=plan.t + 1, compare=False)
        found[check_id] = initial_choice(candidates, x, summary, "")
    log.info("calibration_started", monitor_id=str(plan.monitor_id), horizon=plan.design[0], gamma=plan.design[1],
             alpha=plan.design[2])
    estimate = plan.known or await asyncio.to_thread(threshold_for, *plan.design)
    return CalibrationResult(estimate, found)


def compute_here(plan: CalibrationPlan, settings: Settings) -> CalibrationResult:
    """:func:`compute` in this process (a calibration's child, app/jobs/child.py ``call_child``), on
    its own event loop with a sampling client of its own (the jobs' client: its deadline is not a
    period's)."""
    from app.jobs.runner import job_sampling_client

    async def main() -> CalibrationResult:
        client = job_sampling_client(settings) if plan.auto else None
        try:
            return await compute(plan, client)
        finally:
            if client is not None:
                await client.aclose()

    try:
        return asyncio.run(main())
    except RuntimeError as exc:
        # Under the child's address-space limit a thread's stack (asyncio.to_thread) is the
        # allocation that fails first: that is the memory limit, not an error to try again.
        if "can't start new thread" in str(exc):
            raise MemoryError(str(exc)) from exc
        raise


class Calibrator:
    def __init__(self, session_factory: sessionmaker[Session], settings: Settings,
                 client: SamplingClient | None = None, clock: Callable[[], datetime] = utcnow) -> None:
        self.session_factory = session_factory
        self.settings = settings
        self.client = client
        self.clock = clock
        self.compute_ref = COMPUTE_REF

    def _plan(self, monitor_id: uuid.UUID) -> CalibrationPlan | None:
        with self.session_factory() as session:
            monitor = session.get(Monitor, monitor_id)
            if monitor is None or monitor.lease_owner != self.settings.worker_id or monitor.state != "calibrating":
                return None
            checks = get_checks(session, monitor_id)
            design = (monitor.horizon, monitor.gamma, check_alpha(monitor, len(checks)))
            known = (ThresholdEstimate(monitor.horizon, monitor.gamma, design[2], monitor.threshold,
                                       monitor.threshold_std_error or 0.0, 0, 0, monitor.threshold_source or "table")
                     if monitor.threshold is not None else None)
            auto = [(c.id, c.x, c.x_prime, check_claim(monitor, c)) for c in checks if awaits_discovery(c)]
            from app.jobs.handlers import mechanism_shape, shaped_endpoint

            mechanism = session.get(Mechanism, monitor.mechanism_id)
            shape = mechanism_shape(mechanism)
            budget = monitor.discovery_samples or self.settings.discovery_samples
            return CalibrationPlan(monitor_id, monitor.horizon_index, design, known, auto,
                                   shaped_endpoint(mechanism, shape), shape, monitor.epsilon, monitor.alpha, budget,
                                   monitor.t)

    def limits(self) -> Limits:
        """The jobs' limits, within the calibration's lease."""
        from app.jobs.child import Limits

        s = self.settings
        within = CALIBRATION_LEASE_SECONDS - WRITE_MARGIN_SECONDS
        return Limits(memory_bytes=s.job_memory_mb * 2**20, cpu_seconds=min(s.job_cpu_seconds, within),
                      wall_seconds=float(min(s.job_wall_seconds, within)))

    async def _compute(self, plan: CalibrationPlan) -> CalibrationResult:
        """The plan's result: in a child process with the limits (``process``), or on this loop."""
        if self.settings.calibration_isolation == "inline":
            try:
                return await compute(plan, self.client)
            except MemoryError:
                raise CalibrationFailed("the calibration went over its memory", "memory limit") from None
            except Exception as exc:  # sampling failures, degenerate samples
                reason = getattr(exc, "reason", None)
                raise CalibrationFailed(f"{reason or type(exc).__name__}: {exc}"[:2000], "error") from exc
        from app.jobs.isolation import ChildFailed, call_in_child

        try:
            result: CalibrationResult = await call_in_child(self.compute_ref, (plan, self.settings), self.limits())
        except ChildFailed as exc:
            raise CalibrationFailed(str(exc), exc.reason) from None
        return result

    async def calibrate(self, monitor_id: uuid.UUID) -> bool:
        """Discover events and compute the threshold of a leased ``calibrating`` monitor; activate it.
        False when it was not written (not ours any more, or failed: the reason is on the monitor)."""
        plan = await asyncio.to_thread(self._plan, monitor_id)
        if plan is None:
            return False
        try:
            result = await self._compute(plan)
        except CalibrationFailed as exc:
            log.warning("calibration_failed", monitor_id=str(monitor_id), reason=exc.reason, error=str(exc)[:300])
            await asyncio.to_thread(self._fail, monitor_id, plan.horizon_index, exc.reason, str(exc))
            return False
        when = self.clock().isoformat()
        found = {check_id: {**info, "discovered_at": when} for check_id, info in result.found.items()}
        return await asyncio.to_thread(self._write, monitor_id, plan.horizon_index, result.estimate, found)

    def _write(self, monitor_id: uuid.UUID, horizon_index: int, estimate: ThresholdEstimate,
               found: dict[uuid.UUID, dict]) -> bool:
        with self.session_factory() as session:
            monitor = lock_leased_monitor(session, monitor_id, self.settings.worker_id)
            if monitor is None or monitor.state != "calibrating" or monitor.horizon_index != horizon_index:
                session.rollback()
                return False
            checks = get_checks(session, monitor_id)
            for check in checks:
                if check.id in found:
                    info = found[check.id]
                    if info["adopted"]:
                        check.x, check.x_prime = info["x"], info["x_prime"]
                        check.event = info["event"]
                    check.discovery = info  # not adopted: the check stays `auto`, dormant
            activate(monitor, checks, estimate)
            monitor.calibration_attempts = 0
            monitor.calibration_error = None
            release_lease(monitor)
            session.commit()
        log.info("calibration_done", monitor_id=str(monitor_id), threshold=estimate.value,
                 std_error=estimate.std_error, source=estimate.source, discovered=len(found))
        return True

    def _fail(self, monitor_id: uuid.UUID, horizon_index: int, reason: str, error: str) -> None:
        """Record a failed attempt under the lease: the reason, one more attempt, and either a
        retry after a back-off (the lease expires then) or, out of attempts or over a limit, the
        monitor paused with the reason."""
        s = self.settings
        with self.session_factory() as session:
            monitor = lock_leased_monitor(session, monitor_id, s.worker_id)
            if monitor is None or monitor.state != "calibrating" or monitor.horizon_index != horizon_index:
                session.rollback()
                return
            attempts = (monitor.calibration_attempts or 0) + 1
            monitor.calibration_attempts = attempts
            final = reason in FINAL_REASONS or attempts >= s.calibration_max_attempts
            if final:
                monitor.calibration_error = (f"{reason}: {error} (attempt {attempts} of {s.calibration_max_attempts}; "
                                             "not tried again: resume the monitor to try again)")[:2000]
                monitor.paused_from_state = "calibrating"
                monitor.state = "paused"
                release_lease(monitor)
            else:
                monitor.calibration_error = (f"{reason}: {error} (attempt {attempts} of "
                                             f"{s.calibration_max_attempts}; tried again)")[:2000]
                monitor.lease_owner = None  # free, but not claimable before the back-off ends
                monitor.lease_expires_at = self.clock() + timedelta(
                    seconds=s.calibration_retry_seconds * 2 ** (attempts - 1))
            session.commit()
        log.warning("calibration_attempt_failed", monitor_id=str(monitor_id), reason=reason, attempts=attempts,
                    paused=final)
