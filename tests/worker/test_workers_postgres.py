"""Several worker processes on one Postgres.

- Two workers never commit the same period twice, and both take a share of the work.
- A worker killed in the middle of a period leaves no partial state; the other redoes the period
  once the lease expires: tests/test_faults_postgres.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from app.db import make_engine, make_session_factory
from app.models import load_models
from app.models.monitors import Check, Monitor, PeriodRun
from app.reference.mechanisms import Laplace
from app.reference.server import endpoint_router
from app.sampling.protocol import generate_secret
from app.settings import Settings
from tests.support.sampling_server import serve_app

pytestmark = pytest.mark.postgres

SECRET = generate_secret()


@pytest.fixture
def pg(postgres_url: str) -> Iterator[tuple[str, object]]:
    engine = make_engine(postgres_url)
    yield postgres_url, make_session_factory(engine)
    tables = ", ".join(t.name for t in load_models().metadata.sorted_tables)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {tables} CASCADE"))
    engine.dispose()


@pytest.fixture
def api(pg) -> Iterator[TestClient]:
    from app.auth.service import create_tenant_with_key
    from app.main import create_app

    url, factory = pg
    with factory() as session:
        _, key = create_tenant_with_key(session, "acme", "k")
        session.commit()
    settings = Settings(_env_file=None, database_url=url, migrate_on_start=False,  # type: ignore[call-arg]
                        allow_networks=["127.0.0.0/8"], log_level="WARNING")
    with TestClient(create_app(settings, session_factory=factory), headers={"Authorization": f"Bearer {key}"}) as c:
        yield c


class Gate:
    """Holds the first sampling request of period 1 until released (to kill a worker mid-period)."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.armed = True


def _endpoint_app(gate: Gate | None = None) -> FastAPI:
    laplace = Laplace(epsilon=1.0)

    def sample(database, n, rng, period=0):
        if gate is not None and gate.armed and period == 1:
            gate.armed = False
            gate.arrived.set()
            gate.release.wait(30)
        return laplace.sample(database, n, rng)

    app = FastAPI()
    app.include_router(endpoint_router({"/laplace": (sample, "real")}, secret=SECRET))
    return app


def _monitors(api: TestClient, base: str, count: int, period_seconds: int, horizon: int) -> list[str]:
    mech = api.post("/v1/mechanisms", json={"name": "laplace", "sampling_url": f"{base}/laplace",
                                            "output_kind": "real", "secret": SECRET, "timeout_seconds": 20})
    assert mech.status_code == 201, mech.text
    ids = []
    for i in range(count):
        mon = api.post("/v1/monitors", json={
            "name": f"m{i}", "mechanism_id": mech.json()["id"], "epsilon": 1.0, "horizon": horizon,
            "samples_per_period": 100, "period_seconds": period_seconds,
            "checks": [{"x": [0.0], "x_prime": [1.0], "event": {"kind": "interval", "high": 0.0}}]})
        assert mon.status_code == 201, mon.text
        ids.append(mon.json()["id"])
    return ids


def _worker(url: str, worker_id: str, lease_seconds: int = 10) -> subprocess.Popen:
    env = {**os.environ, "DPWATCH_DATABASE_URL": url, "DPWATCH_ALLOW_NETWORKS": "127.0.0.0/8",
           "DPWATCH_WORKER_ID": worker_id, "DPWATCH_TICK_SECONDS": "0.2",
           "DPWATCH_LEASE_SECONDS": str(lease_seconds), "DPWATCH_MIGRATE_ON_START": "false",
           "DPWATCH_LOG_LEVEL": "WARNING"}
    return subprocess.Popen([sys.executable, "-m", "app.cli", "worker"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    return err.decode(errors="replace")


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_two_workers_never_commit_the_same_period_twice(pg, api):
    url, factory = pg
    with serve_app(_endpoint_app()) as base:
        ids = _monitors(api, base, count=30, period_seconds=1, horizon=200)
        workers = [_worker(url, "worker-a"), _worker(url, "worker-b")]

        def progress() -> bool:  # both workers have committed periods, and enough of them
            with factory() as session:
                rows = session.execute(select(PeriodRun.worker_id, func.count()).group_by(PeriodRun.worker_id)).all()
            return len(rows) == 2 and sum(c for _, c in rows) >= 90

        try:
            made_progress = _wait(progress, 60)
        finally:
            errors = [_stop(w) for w in workers]
        assert made_progress, errors
    with factory() as session:
        runs = session.scalars(select(PeriodRun)).all()
        assert runs, errors
        assert all(r.status == "ok" for r in runs), [r for r in runs if r.status != "ok"][:3]
        assert {r.worker_id for r in runs} == {"worker-a", "worker-b"}, "both workers take a share"
        for monitor_id in ids:
            mid = uuid.UUID(monitor_id)
            monitor = session.get(Monitor, mid)
            ts = sorted(r.t for r in runs if r.monitor_id == mid)
            seqs = sorted(r.seq for r in runs if r.monitor_id == mid)
            assert ts == list(range(1, monitor.t + 1)), (monitor_id, ts, monitor.t)
            assert seqs == list(range(1, monitor.t + 1))
            check = session.scalars(select(Check).where(Check.monitor_id == mid)).one()
            # The detector took each period exactly once.
            assert check.detector_state["t"] == monitor.t


# A worker SIGKILLed mid-period beside another: tests/test_faults_postgres.py (which also checks that
# it leaves no partial state).
