"""Calibration beside another tenant's periods: one tenant's monitors whose calibration is heavy
(an ``auto`` check with a large discovery budget, and a design off the threshold table) while
another tenant's monitors run periods, on one `dpwatch worker` process on Postgres
(docs/hardening.md "Calibration in a process of its own").

What runs (all on 127.0.0.1, each a separate process group):

- a sampling server (bench/job_isolation.py's, ``/healthy``: Laplace samples at once);
- one worker (``python -m app.cli worker``) with the default settings;
- this script: a fresh Postgres database; tenant "heavy" (A) with ``--heavy`` monitors on
  ``/healthy``, each with one ``auto`` check, ``discovery_samples`` = ``--budget`` and horizon
  ``--horizon`` (off the table's grid: a Monte-Carlo threshold); tenant "victim" (B) with 4
  monitors on ``/healthy`` (period 1 s, n = 200 per side, one given check).

For ``--duration`` seconds (after ``--warmup``) B's periods whose slot lies in the window are
counted against the slots; the peak resident size (VmHWM) of every process of the worker's tree
(the worker, its fork server, the children) is sampled every 0.5 s; at the end, A's monitors are
counted by state (and the reason of any failed calibration).

The script runs against the tree it lives in (the workers start with that tree as their working
directory): copy it into an export of another commit to measure that commit.

    nice -n 10 .venv/bin/python bench/calibration_isolation.py [--heavy 20] [--budget 400000] [--duration 120]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from job_isolation import Db, Watch, victim_monitors  # noqa: E402
from service_harness import DPWATCH, PG, ROOT, free_port, say, scratch_service, wait_port, worker_env  # noqa: E402


def calibrating_monitor(session, tenant_id: uuid.UUID, mechanism_id: uuid.UUID, name: str, budget: int,  # noqa: ANN001
                        horizon: int) -> uuid.UUID:
    """A monitor whose calibration is work: one ``auto`` check (discovery with ``budget`` outputs per
    database) and horizon ``horizon`` (off the table's grid: a Monte-Carlo threshold)."""
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor

    return create_monitor(session, tenant_id, MonitorCreate(
        name=name, mechanism_id=mechanism_id, epsilon=1.0, horizon=horizon, samples_per_period=200,
        period_seconds=60, discovery_samples=budget, outputs_window=0, alarm_snapshot_samples=0,
        checks=[{"x": [0], "x_prime": [1], "event": {"kind": "auto"}}])).id


def setup(db_url: str, base: str, secret: str, heavy_monitors: int, budget: int, horizon: int) -> dict:
    from app.auth.service import create_tenant
    from app.db import make_engine, make_session_factory
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism

    engine = make_engine(db_url)
    out: dict = {"victim_monitors": [], "heavy_monitors": []}
    start = datetime.now(UTC) + timedelta(seconds=5)
    with make_session_factory(engine)() as session:
        heavy, victim = create_tenant(session, "heavy"), create_tenant(session, "victim")
        session.flush()

        def mechanism(tenant, path: str) -> uuid.UUID:  # noqa: ANN001
            m = build_mechanism(tenant.id, MechanismCreate(name=f"{path}-{tenant.name}", sampling_url=f"{base}/{path}",
                                                           output_kind="real", secret=secret, timeout_seconds=30))
            session.add(m)
            session.flush()
            return m.id

        heavy_mech, victim_mech = mechanism(heavy, "healthy"), mechanism(victim, "healthy")
        for i in range(heavy_monitors):
            out["heavy_monitors"].append(calibrating_monitor(session, heavy.id, heavy_mech, f"heavy-{i}", budget,
                                                             horizon))
        out["victim_monitors"] = victim_monitors(session, victim.id, victim_mech, start)
        session.commit()
    engine.dispose()
    return out


def heavy_states(db: Db, monitors: list[uuid.UUID]) -> tuple[Counter, list[str]]:
    from sqlalchemy import select

    from app.models.monitors import Monitor

    with db.factory() as session:
        rows = session.scalars(select(Monitor).where(Monitor.id.in_(monitors))).all()
        states = Counter(m.state for m in rows)
        errors = sorted({(getattr(m, "calibration_error", None) or "")[:100] for m in rows} - {""})
    return states, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--heavy", type=int, default=20, help="tenant A's monitors, each calibrating")
    parser.add_argument("--budget", type=int, default=400_000, help="discovery_samples of A's auto checks")
    parser.add_argument("--horizon", type=int, default=2500, help="A's horizon (off the table's grid)")
    parser.add_argument("--job-memory-mb", type=int, default=None,
                        help="DPWATCH_JOB_MEMORY_MB of the worker (default: the settings' 768): the calibrations' limit")
    parser.add_argument("--pg", default=PG)
    args = parser.parse_args()

    from app.sampling.protocol import generate_secret

    port = free_port()
    rows: list[tuple[str, str, str]] = []
    load_start = os.getloadavg()
    started_at = datetime.now(UTC)
    with scratch_service("calibration-isolation", pg=args.pg) as run:
        db_url, procs = run.db_url, run.procs
        say(f"sampling server on :{port} (logs in {run.log_dir})")
        procs.start("endpoints", [sys.executable, str(ROOT / "bench" / "job_isolation.py"), "--serve", str(port)],
                    {"PYTHONUNBUFFERED": "1"})
        wait_port(port, 60, procs)
        ids = setup(db_url, f"http://127.0.0.1:{port}", generate_secret(), args.heavy, args.budget, args.horizon)
        db = Db(db_url)
        env = worker_env(db_url)
        if args.job_memory_mb is not None:
            env["DPWATCH_JOB_MEMORY_MB"] = str(args.job_memory_mb)
        worker = procs.start("worker", [*DPWATCH, "worker"], env | {"DPWATCH_WORKER_ID": "caliso-1"})
        watch = Watch(procs, [worker])
        say(f"worker started; {args.heavy} heavy monitors calibrating; warm-up {args.warmup:g} s")
        watch.wait(args.warmup)
        w0 = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        watch.wait((w0 - datetime.now(UTC)).total_seconds() + args.duration)
        w1 = w0 + timedelta(seconds=int(args.duration))
        watch.wait(3.0)
        kept, worst, failed = db.periods(ids["victim_monitors"], w0, w1)
        expected = 4 * int(args.duration)
        rows.append(("victim's periods during the heavy calibrations", f"{kept}/{expected} = {kept / expected:.1%} "
                     f"(worst monitor {worst}/{int(args.duration)}, {failed} failed)", "≥ 95%"))
        states, errors = heavy_states(db, ids["heavy_monitors"])
        rows.append(("heavy tenant's monitors at the end", ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
                     + (f"; errors: {errors}" if errors else ""), ""))
        roles = watch.by_role()
        rows.append(("peak resident size (VmHWM), per role",
                     ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(roles.items())), "worker < 1024 MB"))
        db.engine.dispose()
    load_end = os.getloadavg()
    memory = "" if args.job_memory_mb is None else f" but DPWATCH_JOB_MEMORY_MB={args.job_memory_mb}"
    print(f"\nCalibration isolation ({ROOT}): 1 worker (default settings{memory}), {args.heavy} heavy monitors (auto "
          f"check, discovery_samples {args.budget}, horizon {args.horizon}), the victim's 4 monitors (period 1 s, "
          f"n = 200), window {args.duration:g} s after {args.warmup:g} s; started {started_at:%Y-%m-%d %H:%M} UTC; "
          f"load average {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end\n")
    print("| measure | value | goal |")
    print("|---|---|---|")
    for name, value, goal in rows:
        print(f"| {name} | {value} | {goal} |")


if __name__ == "__main__":
    main()
