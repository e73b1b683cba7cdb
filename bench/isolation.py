"""Isolation: a hostile tenant beside a healthy one, two `dpwatch worker` processes on Postgres.

What runs (all on 127.0.0.1, each a separate process in its own process group):

- a hostile/healthy sampling server (this script with ``--serve``), three endpoints:
  ``/sleep`` answers valid samples after ``--sleep`` seconds (20 by default);
  ``/bomb`` answers 100 MB of JSON gzip-compressed (``Content-Encoding: gzip``, about 150 KB on
  the wire), although dpwatch asks for ``identity``;
  ``/healthy`` answers Laplace samples at once;
- 2 workers (``python -m app.cli worker``), with the default settings unless ``--no-caps``
  (``DPWATCH_MAX_INFLIGHT_PER_TENANT=0`` and ``..._PER_MECHANISM=0``: no fair claims);
- this script: a fresh Postgres database, two tenants: "hostile" with 16 monitors on ``/sleep``
  and 8 on ``/bomb``, "healthy" with ``--healthy`` monitors on ``/healthy``; every monitor has a
  period of 1 s, n = 1000 per side, one check.

After ``--warmup`` seconds it measures for ``--duration`` seconds, from the database: the healthy
monitors' periods whose slot lies in the window, against the slots in the window (periods kept);
the workers' peak RSS (VmHWM in /proc, over the whole run); the hostile monitors' periods by
status and failure reason (whole run). Progress goes to stderr, the table to stdout.

    .venv/bin/python bench/isolation.py [--healthy 8] [--warmup 10] [--duration 40] [--sleep 20] [--no-caps]
        [--workers 2] [--dbname NAME] [--port P]
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import sys
import time
from datetime import UTC, datetime, timedelta

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from service_harness import (  # noqa: E402
    DPWATCH,
    PG,
    MonitorGroup,
    create_monitor_groups,
    free_port,
    peak_rss_mb,
    period_outcomes,
    say,
    scratch_service,
    wait_port,
    worker_env,
)

BOMB_BYTES = 100 * 1024 * 1024


# ------------------------------------------------------------------------------------ the endpoints


def serve(port: int, sleep: float) -> None:
    """The sampling server (run in its own process)."""
    import asyncio

    import numpy as np
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    chunk = b"0.0, " * (1024 * 1024 // 5)
    body = [b'{"samples": [']
    body += [chunk] * (BOMB_BYTES // len(chunk))
    body.append(b"0.0]}")
    bomb_body = gzip.compress(b"".join(body), compresslevel=9)
    print(f"bomb: {BOMB_BYTES} bytes of JSON, {len(bomb_body)} bytes gzipped", file=sys.stderr, flush=True)
    rng = np.random.default_rng()

    async def n_of(request: Request) -> int:
        return int(json.loads(await request.body())["n"])

    def samples(n: int) -> Response:
        return Response(json.dumps({"samples": rng.laplace(0.0, 1.0, n).tolist()}), media_type="application/json")

    async def healthy(request: Request) -> Response:
        return samples(await n_of(request))

    async def sleeping(request: Request) -> Response:
        n = await n_of(request)
        await asyncio.sleep(sleep)
        return samples(n)

    async def bomb(request: Request) -> Response:
        await n_of(request)
        return Response(bomb_body, media_type="application/json", headers={"content-encoding": "gzip"})

    app = Starlette(routes=[Route("/healthy", healthy, methods=["POST"]), Route("/sleep", sleeping, methods=["POST"]),
                            Route("/bomb", bomb, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ------------------------------------------------------------------------------------ set-up


def setup(db_url: str, base: str, healthy_count: int, secret: str) -> dict[str, list]:
    return create_monitor_groups(db_url, base, secret, [
        MonitorGroup("sleep", "hostile", 16), MonitorGroup("bomb", "hostile", 8),
        MonitorGroup("healthy", "healthy", healthy_count)])


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--healthy", type=int, default=8, help="healthy monitors (period 1 s)")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--sleep", type=float, default=20.0, help="seconds the sleeping endpoint takes")
    parser.add_argument("--no-caps", action="store_true", help="workers without fair claims (caps 0)")
    parser.add_argument("--pg", default=PG)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (1 or 2)")
    parser.add_argument("--dbname", default=None, help="database to create and drop (default: a random name)")
    parser.add_argument("--port", type=int, default=None, help="port of the sampling server (default: a free one)")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.sleep)
        return

    from app.sampling.protocol import generate_secret

    port = args.port or free_port()
    secret = generate_secret()
    with scratch_service("isolation", pg=args.pg, dbname=args.dbname) as run:
        db_url, procs = run.db_url, run.procs
        say(f"sampling server on :{port} (logs in {run.log_dir})")
        procs.start("endpoints", [sys.executable, __file__, "--serve", str(port), "--sleep", str(args.sleep)],
                    {"PYTHONUNBUFFERED": "1"})
        wait_port(port, 60, procs)
        groups = setup(db_url, f"http://127.0.0.1:{port}", args.healthy, secret)
        env = worker_env(db_url)
        if args.no_caps:
            env |= {"DPWATCH_MAX_INFLIGHT_PER_TENANT": "0", "DPWATCH_MAX_INFLIGHT_PER_MECHANISM": "0"}
        workers = [procs.start(f"worker-{i}", [*DPWATCH, "worker"], env | {"DPWATCH_WORKER_ID": f"iso-{i}"})
                   for i in range(1, args.workers + 1)]
        say(f"{args.workers} worker(s) started ({'no caps' if args.no_caps else 'default caps'}); warm-up {args.warmup:g} s")
        peak = {w.pid: 0.0 for w in workers}

        def watch(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                procs.check_alive()
                for w in workers:
                    peak[w.pid] = max(peak[w.pid], peak_rss_mb(w.pid))
                time.sleep(0.5)

        watch(args.warmup)
        w0 = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        watch((w0 - datetime.now(UTC)).total_seconds() + args.duration)
        w1 = w0 + timedelta(seconds=int(args.duration))
        watch(3.0)  # periods of the window's last slots finish
        result = period_outcomes(db_url, groups, w0, w1, ("sleep", "bomb"))
        print_table(args, result, peak)


def print_table(args: argparse.Namespace, r: dict, peak: dict[int, float]) -> None:
    kept, expected = r["kept"], r["expected"]
    print(f"\nIsolation, {'no caps' if args.no_caps else 'default caps (6 per tenant, 4 per mechanism)'}: "
          f"{args.workers} worker(s), {args.healthy} healthy monitors, 16 sleeping ({args.sleep:g} s), 8 gzip bombs, "
          f"window {args.duration:g} s after {args.warmup:g} s\n")
    print("| measure | value | goal |")
    print("|---|---:|---|")
    print(f"| healthy periods kept | {kept}/{expected} = {kept / expected:.1%} | ≥ 90% |")
    print(f"| worst healthy monitor | {r['worst_monitor']}/{r['per_monitor_expected']} | |")
    print(f"| healthy periods failed | {r['healthy_failed']} | 0 |")
    print(f"| worker peak RSS | {', '.join(f'{v:.0f} MB' for v in peak.values())} | < 1024 MB |")
    for path, label in (("sleep", "sleeping monitors' periods"), ("bomb", "gzip-bomb monitors' periods")):
        counts = ", ".join(f"{k}: {v}" for k, v in r["reasons"][path].most_common()) or "none"
        print(f"| {label} | {counts} | |")


if __name__ == "__main__":
    main()
