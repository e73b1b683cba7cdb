"""Calibrating a monitor: the threshold of a (T, γ, α_j/m) that is off the shipped table.

The Monte-Carlo run (method.md §3) takes seconds to minutes, so it runs outside any transaction,
on a monitor this worker has leased; the result is written under the lease like a period.
"""

from __future__ import annotations

import uuid

import structlog
from sqlalchemy.orm import Session, sessionmaker

from app.monitors.models import Monitor
from app.monitors.service import activate, check_alpha, get_checks, is_auto
from app.scheduler.leases import lock_leased_monitor, release_lease
from app.settings import Settings
from app.stats.thresholds import ThresholdEstimate, threshold_for

log = structlog.get_logger("dpwatch.calibration")


class Calibrator:
    def __init__(self, session_factory: sessionmaker[Session], settings: Settings) -> None:
        self.session_factory = session_factory
        self.settings = settings

    def calibrate(self, monitor_id: uuid.UUID) -> bool:
        """Compute and install the threshold of a leased ``calibrating`` monitor. True if activated."""
        with self.session_factory() as session:
            monitor = session.get(Monitor, monitor_id)
            if monitor is None or monitor.lease_owner != self.settings.worker_id or monitor.state != "calibrating":
                return False
            checks = get_checks(session, monitor_id)
            horizon_index = monitor.horizon_index
            design = (monitor.horizon, monitor.gamma, check_alpha(monitor, len(checks)))
            known = (ThresholdEstimate(monitor.horizon, monitor.gamma, design[2], monitor.threshold,
                                       monitor.threshold_std_error or 0.0, 0, 0, monitor.threshold_source or "table")
                     if monitor.threshold is not None else None)
            waiting_for_events = any(is_auto(c) for c in checks)
        if waiting_for_events:
            # Event discovery is not part of this worker yet; keep the lease short and retry later.
            self._release(monitor_id)
            return False
        log.info("calibration_started", monitor_id=str(monitor_id), horizon=design[0], gamma=design[1], alpha=design[2])
        estimate = known or threshold_for(*design)
        with self.session_factory() as session:
            monitor = lock_leased_monitor(session, monitor_id, self.settings.worker_id)
            if monitor is None or monitor.state != "calibrating" or monitor.horizon_index != horizon_index:
                session.rollback()
                return False
            activate(monitor, get_checks(session, monitor_id), estimate)
            release_lease(monitor)
            session.commit()
        log.info("calibration_done", monitor_id=str(monitor_id), threshold=estimate.value,
                 std_error=estimate.std_error, source=estimate.source)
        return True

    def _release(self, monitor_id: uuid.UUID) -> None:
        with self.session_factory() as session:
            monitor = lock_leased_monitor(session, monitor_id, self.settings.worker_id)
            if monitor is not None:
                release_lease(monitor)
            session.commit()
