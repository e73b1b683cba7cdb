"""The dashboard's queries: few, tenant-scoped, and bounded whatever the size of the history.

- the monitor list reads one page of monitors and, in four grouped queries, their mechanisms,
  check counts, open alarms and the last :data:`SPARK_PERIODS` periods of the current horizon;
- a check's chart reads one horizon of one check in one query and thins it to a few hundred
  points (:mod:`app.web.downsample`), keeping the alarm's period.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from app.api.errors import NotFoundError
from app.db import utcnow
from app.models.alarms import Alarm
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.models.snapshots import Snapshot
from app.monitors.schedule import Schedule
from app.stats.claims import Claim
from app.web.claims import check_claim, claim_boundary, format_claim
from app.web.downsample import minmax_indices

#: Periods drawn in a monitor's sparkline on the list page.
SPARK_PERIODS = 40
#: Default and largest number of buckets of a chart (each gives up to two points per series).
DEFAULT_BUCKETS = 250
MAX_BUCKETS = 2000
#: Failed periods listed with their reasons in a chart's data (the count is always exact).
MAX_FAILED_MARKS = 500


@dataclass
class MonitorRow:
    monitor: Monitor
    mechanism_name: str
    checks: int
    open_alarms: int
    spark: list[float | None] = field(default_factory=list)
    spark_alarm: int | None = None


def list_monitor_rows(
    session: Session,
    tenant_id: uuid.UUID,
    *,
    state: str | None,
    mechanism_id: uuid.UUID | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[MonitorRow], str | None]:
    from app.monitors.service import list_monitors

    monitors, next_cursor = list_monitors(session, tenant_id, state=state, mechanism_id=mechanism_id, limit=limit,
                                          cursor=cursor)
    if not monitors:
        return [], next_cursor
    ids = [m.id for m in monitors]
    names = dict(session.execute(select(Mechanism.id, Mechanism.name).where(
        Mechanism.id.in_({m.mechanism_id for m in monitors}), Mechanism.tenant_id == tenant_id)).all())
    checks = dict(session.execute(select(Check.monitor_id, func.count()).where(Check.monitor_id.in_(ids))
                                  .group_by(Check.monitor_id)).all())
    alarms = dict(session.execute(select(Alarm.monitor_id, func.count()).where(
        Alarm.monitor_id.in_(ids), Alarm.resolved_at.is_(None)).group_by(Alarm.monitor_id)).all())
    # The largest M_t over the checks, for the last periods of each monitor's current horizon.
    spark_rows = session.execute(
        select(PeriodRun.monitor_id, PeriodRun.t, func.max(PeriodCheck.statistic))
        .join(Monitor, and_(Monitor.id == PeriodRun.monitor_id, Monitor.horizon_index == PeriodRun.horizon_index))
        .join(PeriodCheck, PeriodCheck.period_run_id == PeriodRun.id)
        .where(PeriodRun.monitor_id.in_(ids), PeriodRun.t > Monitor.t - SPARK_PERIODS)
        .group_by(PeriodRun.monitor_id, PeriodRun.t)
    ).all()
    spark: dict[uuid.UUID, dict[int, float]] = defaultdict(dict)
    for monitor_id, t, value in spark_rows:
        spark[monitor_id][int(t)] = float(value)
    rows = []
    for m in monitors:
        first = max(1, m.t - SPARK_PERIODS + 1)
        values = [spark[m.id].get(t) for t in range(first, m.t + 1)]
        alarm_at = None
        if m.state == "alarm" and m.threshold is not None:
            alarm_at = next((i for i, v in enumerate(values) if v is not None and v > m.threshold), None)
        rows.append(MonitorRow(m, names.get(m.mechanism_id, "?"), int(checks.get(m.id, 0)), int(alarms.get(m.id, 0)),
                               values, alarm_at))
    return rows, next_cursor


def tenant_mechanisms(session: Session, tenant_id: uuid.UUID) -> list[tuple[uuid.UUID, str]]:
    return [(i, n) for i, n in session.execute(
        select(Mechanism.id, Mechanism.name).where(Mechanism.tenant_id == tenant_id).order_by(Mechanism.name))]


def get_check(session: Session, monitor: Monitor, check_id: uuid.UUID) -> Check:
    check = session.scalar(select(Check).where(Check.id == check_id, Check.monitor_id == monitor.id))
    if check is None:
        raise NotFoundError(f"Check {check_id} not found.")
    return check


def _ts(value: datetime) -> float:
    return round(value.timestamp(), 3)


def _gaps(monitor: Monitor, slots: list[datetime], until: datetime | None) -> list[list[float]]:
    """Stretches with slots that ran no period (paused, calibrating, or no worker up), as
    [start, end] in seconds: where the next period came later than the schedule's next slot."""
    if len(slots) < 1:
        return []
    schedule = Schedule.of(monitor)
    out: list[list[float]] = []
    stamps = np.array([s.timestamp() for s in slots])
    diffs = np.diff(stamps)
    if monitor.period_seconds is not None:
        late = np.nonzero(diffs > 1.5 * monitor.period_seconds)[0]
        out = [[round(stamps[i] + monitor.period_seconds, 3), round(stamps[i + 1], 3)] for i in late]
    elif len(diffs):
        # A cron's slots are irregular: check only the intervals longer than the shortest one.
        shortest = float(diffs.min())
        for i in np.nonzero(diffs > shortest * 1.01)[0]:
            expected = schedule.slot_after(slots[i])
            if slots[i + 1] > expected:
                out.append([_ts(expected), _ts(slots[i + 1])])
    if until is not None and slots:
        out.append([_ts(schedule.slot_after(slots[-1])), _ts(until)])
    return out


def _t_at(stamps: np.ndarray, ts: np.ndarray, when: float) -> float | None:
    """The period position of a time: between the last period at or before it and the next (t + 0.5),
    so that an event or a failed slot is drawn between the periods it fell between."""
    if not len(stamps):
        return None
    # Times in the chart data are rounded to the millisecond: within 10 ms is the period itself.
    i = int(np.searchsorted(stamps, when + 0.01, side="right"))
    if i == 0:
        return float(ts[0]) - 0.5
    return float(ts[i - 1]) + (0.0 if abs(stamps[i - 1] - when) <= 0.01 else 0.5)


def chart_events(session: Session, monitor: Monitor, check: Check, horizon_index: int, stamps: np.ndarray,
                 ts: np.ndarray) -> list[dict[str, Any]]:
    """What the charts mark, by period t: the start of a horizon after a reset (or a renewal), the
    check's joining after a re-discovery or a search, contract breaches, and the mechanism's last
    update through the API (its ``updated_at``: a new URL, output shape or setting; the output shape
    dpwatch detects itself leaves it unchanged). A change of the code behind an endpoint that no one
    registers is not known to dpwatch and is not marked."""
    events: list[dict[str, Any]] = []
    if horizon_index > 1 and len(ts):
        events.append({"t": float(ts[0]) - 0.5, "kind": "reset", "label": f"horizon {horizon_index} starts"})
    if check.origin != "given" and check.joined_t and horizon_index == monitor.horizon_index:
        events.append({"t": float(check.joined_t) + 0.5, "kind": "rediscovery",
                       "label": f"check joined ({check.origin})"})
    for alarm_t, alarm_at in session.execute(select(Alarm.t, Alarm.created_at).where(
            Alarm.monitor_id == monitor.id, Alarm.horizon_index == horizon_index, Alarm.kind == "contract")):
        events.append({"t": float(alarm_t), "kind": "contract", "label": "contract breach",
                       "time": _ts(alarm_at)})
    mechanism_changed = session.scalar(select(Mechanism.updated_at).where(Mechanism.id == monitor.mechanism_id))
    created = session.scalar(select(Mechanism.created_at).where(Mechanism.id == monitor.mechanism_id))
    if mechanism_changed is not None and created is not None and mechanism_changed > created and len(stamps):
        when = mechanism_changed.timestamp()
        if stamps[0] < when <= stamps[-1]:
            events.append({"t": _t_at(stamps, ts, when), "kind": "change", "label": "mechanism updated",
                           "time": _ts(mechanism_changed)})
    return events


def check_series(session: Session, monitor: Monitor, check: Check, *, horizon_index: int,
                 buckets: int = DEFAULT_BUCKETS, now: datetime | None = None,
                 since: datetime | None = None, until: datetime | None = None) -> dict[str, Any]:
    """The chart data of one check over one horizon (from ``since`` when given), indexed by period t
    with each period's time: M_t and the threshold, z_t, p̂ and q̂ with the claim's boundary, the
    alarm's period, the failed periods, the stretches with none, and the events to mark. ``until``:
    only the periods finished (and the alarm raised) by then, so that the charts of a page show what
    its numbers show (the page passes the time it was rendered)."""
    stmt = (
        select(PeriodRun.scheduled_for, PeriodRun.t.label("period_t"), PeriodRun.status, PeriodRun.failure_reason,
               PeriodCheck.statistic, PeriodCheck.threshold, PeriodCheck.z, PeriodCheck.p_hat, PeriodCheck.q_hat)
        .outerjoin(PeriodCheck, and_(PeriodCheck.period_run_id == PeriodRun.id, PeriodCheck.check_id == check.id))
        .where(PeriodRun.monitor_id == monitor.id, PeriodRun.horizon_index == horizon_index)
        .order_by(PeriodRun.seq)
    )
    if since is not None:
        stmt = stmt.where(PeriodRun.scheduled_for >= since)
    if until is not None:
        stmt = stmt.where(PeriodRun.finished_at <= until)
    rows = session.execute(stmt).all()
    ok = [r for r in rows if r.status == "ok" and r.statistic is not None]
    failed = [r for r in rows if r.status == "failed"]
    alarm_query = select(Alarm).where(Alarm.check_id == check.id, Alarm.horizon_index == horizon_index)
    if until is not None:
        alarm_query = alarm_query.where(Alarm.created_at <= until)
    alarm = session.scalar(alarm_query.order_by(Alarm.created_at).limit(1))
    if ok:
        slots, ts, _, _, *values = zip(*ok)
    else:
        slots, ts, values = (), (), [()] * 5
    x = np.fromiter((s.timestamp() for s in slots), dtype=np.float64, count=len(slots))
    t = np.asarray(ts, dtype=np.int64)
    columns = {name: np.asarray(v, dtype=np.float64)
               for name, v in zip(("statistic", "threshold", "z", "p_hat", "q_hat"), values)}
    alarm_index = None
    if alarm is not None:
        hits = np.nonzero(t == alarm.t)[0]
        alarm_index = int(hits[0]) if len(hits) else None
    idx = minmax_indices([columns["statistic"], columns["z"], columns["p_hat"], columns["q_hat"]],
                         buckets=max(1, min(buckets, MAX_BUCKETS)),
                         keep=[] if alarm_index is None else [alarm_index])
    claim = check_claim(monitor, check)
    q_kept = [float(v) for v in columns["q_hat"][idx]]
    boundary = claim_boundary(claim, q_kept)

    def kept(name: str) -> list[float]:
        return np.round(columns[name][idx], 6).tolist()

    paused_since = None
    if monitor.state == "paused" and horizon_index == monitor.horizon_index and rows:
        paused_since = now or utcnow()
    gaps = _gaps(monitor, [r.scheduled_for for r in rows], paused_since)
    failed_marks = [[_ts(r.scheduled_for), r.failure_reason] for r in failed[-MAX_FAILED_MARKS:]]
    last_t = float(t[-1]) if len(t) else 0.0

    def gap_t(gap: list[float]) -> list[float]:
        start = _t_at(x, t, gap[0])
        end = _t_at(x, t, gap[1])
        start = last_t + 0.5 if start is None else start
        end = start + 0.5 if end is None or end <= start else end
        return [start, end]

    return {
        "monitor_id": str(monitor.id),
        "check_id": str(check.id),
        "horizon_index": horizon_index,
        "claim": format_claim(claim),
        "periods": len(ok),
        "points": len(idx),
        "x": np.round(x[idx], 3).tolist(),
        "t": t[idx].tolist(),
        "statistic": kept("statistic"),
        "threshold": kept("threshold"),
        "z": kept("z"),
        "p_hat": kept("p_hat"),
        "q_hat": kept("q_hat"),
        "boundary": None if boundary is None else [None if b is None else round(b, 6) for b in boundary],
        "alarm": None if alarm is None else {
            "id": str(alarm.id), "t": alarm.t, "statistic": alarm.statistic, "threshold": alarm.threshold,
            "x": round(float(x[alarm_index]), 3) if alarm_index is not None else None,
        },
        "failed": {
            "count": len(failed),
            "marks": failed_marks,
            "marks_t": [_t_at(x, t, m[0]) for m in failed_marks],
        },
        "gaps": gaps,
        "gaps_t": [gap_t(g) for g in gaps],
        "events": chart_events(session, monitor, check, horizon_index, x, t),
        "state": monitor.state,
    }


def horizons_of(session: Session, monitor: Monitor) -> list[int]:
    found = set(session.scalars(select(PeriodRun.horizon_index).where(PeriodRun.monitor_id == monitor.id).distinct()))
    return sorted(found | {monitor.horizon_index})


def recent_periods(session: Session, monitor: Monitor, limit: int = 12) -> list[tuple[PeriodRun, list[PeriodCheck]]]:
    from app.monitors.service import list_periods

    return list_periods(session, monitor, limit=limit, cursor=None)[0]


def monitor_alarms(session: Session, monitor: Monitor, limit: int = 20) -> list[Alarm]:
    return list(session.scalars(select(Alarm).where(Alarm.monitor_id == monitor.id)
                                .order_by(Alarm.created_at.desc()).limit(limit)))


def monitor_snapshots(session: Session, monitor: Monitor, limit: int = 10) -> list[Snapshot]:
    return list(session.scalars(select(Snapshot).where(Snapshot.monitor_id == monitor.id)
                                .order_by(Snapshot.created_at.desc()).limit(limit)))


def get_snapshot(session: Session, tenant_id: uuid.UUID, snapshot_id: uuid.UUID) -> Snapshot:
    snap = session.scalar(select(Snapshot).where(Snapshot.id == snapshot_id, Snapshot.tenant_id == tenant_id))
    if snap is None:
        raise NotFoundError(f"Snapshot {snapshot_id} not found.")
    return snap


def previous_snapshot(session: Session, snap: Snapshot) -> Snapshot | None:
    """The monitor's last finished snapshot before this one (for "what changed")."""
    return session.scalar(select(Snapshot).where(
        Snapshot.monitor_id == snap.monitor_id, Snapshot.status == "done", Snapshot.created_at < snap.created_at,
        Snapshot.id != snap.id).order_by(Snapshot.created_at.desc()).limit(1))


def snapshot_history(session: Session, snap: Snapshot, limit: int = 50) -> list[dict[str, Any]]:
    """ε̂ and LB of the monitor's finished snapshots, oldest first (the last ``limit``)."""
    rows = session.scalars(select(Snapshot).where(Snapshot.monitor_id == snap.monitor_id, Snapshot.status == "done")
                           .order_by(Snapshot.created_at.desc()).limit(limit)).all()
    out = []
    for s in reversed(rows):
        result = s.result or {}
        out.append({"id": str(s.id), "x": _ts(s.created_at), "epsilon_hat": result.get("epsilon_hat"),
                    "lower_bound": result.get("lower_bound"), "trigger": s.trigger})
    return out


def _profile_1d(curve: dict[str, Any]) -> list[dict[str, Any]]:
    """Loss curves as 1-D series: the grid itself for real outputs, the outcomes for discrete
    ones, and for vectors the largest loss over the other coordinates along each axis."""
    if "outcomes" in curve and curve.get("outcomes") is not None:
        labels = [o if not isinstance(o, list) else "(" + ", ".join(map(str, o)) + ")" for o in curve["outcomes"]]
        return [{"axis": "outcome", "labels": [str(v) for v in labels], "x": list(range(len(labels))),
                 "loss": curve["loss"], "f_x": curve.get("f_x"), "f_xp": curve.get("f_xp")}]
    grid = curve.get("grid") or []
    if len(grid) == 1:
        return [{"axis": "output", "x": grid[0], "loss": curve["loss"], "f_x": curve.get("f_x"),
                 "f_xp": curve.get("f_xp")}]
    loss = np.asarray(curve["loss"], dtype=np.float64)
    out = []
    for axis, values in enumerate(grid):
        others = tuple(i for i in range(loss.ndim) if i != axis)
        out.append({"axis": f"coordinate {axis + 1} (largest loss over the others)", "x": values,
                    "loss": loss.max(axis=others).tolist(), "f_x": None, "f_xp": None})
    return out


def _align(current: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each 1-D loss curve of this snapshot with the previous snapshot's on the same axis, on the
    union of their x values (outcomes for discrete outputs); missing values are None."""
    out = []
    for i, curve in enumerate(current):
        old = before[i] if i < len(before) and before[i]["axis"] == curve["axis"] else None
        if "labels" in curve:
            labels = list(curve["labels"])
            if old is not None:
                labels += [label for label in old["labels"] if label not in set(curve["labels"])]
            now_map = dict(zip(curve["labels"], curve["loss"]))
            old_map = dict(zip(old["labels"], old["loss"])) if old is not None else {}
            out.append({"axis": curve["axis"], "labels": labels, "x": list(range(len(labels))),
                        "loss": [now_map.get(label) for label in labels],
                        "previous_loss": [old_map.get(label) for label in labels] if old is not None else None})
            continue
        xs = sorted(set(curve["x"]) | (set(old["x"]) if old is not None else set()))
        now_map = dict(zip(curve["x"], curve["loss"]))
        old_map = dict(zip(old["x"], old["loss"])) if old is not None else {}
        out.append({"axis": curve["axis"], "x": xs, "loss": [now_map.get(x) for x in xs],
                    "previous_loss": [old_map.get(x) for x in xs] if old is not None else None})
    return out


def snapshot_charts(snap: Snapshot, previous: Snapshot | None, claim: Claim | None) -> dict[str, Any]:
    """What the snapshot page draws, per pair: the loss curve(s) with the previous snapshot's on
    the same axes, ε̂, LB, the claim's ε, and δ̂(ε) now and before."""
    from app.web.claims import claim_delta, claim_epsilon

    def pairs_of(s: Snapshot | None) -> dict[str, dict[str, Any]]:
        if s is None or not s.result:
            return {}
        return {str(p.get("check_id", i)): p for i, p in enumerate(s.result.get("pairs", []))}

    before = pairs_of(previous)
    out = []
    for key, pair in pairs_of(snap).items():
        old = before.get(key)
        curves = _profile_1d(pair.get("loss_curve") or {})
        old_curves = _profile_1d(old.get("loss_curve") or {}) if old is not None else []
        out.append({
            "key": key,
            "position": pair.get("position"),
            "epsilon_hat": pair.get("epsilon_hat"),
            "lower_bound": pair.get("lower_bound"),
            "t_hat": pair.get("t_hat"),
            "curves": _align(curves, old_curves),
            "profile": pair.get("privacy_profile"),
            "tradeoff": (pair.get("claim_terms") or {}).get("tradeoff"),
            "claim_description": (pair.get("claim_terms") or {}).get("description"),
            "refutes": (pair.get("claim_terms") or {}).get("refutes"),
            "previous": None if old is None else {
                "snapshot_id": str(previous.id) if previous is not None else None,
                "epsilon_hat": old.get("epsilon_hat"),
                "lower_bound": old.get("lower_bound"),
                "profile": old.get("privacy_profile"),
            },
        })
    return {"claim": format_claim(claim), "claim_epsilon": claim_epsilon(claim),
            "claim_delta": claim_delta(claim), "pairs": out}
