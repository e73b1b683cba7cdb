"""``dpwatch_monitor_*``: each check's detector as Prometheus gauges, computed at scrape time.

One query reads every check with its monitor, tenant and whether it has an open alarm; the
text is kept for ``metrics_cache_seconds`` (5 s by default), so that several Prometheus
replicas scraping at once cost one query. Every per-check family has the same labels,
``tenant`` (tenant id), ``monitor`` (monitor id) and ``check`` (the check's position), so that
``dpwatch_monitor_statistic > dpwatch_monitor_threshold`` matches one to one. Names live in
``dpwatch_monitor_info`` (value 1), to be joined with ``group_left`` where a legend needs them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.alarms.models import Alarm
from app.auth.models import Tenant
from app.mechanisms.models import Mechanism
from app.monitors.models import Check, Monitor

LABELS = ["tenant", "monitor", "check"]


def monitor_rows(session: Session) -> list[Any]:
    """Every check of every monitor, with what the gauges need (one query)."""
    open_alarms = select(Alarm.check_id).where(Alarm.resolved_at.is_(None)).distinct().subquery()
    return list(session.execute(
        select(Monitor.tenant_id, Tenant.name.label("tenant_name"), Monitor.id, Monitor.name, Monitor.state,
               Mechanism.name.label("mechanism"), Monitor.threshold, Monitor.t.label("period_t"), Monitor.horizon, Monitor.horizon_index,
               Check.position, Check.last_statistic, Check.last_z, Check.max_statistic,
               open_alarms.c.check_id.label("open_alarm"))
        .join(Tenant, Tenant.id == Monitor.tenant_id)
        .join(Mechanism, Mechanism.id == Monitor.mechanism_id)
        .join(Check, Check.monitor_id == Monitor.id)
        .outerjoin(open_alarms, open_alarms.c.check_id == Check.id)
        .order_by(Monitor.tenant_id, Monitor.id, Check.position)
    ))


class _RowsCollector(Collector):
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def collect(self) -> Iterator[GaugeMetricFamily]:
        def family(name: str, doc: str, labels: list[str] = LABELS) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        statistic = family("dpwatch_monitor_statistic", "M_t of the check's latest period (eq. 13).")
        threshold = family("dpwatch_monitor_threshold", "The threshold q(T, gamma, alpha_j/m) M_t is compared with.")
        alarm = family("dpwatch_monitor_alarm", "1 while the check has an open (unresolved) alarm, else 0.")
        period = family("dpwatch_monitor_period", "t: periods completed in the current horizon.")
        z = family("dpwatch_monitor_z", "z_t of the check's latest period (eq. 12).")
        maximum = family("dpwatch_monitor_max_statistic", "The largest M_t so far in the current horizon.")
        horizon = family("dpwatch_monitor_horizon_periods", "T: periods in a horizon.")
        info = family("dpwatch_monitor_info", "Names and state of a monitor (value 1).",
                      ["tenant", "monitor", "tenant_name", "name", "mechanism", "state", "horizon_index"])
        seen: set[Any] = set()
        for row in self.rows:
            labels = [str(row.tenant_id), str(row.id), str(row.position)]
            if row.last_statistic is not None:
                statistic.add_metric(labels, row.last_statistic)
            if row.last_z is not None:
                z.add_metric(labels, row.last_z)
            if row.max_statistic is not None:
                maximum.add_metric(labels, row.max_statistic)
            if row.threshold is not None:
                threshold.add_metric(labels, row.threshold)
            alarm.add_metric(labels, 1.0 if row.open_alarm is not None else 0.0)
            period.add_metric(labels, row.period_t)
            horizon.add_metric(labels, row.horizon)
            if row.id not in seen:
                seen.add(row.id)
                info.add_metric([str(row.tenant_id), str(row.id), row.tenant_name, row.name, row.mechanism,
                                 row.state, str(row.horizon_index)], 1.0)
        yield from (statistic, threshold, alarm, period, z, maximum, horizon, info)


def render_monitor_metrics(session: Session) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_RowsCollector(monitor_rows(session)))
    return generate_latest(registry)


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
