"""Scale: 10,000 monitors, one period a minute each, n = 1000, two workers and Postgres on this machine.

What runs (all on 127.0.0.1, each a separate process group; the machinery is
bench/service_throughput.py's):

- the reference endpoint (`dpwatch serve-reference`, a uvicorn process) serving the Laplace
  mechanism over the sampling protocol, binary float64 answers (`prefer_binary`);
- the API (`dpwatch serve --no-worker`);
- W workers (`dpwatch worker`, default 2);
- this script: a fresh database, a tenant, one mechanism, and M monitors (default 10,000) with
  `period_seconds = 60`, n = 1000 per side, one check x = [0], x' = [1], E = (−∞, 0], the chosen
  `--detector`, and anchors spread evenly over the first minute, so that the monitors ask for
  M/60 periods per second (167/s for 10,000).

During a window of `--duration` seconds after `--warmup`, it counts the periods committed
(`period_runs.finished_at` in the window, from the database), how late they started
(`started_at − scheduled_for`), and polls the API open-loop at `--api-rate` requests per second,
rotating GET /v1/monitors/{id}, GET /v1/monitors/{id}/status and GET /v1/monitors?limit=50.
Keeping up means: periods/s ≈ M/60 and the start lag stays flat.

    .venv/bin/python bench/scale.py [--monitors 10000] [--workers 2] [--warmup 20] [--duration 60]
        [--detector e-process] [--api-rate 20] [--max-in-flight 8] [--dbname NAME] [--port-base P]
        [--py-spy DIR]

`--py-spy DIR` records the first worker with py-spy during the window (flame graph SVG and
speedscope JSON in DIR). The table gives CPU per committed period by component (from
/proc/<pid>/stat utime+stime, which the other processes on a shared machine disturb less than
wall time) and the load average at the start and the end of the window.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import service_throughput as st  # noqa: E402
from sqlalchemy import text  # noqa: E402

from app.db import make_session_factory  # noqa: E402
from app.monitors.schemas import MonitorCreate  # noqa: E402
from app.monitors.service import create_monitor  # noqa: E402


def create_monitors(env: st.Env, engine, count: int, n: int, detector: str, start: datetime) -> list[uuid.UUID]:  # noqa: ANN001
    ids = []
    factory = make_session_factory(engine)
    session = factory()
    try:
        for i in range(count):
            data = MonitorCreate(
                name=f"scale-{i}", mechanism_id=env.mechanisms["binary"], epsilon=1.0, alpha=0.05,
                horizon=10_000, detector=detector, samples_per_period=n, period_seconds=60,
                start_at=start + timedelta(seconds=60.0 * i / count),
                checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}],
            )
            ids.append(create_monitor(session, env.tenant_id, data).id)
            if i % 500 == 499:
                session.commit()
                session.close()
                session = factory()
        session.commit()
    finally:
        session.close()
    with engine.begin() as c:
        c.execute(text("ANALYZE"))
    return ids


async def poll(env: st.Env, ids: list[uuid.UUID], rate: float, seconds: float) -> list[tuple[str, float, int]]:
    """Open loop (request i leaves at start + i/rate whatever the earlier ones did)."""
    def request(i: int, rng: random.Random) -> tuple[str, str]:
        mid = rng.choice(ids)
        return (("get", f"/v1/monitors/{mid}"), ("status", f"/v1/monitors/{mid}/status"),
                ("list", "/v1/monitors?limit=50"))[i % 3]

    return await st.open_loop_get(env, rate, seconds, request, seed=3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--monitors", type=int, default=10_000)
    ap.add_argument("--samples", "-n", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--detector", default="e-process", choices=["aggregator", "e-process", "e-detector"])
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--api-rate", type=float, default=20.0)
    ap.add_argument("--tick", type=float, default=0.1)
    ap.add_argument("--max-in-flight", type=int, default=None)
    ap.add_argument("--caps", type=int, nargs=2, default=(0, 0), metavar=("TENANT", "MECHANISM"),
                    help="in-flight caps per tenant and per mechanism (fair claims); the bench has one "
                         "tenant on one mechanism, so the default 0 0 switches them off")
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    ap.add_argument("--dbname", default=None, help="database to create and drop (default: a random name)")
    ap.add_argument("--port-base", type=int, default=None,
                    help="reference endpoint on this port, API on the next (default: free ports)")
    ap.add_argument("--py-spy", metavar="DIR", default=None, help="record worker1 with py-spy during the window")
    ap.add_argument("--py-spy-rate", type=int, default=100)
    args = ap.parse_args()

    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with st.bench_service(args, "dpwatch_scale") as (env, engine, procs):
        dbname = env.dbname
        t_create = time.perf_counter()
        start = datetime.now(UTC) + timedelta(days=1)  # not due while they are created
        ids = create_monitors(env, engine, args.monitors, args.samples, args.detector, start)
        st.say(f"{len(ids)} monitors created in {time.perf_counter() - t_create:.0f} s")
        idle = [s[1] for s in asyncio.run(poll(env, ids, args.api_rate, 6.0))]
        st.say(f"idle API p50 {st.pct(idle, 0.5) * 1e3:.1f} ms, p99 {st.pct(idle, 0.99) * 1e3:.1f} ms")
        # Spread the anchors over the minute that starts now: M/60 periods per second from now on.
        first = datetime.now(UTC) + timedelta(seconds=2)
        with engine.begin() as c:
            c.execute(text(
                "WITH o AS (SELECT id, row_number() OVER (ORDER BY created_at, id) - 1 AS k FROM monitors) "
                "UPDATE monitors m SET schedule_anchor = :first + (o.k * 60.0 / :count) * interval '1 second', "
                "next_run_at = :first + (o.k * 60.0 / :count) * interval '1 second' FROM o WHERE o.id = m.id"),
                {"first": first, "count": len(ids)})
        names = [f"worker{i + 1}" for i in range(args.workers)]
        extra = {} if args.max_in_flight is None else {"DPWATCH_MAX_IN_FLIGHT": str(args.max_in_flight)}
        extra |= {"DPWATCH_MAX_INFLIGHT_PER_TENANT": str(args.caps[0]),
                  "DPWATCH_MAX_INFLIGHT_PER_MECHANISM": str(args.caps[1])}
        for name in names:
            procs.start(name, [*st.DPWATCH, "worker"], {**st.worker_env(env.db_url), "DPWATCH_WORKER_ID": f"scale-{name}",
                                                        "DPWATCH_TICK_SECONDS": str(args.tick),
                                                        "DPWATCH_LEASE_SECONDS": "60", **extra})
        try:
            st.say(f"warm-up {args.warmup:g} s")
            time.sleep(args.warmup)
            procs.check_alive()
            pids = {"reference": [procs.procs["reference"].pid], "api": [procs.procs["api"].pid],
                    "workers": [procs.procs[n].pid for n in names], "postgres": st.pg_backends(engine, dbname)}
            spy = None
            if args.py_spy:
                Path(args.py_spy).mkdir(parents=True, exist_ok=True)
                out = Path(args.py_spy) / f"scale-{len(ids)}-worker1"
                spy = [subprocess.Popen(
                    [st.PY_SPY, "record", "--pid", str(pids["workers"][0]), "--duration", str(int(args.duration)),
                     "--rate", str(args.py_spy_rate), "--format", fmt, "--output", f"{out}.{ext}", "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                    for fmt, ext in (("flamegraph", "svg"), ("speedscope", "speedscope.json"))]
            load0 = os.getloadavg()
            before = st.cpu_snapshot([p for g in pids.values() for p in g])
            t0 = datetime.now(UTC)
            polled: list[list[tuple[str, float, int]]] = []
            poller = threading.Thread(target=lambda: polled.append(asyncio.run(
                poll(env, ids, args.api_rate, args.duration))), daemon=True)
            poller.start()
            time.sleep(args.duration)
            t1 = datetime.now(UTC)
            load1 = os.getloadavg()
            pids["postgres"] = sorted(set(pids["postgres"]) | set(st.pg_backends(engine, dbname)))
            after = st.cpu_snapshot([p for g in pids.values() for p in g])
            poller.join(st.API_GRACE_SECONDS + 30)
            procs.check_alive()
            for p in spy or ():
                p.wait(60)
        finally:
            for name in names:
                procs.stop(name)
        window = (t1 - t0).total_seconds()
        cpu = {k: sum(after.by_pid.get(p, 0.0) - before.by_pid.get(p, 0.0) for p in g) for k, g in pids.items()}
        machine = after.system - before.system
        with engine.connect() as c:
            rows = c.execute(text(
                "SELECT status, EXTRACT(EPOCH FROM started_at - scheduled_for) FROM period_runs "
                "WHERE finished_at >= :t0 AND finished_at < :t1"), {"t0": t0, "t1": t1}).all()
            total_due = c.execute(text("SELECT count(*) FROM monitors WHERE next_run_at <= :t1"),
                                  {"t1": t1}).scalar_one()
        ok = [r for r in rows if r[0] == "ok"]
        lags = sorted(float(r[1]) for r in ok)
        samples = polled[0] if polled else []
        demand = len(ids) / 60.0
        print(f"\nScale: {len(ids)} monitors ({args.detector}), one period a minute each (demand {demand:.0f} "
              f"periods/s), n = {args.samples}, {args.workers} workers; window {window:.0f} s after "
              f"{args.warmup:g} s warm-up; API polled at {args.api_rate:g} req/s\n")
        print("| measure | value | goal |")
        print("|---|---|---|")
        print(f"| periods committed per second | {len(ok) / window:.1f} | ≥ {demand:.0f} |")
        print(f"| failed periods | {len(rows) - len(ok)} | 0 |")
        print(f"| start lag (started − scheduled) median / p99 | {st.pct(lags, 0.5):.1f} s / {st.pct(lags, 0.99):.1f} s"
              " | flat, ≪ 60 s |")
        print(f"| monitors overdue at the end of the window | {total_due} | ≈ in flight |")
        for kind in ("get", "status", "list"):
            lat = [s[1] for s in samples if s[0] == kind]
            print(f"| API {kind} p50 / p99 ({len(lat)} requests) | {st.pct(lat, 0.5) * 1e3:.0f} ms / "
                  f"{st.pct(lat, 0.99) * 1e3:.0f} ms | p99 < 100 ms |")
        print(f"| API errors | {sum(1 for s in samples if s[2] != 200)} | 0 |")
        print(f"| idle API p50 / p99 (before the workers) | {st.pct(idle, 0.5) * 1e3:.0f} ms / "
              f"{st.pct(idle, 0.99) * 1e3:.0f} ms | |")
        per = max(len(ok), 1)
        print("| CPU per committed period | " + ", ".join(
            f"{k} {v / per * 1e3:.2f} ms" for k, v in cpu.items() if k != "api") + " | worker ≤ 5 ms, all ≤ 12 ms |")
        print(f"| load average (1 min) at start / end of the window | {load0[0]:.1f} / {load1[0]:.1f} | |")
        print("| CPU seconds in the window | " + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
              + f", whole machine {machine:.0f} (of {2 * window:.0f} on 2 cores) | |")


if __name__ == "__main__":
    main()
