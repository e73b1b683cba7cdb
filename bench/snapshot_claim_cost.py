"""The cost of a snapshot claim on a large table (docs/hardening.md, "Snapshots in turns").

For each size N: a scratch Postgres database at the current schema, N done snapshots started one a
second back from now and 5 pending ones, then ``SnapshotRunner.claim(1)`` ten times (each claim put
back); prints the median and the longest.

    .venv/bin/python bench/snapshot_claim_cost.py [N ...]   # default 10000 300000 1000000
"""
import pathlib
import sys
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from sqlalchemy import create_engine, text

from app.auth.service import create_tenant_with_key
from app.db import make_engine, make_session_factory, run_migrations
from app.models.mechanisms import Mechanism
from app.monitors.schemas import MonitorCreate
from app.monitors.service import create_monitor
from app.snapshots.runner import SnapshotRunner


def measure(N: int) -> None:
    name = f"snapq_{uuid.uuid4().hex[:8]}"
    admin = create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    try:
        run_migrations(url)
        engine = make_engine(url)
        factory = make_session_factory(engine)
        with factory() as s:
            tenant, _ = create_tenant_with_key(s, "t", "k")
            s.flush()
            mech = Mechanism(tenant_id=tenant.id, name="m", sampling_url="http://127.0.0.1:9/", output_kind="real",
                             secret="x" * 32)
            s.add(mech)
            s.flush()
            mon = create_monitor(s, tenant.id, MonitorCreate(name="m", mechanism_id=mech.id, epsilon=1.0, horizon=100,
                                 samples_per_period=100, period_seconds=60,
                                 checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}]))
            s.commit()
            tid, mid = tenant.id, mon.id
        with engine.begin() as c:
            c.execute(text("""INSERT INTO snapshots (id, tenant_id, monitor_id, trigger, status, params, created_at, started_at, finished_at)
                SELECT gen_random_uuid(), :t, :m, 'schedule', 'done', '{}'::json, now() - (g || ' seconds')::interval,
                       now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval
                FROM generate_series(1, :n) g"""), {"t": tid, "m": mid, "n": N})
            c.execute(text("""INSERT INTO snapshots (id, tenant_id, monitor_id, trigger, status, params, created_at)
                SELECT gen_random_uuid(), :t, :m, 'schedule', 'pending', '{}'::json, now() FROM generate_series(1, 5)"""), {"t": tid, "m": mid})
            c.execute(text("ANALYZE snapshots"))
        from app.settings import Settings
        runner = SnapshotRunner(factory, None, Settings())
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            ids = runner.claim(1)
            times.append(time.perf_counter() - t0)
            # put it back so each claim sees the same table
            with engine.begin() as c:
                c.execute(text("UPDATE snapshots SET status='pending', lease_owner=NULL, lease_expires_at=NULL, started_at=NULL WHERE id = ANY(:ids)"), {"ids": list(ids)})
        times.sort()
        print(f"N = {N:,} done snapshots: claim median {times[5]*1e3:.1f} ms, max {times[-1]*1e3:.1f} ms")
        engine.dispose()
    finally:
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))


if __name__ == "__main__":
    for size in [int(v) for v in sys.argv[1:]] or [10_000, 300_000, 1_000_000]:
        measure(size)
