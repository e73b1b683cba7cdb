"""Snapshots in turns: one tenant's scheduled MPL snapshots beside another tenant's alarm, one
`dpwatch worker` process on Postgres.

What runs (all on 127.0.0.1, each a separate process in its own process group):

- a sampling server (this script with ``--serve``): ``/laplace`` answers Laplace(0, 1) samples;
  ``/leaky`` answers Laplace(0, 1) on x = [0] and Laplace(5, 1) on any other database (a claim of
  ε = 1 that the event "output ≤ 0" refutes within a few periods);
- one worker (``python -m app.cli worker``), default settings;
- this script: a fresh Postgres database, two tenants: "flooding" with ``--flood`` monitors on
  ``/laplace`` that take a scheduled MPL snapshot every period (``snapshot_every: 1``, period 1 s,
  n = 1000); "alarmed" with one monitor on ``/leaky`` (period 1 s, n = 1000, its alarm's snapshot
  draws ``--alarm-samples`` fresh outputs per database), created ``--delay`` seconds later.

It waits for the alarmed tenant's alarm and then for its snapshot to end (at most ``--timeout``
seconds), and reports: the seconds from the alarm to its snapshot's end (the alarm's webhooks wait
for it), the snapshots queued then, and the flooding tenant's snapshots done meanwhile.

    .venv/bin/python bench/snapshot_fairness.py [--flood 10] [--delay 20] [--alarm-samples 2000] [--timeout 120]
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

from service_harness import DPWATCH, PG, free_port, say, scratch_service, wait_port, worker_env  # noqa: E402


def serve(port: int) -> None:
    import numpy as np
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    rng = np.random.default_rng()

    async def laplace(request: Request) -> Response:
        n = int(json.loads(await request.body())["n"])
        return Response(json.dumps({"samples": rng.laplace(0.0, 1.0, n).tolist()}), media_type="application/json")

    async def leaky(request: Request) -> Response:
        body = json.loads(await request.body())
        shift = 0.0 if body["database"] == [0] else 5.0
        return Response(json.dumps({"samples": rng.laplace(shift, 1.0, int(body["n"])).tolist()}),
                        media_type="application/json")

    app = Starlette(routes=[Route("/laplace", laplace, methods=["POST"]), Route("/leaky", leaky, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def add_tenant(db_url: str, name: str, url: str, secret: str, count: int, **monitor: object) -> list:
    from app.auth.service import create_tenant
    from app.db import make_engine, make_session_factory
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor

    engine = make_engine(db_url)
    ids = []
    with make_session_factory(engine)() as session:
        tenant = create_tenant(session, name)
        session.flush()
        mechanism = build_mechanism(tenant.id, MechanismCreate(
            name=name, sampling_url=url, output_kind="real", secret=secret, timeout_seconds=30))
        session.add(mechanism)
        session.flush()
        start = datetime.now(UTC) + timedelta(seconds=2)
        for i in range(count):
            m = create_monitor(session, tenant.id, MonitorCreate(
                name=f"{name}-{i}", mechanism_id=mechanism.id, epsilon=1.0, horizon=10_000, samples_per_period=1000,
                period_seconds=1, start_at=start + timedelta(seconds=i / max(count, 1)),
                checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}], **monitor))
            ids.append(m.id)
        session.commit()
        tenant_id = tenant.id
    engine.dispose()
    return [tenant_id, ids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=10, help="monitors with snapshot_every 1")
    parser.add_argument("--delay", type=float, default=20.0, help="seconds before the alarmed tenant is created")
    parser.add_argument("--alarm-samples", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--pg", default=PG)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    from sqlalchemy import func, select

    from app.db import make_engine, make_session_factory
    from app.models.alarms import Alarm
    from app.models.snapshots import Snapshot
    from app.sampling.protocol import generate_secret

    port, secret = free_port(), generate_secret()
    t_start, load0 = time.monotonic(), os.getloadavg()
    with scratch_service("snapshot-fairness", pg=args.pg) as run:
        run.procs.start("endpoints", [sys.executable, __file__, "--serve", str(port)], {"PYTHONUNBUFFERED": "1"})
        wait_port(port, 60, run.procs)
        base = f"http://127.0.0.1:{port}"
        flooding, _ = add_tenant(run.db_url, "flooding", f"{base}/laplace", secret, args.flood, snapshot_every=1,
                                 outputs_window=5)
        run.procs.start("worker", [*DPWATCH, "worker"], worker_env(run.db_url) | {"DPWATCH_WORKER_ID": "snap-1"})
        say(f"worker started; the alarmed tenant comes in {args.delay:g} s (logs in {run.log_dir})")
        time.sleep(args.delay)
        alarmed, _ = add_tenant(run.db_url, "alarmed", f"{base}/leaky", secret, 1, outputs_window=5,
                                alarm_snapshot_samples=args.alarm_samples)
        engine = make_engine(run.db_url)
        factory = make_session_factory(engine)
        alarm_at = snap_done = None
        queued_at_alarm = done_before = done_after = 0
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            run.procs.check_alive()
            with factory() as s:
                if alarm_at is None:
                    alarm_at = s.scalar(select(Alarm.created_at).where(Alarm.tenant_id == alarmed).limit(1))
                    if alarm_at is not None:
                        queued_at_alarm = s.scalar(select(func.count()).select_from(Snapshot).where(
                            Snapshot.status == "pending")) or 0
                        done_before = s.scalar(select(func.count()).select_from(Snapshot).where(
                            Snapshot.tenant_id == flooding, Snapshot.status.in_(("done", "failed")))) or 0
                        say(f"alarm at {alarm_at:%H:%M:%S}; {queued_at_alarm} snapshots queued")
                if alarm_at is not None:
                    row = s.execute(select(Snapshot.status, Snapshot.finished_at).where(
                        Snapshot.tenant_id == alarmed, Snapshot.trigger == "alarm")).first()
                    if row is not None and row.status in ("done", "failed"):
                        snap_done = (row.status, row.finished_at)
                        done_after = s.scalar(select(func.count()).select_from(Snapshot).where(
                            Snapshot.tenant_id == flooding, Snapshot.status.in_(("done", "failed")))) or 0
                        break
            time.sleep(0.5)
        with factory() as s:
            queued_end = s.scalar(select(func.count()).select_from(Snapshot).where(Snapshot.status == "pending")) or 0
        engine.dispose()
    load1 = os.getloadavg()
    print(f"\nSnapshots in turns: 1 worker, {args.flood} monitors with snapshot_every 1 (period 1 s), one alarmed "
          f"monitor created after {args.delay:g} s (alarm snapshot of {args.alarm_samples} fresh outputs per "
          f"database); wall {time.monotonic() - t_start:.0f} s, load {load0[0]:.1f} -> {load1[0]:.1f}\n")
    print("| measure | value |")
    print("|---|---:|")
    if alarm_at is None:
        print(f"| the alarm | none within {args.timeout:g} s |")
        return
    print(f"| snapshots queued at the alarm | {queued_at_alarm} |")
    if snap_done is None:
        print(f"| the alarm's snapshot | not ended {args.timeout:g} s after the alarm's creation was looked for |")
    else:
        wait = (snap_done[1] - alarm_at).total_seconds()
        print(f"| alarm → its snapshot ended ({snap_done[0]}) | {wait:.1f} s |")
        print(f"| flooding tenant's snapshots ended meanwhile | {done_after - done_before} |")
    print(f"| snapshots queued at the end | {queued_end} |")


if __name__ == "__main__":
    main()
