"""Small builders shared by the API tests: request bodies, and rows the engine would write."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.alarms.service import fire_alarm
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.settings import Settings

MECHANISM = {
    "name": "laplace-count",
    "sampling_url": "https://dp.example.org/count/sample",
    "output_kind": "real",
}

# (T=100, γ=0.25, α=0.05) with one check, or α/2 with two, are on the shipped threshold grid.
MONITOR = {
    "name": "count neighbours",
    "checks": [{"x": [1, 1, 0], "x_prime": [1, 1, 1], "event": {"kind": "interval", "low": 2.5, "high": None}}],
    "epsilon": 1.0,
    "horizon": 100,
    "samples_per_period": 1000,
    "period_seconds": 3600,
}


def create_mechanism(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/mechanisms", json={**MECHANISM, **overrides})
    assert response.status_code == 201, response.text
    return response.json()


def create_monitor(client: TestClient, mechanism_id: str, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/monitors", json={**MONITOR, "mechanism_id": mechanism_id, **overrides})
    assert response.status_code == 201, response.text
    return response.json()


def create_webhook(client: TestClient, **overrides: Any) -> dict[str, Any]:
    body = {"url": "https://hooks.example.org/dpwatch", "event_types": ["alarm.firing", "alarm.resolved"], **overrides}
    response = client.post("/v1/webhooks", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def record_period(
    session: Session,
    monitor_id: str | uuid.UUID,
    *,
    statistic: float = 1.0,
    failed: bool = False,
    settings: Settings | None = None,
) -> PeriodRun:
    """Write one period the way the runner does (period row, per-check rows, detector fields);
    when a check's statistic exceeds the threshold and ``settings`` is given, fire its alarm."""
    monitor = session.get(Monitor, uuid.UUID(str(monitor_id)))
    assert monitor is not None
    checks = list(session.scalars(select(Check).where(Check.monitor_id == monitor.id).order_by(Check.position)))
    seq = len(list(session.scalars(select(PeriodRun.id).where(PeriodRun.monitor_id == monitor.id)))) + 1
    monitor.last_seq = seq  # as the runner keeps it
    slot = monitor.schedule_anchor + timedelta(seconds=(monitor.period_seconds or 60) * (seq - 1))
    now = datetime.now(UTC)
    run = PeriodRun(
        monitor_id=monitor.id,
        seq=seq,
        scheduled_for=slot,
        horizon_index=monitor.horizon_index,
        t=None if failed else monitor.t + 1,
        status="failed" if failed else "ok",
        failure_reason="timeout" if failed else None,
        failure_detail="the endpoint did not answer within 10 s" if failed else None,
        started_at=now,
        finished_at=now,
        sampling_seconds=0.25,
        worker_id="test-worker",
    )
    session.add(run)
    session.flush()
    if failed:
        monitor.consecutive_failures += 1
        return run
    threshold = monitor.threshold if monitor.threshold is not None else 3.0
    for check in checks:
        n = monitor.samples_per_period
        row = PeriodCheck(
            period_run_id=run.id,
            check_id=check.id,
            a=400,
            b=300,
            n=n,
            p_hat=400 / n,
            q_hat=300 / n,
            d_hat=0.4 - 2.718 * 0.3,
            sigma_hat=0.6,
            z=statistic / 2,
            statistic=statistic,
            threshold=threshold,
        )
        session.add(row)
        session.flush()
        check.last_z = row.z
        check.last_statistic = statistic
        check.max_statistic = max(check.max_statistic or statistic, statistic)
        if statistic > threshold and settings is not None:
            fire_alarm(session, monitor, check, run, row, settings)
            monitor.state = "alarm"
    monitor.t += 1
    monitor.last_period_at = now
    session.flush()
    return run
