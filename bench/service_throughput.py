"""Service throughput: periods per second of `dpwatch worker` on Postgres, with API latency.

What runs (all on 127.0.0.1, each a separate process in its own process group):

- the reference endpoint (`dpwatch serve-reference`), serving the Laplace mechanism over the
  sampling protocol (real outputs; binary `application/x-dpwatch-float64` when asked);
- the API (`dpwatch serve --no-worker`);
- 1 or 2 workers (`dpwatch worker`), each with its own DPWATCH_WORKER_ID;
- this script: it sets up a fresh Postgres database (migrations, a tenant and key, two mechanisms
  registered through the REST API with the endpoint's secret, one with `prefer_binary` false and
  one true), creates M monitors for each run (period 1 s, n = 1000 per side, one check
  x = [0], x' = [1], E = (-inf, 0]), and polls the API at a fixed rate while the workers run.

Each run (workers × format) starts from an empty monitors table: M new monitors whose anchors are
spread over one second, so that M monitors ask for M periods per second. With M above what the
service can do, the workers are saturated and the count of committed periods in the measurement
window is the throughput. Everything is counted from the database (`period_runs.finished_at` in
the window), not from the workers' logs.

Also measured, with no worker running: the bare cost of the two sampling calls of one period
(`SamplingClient.sample` on x and on x' concurrently, as the runner does) against the same
endpoint, back to back (latency and the caller's CPU); how many such pairs one Python process can
draw per second when it does nothing else (C pairs in flight); the API's latency without load.
During each run: CPU seconds of every process involved (from /proc; the workers split into the
event-loop thread and the other threads, i.e. the database work sent to `asyncio.to_thread`), per
committed period, to show where the 2 cores go; Postgres connections opened.

The `dpwatch` commands are started as `python -m app.cli …` (the same Typer app).

    .venv/bin/python bench/service_throughput.py [--monitors 300] [--warmup 8] [--duration 30]
        [--workers 1 2] [--formats json binary] [--api-rate 20] [--tick 0.1] [--start-t T]
        [--outputs-window W] [--py-spy DIR [--py-spy-opts=--gil]] [--worker-env KEY=VALUE ...]

`--start-t T` starts the monitors mid-horizon (detectors holding T prefix sums); `--worker-env`
passes extra environment to the workers (experiments, e.g. PYTHONPATH with a patch module).

Progress goes to stderr; the tables to stdout. The database and every process are removed at the
end, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pathlib
import platform
import random
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import structlog  # noqa: E402
from service_harness import DPWATCH, Procs, free_port, say, scratch_service, worker_env  # noqa: E402
from sqlalchemy import select, text  # noqa: E402

from app.auth.service import create_tenant_with_key  # noqa: E402
from app.db import make_engine, make_session_factory  # noqa: E402
from app.monitors.schemas import MonitorCreate  # noqa: E402
from app.monitors.service import create_monitor  # noqa: E402
from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig  # noqa: E402
from app.sampling.protocol import generate_secret  # noqa: E402
from app.sampling.safe_http import SafeHttpConfig  # noqa: E402

# `DPWATCH` (bench/service_harness.py) runs `python -m app.cli` (same Typer app): other sessions on a
# shared machine sometimes `pkill -f "dpwatch serve"`, which must not hit this benchmark's processes.
CLK_TCK = os.sysconf("SC_CLK_TCK")
PY_SPY = str(ROOT / ".venv" / "bin" / "py-spy")  # `.venv/bin/pip install py-spy` for --py-spy


def wait_http(url: str, timeout: float, procs: Procs) -> None:
    deadline = time.monotonic() + timeout
    while True:
        procs.check_alive()
        try:
            r = httpx.get(url, timeout=1.0, trust_env=False)
            if r.status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not come up in {timeout} s")
        time.sleep(0.1)


# ------------------------------------------------------------------------------------ CPU from /proc


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads); 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / CLK_TCK
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of a process."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(parts[11]) + int(parts[12])) / CLK_TCK
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return out


def loop_thread_share(pids: list[int], before: dict[int, dict[int, float]]) -> tuple[float, float]:
    """(main thread CPU, other threads CPU) of the worker processes since ``before``."""
    main = other = 0.0
    for pid in pids:
        now = thread_cpu(pid)
        for tid, value in now.items():
            delta = value - before.get(pid, {}).get(tid, 0.0)
            if tid == pid:
                main += delta
            else:
                other += delta
    return main, other


def system_busy() -> float:
    """CPU seconds spent not idle by the whole machine (all cores) since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / CLK_TCK


@dataclass
class CpuSnapshot:
    wall: float
    system: float
    by_pid: dict[int, float]


def pg_backends(engine, dbname: str) -> list[int]:
    with engine.connect() as c:
        return [r[0] for r in c.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid()"), {"d": dbname})]


def reaped_children_cpu(pid: int) -> float:
    """CPU seconds of the reaped children of a process (cutime + cstime): for the postmaster, the
    backends that ended (of every database on the server)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[13]) + int(parts[14])) / CLK_TCK
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0


def parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def pg_sessions(engine, dbname: str) -> int:
    """Connections opened to the database so far (pg_stat_database.sessions, Postgres 14+)."""
    with engine.connect() as c:
        return int(c.execute(text("SELECT sessions FROM pg_stat_database WHERE datname = :d"), {"d": dbname}).scalar())


def cpu_snapshot(pids: list[int]) -> CpuSnapshot:
    return CpuSnapshot(time.monotonic(), system_busy(), {pid: proc_cpu(pid) for pid in pids})


# ------------------------------------------------------------------------------------ setup


@dataclass
class Env:
    db_url: str
    admin_url: str
    dbname: str
    secret: str
    ref_port: int
    api_port: int
    api_key: str = ""
    mechanisms: dict[str, uuid.UUID] = field(default_factory=dict)
    tenant_id: uuid.UUID | None = None

    @property
    def sampling_url(self) -> str:
        return f"http://127.0.0.1:{self.ref_port}/reference/laplace"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"


@contextlib.contextmanager
def bench_service(args: argparse.Namespace, prefix: str, api_env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """A bench's service on this machine, torn down on exit (also on SIGTERM): a fresh, migrated
    database (``--dbname``, or a random name with ``prefix``; ``--pg``; bench/service_harness.py),
    the reference endpoint and ``dpwatch serve --no-worker`` on ``--port-base`` and the next port
    (or free ports), and the tenant with its mechanisms. Yields ``(env, engine, procs)``."""
    dbname = getattr(args, "dbname", None) or f"{prefix}_{secrets.token_hex(4)}"
    port_base = getattr(args, "port_base", None)
    ref_port, api_port = ((port_base, port_base + 1) if port_base else (free_port(), free_port()))
    env = Env(db_url=f"{args.pg}/{dbname}", admin_url=f"{args.pg}/postgres", dbname=dbname,
              secret=generate_secret(), ref_port=ref_port, api_port=api_port)
    with scratch_service(prefix.removeprefix("dpwatch_"), pg=args.pg, dbname=dbname,
                         keep_logs=getattr(args, "keep_logs", False)) as run:
        procs = run.procs
        engine = make_engine(env.db_url)
        try:
            say(f"reference endpoint on :{env.ref_port}, API on :{env.api_port} (logs in {run.log_dir})")
            procs.start("reference", [*DPWATCH, "serve-reference", "--host", "127.0.0.1", "--port",
                                      str(env.ref_port), "--secret", env.secret], {"PYTHONUNBUFFERED": "1"})
            api_workers = getattr(args, "api_workers", 1) or 1  # serve --workers N: N API processes
            procs.start("api", [*DPWATCH, "serve", "--no-worker", "--host", "127.0.0.1", "--port",
                                str(env.api_port), *(["--workers", str(api_workers)] if api_workers > 1 else [])],
                        worker_env(env.db_url) | (api_env or {}))
            wait_http(f"http://127.0.0.1:{env.ref_port}/reference/laplace", 60, procs)
            wait_http(f"{env.api}/healthz", 60, procs)
            setup_tenant_and_mechanisms(env, engine)
            yield env, engine, procs
        finally:
            procs.close()
            engine.dispose()


def setup_tenant_and_mechanisms(env: Env, engine) -> None:
    with make_session_factory(engine)() as session:
        tenant, key = create_tenant_with_key(session, "bench", "bench key")
        session.commit()
        env.tenant_id, env.api_key = tenant.id, key
    headers = {"Authorization": f"Bearer {env.api_key}"}
    for fmt, binary in (("json", False), ("binary", True)):
        r = httpx.post(f"{env.api}/v1/mechanisms", headers=headers, trust_env=False, timeout=30, json={
            "name": f"laplace-{fmt}", "sampling_url": env.sampling_url, "output_kind": "real",
            "max_batch": 10_000, "timeout_seconds": 10, "prefer_binary": binary, "secret": env.secret,
        })
        r.raise_for_status()
        env.mechanisms[fmt] = uuid.UUID(r.json()["id"])


def reset_monitors(env: Env, engine, fmt: str, count: int, n: int, start: datetime, spread: bool,
                   start_t: int = 0, outputs_window: int | None = None) -> list[uuid.UUID]:
    """Drop every monitor (cascading to checks and periods), then create ``count`` fresh ones.

    ``start_t`` > 0 puts them mid-horizon: t = start_t and detectors holding start_t prefix sums
    (of standard normal z), as monitors that have been running for start_t periods."""
    with engine.begin() as c:
        c.execute(text("TRUNCATE monitors CASCADE"))
    ids = []
    with make_session_factory(engine)() as session:
        for i in range(count):
            anchor = start + timedelta(seconds=(i / count) if spread else 0.0)
            data = MonitorCreate(
                name=f"bench-{fmt}-{i}", mechanism_id=env.mechanisms[fmt], epsilon=1.0, alpha=0.05, gamma=0.25,
                horizon=10_000, samples_per_period=n, period_seconds=1, start_at=anchor,
                **({} if outputs_window is None else {"outputs_window": outputs_window}),
                checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}],
            )
            monitor = create_monitor(session, env.tenant_id, data)
            assert monitor.state == "active", monitor.state  # threshold from the shipped table
            ids.append(monitor.id)
        if start_t:
            from app.models.monitors import Check, Monitor
            from app.stats.aggregator import WeightedAggregator

            rng = np.random.default_rng(7)
            session.flush()
            detector = None
            for check in session.scalars(select(Check)):
                if detector is None:  # one path of z, shared by every check (same horizon, γ, threshold)
                    detector = WeightedAggregator.from_state(check.detector_state)
                    for z in rng.standard_normal(start_t):
                        detector.update(float(z))
                check.detector_state = detector.to_state()
                check.max_statistic = detector.max_statistic
            for monitor in session.scalars(select(Monitor)):
                monitor.t = start_t
        session.commit()
    with engine.begin() as c:
        c.execute(text("ANALYZE"))
    return ids


# ------------------------------------------------------------------------------------ bare sampling


def sampling_client() -> SamplingClient:
    return SamplingClient(http_config=SafeHttpConfig(allow_networks=["127.0.0.0/8"]),
                          config=SamplingClientConfig(deadline_seconds=36.0, max_attempts=4, backoff_initial=0.5))


def endpoint(env: Env, binary: bool) -> MechanismEndpoint:
    return MechanismEndpoint(env.sampling_url, env.secret, "real", max_batch=10_000, timeout_seconds=10,
                             prefer_binary=binary)


async def pair(client: SamplingClient, ep: MechanismEndpoint, n: int, k: int) -> None:
    """The two sampling calls of one period, concurrently (as PeriodRunner.sample does)."""
    a, b = await asyncio.gather(
        client.sample(ep, [0], n, monitor_id="bench", period=k + 1, request_id_prefix=f"bare-{k}-0"),
        client.sample(ep, [1], n, monitor_id="bench", period=k + 1, request_id_prefix=f"bare-{k}-1"),
    )
    assert a.shape == (n,) and b.shape == (n,)


async def bare_sampling(env: Env, binary: bool, n: int, pairs: int, concurrency: int,
                        burst_seconds: float, ref_pid: int) -> dict[str, float]:
    ep = endpoint(env, binary)
    async with sampling_client() as client:
        for k in range(10):  # warm-up: connections, caches
            await pair(client, ep, n, k)
        times = []
        seq_cpu0, seq_ref0 = proc_cpu(os.getpid()), proc_cpu(ref_pid)
        for k in range(pairs):
            t0 = time.perf_counter()
            await pair(client, ep, n, k)
            times.append(time.perf_counter() - t0)
        seq_cpu1, seq_ref1 = proc_cpu(os.getpid()), proc_cpu(ref_pid)
        # Throughput of one process doing nothing but sampling: `concurrency` pairs in flight.
        done = 0
        stop_at = time.perf_counter() + burst_seconds

        async def loop(j: int) -> None:
            nonlocal done
            k = 0
            while time.perf_counter() < stop_at:
                await pair(client, ep, n, 10_000 * j + k)
                k += 1
                done += 1

        t0 = time.perf_counter()
        cpu0, ref0 = proc_cpu(os.getpid()), proc_cpu(ref_pid)
        await asyncio.gather(*(loop(j) for j in range(concurrency)))
        burst_wall = time.perf_counter() - t0
        cpu1, ref1 = proc_cpu(os.getpid()), proc_cpu(ref_pid)
    times.sort()
    return {
        "pair_mean": statistics.fmean(times),
        "pair_median": statistics.median(times),
        "pair_p90": times[int(0.9 * (len(times) - 1))],
        "pairs_per_s": done / burst_wall,
        # the caller's and the endpoint's CPU for one pair: back to back, and with pairs in flight
        "client_cpu_per_pair": (seq_cpu1 - seq_cpu0) / pairs,
        "ref_cpu_per_pair": (seq_ref1 - seq_ref0) / pairs,
        "burst_client_cpu_per_pair": (cpu1 - cpu0) / done,
        "burst_ref_cpu_per_pair": (ref1 - ref0) / done,
    }


# ------------------------------------------------------------------------------------ API poller


API_GRACE_SECONDS = 10.0


async def timed_get(client: httpx.AsyncClient, kind: str, path: str, out: list[tuple[str, float, int]]) -> None:
    """GET ``path`` and record (kind, seconds, status); status 0 for a transport error, and also when the
    request is abandoned (cancelled), with the time it had waited (a lower bound of its latency)."""
    t0 = time.perf_counter()
    status = 0
    try:
        status = (await client.get(path)).status_code
    except httpx.HTTPError:
        pass
    finally:
        out.append((kind, time.perf_counter() - t0, status))


async def open_loop_get(env: Env, rate: float, seconds: float, request: Callable[[int, random.Random], tuple[str, str]],
                        *, seed: int, connections: int = 64, timeout: float = 30.0,
                        grace: float | None = API_GRACE_SECONDS) -> list[tuple[str, float, int]]:
    """Open loop: request i (``request(i, rng)`` → (kind, path)) is sent at start + i/rate whether or not
    earlier ones have answered (no coordinated omission), for ``seconds``.

    Requests still unanswered ``grace`` seconds after the last one was sent are abandoned and recorded
    with status 0 (:func:`timed_get`); ``grace=None`` waits for every answer."""
    headers = {"Authorization": f"Bearer {env.api_key}"}
    out: list[tuple[str, float, int]] = []
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=env.api, headers=headers, trust_env=False, timeout=timeout,
                                 limits=limits) as client:
        tasks = []
        start = time.perf_counter()
        for i in range(int(rate * seconds)):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(timed_get(client, *request(i, rng), out)))
        if grace is None:
            await asyncio.gather(*tasks)
        else:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
    return out


async def poll_api(env: Env, monitor_ids: list[uuid.UUID], rate: float, seconds: float) -> list[tuple[str, float, int]]:
    """:func:`open_loop_get` alternating GET /v1/monitors?limit=50 and GET /v1/monitors/{id}/status."""
    def request(i: int, rng: random.Random) -> tuple[str, str]:
        if i % 2 == 0:
            return "list", "/v1/monitors?limit=50"
        return "status", f"/v1/monitors/{rng.choice(monitor_ids)}/status"

    return await open_loop_get(env, rate, seconds, request, seed=1)


def api_service_times(env: Env, monitor_ids: list[uuid.UUID], repeats: int = 20) -> dict[str, float]:
    """Median latency of each request kind sent one at a time (no queueing): the API's service time."""
    headers = {"Authorization": f"Bearer {env.api_key}"}
    out = {}
    with httpx.Client(base_url=env.api, headers=headers, trust_env=False, timeout=60) as client:
        for kind, path in (("list", "/v1/monitors?limit=50"), ("status", f"/v1/monitors/{monitor_ids[0]}/status")):
            times = []
            for _ in range(repeats + 2):
                t0 = time.perf_counter()
                client.get(path).raise_for_status()
                times.append(time.perf_counter() - t0)
            out[kind] = statistics.median(times[2:])
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


# ------------------------------------------------------------------------------------ one run


@dataclass
class RunResult:
    workers: int
    fmt: str
    window: float
    ok: int
    failed: int
    sampling_mean: float
    sampling_median: float
    sampling_p90: float
    write_gap_mean: float  # finished_at - started_at - sampling_seconds (mean)
    lag_median: float  # started_at - scheduled_for (median): how late periods start
    per_worker: dict[str, int]
    api_p50: float
    api_p99: float
    api_errors: int
    api_by_kind: dict[str, tuple[float, float]]
    api_error_codes: list[int]
    pg_connects: float  # new Postgres connections per second
    cpu: dict[str, float]  # CPU seconds in the window by component

    @property
    def rate(self) -> float:
        return self.ok / self.window


def run_one(env: Env, engine, procs: Procs, args: argparse.Namespace, workers: int, fmt: str) -> RunResult:
    say(f"run: {workers} worker(s), {fmt}: creating {args.monitors} monitors")
    start = datetime.now(UTC) + timedelta(seconds=2)
    monitor_ids = reset_monitors(env, engine, fmt, args.monitors, args.samples, start, not args.no_spread,
                                 args.start_t, args.outputs_window)
    names = [f"worker{i + 1}" for i in range(workers)]
    for name in names:
        procs.start(name, [*DPWATCH, "worker"], {
            **worker_env(env.db_url), "DPWATCH_WORKER_ID": f"bench-{name}",
            "DPWATCH_TICK_SECONDS": str(args.tick), "DPWATCH_LEASE_SECONDS": "60",
            **dict(item.split("=", 1) for item in args.worker_env),
        })
    try:
        say(f"  warm-up {args.warmup:g} s")
        time.sleep(args.warmup)
        procs.check_alive()
        worker_pids = {name: procs.procs[name].pid for name in names}
        pids = {"reference": [procs.procs["reference"].pid], "api": [procs.procs["api"].pid],
                "workers": list(worker_pids.values()), "bench": [os.getpid()],
                "postgres": pg_backends(engine, env.dbname)}
        spy = []
        if args.py_spy:
            for name, pid in worker_pids.items():
                out = pathlib.Path(args.py_spy) / f"{fmt}-{workers}w-{name}"
                spy.append(subprocess.Popen(
                    [PY_SPY, "record", "--pid", str(pid), "--duration", str(int(args.duration)), "--rate", "200",
                     "--format", "raw", "--output", f"{out}.txt", "--nonblocking", *args.py_spy_opts.split()],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        t0 = datetime.now(UTC)
        threads_before = {pid: thread_cpu(pid) for pid in worker_pids.values()}
        postmaster = parent_pid(pids["postgres"][0]) if pids["postgres"] else None
        reaped0 = reaped_children_cpu(postmaster) if postmaster else 0.0
        sessions0 = pg_sessions(engine, env.dbname)
        before = cpu_snapshot([p for group in pids.values() for p in group])
        say(f"  measuring {args.duration:g} s, API polled at {args.api_rate:g} req/s")
        polled: list[list[tuple[str, float, int]]] = []
        poller = threading.Thread(target=lambda: polled.append(
            asyncio.run(poll_api(env, monitor_ids, args.api_rate, args.duration))), daemon=True)
        poller.start()
        remaining = args.duration - (datetime.now(UTC) - t0).total_seconds()
        if remaining > 0:
            time.sleep(remaining)
        t1 = datetime.now(UTC)
        # backends opened during the window count from zero
        pids["postgres"] = sorted(set(pids["postgres"]) | set(pg_backends(engine, env.dbname)))
        after = cpu_snapshot([p for group in pids.values() for p in group])
        loop_cpu, thread_cpu_total = loop_thread_share(list(worker_pids.values()), threads_before)
        reaped1 = reaped_children_cpu(postmaster) if postmaster else 0.0
        sessions1 = pg_sessions(engine, env.dbname)
        poller.join(API_GRACE_SECONDS + 30)
        samples = polled[0] if polled else []
        procs.check_alive()
        for p in spy:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    finally:
        for name in names:
            procs.stop(name)
    window = (t1 - t0).total_seconds()
    cpu = {k: sum(after.by_pid.get(p, 0.0) - before.by_pid.get(p, 0.0) for p in group) for k, group in pids.items()}
    # Backends that ended during the window (pool overflow connections are closed on check-in) are
    # no longer in /proc: count them through the postmaster's reaped-children time (any database).
    cpu["postgres"] += reaped1 - reaped0
    ours = sum(cpu.values())  # before the derived entries below
    cpu["machine"] = after.system - before.system
    cpu["other"] = max(0.0, cpu["machine"] - ours)
    cpu["workers_loop"], cpu["workers_threads"] = loop_cpu, thread_cpu_total

    with engine.connect() as c:
        rows = c.execute(text(
            "SELECT status, sampling_seconds, EXTRACT(EPOCH FROM finished_at - started_at),"
            " EXTRACT(EPOCH FROM started_at - scheduled_for), worker_id"
            " FROM period_runs WHERE finished_at >= :t0 AND finished_at < :t1"), {"t0": t0, "t1": t1}).all()
    ok = [r for r in rows if r[0] == "ok"]
    failed = len(rows) - len(ok)
    sampling = sorted(float(r[1]) for r in ok)
    gaps = [float(r[2]) - float(r[1]) for r in ok]
    lags = [float(r[3]) for r in ok]
    per_worker: dict[str, int] = {}
    for r in ok:
        per_worker[r[4]] = per_worker.get(r[4], 0) + 1
    # every request counts, failed or abandoned ones at the time they had taken
    lat = [s[1] for s in samples]
    by_kind = {kind: (pct([s[1] for s in samples if s[0] == kind], 0.5),
                      pct([s[1] for s in samples if s[0] == kind], 0.99)) for kind in ("list", "status")}
    result = RunResult(
        workers=workers, fmt=fmt, window=window, ok=len(ok), failed=failed,
        sampling_mean=statistics.fmean(sampling) if sampling else float("nan"),
        sampling_median=statistics.median(sampling) if sampling else float("nan"),
        sampling_p90=pct(sampling, 0.9),
        write_gap_mean=statistics.fmean(gaps) if gaps else float("nan"),
        lag_median=statistics.median(lags) if lags else float("nan"),
        per_worker=per_worker, api_p50=pct(lat, 0.5), api_p99=pct(lat, 0.99),
        api_errors=sum(1 for s in samples if s[2] != 200), api_by_kind=by_kind, cpu=cpu,
        api_error_codes=sorted({s[2] for s in samples if s[2] != 200}),
        pg_connects=(sessions1 - sessions0) / window,
    )
    if not result.ok:
        for name in names:
            tail = (procs.log_dir / f"{name}.log").read_text(errors="replace")[-2000:]
            say(f"  no period committed; {name} log tail:\n{tail}")
    say(f"  {result.ok} ok periods in {window:.1f} s = {result.rate:.1f}/s, {failed} failed; "
        f"API p50 {result.api_p50 * 1e3:.1f} ms p99 {result.api_p99 * 1e3:.1f} ms; CPU "
        + ", ".join(f"{k} {v:.1f}s" for k, v in cpu.items()) + f"; per worker {per_worker}")
    return result


# ------------------------------------------------------------------------------------ report


def git_revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "app"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.strip()
        return head + (" + uncommitted changes in app/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"


def print_tables(results: list[RunResult], bare: dict[str, dict[str, float]], idle_api: tuple[float, float],
                 service_times: dict[str, float], args: argparse.Namespace) -> None:
    print()
    print(f"Service throughput: n = {args.samples} outputs per side, {args.monitors} monitors due every second, "
          f"{args.duration:g} s window after {args.warmup:g} s warm-up, tick {args.tick:g} s, "
          f"API polled at {args.api_rate:g} req/s"
          + (f", monitors started at t = {args.start_t}" if args.start_t else "")
          + (f", outputs_window {args.outputs_window}" if args.outputs_window is not None else ""))
    print(f"dpwatch {git_revision()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"API with no worker running: p50/p99 {idle_api[0] * 1e3:.1f}/{idle_api[1] * 1e3:.1f} ms at "
          f"{args.api_rate:g} req/s; one request at a time (median): GET /v1/monitors?limit=50 "
          f"{service_times['list'] * 1e3:.1f} ms, "
          f"GET /v1/monitors/{{id}}/status {service_times['status'] * 1e3:.1f} ms")
    print()
    print("| workers | format | periods/s | failed | sampling s/period in service (mean / median) "
          "| bare pair s (median) | worker CPU ms/period | bare pair caller CPU ms | API p50 ms | API p99 ms |")
    print("|--:|:--|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in results:
        b = bare[r.fmt]
        wcpu = r.cpu["workers"] / r.ok * 1e3 if r.ok else float("nan")
        print(f"| {r.workers} | {r.fmt} | {r.rate:.1f} | {r.failed} | {r.sampling_mean:.4f} / {r.sampling_median:.4f} "
              f"| {b['pair_median']:.4f} | {wcpu:.2f} | {b['client_cpu_per_pair'] * 1e3:.2f} "
              f"| {r.api_p50 * 1e3:.1f} | {r.api_p99 * 1e3:.1f} |")
    print()
    print("Bare sampling (no worker running): one period's two calls (x and x', concurrently), back to back; "
          f"then {args.bare_concurrency} pairs in flight in one process for {args.bare_seconds:g} s")
    print()
    print("| format | pair mean ms | pair median ms | pair p90 ms | caller CPU ms/pair | endpoint CPU ms/pair "
          f"| pairs/s, {args.bare_concurrency} in flight | caller CPU ms/pair, {args.bare_concurrency} in flight |")
    print("|:--|--:|--:|--:|--:|--:|--:|--:|")
    for fmt, b in bare.items():
        print(f"| {fmt} | {b['pair_mean'] * 1e3:.2f} | {b['pair_median'] * 1e3:.2f} | {b['pair_p90'] * 1e3:.2f} "
              f"| {b['client_cpu_per_pair'] * 1e3:.2f} | {b['ref_cpu_per_pair'] * 1e3:.2f} | {b['pairs_per_s']:.0f} "
              f"| {b['burst_client_cpu_per_pair'] * 1e3:.2f} |")
    print()
    print("Where the time goes: CPU ms per committed period, by process (window CPU / ok periods); "
          "machine busy = all CPU used on the box in the window / (window x cores)")
    print()
    print("| workers | format | worker(s) | of which event loop | of which threads (DB) | reference endpoint "
          "| postgres | API | bench (poller) | other processes | machine busy % | start lag median s "
          "| after-sampling s/period | new PG connections/s | periods per worker |")
    print("|--:|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:--|")
    for r in results:
        per = lambda k: r.cpu[k] / r.ok * 1e3 if r.ok else float("nan")  # noqa: E731
        busy = r.cpu["machine"] / (r.window * (os.cpu_count() or 1)) * 100
        split = " / ".join(str(v) for _, v in sorted(r.per_worker.items()))
        print(f"| {r.workers} | {r.fmt} | {per('workers'):.2f} | {per('workers_loop'):.2f} "
              f"| {per('workers_threads'):.2f} "
              f"| {per('reference'):.2f} | {per('postgres'):.2f} "
              f"| {per('api'):.2f} | {per('bench'):.2f} | {per('other'):.2f} | {busy:.0f} "
              f"| {r.lag_median:.3f} | {r.write_gap_mean:.4f} | {r.pg_connects:.1f} | {split} |")
    print()
    print("API latency by request, p50 / p99 ms:")
    for r in results:
        (lp50, lp99), (sp50, sp99) = r.api_by_kind["list"], r.api_by_kind["status"]
        print(f"- {r.workers} worker(s), {r.fmt}: GET /v1/monitors?limit=50 {lp50 * 1e3:.1f} / {lp99 * 1e3:.1f}; "
              f"GET /v1/monitors/{{id}}/status {sp50 * 1e3:.1f} / {sp99 * 1e3:.1f}"
              + (f"; {r.api_errors} errors (status {r.api_error_codes}, 0 = no answer)" if r.api_errors else ""))


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--monitors", type=int, default=300, help="monitors per run (each due once per second)")
    parser.add_argument("--samples", "-n", type=int, default=1000, help="outputs per side and period")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds after the workers start before measuring")
    parser.add_argument("--duration", type=float, default=30.0, help="measurement window, seconds")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--formats", nargs="+", choices=["json", "binary"], default=["json", "binary"])
    parser.add_argument("--tick", type=float, default=0.1, help="DPWATCH_TICK_SECONDS of the workers")
    parser.add_argument("--api-rate", type=float, default=20.0, help="API requests per second while measuring")
    parser.add_argument("--bare-pairs", type=int, default=200, help="back-to-back pairs for the bare sampling cost")
    parser.add_argument("--bare-concurrency", type=int, default=4, help="pairs in flight for bare pairs/s")
    parser.add_argument("--bare-seconds", type=float, default=5.0)
    parser.add_argument("--start-t", type=int, default=0,
                        help="start the monitors mid-horizon, at t = this (detectors with t prefix sums)")
    parser.add_argument("--outputs-window", type=int, default=None,
                        help="monitors' outputs_window (raw outputs kept for MPL snapshots); default: the API's")
    parser.add_argument("--no-spread", action="store_true", help="all monitors due at the same instant")
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432", help="Postgres server URL")
    parser.add_argument("--py-spy", metavar="DIR", help="record each worker with py-spy during the window")
    parser.add_argument("--py-spy-opts", default="", help="extra py-spy record options, e.g. '--gil' or '--idle'")
    parser.add_argument("--worker-env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra environment of the worker processes (experiments; repeatable)")
    parser.add_argument("--keep-logs", action="store_true", help="print the log directory and keep it")
    args = parser.parse_args()

    import logging

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.basicConfig(level=logging.WARNING)
    if args.py_spy:
        if not os.path.exists(PY_SPY):
            parser.error("--py-spy needs py-spy in the venv: .venv/bin/pip install py-spy")
        pathlib.Path(args.py_spy).mkdir(parents=True, exist_ok=True)

    results: list[RunResult] = []
    bare: dict[str, dict[str, float]] = {}
    with bench_service(args, "dpwatch_bench") as (env, engine, procs):
        # Idle API latency (monitors exist, no worker).
        ids = reset_monitors(env, engine, args.formats[0], args.monitors, args.samples,
                             datetime.now(UTC) + timedelta(days=1), True, args.start_t)
        asyncio.run(poll_api(env, ids, args.api_rate, 2.0))  # warm-up
        service_times = api_service_times(env, ids)
        say(f"API one request at a time (median): list {service_times['list'] * 1e3:.1f} ms, "
            f"status {service_times['status'] * 1e3:.1f} ms")
        idle = [s[1] for s in asyncio.run(poll_api(env, ids, args.api_rate, 10.0))]
        idle_api = (pct(idle, 0.5), pct(idle, 0.99))
        say(f"idle API p50 {idle_api[0] * 1e3:.1f} ms, p99 {idle_api[1] * 1e3:.1f} ms")

        for fmt in args.formats:
            bare[fmt] = asyncio.run(bare_sampling(env, fmt == "binary", args.samples, args.bare_pairs,
                                                  args.bare_concurrency, args.bare_seconds,
                                                  procs.procs["reference"].pid))
            say(f"bare sampling {fmt}: pair median {bare[fmt]['pair_median'] * 1e3:.2f} ms, "
                f"{bare[fmt]['pairs_per_s']:.0f} pairs/s in one process")

        for workers in args.workers:
            for fmt in args.formats:
                results.append(run_one(env, engine, procs, args, workers, fmt))
        print_tables(results, bare, idle_api, service_times, args)

if __name__ == "__main__":
    main()
