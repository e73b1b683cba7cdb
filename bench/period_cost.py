"""Cost of one period as a monitor ages: CPU, wall time, statements and bytes written at t ≈ 10 and t ≈ N.

One monitor (one check, n outputs per side, outputs_window 20) runs N periods on a fresh Postgres
database. Each period is what a worker does — claim (leases.claim_monitors), plan, sample, write
(PeriodRunner.run) — called directly, with a fake clock one period ahead each time and an
in-process sampling stub (numpy Laplace draws: x = [0], x' = [1], b = 1, the ε = 1 boundary of
E = (−∞, 0]), so that only the service's own cost is measured.

Per period, in two windows (the first W periods after a warm-up of 5, and the last W):

- CPU ms of this process (``time.process_time``: the service's Python, SQLAlchemy and psycopg work;
  the Postgres backend's CPU is not in it) and wall ms;
- statements sent (a ``before_cursor_execute`` listener; COMMIT is not counted);
- bytes written: the row versions the period created, summed with ``pg_column_size`` — its
  period_runs, period_checks and period_outputs rows, plus the new versions of the updated
  checks and monitors rows (MVCC writes a whole new tuple on UPDATE);
- the check's detector_state JSON size.

    .venv/bin/python bench/period_cost.py [--periods 20000] [--detector e-process] [--window 20]
        [--horizon T] [--n 1000] [--postgres URL]

The aggregator needs T ≥ N to run N periods in one horizon; thresholds are tabled up to T = 10,000,
so ``--detector aggregator --periods 4970 --horizon 5000`` measures it over (almost) one whole horizon:
the paired window needs 25 more periods inside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.db import make_engine, make_session_factory, normalise_url, run_migrations  # noqa: E402

DEFAULT_PG = os.environ.get("DPWATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


class StubClient:
    """The sampling client's interface, answered in process: Laplace(x[0], 1) draws."""

    def __init__(self, seed: int = 1) -> None:
        self.rng = np.random.default_rng(seed)

    async def sample(self, endpoint, database, n, **_kw):  # noqa: ANN001, ANN201
        return self.rng.laplace(float(database[0]), 1.0, size=n)


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def _bytes_of_period(session, monitor_id: uuid.UUID, seq: int) -> int:  # noqa: ANN001
    row = session.execute(text("""
        SELECT
          (SELECT COALESCE(SUM(pg_column_size(r.*)), 0) FROM period_runs r WHERE r.monitor_id = :m AND r.seq = :s)
        + (SELECT COALESCE(SUM(pg_column_size(c.*)), 0) FROM period_checks c JOIN period_runs r
             ON r.id = c.period_run_id WHERE r.monitor_id = :m AND r.seq = :s)
        + (SELECT COALESCE(SUM(pg_column_size(o.*)), 0) FROM period_outputs o WHERE o.monitor_id = :m AND o.seq = :s)
        + (SELECT COALESCE(SUM(pg_column_size(k.*)), 0) FROM checks k WHERE k.monitor_id = :m)
        + (SELECT pg_column_size(mo.*) FROM monitors mo WHERE mo.id = :m)
    """), {"m": monitor_id, "s": seq}).scalar_one()
    return int(row)


async def run(args: argparse.Namespace) -> dict:
    from app.auth.service import create_tenant_with_key
    from app.models.mechanisms import Mechanism
    from app.models.monitors import Check, Monitor
    from app.monitors.leases import claim_monitors
    from app.monitors.runner import PeriodRunner
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor
    from app.settings import Settings

    base = normalise_url(args.postgres)
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    name = f"dpwatch_bench_{uuid.uuid4().hex[:10]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    engine = None
    try:
        run_migrations(url)
        engine = make_engine(url)
        factory = make_session_factory(engine)
        settings = Settings(_env_file=None, database_url=url, migrate_on_start=False, worker_id="bench",  # type: ignore[call-arg]
                            log_level="WARNING", allow_networks=["127.0.0.0/8"])
        start = datetime(2026, 1, 1, tzinfo=UTC)
        with factory() as session:
            tenant, _ = create_tenant_with_key(session, "bench", "bench")
            mech = Mechanism(tenant_id=tenant.id, name="stub", sampling_url="http://127.0.0.1:9/stub",
                             output_kind="real", secret="whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            session.add(mech)
            session.flush()
            tenant_id, mech_id = tenant.id, mech.id
            session.commit()

        def new_monitor(anchor: datetime) -> uuid.UUID:
            body = {"name": "cost", "mechanism_id": str(mech_id), "epsilon": 1.0, "samples_per_period": args.n,
                    "period_seconds": 60, "detector": args.detector, "start_at": anchor.isoformat(),
                    "checks": [{"x": [0.0], "x_prime": [1.0], "event": {"kind": "interval", "high": 0.0}}]}
            if args.horizon:
                body["horizon"] = args.horizon
            with factory() as session:
                monitor = create_monitor(session, tenant_id, MonitorCreate.model_validate(body), now=anchor)
                session.commit()
                assert monitor.state == "active", monitor.state
                return monitor.id

        mid = new_monitor(start)
        clock = Clock(start)
        runner = PeriodRunner(factory, StubClient(), settings, clock=clock)
        statements = [0]

        def count(*_a):  # noqa: ANN002
            statements[0] += 1

        event.listen(engine, "before_cursor_execute", count)
        first = range(6, 6 + args.window)
        last = range(args.periods - args.window + 1, args.periods + 1)
        samples: dict[str, dict[str, list[float]]] = {"first": {}, "last": {}, "paired_old": {}, "paired_new": {}}

        async def period(monitor_id: uuid.UUID, at: datetime, window: str | None) -> None:
            clock.now = at
            statements[0] = 0
            c0, w0 = time.process_time(), time.perf_counter()
            with factory() as session:
                claimed = claim_monitors(session, worker_id="bench", states=("active", "degraded"), now=clock.now,
                                         lease_seconds=30, limit=8)
                session.commit()
            assert claimed == [monitor_id], (at, claimed)
            outcome = await runner.run(monitor_id)
            c1, w1 = time.process_time(), time.perf_counter()
            n_statements = statements[0]
            assert outcome.outcome == "ok", (at, outcome)
            if window:
                with factory() as session:
                    seq = session.get(Monitor, monitor_id).last_seq
                    nbytes = _bytes_of_period(session, monitor_id, seq)
                    state = session.query(Check.detector_state).filter(Check.monitor_id == monitor_id).scalar()
                d = samples[window]
                d.setdefault("cpu_ms", []).append(1000 * (c1 - c0))
                d.setdefault("wall_ms", []).append(1000 * (w1 - w0))
                d.setdefault("statements", []).append(n_statements)
                d.setdefault("bytes", []).append(nbytes)
                d.setdefault("state_bytes", []).append(len(json.dumps(state)))

        def slot(p: int, offset: float = 0.0) -> datetime:
            return start + timedelta(seconds=60 * (p - 1) + offset, milliseconds=1)

        wall0 = time.perf_counter()
        for p in range(1, args.periods + 1):
            await period(mid, slot(p), "first" if p in first else "last" if p in last else None)
            if p % 1000 == 0:
                print(f"  period {p}: {(time.perf_counter() - wall0) / p * 1000:.1f} ms/period so far",
                      file=sys.stderr, flush=True)
        # Paired: a fresh monitor (slots 30 s after the old one's) and the old one, period for period
        # under the same machine load: t ≈ 6.. for the new one, t ≈ N + 6.. for the old one.
        base = args.periods
        new_id = new_monitor(slot(base + 1, 30.0))
        for k in range(1, 6 + args.window):
            window_old = "paired_old" if k > 5 else None
            await period(mid, slot(base + k), window_old)
            await period(new_id, slot(base + k, 30.0), "paired_new" if k > 5 else None)
        event.remove(engine, "before_cursor_execute", count)
        with factory() as session:
            m = session.get(Monitor, mid)
            final_t = m.t
        out = {"detector": args.detector, "periods": args.periods, "n": args.n, "final_t": final_t,
               "windows": {w: {k: statistics.median(v) for k, v in d.items()} for w, d in samples.items()},
               "window_t": {"first": [first.start, first.stop - 1], "last": [last.start, last.stop - 1],
                            "paired_new": [6, 5 + args.window],
                            "paired_old": [args.periods + 6, args.periods + 5 + args.window]},
               "total_seconds": time.perf_counter() - wall0}
        return out
    finally:
        if engine is not None:
            engine.dispose()
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    import signal

    def on_term(*_: object) -> None:  # the database is dropped on the way out
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--periods", type=int, default=20000)
    ap.add_argument("--detector", default="e-process", choices=["aggregator", "e-process", "e-detector"])
    ap.add_argument("--horizon", type=int, default=None)
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--postgres", default=DEFAULT_PG)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.detector == "aggregator" and not args.horizon:
        args.horizon = args.periods
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
        return
    print(f"detector {result['detector']}, n = {result['n']}, {result['periods']} periods "
          f"({result['total_seconds']:.0f} s); medians over {args.window} periods")
    for a, b, title in (("first", "last", "one monitor, early window vs last window (sequential)"),
                        ("paired_new", "paired_old", "a fresh monitor vs the aged one, period for period (same load)")):
        f, g = result["windows"][a], result["windows"][b]
        ta, tb = result["window_t"][a], result["window_t"][b]
        print(f"\n{title}\n")
        print(f"| quantity | t = {ta[0]}–{ta[1]} | t = {tb[0]}–{tb[1]} | ratio |")
        print("|---|---|---|---|")
        for key, label in (("cpu_ms", "CPU ms per period (this process)"), ("wall_ms", "wall ms per period"),
                           ("statements", "statements per period"),
                           ("bytes", "bytes written per period (row versions)"),
                           ("state_bytes", "check's detector_state JSON (bytes)")):
            print(f"| {label} | {f[key]:.2f} | {g[key]:.2f} | {g[key] / f[key]:.2f} |")


if __name__ == "__main__":
    main()
