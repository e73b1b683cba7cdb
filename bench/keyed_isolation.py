"""Keyed isolation: a tenant whose keyed endpoint answers huge key tables beside a healthy tenant,
one `dpwatch worker` process on Postgres.

What runs (all on 127.0.0.1, each a separate process in its own process group):

- a sampling server (this script with ``--serve``): ``/keys`` answers n keyed outputs of
  ``--keys`` keys each, every key distinct within the answer (``"k<i>_<j>": 1.5``), built once
  per n and sent as is (``--keys 500`` at n = 4000: 30 MiB of JSON, x and x′ together inside the
  default 64 MiB period budget; 2 million distinct keys per answer; ``--shared``: the same 500 keys
  in every output); ``/healthy`` answers Laplace samples at once;
- one worker (``python -m app.cli worker``), default settings;
- this script: a fresh Postgres database, two tenants: "hostile" with ``--hostile`` keyed
  monitors on ``/keys`` (n = ``--n`` per side, open keyed shape, one ``key`` event), "healthy"
  with ``--healthy`` real monitors on ``/healthy`` (n = 1000); every period 1 s.

After ``--warmup`` seconds it measures for ``--duration`` seconds, from the database: the healthy
monitors' periods whose slot lies in the window against the slots in the window (periods kept),
the healthy periods' longest and 99th-percentile ``sampling_seconds`` (an event-loop stall of the
worker shows there), the worker's peak RSS (VmHWM) and CPU seconds, and the hostile periods by
status and failure reason. Progress goes to stderr, the table to stdout.

    .venv/bin/python bench/keyed_isolation.py [--hostile 4] [--healthy 4] [--n 4000] [--keys 500] [--shared]
        [--warmup 10] [--duration 60] [--dbname NAME] [--port P]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from datetime import UTC, datetime, timedelta

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from service_harness import (  # noqa: E402
    DPWATCH,
    PG,
    MonitorGroup,
    cpu_seconds,
    create_monitor_groups,
    free_port,
    peak_rss_mb,
    period_outcomes,
    rss_mb,
    say,
    scratch_service,
    wait_port,
    worker_env,
)


def keyed_body(n: int, keys: int, shared: bool = False) -> bytes:
    """n keyed outputs of ``keys`` keys each, every key distinct within the answer (``shared``:
    the same ``keys`` keys in every output)."""
    rows = ("{" + ",".join(f'"k{0 if shared else i}_{j}":1.5' for j in range(keys)) + "}" for i in range(n))
    return ('{"samples":[' + ",".join(rows) + "]}").encode()


def serve(port: int, keys: int, shared: bool) -> None:
    """The sampling server (run in its own process)."""
    import numpy as np
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    rng = np.random.default_rng()
    bodies: dict[int, bytes] = {}

    async def n_of(request: Request) -> int:
        return int(json.loads(await request.body())["n"])

    async def healthy(request: Request) -> Response:
        n = await n_of(request)
        return Response(json.dumps({"samples": rng.laplace(0.0, 1.0, n).tolist()}), media_type="application/json")

    async def keyed(request: Request) -> Response:
        n = await n_of(request)
        if n not in bodies:
            bodies[n] = keyed_body(n, keys, shared)
            print(f"keyed answer for n={n}: {len(bodies[n]) / 2**20:.1f} MiB", file=sys.stderr, flush=True)
        return Response(bodies[n], media_type="application/json")

    app = Starlette(routes=[Route("/healthy", healthy, methods=["POST"]), Route("/keys", keyed, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def setup(db_url: str, base: str, args: argparse.Namespace, secret: str) -> dict[str, list]:
    return create_monitor_groups(db_url, base, secret, [
        MonitorGroup("keys", "hostile", args.hostile, args.n, "keyed", {"kind": "key", "key": "k0_0"}, 60),
        MonitorGroup("healthy", "healthy", args.healthy, timeout_seconds=60)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", type=int, default=4, help="keyed monitors of the hostile tenant")
    parser.add_argument("--healthy", type=int, default=4, help="healthy monitors (period 1 s)")
    parser.add_argument("--n", type=int, default=4000, help="outputs per side of a hostile period")
    parser.add_argument("--keys", type=int, default=500, help="keys per hostile output")
    parser.add_argument("--shared", action="store_true", help="the same keys in every output (else all distinct)")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--pg", default=PG)
    parser.add_argument("--dbname", default=None)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.keys, args.shared)
        return

    from app.sampling.protocol import generate_secret

    port = args.port or free_port()
    secret = generate_secret()
    t_start = time.monotonic()
    load0 = os.getloadavg()
    with scratch_service("keyed-isolation", pg=args.pg, dbname=args.dbname) as run:
        procs = run.procs
        procs.start("endpoints", [sys.executable, __file__, "--serve", str(port), "--keys", str(args.keys),
                                  *(["--shared"] if args.shared else [])],
                    {"PYTHONUNBUFFERED": "1"})
        wait_port(port, 60, procs)
        groups = setup(run.db_url, f"http://127.0.0.1:{port}", args, secret)
        worker = procs.start("worker", [*DPWATCH, "worker"], worker_env(run.db_url) | {"DPWATCH_WORKER_ID": "keyed-1"})
        say(f"worker started; warm-up {args.warmup:g} s (logs in {run.log_dir})")
        peak = 0.0

        last_said = time.monotonic()

        def watch(seconds: float) -> None:
            nonlocal peak, last_said
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                procs.check_alive()
                peak = max(peak, peak_rss_mb(worker.pid))
                if time.monotonic() - last_said >= 10:
                    say(f"worker RSS {rss_mb(worker.pid):.0f} MB, peak {peak:.0f} MB, CPU {cpu_seconds(worker.pid):.0f} s")
                    last_said = time.monotonic()
                time.sleep(0.5)

        watch(args.warmup)
        w0 = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        cpu0 = cpu_seconds(worker.pid)
        watch((w0 - datetime.now(UTC)).total_seconds() + args.duration)
        cpu1 = cpu_seconds(worker.pid)
        w1 = w0 + timedelta(seconds=int(args.duration))
        watch(5.0)
        r = period_outcomes(run.db_url, groups, w0, w1, ("keys",))
    load1 = os.getloadavg()
    print(f"\nKeyed isolation: 1 worker, {args.hostile} keyed monitors (n = {args.n}, {args.keys} "
          f"{'shared' if args.shared else 'distinct'} keys per output), {args.healthy} healthy monitors; window {args.duration:g} s after {args.warmup:g} s; "
          f"wall {time.monotonic() - t_start:.0f} s, load {load0[0]:.1f} -> {load1[0]:.1f}\n")
    print("| measure | value | goal |")
    print("|---|---:|---|")
    print(f"| healthy periods kept | {r['kept']}/{r['expected']} = {r['kept'] / r['expected']:.1%} | ≥ 95% |")
    print(f"| healthy periods failed | {r['healthy_failed']} | 0 |")
    print(f"| healthy sampling_seconds p99 / max | {r['p99_s']:.2f} / {r['max_s']:.2f} s | |")
    print(f"| worker peak RSS | {peak:.0f} MB | < 1024 MB |")
    print(f"| worker CPU in the window | {cpu1 - cpu0:.0f} s of {args.duration:g} s | |")
    counts = ", ".join(f"{k}: {v}" for k, v in r["reasons"]["keys"].most_common()) or "none"
    print(f"| keyed monitors' periods (whole run) | {counts} | |")
    for detail, count in r["details"]["keys"].most_common(3):
        print(f"| keyed failure ({count}) | {detail} | |")


if __name__ == "__main__":
    main()
