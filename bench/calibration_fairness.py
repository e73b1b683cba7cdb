"""Calibration claims across tenants: how long another tenant's new monitor waits behind one tenant's
many calibrations, on one `dpwatch worker` process on Postgres (docs/hardening.md "Fair claims of
calibrations").

What runs (all on 127.0.0.1, each a separate process group):

- a sampling server (bench/job_isolation.py's, ``/healthy``: Laplace samples at once);
- one worker (``python -m app.cli worker``) with the default settings (``--worker-env`` adds some);
- this script: a fresh Postgres database; tenant "many" (A) with ``--many`` monitors that need a
  calibration (bench/calibration_isolation.py ``calibrating_monitor``: an ``auto`` check with
  ``discovery_samples`` = ``--budget`` and horizon ``--horizon``, off the table's grid), created
  before the worker starts. Once the worker has claimed A's first calibration, tenant "new" (B)
  creates one monitor of the same kind.

Measured: the seconds from B's monitor's creation until it is ``active`` (polled every 0.25 s), how
many of A's monitors were active then, and the wall time until every monitor is active (or
``--timeout``).

The script runs against the tree it lives in (the worker starts with that tree as its working
directory): copy it into an export of another commit to measure that commit.

    nice -n 10 .venv/bin/python bench/calibration_fairness.py [--many 20] [--budget 20000] [--horizon 300]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
import uuid
from datetime import UTC, datetime

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from calibration_isolation import calibrating_monitor  # noqa: E402
from job_isolation import Db, Watch  # noqa: E402
from service_harness import DPWATCH, PG, ROOT, free_port, say, scratch_service, wait_port, worker_env  # noqa: E402


def tenant_with_mechanism(db: Db, name: str, url: str, secret: str) -> tuple[uuid.UUID, uuid.UUID]:
    from app.auth.service import create_tenant
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism

    with db.factory() as session:
        tenant = create_tenant(session, name)
        session.flush()
        mechanism = build_mechanism(tenant.id, MechanismCreate(name=f"healthy-{name}", sampling_url=url,
                                                               output_kind="real", secret=secret, timeout_seconds=30))
        session.add(mechanism)
        session.commit()
        return tenant.id, mechanism.id


def monitors(db: Db, tenant_id: uuid.UUID, mechanism_id: uuid.UUID, count: int, budget: int,
             horizon: int) -> list[uuid.UUID]:
    with db.factory() as session:
        ids = [calibrating_monitor(session, tenant_id, mechanism_id, f"m{i}", budget, horizon) for i in range(count)]
        session.commit()
        return ids


def states(db: Db, ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[str, bool]]:
    """Each monitor's state and whether a worker holds its lease."""
    from sqlalchemy import select

    from app.models.monitors import Monitor

    with db.factory() as session:
        return {m: (state, owner is not None) for m, state, owner in session.execute(
            select(Monitor.id, Monitor.state, Monitor.lease_owner).where(Monitor.id.in_(ids)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--many", type=int, default=20, help="tenant A's monitors, each needing a calibration")
    parser.add_argument("--budget", type=int, default=20_000, help="discovery_samples of each auto check")
    parser.add_argument("--horizon", type=int, default=300, help="the monitors' horizon (off the table's grid)")
    parser.add_argument("--timeout", type=float, default=900.0, help="give up waiting after this many seconds")
    parser.add_argument("--worker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable of the worker (repeatable)")
    parser.add_argument("--pg", default=PG)
    args = parser.parse_args()

    from app.sampling.protocol import generate_secret

    port = free_port()
    load_start = os.getloadavg()
    started_at = datetime.now(UTC)
    wall0 = time.monotonic()
    with scratch_service("calibration-fairness", pg=args.pg) as run:
        procs = run.procs
        procs.start("endpoints", [sys.executable, str(ROOT / "bench" / "job_isolation.py"), "--serve", str(port)],
                    {"PYTHONUNBUFFERED": "1"})
        wait_port(port, 60, procs)
        db, secret, url = Db(run.db_url), generate_secret(), f"http://127.0.0.1:{port}/healthy"
        tenant_a, mech_a = tenant_with_mechanism(db, "many", url, secret)
        tenant_b, mech_b = tenant_with_mechanism(db, "new", url, secret)
        many = monitors(db, tenant_a, mech_a, args.many, args.budget, args.horizon)
        env = worker_env(run.db_url) | dict(item.split("=", 1) for item in args.worker_env)
        worker = procs.start("worker", [*DPWATCH, "worker"], env | {"DPWATCH_WORKER_ID": "calfair-1"})
        watch = Watch(procs, [worker])
        say(f"worker started; {args.many} of A's monitors calibrating; waiting for its first claim")
        watch.wait(120, until=lambda: any(leased for _, leased in states(db, many).values()))
        new = monitors(db, tenant_b, mech_b, 1, args.budget, args.horizon)
        t_new = time.monotonic()
        say("B's monitor created")
        waited = watch.wait(args.timeout, until=lambda: states(db, new)[new[0]][0] == "active")
        seen = states(db, many)
        a_active_then = sum(state == "active" for state, _ in seen.values())
        b_active = states(db, new)[new[0]][0] == "active"
        say(f"B's monitor {'active' if b_active else 'not active'} after {waited:.1f} s; A: {a_active_then} active")
        watch.wait(max(0.0, args.timeout - (time.monotonic() - t_new)),
                   until=lambda: all(state == "active" for state, _ in states(db, many).values()))
        all_done = time.monotonic() - t_new
        a_active_end = sum(state == "active" for state, _ in states(db, many).values())
        db.engine.dispose()
    wall = time.monotonic() - wall0
    load_end = os.getloadavg()
    extra = " ".join(args.worker_env) or "default settings"
    print(f"\nCalibration fairness ({ROOT}): 1 worker ({extra}); tenant A: {args.many} monitors needing a calibration "
          f"(auto check, discovery_samples {args.budget}, horizon {args.horizon}), then tenant B: 1 such monitor; "
          f"started {started_at:%Y-%m-%d %H:%M} UTC; wall {wall:.0f} s; load average {load_start[0]:.1f} at the "
          f"start, {load_end[0]:.1f} at the end\n")
    print("| measure | value |")
    print("|---|---|")
    print(f"| B's monitor: seconds from creation to `active` | {waited:.1f}{'' if b_active else ' (timeout)'} |")
    print(f"| A's monitors `active` when B's became active | {a_active_then} of {args.many} |")
    print(f"| seconds from B's creation until all of A's were active | {all_done:.1f} ({a_active_end} of {args.many}) |")


if __name__ == "__main__":
    main()
