"""What the benches that run dpwatch's processes on Postgres share (bench/isolation.py,
bench/job_isolation.py, bench/retention.py, and bench/service_throughput.py's ``bench_service``,
which bench/scale.py and bench/api_load.py use).

- :func:`scratch_service`: a fresh Postgres database with dpwatch's schema and a :class:`Procs`
  whose logs go to a temporary directory; on the way out (also on SIGTERM, read as Ctrl-C) the
  processes are stopped and then the database is dropped;
- :class:`Procs`: processes started in their own process groups, checked alive, stopped with
  SIGINT, then SIGKILL;
- :func:`worker_env`: the environment of a `dpwatch worker` on that database;
- :func:`free_port`, :func:`wait_port`, :func:`peak_rss_mb`, :func:`say`.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: The dpwatch command line, in this interpreter.
DPWATCH = [sys.executable, "-m", "app.cli"]
#: Postgres as the benches reach it (the admin database is ``{PG}/postgres``).
PG = "postgresql+psycopg://postgres@127.0.0.1:5432"


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    """Processes of one run, each in its own process group, with its output in ``log_dir/<name>.log``."""

    def __init__(self, log_dir: pathlib.Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True)
        self.procs[name] = proc
        return proc

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                tail = (self.log_dir / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"process {name} exited with {proc.returncode}:\n{tail}")

    def stop(self, name: str, timeout: float = 10.0) -> None:
        """Stop one process (SIGINT to its group, SIGKILL after ``timeout``) and forget it."""
        proc = self.procs.pop(name, None)
        if proc is not None:
            self._stop([proc], timeout)

    def close(self, timeout: float = 15.0) -> None:
        """Stop every process, all at once (SIGINT to each group, SIGKILL after ``timeout``)."""
        procs, self.procs = list(self.procs.values()), {}
        self._stop(procs, timeout)

    @staticmethod
    def _stop(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            # a process group may have children left (none expected): make sure
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)


def _status_mb(pid: int, field: str) -> float:
    """A memory field of /proc/PID/status (``VmHWM``, ``VmRSS``) in MB; 0 if the process is gone."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mb(pid: int) -> float:
    """VmHWM (peak resident set) of a live process, in MB; 0 if gone."""
    return _status_mb(pid, "VmHWM")


def rss_mb(pid: int) -> float:
    """VmRSS (resident set now) of a live process, in MB; 0 if gone."""
    return _status_mb(pid, "VmRSS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process; 0 if gone."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def wait_port(port: int, timeout: float, procs: Procs) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check_alive()
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.2)
    raise RuntimeError(f"port {port} did not open in {timeout} s")


def worker_env(db_url: str) -> dict[str, str]:
    """The environment of a dpwatch process on ``db_url`` (migrated already), reaching 127.0.0.1."""
    return {"DPWATCH_DATABASE_URL": db_url, "DPWATCH_ALLOW_NETWORKS": "127.0.0.0/8",
            "DPWATCH_MIGRATE_ON_START": "false", "DPWATCH_LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}


@dataclass
class Scratch:
    """A run's database and processes (:func:`scratch_service`)."""

    db_url: str
    procs: Procs
    log_dir: pathlib.Path


@contextlib.contextmanager
def scratch_service(name: str, *, pg: str = PG, dbname: str | None = None,
                    keep_logs: bool = True) -> Iterator[Scratch]:
    """A fresh database (``dbname``, else ``dpwatch_<name>_<random>``) migrated to dpwatch's schema,
    and a :class:`Procs` logging to a temporary directory (``dpwatch-<name>-…``, removed at the end
    unless ``keep_logs``). SIGTERM ends the run as Ctrl-C does; on the way out the processes are
    stopped, then the database is dropped. dpwatch's own log lines below WARNING are silenced in
    this process."""
    import logging

    import structlog
    from sqlalchemy import create_engine, text

    from app.db import run_migrations

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    dbname = dbname or f"dpwatch_{name.replace('-', '_')}_{secrets.token_hex(4)}"
    db_url = f"{pg}/{dbname}"
    admin = create_engine(f"{pg}/postgres", isolation_level="AUTOCOMMIT")
    log_dir = pathlib.Path(tempfile.mkdtemp(prefix=f"dpwatch-{name}-"))
    procs = Procs(log_dir)

    def on_term(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    created = False
    try:
        say(f"database {dbname}: create + migrate")
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{dbname}"'))
        created = True
        run_migrations(db_url)
        yield Scratch(db_url=db_url, procs=procs, log_dir=log_dir)
    finally:
        procs.close()
        if created:
            say(f"dropping database {dbname}")
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)'))
        admin.dispose()
        if keep_logs:
            say(f"logs kept in {log_dir}")
        else:
            shutil.rmtree(log_dir, ignore_errors=True)


@dataclass(frozen=True)
class MonitorGroup:
    """``count`` monitors of tenant ``tenant`` on one mechanism at ``{base}/{path}``, period 1 s,
    staggered over the first second, one check on x = [0], x′ = [1]."""

    path: str
    tenant: str
    count: int
    n: int = 1000
    output_kind: str = "real"
    event: Any = None  # None: the interval (−∞, 0]
    timeout_seconds: float = 30


def create_monitor_groups(db_url: str, base: str, secret: str, plan: list[MonitorGroup]) -> dict[str, list]:
    """The tenants, mechanisms and monitors of ``plan`` (each tenant once), starting in 5 s: the
    monitors' ids by group path."""
    from app.auth.service import create_tenant
    from app.db import make_engine, make_session_factory
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor

    engine = make_engine(db_url)
    groups: dict[str, list] = {g.path: [] for g in plan}
    start = datetime.now(UTC) + timedelta(seconds=5)
    with make_session_factory(engine)() as session:
        tenants: dict[str, Any] = {}
        for g in plan:
            if g.tenant not in tenants:
                tenants[g.tenant] = create_tenant(session, g.tenant)
        session.flush()
        for g in plan:
            tenant = tenants[g.tenant]
            mechanism = build_mechanism(tenant.id, MechanismCreate(
                name=g.path, sampling_url=f"{base}/{g.path}", output_kind=g.output_kind, secret=secret,
                timeout_seconds=g.timeout_seconds))
            session.add(mechanism)
            session.flush()
            event = g.event if g.event is not None else {"kind": "interval", "high": 0.0}
            for i in range(g.count):
                monitor = create_monitor(session, tenant.id, MonitorCreate(
                    name=f"{g.path}-{i}", mechanism_id=mechanism.id, epsilon=1.0, horizon=10_000,
                    samples_per_period=g.n, period_seconds=1, start_at=start + timedelta(seconds=i / max(g.count, 1)),
                    checks=[{"x": [0], "x_prime": [1], "event": event}]))
                assert monitor.state == "active", monitor.state
                groups[g.path].append(monitor.id)
        session.commit()
    engine.dispose()
    return groups


def period_outcomes(db_url: str, groups: dict[str, list], w0: datetime, w1: datetime,
                    hostile: tuple[str, ...]) -> dict[str, object]:
    """How the ``groups["healthy"]`` monitors fared between ``w0`` and ``w1`` (one period a second
    each): periods kept (status ok, scheduled in the window) against expected, the worst monitor,
    the sampling seconds' max and p99, failed periods; and for each group of ``hostile``, its
    periods by outcome (``reasons``) and the first 120 characters of its failures (``details``)."""
    from sqlalchemy import select

    from app.db import make_engine, make_session_factory
    from app.models.monitors import PeriodRun

    engine = make_engine(db_url)
    with make_session_factory(engine)() as session:
        runs = session.execute(select(PeriodRun.monitor_id, PeriodRun.status, PeriodRun.failure_reason,
                                      PeriodRun.failure_detail, PeriodRun.scheduled_for,
                                      PeriodRun.sampling_seconds)).all()
    engine.dispose()
    healthy = set(groups["healthy"])
    kept = [r for r in runs if r.monitor_id in healthy and r.status == "ok" and w0 <= r.scheduled_for < w1]
    seconds = sorted(r.sampling_seconds for r in kept)
    per_monitor = Counter(r.monitor_id for r in kept)
    reasons: dict[str, Counter] = {}
    details: dict[str, Counter] = {}
    for name in hostile:
        ids = set(groups[name])
        reasons[name] = Counter((r.status if r.status == "ok" else r.failure_reason) for r in runs if r.monitor_id in ids)
        details[name] = Counter((r.failure_detail or "")[:120] for r in runs if r.monitor_id in ids and r.status != "ok")
    return {"kept": len(kept), "expected": len(healthy) * int((w1 - w0).total_seconds()),
            "worst_monitor": min(per_monitor.get(m, 0) for m in healthy),
            "per_monitor_expected": int((w1 - w0).total_seconds()), "reasons": reasons, "details": details,
            "max_s": seconds[-1] if seconds else float("nan"),
            "p99_s": seconds[int(0.99 * (len(seconds) - 1))] if seconds else float("nan"),
            "healthy_failed": sum(1 for r in runs if r.monitor_id in healthy and r.status != "ok")}
