"""API under load beside a worker: 50 concurrent API clients for a minute, beside
one worker running 200 monitors, all on this machine.

What runs (127.0.0.1, each a separate process group; the machinery is bench/service_throughput.py's):
the reference endpoint (Laplace, binary answers), the API (`dpwatch serve --no-worker`), one
`dpwatch worker`, and this script, which creates a database, a tenant, one mechanism and
`--monitors` monitors (n = 1000, one check, a period of `--period` seconds, anchors spread evenly).

Phases, each `--duration` seconds after a `--warmup`:

1. **worker alone**: periods committed per second;
2. **worker + N API clients**, for each N of `--clients` (one phase each, in order): N closed-loop clients, each sending its next request when the
   last one answered, rotating GET /v1/monitors/{id}, GET /v1/monitors/{id}/status,
   GET /v1/monitors?limit=50 and GET /v1/monitors/{id}/periods?limit=50; the periods committed per
   second, and each kind's latency p50/p99 and count;
3. with ``--rate R``: **worker + R requests/s, open loop**: the same rotation of requests, one sent
   every 1/R s whether or not the earlier ones have answered (the API's p99 at 20
   requests/s; the goal is < 100 ms).

The worker's loss is 1 − (periods/s with clients) / (periods/s alone). CPU seconds of each process
(utime + stime from /proc) and the load average are given per phase. `--py-spy DIR` records the
API process during phase 2 (flame graph SVG and speedscope JSON).

    .venv/bin/python bench/api_load.py [--monitors 200] [--period 5] [--clients 50 [N ...]] [--warmup 15]
        [--duration 60] [--rate R] [--dbname NAME] [--port-base P] [--py-spy DIR] [--path /healthz]

Besides the latencies, the API process's CPU per request (its CPU seconds over the phase / requests
answered) is printed per phase.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import service_throughput as st  # noqa: E402
from sqlalchemy import text  # noqa: E402

from app.db import make_session_factory  # noqa: E402
from app.monitors.schemas import MonitorCreate  # noqa: E402
from app.monitors.service import create_monitor  # noqa: E402


def create_monitors(env: st.Env, engine, count: int, period: int) -> list[uuid.UUID]:  # noqa: ANN001
    factory = make_session_factory(engine)
    start = datetime.now(UTC) + timedelta(days=1)
    ids = []
    with factory() as session:
        for i in range(count):
            data = MonitorCreate(
                name=f"load-{i}", mechanism_id=env.mechanisms["binary"], epsilon=1.0, alpha=0.05, horizon=10_000,
                detector="e-process", samples_per_period=1000, period_seconds=period, start_at=start,
                checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}])
            ids.append(create_monitor(session, env.tenant_id, data).id)
        session.commit()
    first = datetime.now(UTC) + timedelta(seconds=1)
    with engine.begin() as c:
        c.execute(text(
            "WITH o AS (SELECT id, row_number() OVER (ORDER BY created_at, id) - 1 AS k FROM monitors) "
            "UPDATE monitors m SET schedule_anchor = :first + (o.k * :period / :count) * interval '1 second', "
            "next_run_at = :first + (o.k * :period / :count) * interval '1 second' FROM o WHERE o.id = m.id"),
            {"first": first, "count": count, "period": float(period)})
        c.execute(text("ANALYZE"))
    return ids


def child_pids(pid: int) -> list[int]:
    """The processes ``pid`` started (serve --workers N: its API processes)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


#: With ``--path P``: every request is a GET of P instead of the rotation (e.g. ``/healthz``, which
#: reads no key and no row: the framework's own floor under the same clients).
FIXED_PATH: str | None = None


def request_of(i: int, mid: uuid.UUID) -> tuple[str, str]:
    if FIXED_PATH is not None:
        return ("path", FIXED_PATH)
    return (("get", f"/v1/monitors/{mid}"), ("status", f"/v1/monitors/{mid}/status"),
            ("list", "/v1/monitors?limit=50"), ("periods", f"/v1/monitors/{mid}/periods?limit=50"))[i % 4]


async def open_loop(env: st.Env, ids: list[uuid.UUID], rate: float, seconds: float) -> list[tuple[str, float, int]]:
    """One request every 1/rate s (fixed arrival times, not waiting for answers), for ``seconds``."""
    return await st.open_loop_get(env, rate, seconds, lambda i, rng: request_of(i, rng.choice(ids)), seed=7,
                                  connections=200, timeout=60, grace=None)


async def clients(env: st.Env, ids: list[uuid.UUID], n: int, seconds: float) -> list[tuple[str, float, int]]:
    """``n`` closed-loop clients, each sending its next request when the last one has answered.

    Each client has an HTTP client and a connection of its own, as independent callers would: one
    httpx client shared by 50 tasks spent about 6 ms of this process's CPU per request in its
    connection pool (16 of the machine's 61 CPU-seconds in a 30 s phase, against 1.4 ms at 10
    clients), CPU taken from the server it measures."""
    out: list[tuple[str, float, int]] = []
    headers = {"Authorization": f"Bearer {env.api_key}"}
    end = time.perf_counter() + seconds

    async def loop(j: int) -> None:
        rng = random.Random(j)
        i = j
        async with httpx.AsyncClient(base_url=env.api, headers=headers, trust_env=False, timeout=60,
                                     limits=httpx.Limits(max_connections=1, max_keepalive_connections=1)) as client:
            while time.perf_counter() < end:
                await st.timed_get(client, *request_of(i, rng.choice(ids)), out)
                i += 1

    await asyncio.gather(*(loop(j) for j in range(n)))
    return out


def committed(engine, t0: datetime, t1: datetime) -> int:  # noqa: ANN001
    with engine.connect() as c:
        return c.execute(text("SELECT count(*) FROM period_runs WHERE status = 'ok' AND finished_at >= :a "
                              "AND finished_at < :b"), {"a": t0, "b": t1}).scalar_one()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--monitors", type=int, default=200)
    ap.add_argument("--period", type=int, default=5)
    ap.add_argument("--clients", type=int, nargs="+", default=[50],
                    help="closed-loop clients; several values run one phase each, in order (a capacity curve)")
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    ap.add_argument("--dbname", default=None)
    ap.add_argument("--port-base", type=int, default=None)
    ap.add_argument("--py-spy", metavar="DIR", default=None)
    ap.add_argument("--rate", type=float, default=None,
                    help="also run a third phase: this many requests/s, open loop")
    ap.add_argument("--api-env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--api-workers", type=int, default=1,
                    help="API processes (dpwatch serve --workers N); their CPU is added up")
    ap.add_argument("--path", default=None, metavar="PATH",
                    help="GET only this path (e.g. /healthz) instead of the rotation of four monitor reads")
    args = ap.parse_args()
    global FIXED_PATH
    FIXED_PATH = args.path

    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    api_env = dict(kv.split("=", 1) for kv in args.api_env)
    with st.bench_service(args, "dpwatch_apiload", api_env=api_env) as (env, engine, procs):
        dbname = env.dbname
        ids = create_monitors(env, engine, args.monitors, args.period)
        procs.start("worker", [*st.DPWATCH, "worker"], {**st.worker_env(env.db_url), "DPWATCH_WORKER_ID": "load-worker",
                                                        "DPWATCH_TICK_SECONDS": "0.2"})
        st.say(f"{len(ids)} monitors, worker started; warm-up {args.warmup:g} s")
        time.sleep(args.warmup)
        api_pid = procs.procs["api"].pid
        pids = {"worker": [procs.procs["worker"].pid], "api": [api_pid, *child_pids(api_pid)],
                "reference": [procs.procs["reference"].pid], "bench": [os.getpid()]}
        rows = []
        phases = ["worker alone", *(f"worker + {n} API clients" for n in args.clients)]
        if args.rate:
            phases.append(f"worker + {args.rate:g} requests/s")
        for phase in phases:
            procs.check_alive()
            pids["postgres"] = st.pg_backends(engine, dbname)
            spy = []
            if phase == phases[1] and args.py_spy:
                Path(args.py_spy).mkdir(parents=True, exist_ok=True)
                out = Path(args.py_spy) / "api-load-api"
                spy = [subprocess.Popen(
                    [st.PY_SPY, "record", "--pid", str(pids["api"][0]), "--duration", str(int(args.duration)),
                     "--rate", "100", "--format", fmt, "--output", f"{out}.{ext}", "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                    for fmt, ext in (("flamegraph", "svg"), ("speedscope", "speedscope.json"))]
            load0 = os.getloadavg()[0]
            before = st.cpu_snapshot([p for g in pids.values() for p in g])
            t0 = datetime.now(UTC)
            if phase == "worker alone":
                samples = time.sleep(args.duration) or []
            elif phase.endswith("API clients"):
                samples = asyncio.run(clients(env, ids, int(phase.split()[2]), args.duration))
            else:
                samples = asyncio.run(open_loop(env, ids, args.rate, args.duration))
            t1 = datetime.now(UTC)
            pids["postgres"] = sorted(set(pids["postgres"]) | set(st.pg_backends(engine, dbname)))
            after = st.cpu_snapshot([p for g in pids.values() for p in g])
            for p in spy:
                p.wait(60)
            window = (t1 - t0).total_seconds()
            cpu = {k: sum(after.by_pid.get(p, 0.0) - before.by_pid.get(p, 0.0) for p in g) for k, g in pids.items()}
            rows.append((phase, committed(engine, t0, t1) / window, samples, cpu, load0, os.getloadavg()[0],
                         after.system - before.system, window))
        alone = rows[0][1]
        print(f"\nAPI load ({args.api_workers} API process{'es' if args.api_workers > 1 else ''}): "
              f"{', '.join(map(str, args.clients))} closed-loop clients beside one worker with {len(ids)} monitors "
              f"(period {args.period} s, demand {len(ids) / args.period:.0f} periods/s); phases of "
              f"{args.duration:g} s\n")
        print("| phase | periods/s | API requests/s | get p50/p99 | status p50/p99 | list p50/p99 | periods p50/p99 "
              "| all p50/p99 | errors | API CPU per request | CPU s (worker, api, postgres, reference, this bench's clients; machine) "
              "| load avg start/end |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for phase, rate, samples, cpu, l0, l1, machine, window in rows:
            cells = []
            for kind in ("get", "status", "list", "periods"):
                lat = [s[1] for s in samples if s[0] == kind]
                cells.append(f"{st.pct(lat, 0.5) * 1e3:.0f} / {st.pct(lat, 0.99) * 1e3:.0f} ms" if lat else "–")
            every = [s[1] for s in samples]
            cells.append(f"{st.pct(every, 0.5) * 1e3:.0f} / {st.pct(every, 0.99) * 1e3:.0f} ms" if every else "–")
            errors = sum(1 for s in samples if s[2] != 200)
            codes = sorted({s[2] for s in samples if s[2] != 200})
            per = f"{cpu['api'] / len(samples) * 1e3:.2f} ms" if samples else "–"
            print(f"| {phase} | {rate:.1f} | {len(samples) / window:.0f} | " + " | ".join(cells)
                  + f" | {errors}{' ' + str(codes) if codes else ''} | {per} | {cpu['worker']:.0f}, {cpu['api']:.0f}, "
                  f"{cpu['postgres']:.0f}, "
                  f"{cpu['reference']:.0f}, {cpu['bench']:.0f}; {machine:.0f} of {2 * window:.0f} | {l0:.1f} / {l1:.1f} |")
        for n, row in zip(args.clients, rows[1:], strict=False):
            every = [s[1] for s in row[2]]
            print(f"\nAll requests with {n} clients: p50 {st.pct(every, 0.5) * 1e3:.0f} ms, p99 "
                  f"{st.pct(every, 0.99) * 1e3:.0f} ms (goal at 50 clients: < 300 ms); worker lost "
                  f"{1 - row[1] / alone:.1%} of its periods/s (goal < 10%)")
        if args.rate:
            every = [s[1] for s in rows[-1][2]]
            print(f"At {args.rate:g} requests/s: p50 {st.pct(every, 0.5) * 1e3:.0f} ms, "
                  f"p99 {st.pct(every, 0.99) * 1e3:.0f} ms (goal: < 100 ms); worker lost "
                  f"{1 - rows[-1][1] / alone:.1%} of its periods/s")


if __name__ == "__main__":
    main()
