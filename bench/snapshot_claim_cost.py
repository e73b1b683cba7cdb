"""The cost of a snapshot claim on a large table (docs/hardening.md, "Snapshots in turns").

For each size N: a scratch Postgres database at the current schema (service_harness.scratch_service),
N done snapshots started one a second back from now and 5 pending ones, then
``SnapshotRunner.claim(1)`` ten times (each claim put back); prints the median and the longest.

    .venv/bin/python bench/snapshot_claim_cost.py [N ...]   # default 10000 300000 1000000
"""

from __future__ import annotations

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from service_harness import scratch_service  # noqa: E402
from sqlalchemy import text  # noqa: E402

from app.auth.service import create_tenant_with_key  # noqa: E402
from app.db import make_engine, make_session_factory  # noqa: E402
from app.models.mechanisms import Mechanism  # noqa: E402
from app.monitors.schemas import MonitorCreate  # noqa: E402
from app.monitors.service import create_monitor  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.snapshots.runner import SnapshotRunner  # noqa: E402

DONE = """INSERT INTO snapshots (id, tenant_id, monitor_id, trigger, status, params, created_at, started_at,
    finished_at)
    SELECT gen_random_uuid(), :t, :m, 'schedule', 'done', '{}'::json, now() - (g || ' seconds')::interval,
           now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval
    FROM generate_series(1, :n) g"""
PENDING = """INSERT INTO snapshots (id, tenant_id, monitor_id, trigger, status, params, created_at)
    SELECT gen_random_uuid(), :t, :m, 'schedule', 'pending', '{}'::json, now() FROM generate_series(1, 5)"""
PUT_BACK = """UPDATE snapshots SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, started_at = NULL
    WHERE id = ANY(:ids)"""


def measure(size: int) -> None:
    with scratch_service("snapclaim", keep_logs=False) as run:
        engine = make_engine(run.db_url)
        factory = make_session_factory(engine)
        with factory() as s:
            tenant, _ = create_tenant_with_key(s, "t", "k")
            s.flush()
            mech = Mechanism(tenant_id=tenant.id, name="m", sampling_url="http://127.0.0.1:9/", output_kind="real",
                             secret="x" * 32)
            s.add(mech)
            s.flush()
            mon = create_monitor(s, tenant.id, MonitorCreate(
                name="m", mechanism_id=mech.id, epsilon=1.0, horizon=100, samples_per_period=100, period_seconds=60,
                checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}]))
            s.commit()
            ids = {"t": tenant.id, "m": mon.id}
        with engine.begin() as c:
            c.execute(text(DONE), {**ids, "n": size})
            c.execute(text(PENDING), ids)
            c.execute(text("ANALYZE snapshots"))
        runner = SnapshotRunner(factory, None, Settings())  # type: ignore[arg-type]  # claim() draws nothing
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            claimed = runner.claim(1)
            times.append(time.perf_counter() - t0)
            with engine.begin() as c:  # put it back so each claim sees the same table
                c.execute(text(PUT_BACK), {"ids": list(claimed)})
        engine.dispose()
    times.sort()
    print(f"N = {size:,} done snapshots: claim median {times[5] * 1e3:.1f} ms, max {times[-1] * 1e3:.1f} ms")


if __name__ == "__main__":
    for n in [int(v) for v in sys.argv[1:]] or [10_000, 300_000, 1_000_000]:
        measure(n)
