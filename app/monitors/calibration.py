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
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime

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
from app.sampling.client import SamplingClient
from app.settings import Settings
from app.stats.claims import PureDP
from app.stats.thresholds import ThresholdEstimate, threshold_for

log = structlog.get_logger("dpwatch.calibration")


class Calibrator:
    def __init__(self, session_factory: sessionmaker[Session], settings: Settings,
                 client: SamplingClient | None = None, clock: Callable[[], datetime] = utcnow) -> None:
        self.session_factory = session_factory
        self.settings = settings
        self.client = client
        self.clock = clock

    def _plan(self, monitor_id: uuid.UUID):  # type: ignore[no-untyped-def]
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
            return (monitor.horizon_index, design, known, auto, shaped_endpoint(mechanism, shape), shape,
                    monitor.epsilon, monitor.alpha, budget, monitor.t)

    async def calibrate(self, monitor_id: uuid.UUID) -> bool:
        """Discover events and compute the threshold of a leased ``calibrating`` monitor; activate it."""
        plan = await asyncio.to_thread(self._plan, monitor_id)
        if plan is None:
            return False
        horizon_index, design, known, auto, endpoint, shape, epsilon, alpha, budget, t = plan
        found: dict[uuid.UUID, dict] = {}
        if auto:
            if self.client is None:
                raise RuntimeError("event discovery needs a sampling client")
            for check_id, x, xp, claim in auto:
                log.info("discovery_started", monitor_id=str(monitor_id), check_id=str(check_id))
                try:
                    if not isinstance(claim, PureDP):  # (ε, δ), GDP, zCDP: claim-aware tail events (app/claims/events.py)
                        result = await discover_for_claim(self.client, endpoint, shape, [(x, xp)], claim,
                                                          budget=budget, alpha=alpha,
                                                          label=f"discover-{check_id.hex[:12]}", period=t + 1)
                        found[check_id] = claim_choice(result, x, self.clock().isoformat())
                        continue
                    candidates, _, summary = await discover_and_assess(
                        self.client, endpoint, shape, [(x, xp)], [], epsilon=epsilon, alpha=alpha, budget=budget,
                        fresh=0, label=f"discover-{check_id.hex[:12]}", period=t + 1, compare=False)
                except Exception as exc:  # sampling failures, degenerate samples
                    log.warning("discovery_failed", monitor_id=str(monitor_id), error=str(exc)[:300])
                    await asyncio.to_thread(self._release, monitor_id)
                    return False
                found[check_id] = initial_choice(candidates, x, summary, self.clock().isoformat())
        log.info("calibration_started", monitor_id=str(monitor_id), horizon=design[0], gamma=design[1], alpha=design[2])
        estimate = known or await asyncio.to_thread(threshold_for, *design)
        return await asyncio.to_thread(self._write, monitor_id, horizon_index, estimate, found)

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
            release_lease(monitor)
            session.commit()
        log.info("calibration_done", monitor_id=str(monitor_id), threshold=estimate.value,
                 std_error=estimate.std_error, source=estimate.source, discovered=len(found))
        return True

    def _release(self, monitor_id: uuid.UUID) -> None:
        with self.session_factory() as session:
            monitor = lock_leased_monitor(session, monitor_id, self.settings.worker_id)
            if monitor is not None:
                release_lease(monitor)
            session.commit()
