"""``dpwatch_monitor_*``: each check's detector as Prometheus gauges, computed at scrape time.

One query reads every check with its monitor, tenant and whether it has an open alarm; the
text is kept for ``metrics_cache_seconds`` (5 s by default), so that several Prometheus
replicas scraping at once cost one query. Every per-check family has the same labels,
``tenant`` (tenant id), ``monitor`` (monitor id) and ``check`` (the check's position), so that
``dpwatch_monitor_statistic > dpwatch_monitor_threshold`` matches one to one. Names live in
``dpwatch_monitor_info`` (value 1), to be joined with ``group_left`` where a legend needs them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.models.alarms import Alarm
from app.models.auth import Tenant
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor


def monitor_rows(session: Session) -> list[Any]:
    """Every check of every monitor, with what the gauges need (one query)."""
    open_alarms = select(Alarm.check_id).where(Alarm.resolved_at.is_(None)).distinct().subquery()
    return list(session.execute(
        select(Monitor.tenant_id, Tenant.name.label("tenant_name"), Monitor.id, Monitor.name, Monitor.state,
               Mechanism.name.label("mechanism"), Monitor.threshold, Monitor.t.label("period_t"), Monitor.horizon,
               Monitor.horizon_index,
               Check.position, Check.last_statistic, Check.last_z, Check.max_statistic,
               open_alarms.c.check_id.label("open_alarm"))
        .join(Tenant, Tenant.id == Monitor.tenant_id)
        .join(Mechanism, Mechanism.id == Monitor.mechanism_id)
        .join(Check, Check.monitor_id == Monitor.id)
        .outerjoin(open_alarms, open_alarms.c.check_id == Check.id)
        .order_by(Monitor.tenant_id, Monitor.id, Check.position)
    ))


#: (name, help, value of a row or None to leave the series out) of the per-check families.
FAMILIES: list[tuple[str, str, Callable[[Any], float | None]]] = [
    ("dpwatch_monitor_statistic", "M_t of the check's latest period (eq. 13).", lambda r: r.last_statistic),
    ("dpwatch_monitor_threshold", "The threshold q(T, gamma, alpha_j/m) M_t is compared with.", lambda r: r.threshold),
    ("dpwatch_monitor_alarm", "1 while the check has an open (unresolved) alarm, else 0.",
     lambda r: 1.0 if r.open_alarm is not None else 0.0),
    ("dpwatch_monitor_period", "t: periods completed in the current horizon.", lambda r: r.period_t),
    ("dpwatch_monitor_z", "z_t of the check's latest period (eq. 12).", lambda r: r.last_z),
    ("dpwatch_monitor_max_statistic", "The largest M_t so far in the current horizon.", lambda r: r.max_statistic),
    ("dpwatch_monitor_horizon_periods", "T: periods in a horizon.", lambda r: r.horizon),
]
INFO = ("dpwatch_monitor_info", "Names and state of a monitor (value 1).")


def _escape(value: object) -> str:
    """A label value in the text format: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def render_rows(rows: list[Any]) -> bytes:
    """The Prometheus text format (version 0.0.4) of the per-check families and the info family.

    Written directly rather than through prometheus_client's collector API: with 10,000 monitors
    the generic path spent seconds building sample objects; here each row's labels are formatted
    once and shared by every family."""
    ids: dict[Any, str] = {}
    for r in rows:  # each id as text once (str(UUID) is slow enough to matter here)
        if r.id not in ids:
            ids[r.id] = str(r.id)
            ids.setdefault(r.tenant_id, str(r.tenant_id))
    labels = [f'tenant="{ids[r.tenant_id]}",monitor="{ids[r.id]}",check="{r.position}"' for r in rows]
    out: list[str] = []
    for name, doc, value_of in FAMILIES:
        out.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
        values = [value_of(row) for row in rows]
        out.extend(f"{name}{{{label}}} {float(v)!r}\n" if math.isfinite(v) else f"{name}{{{label}}} {_number(v)}\n"
                   for label, v in zip(labels, values) if v is not None)
    name, doc = INFO
    out.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
    seen: set[Any] = set()
    for row in rows:
        if row.id in seen:
            continue
        seen.add(row.id)
        out.append(f'{name}{{tenant="{ids[row.tenant_id]}",monitor="{ids[row.id]}",tenant_name="{_escape(row.tenant_name)}",'
                   f'name="{_escape(row.name)}",mechanism="{_escape(row.mechanism)}",state="{row.state}",'
                   f'horizon_index="{row.horizon_index}"}} 1.0\n')
    return "".join(out).encode("utf-8")


def render_monitor_metrics(session: Session) -> bytes:
    return render_rows(monitor_rows(session))


class MonitorMetrics:
    """The per-monitor text for ``/metrics``, recomputed at most every ``ttl_seconds``."""

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._text = b""
        self._at: float | None = None

    def text(self, session_factory: sessionmaker[Session]) -> bytes:
        with self._lock:
            now = self.clock()
            if self._at is None or now - self._at >= self.ttl_seconds:
                with session_factory() as session:
                    self._text = render_monitor_metrics(session)
                self._at = now
            return self._text
