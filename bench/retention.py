"""Retention under load: rows and bytes of the period tables stay flat once periods older than the
retention window are deleted (docs/hardening.md "Quotas and retention").

What runs: a sampling server answering Laplace samples (bench/isolation.py's ``--serve``), two
``dpwatch worker`` processes with ``DPWATCH_RETENTION_DAYS`` set to ``--retention`` seconds and the
sweep every ``--sweep`` seconds, and ``--monitors`` e-process monitors of one tenant, period
``--period`` s, n = ``--n`` per side. Every ``--every`` seconds the script reads, per table, the rows
(``count(*)``) and the bytes (``pg_total_relation_size``: heap, indexes and TOAST) and the periods
committed so far. The table it prints is the time series; the last lines give the projection of
the measured steady state to 10,000 monitors at one period a minute.

    .venv/bin/python bench/retention.py [--monitors 100] [--period 2] [--retention 120] [--duration 420]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from datetime import UTC, datetime, timedelta

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from service_harness import DPWATCH, PG, ROOT, free_port, say, scratch_service, wait_port, worker_env  # noqa: E402

TABLES = ("period_runs", "period_checks", "period_outputs", "checks", "monitors", "alarms")


def setup(db_url: str, base: str, monitors: int, period: int, n: int, secret: str) -> None:
    from app.auth.service import create_tenant
    from app.db import make_engine, make_session_factory
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor

    engine = make_engine(db_url)
    start = datetime.now(UTC) + timedelta(seconds=5)
    with make_session_factory(engine)() as session:
        tenant = create_tenant(session, "retention")
        session.flush()
        mechanism = build_mechanism(tenant.id, MechanismCreate(name="healthy", sampling_url=f"{base}/healthy",
                                                               output_kind="real", secret=secret, timeout_seconds=30))
        session.add(mechanism)
        session.flush()
        for i in range(monitors):
            create_monitor(session, tenant.id, MonitorCreate(
                name=f"r-{i}", mechanism_id=mechanism.id, epsilon=1.0, horizon=10_000, detector="e-process", samples_per_period=n,
                period_seconds=period, start_at=start + timedelta(seconds=period * i / monitors),
                checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}]))
        session.commit()
    engine.dispose()


def sizes(engine) -> dict[str, tuple[int, int]]:  # noqa: ANN001
    from sqlalchemy import text

    out = {}
    with engine.connect() as c:
        for table in TABLES:
            rows = c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            size = c.execute(text(f"SELECT pg_total_relation_size('{table}')")).scalar_one()
            out[table] = (int(rows), int(size))
            dead, vacuums = c.execute(text(
                "SELECT n_dead_tup, autovacuum_count + vacuum_count FROM pg_stat_user_tables WHERE relname = :t"),
                {"t": table}).one()
            out[f"{table}:dead"] = (int(dead), int(vacuums))
        out["committed"] = (int(c.execute(text("SELECT coalesce(sum(last_seq), 0) FROM monitors")).scalar_one()), 0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--monitors", type=int, default=100)
    parser.add_argument("--period", type=int, default=2)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--retention", type=float, default=120.0, help="retention window, seconds")
    parser.add_argument("--sweep", type=float, default=10.0, help="seconds between sweeps")
    parser.add_argument("--duration", type=float, default=420.0)
    parser.add_argument("--every", type=float, default=30.0)
    parser.add_argument("--pg", default=PG)
    parser.add_argument("--default-autovacuum", action="store_true",
                        help="reset the period tables' autovacuum settings to the server's defaults (as before)")
    args = parser.parse_args()

    from sqlalchemy import create_engine, text

    from app.db import make_engine
    from app.sampling.protocol import generate_secret

    port = free_port()
    series: list[tuple[float, dict[str, tuple[int, int]]]] = []
    with scratch_service("retention", pg=args.pg) as run:
        db_url, procs = run.db_url, run.procs
        if args.default_autovacuum:
            with create_engine(db_url, isolation_level="AUTOCOMMIT").connect() as c:
                for table in TABLES[:3]:
                    c.execute(text(f"ALTER TABLE {table} RESET (autovacuum_vacuum_scale_factor, "
                                   "autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay)"))
        procs.start("endpoints", [sys.executable, str(ROOT / "bench" / "isolation.py"), "--serve", str(port)],
                    {"PYTHONUNBUFFERED": "1"})
        wait_port(port, 60, procs)
        setup(db_url, f"http://127.0.0.1:{port}", args.monitors, args.period, args.n, generate_secret())
        env = worker_env(db_url) | {
            "DPWATCH_RETENTION_DAYS": repr(args.retention / 86_400), "DPWATCH_RETENTION_EVERY_SECONDS": str(args.sweep),
            "DPWATCH_MAX_INFLIGHT_PER_TENANT": "0", "DPWATCH_MAX_INFLIGHT_PER_MECHANISM": "0"}
        for i in (1, 2):
            procs.start(f"worker-{i}", [*DPWATCH, "worker", "--no-jobs"], env | {"DPWATCH_WORKER_ID": f"ret-{i}"})
        say(f"{args.monitors} monitors, period {args.period} s, retention {args.retention:g} s; logs in {run.log_dir}")
        engine = make_engine(db_url)
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.duration:
            procs.check_alive()
            series.append((time.monotonic() - t0, sizes(engine)))
            say(f"t = {series[-1][0]:.0f} s: period_runs {series[-1][1]['period_runs'][0]}")
            time.sleep(max(0.0, args.every - (time.monotonic() - t0) % args.every))
        series.append((time.monotonic() - t0, sizes(engine)))
        engine.dispose()

    print(f"\nRetention: {args.monitors} e-process monitors, period {args.period} s, n = {args.n}, retention "
          f"{args.retention:g} s, sweep every {args.sweep:g} s, 2 workers, {args.duration:g} s, autovacuum "
          f"{'server defaults' if args.default_autovacuum else 'as migrated (0008)'}\n")
    print("| t (s) | periods committed | " + " | ".join(f"{t} rows / MB (dead rows, vacuums)" for t in TABLES[:3]) + " |")
    print("|---:|---:|" + "---:|" * 3)
    for t, s in series:
        print(f"| {t:.0f} | {s['committed'][0]} | " + " | ".join(
            f"{s[name][0]:,} / {s[name][1] / 2**20:.1f} ({s[name + ':dead'][0]:,}, {s[name + ':dead'][1]})"
            for name in TABLES[:3]) + " |")
    # steady state: the periods committed per second in the last half, and the rows kept
    half = [x for x in series if x[0] >= args.duration / 2]
    if len(half) >= 2:
        (ta, a), (tb, b) = half[0], half[-1]
        rate = (b["committed"][0] - a["committed"][0]) / max(1e-9, tb - ta)
        for name in TABLES[:3]:
            rows, size = b[name]
            per_row = size / max(1, rows)
            print(f"\n{name}: {rate:.1f} periods/s committed in the second half; rows {a[name][0]:,} → {rows:,}, "
                  f"{a[name][1] / 2**20:.1f} → {size / 2**20:.1f} MB; {per_row:.0f} bytes a row with indexes")


if __name__ == "__main__":
    main()
