"""Keeping raw outputs and requesting snapshots (services never commit)."""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.models.monitors import Monitor, PeriodRun
from app.models.snapshots import PeriodOutputs, Snapshot
from app.monitors.output_codec import decode_outputs, encode_outputs


def database_digest(database_key: str) -> str:
    """Column value for a database: sha256 of its canonical JSON (``runner.database_key``)."""
    return hashlib.sha256(database_key.encode()).hexdigest()


def store_outputs(session: Session, monitor: Monitor, run: PeriodRun, outputs: dict[str, np.ndarray]) -> int:
    """Keep this period's outputs (one row per distinct database) and drop those that fell out of
    the window of the last ``monitor.outputs_window`` periods. Returns the bytes stored."""
    if monitor.outputs_window <= 0:
        return 0
    stored = 0
    for key, values in outputs.items():
        encoding, shape, data = encode_outputs(values)
        session.add(PeriodOutputs(monitor_id=monitor.id, period_run_id=run.id, seq=run.seq,
                                  horizon_index=run.horizon_index, t=run.t or 0, database_key=database_digest(key),
                                  encoding=encoding, shape=shape, data=data))
        stored += len(data)
    session.execute(delete(PeriodOutputs).where(PeriodOutputs.monitor_id == monitor.id,
                                                PeriodOutputs.seq <= run.seq - monitor.outputs_window)
                    .execution_options(synchronize_session=False))
    return stored


def load_window(session: Session, monitor_id: uuid.UUID, *, horizon_index: int | None = None,
                min_t: int | None = None) -> dict[str, list[tuple[int, np.ndarray]]]:
    """The kept outputs of a monitor, by database digest, as (seq, outputs) in period order;
    optionally only those of one horizon from period ``min_t`` on."""
    out: dict[str, list[tuple[int, np.ndarray]]] = defaultdict(list)
    stmt = select(PeriodOutputs).where(PeriodOutputs.monitor_id == monitor_id)
    if horizon_index is not None:
        stmt = stmt.where(PeriodOutputs.horizon_index == horizon_index)
    if min_t is not None:
        stmt = stmt.where(PeriodOutputs.t >= min_t)
    rows = session.scalars(stmt.order_by(PeriodOutputs.seq))
    for row in rows:
        out[row.database_key].append((row.seq, decode_outputs(row.encoding, row.shape, row.data)))
    return dict(out)


def request_snapshot(session: Session, monitor: Monitor, trigger: str, *, alarm_id: uuid.UUID | None = None,
                     extra_samples: int = 0, alpha: float = 0.05) -> Snapshot:
    """A pending snapshot job; a worker claims and computes it (app.snapshots.runner)."""
    snapshot = Snapshot(tenant_id=monitor.tenant_id, monitor_id=monitor.id, alarm_id=alarm_id, trigger=trigger,
                        status="pending", params={"extra_samples": int(extra_samples), "alpha": float(alpha),
                                                  "window": monitor.outputs_window})
    session.add(snapshot)
    session.flush()
    return snapshot


def scheduled_snapshot_pending(session: Session, monitor_id: uuid.UUID) -> bool:
    """Whether a scheduled snapshot of the monitor waits to be claimed."""
    return session.scalar(select(Snapshot.id).where(Snapshot.monitor_id == monitor_id, Snapshot.trigger == "schedule",
                                                    Snapshot.status == "pending").limit(1)) is not None


def snapshot_params_for_alarm(monitor: Monitor) -> dict[str, Any] | None:
    """Whether an alarm of this monitor gets a snapshot (it needs kept outputs or fresh samples)."""
    if monitor.outputs_window <= 0 and monitor.alarm_snapshot_samples <= 0:
        return None
    return {"extra_samples": monitor.alarm_snapshot_samples}
