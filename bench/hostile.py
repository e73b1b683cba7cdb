"""Hostile tenants beside a healthy one: one worker on Postgres, measured.

What runs, all on 127.0.0.1:

- a *sampling* server (this script with ``--serve-sampling``, tests/hostile_servers.RawServer: one
  host and port for every tenant, as a shared host or a reverse proxy would be):
  ``/flood`` answers 60 MiB of valid ``{"samples":[{},{},…]}``; ``/zeros`` 60 MiB of ``0,0,…``;
  ``/smuggle`` a valid answer followed by a second, complete HTTP response holding 666.0s;
  ``/hang`` answers after ``--hang`` seconds; ``/unavailable`` answers 503; ``/victim`` and
  ``/healthy`` answer honest Laplace samples;
- a *webhook* server (``--serve-hooks``): ``/bomb`` replies 500 with ``Content-Encoding: gzip,
  gzip`` (1 GiB of zeros in ~1 KB), ``/bomb20`` the same with 65 KB bodies, ``/slow`` replies
  after 9.5 s, ``/fast`` at once and records when each message arrived;
- **the worker, in this process** (``app.scheduler.worker.Worker``, default settings except
  ``--max-in-flight``; start-up's objects frozen as ``dpwatch worker`` does), with an event-loop probe: a task that sleeps 10 ms and records how late it
  wakes (wall clock) and how much CPU the loop's thread spent meanwhile (``time.thread_time``:
  the stall the loop would show on an idle machine). ``SamplingClient.sample`` is wrapped to
  count, per monitor, answers holding 666.0 (an injected answer);
- tenants: "flooder" (2 monitors on /flood, 1 on /zeros), "smuggler" (2 on /smuggle), "hanger"
  (4 on /hang, 1 on /unavailable), "victim" (``--victims`` monitors on /victim) and "healthy"
  (4 on /healthy); every monitor has a period of 1 s and n = 1000. Webhooks: the hostile tenant's
  receivers get 20 bomb messages each and 150 slow ones, queued before the worker starts; the
  healthy tenant's fast receiver gets ``--fast`` messages queued one by one during the window,
  while the slow receiver's backlog is being delivered, and the bench records how long each took
  from queued to received.

After ``--warmup`` s it measures for ``--duration`` s. Progress on stderr, the table on stdout.

    .venv/bin/python bench/hostile.py [--duration 120] [--victims 10] [--max-in-flight 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from service_harness import free_port, say  # noqa: E402

INJECTED = 666.0
FLOOD_BYTES = 60 << 20


def peak_rss_mb(pid: int | None = None) -> float:
    """VmHWM (peak resident set) in MB."""
    path = pathlib.Path(f"/proc/{pid or 'self'}/status")
    for line in path.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


# ------------------------------------------------------------------------------------ the servers


def serve_sampling(port: int, hang: float) -> None:
    import numpy as np

    from tests.support.hostile_servers import RawReply, json_flood, response

    rng = np.random.default_rng()
    flood = response(json_flood(FLOOD_BYTES), chunk=1 << 16)
    zeros = response(b'{"samples":[' + b",".join([b"0"] * (FLOOD_BYTES // 2)) + b"]}", chunk=1 << 16)

    def samples(n: int, value: float | None = None) -> bytes:
        values = [value] * n if value is not None else rng.laplace(0.0, 1.0, n).tolist()
        return response(json.dumps({"samples": values}).encode())

    async def handler(request):  # noqa: ANN001, ANN202
        n = request.json()["n"]
        if request.path == "/flood":
            return RawReply([flood])
        if request.path == "/zeros":
            return RawReply([zeros])
        if request.path == "/smuggle":
            return RawReply([samples(n) + samples(n, INJECTED)])
        if request.path == "/hang":
            return RawReply([samples(n)], hang=hang)
        if request.path == "/unavailable":
            return RawReply([response(b'{"detail":"down"}', status=503)])
        return RawReply([samples(n)])

    _run_forever(handler, port)


def serve_hooks(port: int, arrivals: str) -> None:
    from tests.support.hostile_servers import RawReply, gzip_bomb, response

    bomb = response(gzip_bomb(1 << 30, layers=2), status=500, headers={"content-encoding": "gzip, gzip"})
    bomb65 = response(gzip_bomb(64 << 20, layers=1)[: 65 * 1024], status=500, headers={"content-encoding": "gzip"})
    say(f"webhook bomb: {len(bomb)} bytes on the wire for 1 GiB")
    log = open(arrivals, "a")  # noqa: SIM115 - closed with the process

    async def handler(request):  # noqa: ANN001, ANN202
        if request.path == "/bomb":
            return RawReply([bomb])
        if request.path == "/bomb20":
            return RawReply([bomb65])
        if request.path == "/slow":
            await asyncio.sleep(9.5)
        elif request.path == "/fast":
            log.write(json.dumps({"id": request.headers.get("webhook-id"), "at": time.time()}) + "\n")
            log.flush()
        return RawReply([response(b"", status=204)])

    _run_forever(handler, port)


def _run_forever(handler, port: int) -> None:  # noqa: ANN001
    from tests.support import hostile_servers

    async def main() -> None:
        server = hostile_servers.RawServer(handler)

        async def serve(reader, writer):  # noqa: ANN001, ANN202
            await server._serve(reader, writer)

        listener = await asyncio.start_server(serve, "127.0.0.1", port, backlog=1024)
        async with listener:
            await listener.serve_forever()

    asyncio.run(main())


# ------------------------------------------------------------------------------------ set-up


MONITORS = [  # (tenant, path, count)
    ("flooder", "flood", 2), ("flooder", "zeros", 1), ("smuggler", "smuggle", 2),
    ("hanger", "hang", 4), ("hanger", "unavailable", 1), ("healthy", "healthy", 4),
]


def setup(db_url: str, sampling: str, hooks: str, victims: int, fast: int, secret: str) -> dict[str, list]:
    from app.auth.service import create_tenant
    from app.db import make_engine, make_session_factory, utcnow
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism
    from app.models.alarms import Webhook, WebhookMessage
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor
    from app.sampling.protocol import generate_secret

    engine = make_engine(db_url)
    groups: dict[str, list] = {}
    start = datetime.now(UTC) + timedelta(seconds=3)
    with make_session_factory(engine)() as session:
        tenants = {name: create_tenant(session, name) for name in ("flooder", "smuggler", "hanger", "victim", "healthy")}
        session.flush()
        for tenant, path, count in [*MONITORS, ("victim", "victim", victims)]:
            mechanism = build_mechanism(tenants[tenant].id, MechanismCreate(
                name=path, sampling_url=f"{sampling}/{path}", output_kind="real", secret=secret, timeout_seconds=20))
            session.add(mechanism)
            session.flush()
            for i in range(count):
                monitor = create_monitor(session, tenants[tenant].id, MonitorCreate(
                    name=f"{path}-{i}", mechanism_id=mechanism.id, epsilon=1.0, horizon=10_000,
                    samples_per_period=1000, period_seconds=1, start_at=start + timedelta(seconds=i / max(count, 1)),
                    checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}]))
                groups.setdefault(path, []).append(monitor.id)
        now = utcnow()
        plan = [("flooder", "bomb", 20), ("flooder", "bomb20", 20), ("hanger", "slow", 150), ("healthy", "fast", 0)]
        for tenant, path, count in plan:
            hook = Webhook(tenant_id=tenants[tenant].id, url=f"{hooks}/{path}", event_types=["webhook.test"],
                           secret=generate_secret())
            session.add(hook)
            session.flush()
            groups[f"webhook:{path}"] = [(tenants[tenant].id, hook.id)]
            for i in range(count):
                # queued in this order: the fast receiver's messages come last
                at = now + timedelta(milliseconds=len(groups.get("messages", [])))
                message = WebhookMessage(tenant_id=tenants[tenant].id, webhook_id=hook.id, event_type="webhook.test",
                                         payload={"type": "webhook.test", "data": {"i": i, "to": path}},
                                         created_at=at, next_attempt_at=at)
                session.add(message)
                session.flush()
                groups.setdefault("messages", []).append(message.id)
                groups.setdefault(f"hook:{path}", []).append(message.id)
        session.commit()
    engine.dispose()
    return groups


# ------------------------------------------------------------------------------------ the worker


class GcPauses:
    """The longest pause of each generation of the cyclic garbage collector (it runs on whatever
    thread allocates, here mostly the loop's)."""

    def __init__(self) -> None:
        self.longest = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._t0 = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            if info["generation"] == 2 and os.environ.get("HOSTILE_GC_CENSUS"):  # what a full collection scans
                from collections import Counter as _Counter

                objs = gc.get_objects(generation=2)
                self.census = getattr(self, "census", [])
                top = _Counter(type(o).__name__ for o in objs).most_common(8)
                self.census.append((len(objs), top))
                print(f"[gc2] {len(objs)} objects in gen 2: {top}", file=sys.stderr, flush=True)
                del objs
            self._t0 = time.perf_counter()
        else:
            g = info["generation"]
            self.count[g] += 1
            self.longest[g] = max(self.longest[g], time.perf_counter() - self._t0)


class LoopProbe:
    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.beat = time.perf_counter()
        self.started_at = 0

    async def run(self) -> None:
        while True:
            w0, c0 = time.perf_counter(), time.thread_time()
            self.beat = w0
            await asyncio.sleep(0.01)
            self.wall.append(time.perf_counter() - w0 - 0.01)
            self.cpu.append(time.thread_time() - c0)


class Watchdog:
    """``--watchdog``: a thread that, whenever the loop is 100 ms late, samples what the loop's
    thread is running (its innermost frames in dpwatch's code), to name what stalls it."""

    def __init__(self, probe: LoopProbe, thread_id: int) -> None:
        import threading

        self.probe, self.thread_id = probe, thread_id
        self.seen: Counter = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import traceback

        while not self._stop.wait(0.02):
            if time.perf_counter() - self.probe.beat < 0.1:
                continue
            frame = sys._current_frames().get(self.thread_id)
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)
            ours = [f"{pathlib.Path(f.filename).name}:{f.lineno} {f.name}" for f in stack
                    if "/app/" in f.filename or "site-packages" in f.filename][-4:]
            self.seen[" <- ".join(reversed(ours))] += 1

    def stop(self) -> None:
        self._stop.set()
        for stack, count in self.seen.most_common(12):
            print(f"[watchdog] {count:4d}  {stack}", file=sys.stderr)


async def run_worker(db_url: str, args: argparse.Namespace, groups: dict[str, list], injected: Counter,
                     answers: Counter) -> tuple[LoopProbe, float]:
    from app.db import make_engine, make_session_factory
    from app.sampling import client as sampling_client
    from app.scheduler.worker import Worker
    from app.settings import Settings

    original = sampling_client.SamplingClient.sample

    async def counted(self, mechanism, database, n, *, monitor_id, **kwargs):  # noqa: ANN001, ANN003, ANN202
        out = await original(self, mechanism, database, n, monitor_id=monitor_id, **kwargs)
        answers[monitor_id] += 1
        if getattr(out, "dtype", None) is not None and out.dtype.kind == "f" and (out == INJECTED).any():
            injected[monitor_id] += 1
        return out

    sampling_client.SamplingClient.sample = counted  # type: ignore[method-assign]
    settings = Settings(_env_file=None, database_url=db_url, allow_networks=["127.0.0.0/8"],  # type: ignore[call-arg]
                        migrate_on_start=False, log_level="WARNING", worker_id="hostile-bench",
                        max_in_flight=args.max_in_flight)
    engine = make_engine(db_url)
    worker = Worker(settings, make_session_factory(engine))
    probe = LoopProbe()
    probe.gc = GcPauses()
    if args.debug_slow:  # asyncio names every callback that ran longer than 50 ms
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = 0.05
        logging.getLogger("asyncio").setLevel(logging.WARNING)
    probe_task = asyncio.create_task(probe.run())
    import threading

    watchdog = Watchdog(probe, threading.get_ident()) if args.watchdog else None
    await worker.start()
    if not args.no_gc_freeze:  # as `dpwatch worker` and `dpwatch serve` do once started
        from app.observability import freeze_startup_objects, freeze_warm_objects_later

        freeze_startup_objects()  # its gc.collect() is start-up work: one full collection of everything
        freeze_warm_objects_later(args.warm_freeze)
    await asyncio.sleep(0.1)  # the probe's first turns hold the start-up work
    # Start-up (imports, TLS context, the start-up freeze's full collection) is reported apart.
    probe.started_at = len(probe.cpu)
    probe.gc.longest, probe.gc.count = [0.0, 0.0, 0.0], [0, 0, 0]
    started = time.monotonic()

    def queue_fast(i: int) -> str:
        """One message to the healthy tenant's receiver, due now."""
        from app.db import utcnow
        from app.models.alarms import WebhookMessage

        tenant_id, hook_id = groups["webhook:fast"][0]
        with make_session_factory(engine)() as session:
            now = utcnow()
            message = WebhookMessage(tenant_id=tenant_id, webhook_id=hook_id, event_type="webhook.test",
                                     payload={"type": "webhook.test", "data": {"i": i}}, created_at=now,
                                     next_attempt_at=now)
            session.add(message)
            session.commit()
            return message.id

    try:
        await asyncio.sleep(args.warmup)
        for i in range(args.fast):  # while the slow receiver's backlog is being delivered
            groups.setdefault("hook:fast", []).append(await asyncio.to_thread(queue_fast, i))
            await asyncio.sleep(max(0.0, args.duration - 5) / max(args.fast, 1))
        await asyncio.sleep(max(0.0, args.warmup + args.duration + 3 - (time.monotonic() - started)))
    finally:
        await worker.stop()
        probe_task.cancel()
        if watchdog is not None:
            watchdog.stop()
        engine.dispose()
    return probe, time.monotonic() - started


# ------------------------------------------------------------------------------------ measures


def measure(db_url: str, groups: dict[str, list], w0: datetime, w1: datetime, arrivals: pathlib.Path) -> dict:
    from sqlalchemy import select

    from app.db import make_engine, make_session_factory
    from app.models.alarms import WebhookAttempt, WebhookMessage
    from app.models.monitors import PeriodRun

    engine = make_engine(db_url)
    with make_session_factory(engine)() as session:
        runs = session.execute(select(PeriodRun.monitor_id, PeriodRun.status, PeriodRun.failure_reason,
                                      PeriodRun.scheduled_for)).all()
        messages = {m.id: m for m in session.scalars(select(WebhookMessage))}
        attempts = Counter(a.message_id for a in session.scalars(select(WebhookAttempt)))
    engine.dispose()
    out: dict = {"reasons": {}, "kept": {}}
    for path, ids in groups.items():
        if path.startswith(("hook:", "webhook:")) or path == "messages":
            continue
        ids = set(ids)
        out["reasons"][path] = Counter(r.status if r.status == "ok" else r.failure_reason
                                       for r in runs if r.monitor_id in ids)
        kept = sum(1 for r in runs if r.monitor_id in ids and r.status == "ok" and w0 <= r.scheduled_for < w1)
        out["kept"][path] = (kept, len(ids) * int((w1 - w0).total_seconds()))
    seen = {}
    if arrivals.exists():
        for line in arrivals.read_text().splitlines():
            item = json.loads(line)
            seen.setdefault(item["id"], item["at"])
    fast = groups.get("hook:fast", [])
    waits = sorted(seen[m] - messages[m].created_at.timestamp() for m in fast if m in seen)
    out["fast"] = {"delivered": len(waits), "queued": len(fast), "waits": waits}
    slow = groups.get("hook:slow", [])
    out["slow_delivered"] = sum(1 for m in slow if messages[m].status == "delivered")
    out["bomb_attempts"] = sum(attempts[m] for m in groups.get("hook:bomb", []) + groups.get("hook:bomb20", []))
    return out


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--victims", type=int, default=10, help="honest monitors beside the smuggler (period 1 s)")
    parser.add_argument("--fast", type=int, default=20,
                        help="messages to the healthy tenant's receiver, queued one by one during the window")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=100.0)
    parser.add_argument("--hang", type=float, default=20.0, help="seconds /hang takes")
    parser.add_argument("--max-in-flight", type=int, default=16, help="the worker's DPWATCH_MAX_IN_FLIGHT")
    parser.add_argument("--no-gc-freeze", action="store_true",
                        help="do not freeze start-up's objects (app.observability.freeze_startup_objects)")
    parser.add_argument("--warm-freeze", type=float, default=60.0,
                        help="seconds after start of the second freeze (app.observability.freeze_warm_objects_later)")
    parser.add_argument("--watchdog", action="store_true", help="name what runs when the loop is 100 ms late")
    parser.add_argument("--debug-slow", action="store_true", help="log every loop callback longer than 50 ms")
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    parser.add_argument("--db", default="dpwatch_bench_hostile")
    parser.add_argument("--port-base", type=int, default=None, help="sampling server on this port, hooks on the next")
    parser.add_argument("--serve-sampling", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-hooks", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--arrivals", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sampling:
        serve_sampling(args.serve_sampling, args.hang)
        return
    if args.serve_hooks:
        serve_hooks(args.serve_hooks, args.arrivals)
        return

    import structlog
    from sqlalchemy import create_engine, text

    from app.db import run_migrations
    from app.sampling.protocol import generate_secret

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    logging.basicConfig(level=logging.ERROR)
    db_url = f"{args.pg}/{args.db}"
    admin = create_engine(f"{args.pg}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)'))
        c.execute(text(f'CREATE DATABASE "{args.db}"'))
    log_dir = pathlib.Path(tempfile.mkdtemp(prefix="dpwatch-hostile-"))
    arrivals = log_dir / "arrivals.jsonl"
    procs: list[subprocess.Popen[bytes]] = []
    sampling_port, hooks_port = ((args.port_base, args.port_base + 1) if args.port_base
                                 else (free_port(), free_port()))
    try:
        run_migrations(db_url)
        for flag, port, extra in (("--serve-sampling", sampling_port, []),
                                  ("--serve-hooks", hooks_port, ["--arrivals", str(arrivals)])):
            out = open(log_dir / f"{flag[2:]}.log", "wb")  # noqa: SIM115
            procs.append(subprocess.Popen([sys.executable, __file__, flag, str(port), "--hang", str(args.hang), *extra],
                                          stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
                                          env={**os.environ, "PYTHONUNBUFFERED": "1"}))
        for port in (sampling_port, hooks_port):
            deadline = time.monotonic() + 120
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"port {port} did not open (logs in {log_dir})")
                time.sleep(0.2)
        groups = setup(db_url, f"http://127.0.0.1:{sampling_port}", f"http://127.0.0.1:{hooks_port}",
                       args.victims, args.fast, generate_secret())
        say(f"servers up, {sum(len(v) for k, v in groups.items() if not k.startswith(('hook', 'webhook')) and k != 'messages')} "
            f"monitors; worker runs {args.warmup + args.duration:g} s (logs in {log_dir})")
        rss_before = peak_rss_mb()
        injected: Counter = Counter()
        answers: Counter = Counter()
        w0 = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=int(args.warmup) + 1)
        w1 = w0 + timedelta(seconds=int(args.duration))
        probe, ran = asyncio.run(run_worker(db_url, args, groups, injected, answers))
        rss = peak_rss_mb()
        result = measure(db_url, groups, w0, w1, arrivals)
        victims = {str(m) for m in groups["victim"]}
        smugglers = {str(m) for m in groups["smuggle"]}
        result["injected_victims"] = sum(injected[m] for m in victims)
        result["injected_smuggler"] = sum(injected[m] for m in smugglers)
        result["victim_answers"] = sum(answers[m] for m in victims)
        print_table(args, result, probe, rss, rss_before, ran)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        admin.dispose()


def print_table(args: argparse.Namespace, r: dict, probe: LoopProbe, rss: float, rss_before: float, ran: float) -> None:
    load = os.getloadavg()
    print(f"\nHostile tenants, one worker in process (max_in_flight {args.max_in_flight}"
          f"{', without freeze_startup_objects()' if args.no_gc_freeze else ''}), {ran:.0f} s; "
          f"window {args.duration:g} s after {args.warmup:g} s; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")
    print("| measure | value | goal |")
    print("|---|---:|---|")
    print(f"| worker peak RSS (VmHWM of the process) | {rss:.0f} MB (before the worker: {rss_before:.0f} MB) | < 1024 MB |")
    cpu, wall = probe.cpu[probe.started_at:], probe.wall[probe.started_at:]
    print(f"| event loop: longest CPU stretch between two 10 ms sleeps, running | {max(cpu) * 1000:.0f} ms "
          f"(p99 {quantile(cpu, 0.99) * 1000:.1f} ms, {len(cpu)} turns) | < 100 ms |")
    print(f"| the same during the worker's start-up (imports, TLS context, the start-up freeze's collection) | "
          f"{max(probe.cpu[:probe.started_at], default=0) * 1000:.0f} ms | |")
    gcp = probe.gc
    print(f"| garbage collector: longest pause of generation 0 / 1 / 2 (count) | "
          f"{gcp.longest[0] * 1000:.0f} / {gcp.longest[1] * 1000:.0f} / {gcp.longest[2] * 1000:.0f} ms "
          f"({gcp.count[0]} / {gcp.count[1]} / {gcp.count[2]}) | |")
    print(f"| event loop: wall-clock lag, running, max / p99 / p50 | {max(wall) * 1000:.0f} / "
          f"{quantile(wall, 0.99) * 1000:.0f} / {quantile(wall, 0.5) * 1000:.1f} ms | (machine load) |")
    print(f"| victims' answers holding injected samples | {r['injected_victims']} of {r['victim_answers']} "
          f"answers ({sum(r['reasons']['victim'].values())} periods) | 0 in ≥ 1000 periods |")
    print(f"| the smuggler's own answers holding injected samples | {r['injected_smuggler']} | 0 |")
    waits = r["fast"]["waits"]
    print(f"| healthy tenant's webhooks delivered / queued | {r['fast']['delivered']} / {r['fast']['queued']} | all |")
    print(f"| their wait from queued to received, max / median | {max(waits, default=float('nan')):.2f} / "
          f"{quantile(waits, 0.5):.2f} s | never behind the 9.5 s receiver (ticks: 1 s) |")
    print(f"| slow receiver's messages delivered (150 queued, 9.5 s each) | {r['slow_delivered']} | (2 at a time) |")
    print(f"| bomb receivers' attempts (40 messages, 500 each time) | {r['bomb_attempts']} | |")
    for path in ("healthy", "victim"):
        kept, expected = r["kept"][path]
        print(f"| {path} periods kept in the window (item 4's measure) | {kept}/{expected} = "
              f"{kept / max(expected, 1):.1%} | ≥ 90% |")
    for path in ("flood", "zeros", "smuggle", "hang", "unavailable"):
        counts = ", ".join(f"{k}: {v}" for k, v in r["reasons"][path].most_common()) or "none"
        print(f"| /{path} periods | {counts} | |")


if __name__ == "__main__":
    main()
