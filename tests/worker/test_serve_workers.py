"""`dpwatch serve --workers N`: N API processes on one port, one migration, /metrics adding up every
process's counters (prometheus_client's multiprocess mode). docs/deployment.md."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from app.auth.service import create_tenant_with_key
from app.db import make_engine, make_session_factory
from tests.support.sampling_server import free_port

ROOT = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    """The API processes uvicorn spawned (not multiprocessing's resource tracker)."""
    try:
        pids = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    out = []
    for child in pids:
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            out.append(child)
    return out


@pytest.fixture
def served(tmp_path: Path):  # noqa: ANN201
    port = free_port()
    database = f"sqlite:///{tmp_path / 'dpwatch.sqlite3'}"
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {**os.environ, "DPWATCH_DATABASE_URL": database, "DPWATCH_MIGRATE_ON_START": "true",
           "DPWATCH_LOG_LEVEL": "WARNING", "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "PYTHONUNBUFFERED": "1"}
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--workers", "2", "--no-worker",
                             "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError("serve exited: " + (tmp_path / "serve.log").read_text()[-3000:])
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200 and len(_children(proc.pid)) >= 2:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("serve did not start: " + (tmp_path / "serve.log").read_text()[-3000:])
            time.sleep(0.2)
        engine = make_engine(database)
        with make_session_factory(engine)() as session:
            _, key = create_tenant_with_key(session, "acme", "k")
            session.commit()
        engine.dispose()
        yield base, key, proc, metrics_dir
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()


def _requests_total(metrics: str, route: str) -> float:
    pattern = re.compile(r'^dpwatch_http_requests_total\{([^}]*)\} ([0-9.e+]+)$', re.M)
    return sum(float(value) for labels, value in pattern.findall(metrics)
               if f'route="{route}"' in labels and 'method="GET"' in labels)


def test_two_api_processes_share_the_port_and_the_metrics(served) -> None:  # noqa: ANN001
    base, key, proc, metrics_dir = served
    api_processes = _children(proc.pid)
    assert len(api_processes) == 2, api_processes

    def get(_: int) -> int:  # a new connection each: the processes take turns at accepting
        return httpx.get(f"{base}/v1/mechanisms", headers={"Authorization": f"Bearer {key}"}, timeout=30).status_code

    sent = 0
    with ThreadPoolExecutor(8) as pool:
        for _ in range(5):
            statuses = list(pool.map(get, range(40)))
            sent += len(statuses)
            assert statuses == [200] * len(statuses)
            pids = {int(m.group(1)) for f in metrics_dir.glob("counter_*.db") if (m := re.match(r"counter_(\d+)", f.name))}
            if len(pids & set(api_processes)) == 2:
                break
    assert set(api_processes) <= pids, (pids, api_processes)  # both processes answered requests
    metrics = httpx.get(f"{base}/metrics", timeout=30).text
    assert _requests_total(metrics, "/v1/mechanisms") == sent  # every process's requests, added up
    assert "dpwatch_monitors" in metrics
