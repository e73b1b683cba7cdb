"""API CPU per request on the read path, A/B between source trees, back to back.

One fresh Postgres database (one tenant, ``--monitors`` monitors, ``--periods`` periods each with
one check, so that GET …/periods?limit=50 serialises real rows), then, for each round and each
tree given with ``--tree`` (default: this one), a ``dpwatch serve --no-worker`` process started
from that tree, ``--clients`` closed-loop clients on bench/api_load.py's rotation (GET
/v1/monitors/{id}, …/status, /v1/monitors?limit=50, …/periods?limit=50) for ``--seconds`` after a
3 s warm-up, and the process's CPU (utime + stime from /proc) divided by the requests answered.
Trees alternate (A B A B …) so that both see the same machine load; the load average is printed
with every line. CPU per request is what to compare on a shared machine: latencies are not.

    nice -n 10 .venv/bin/python bench/api_cpu.py --tree /work/main --tree . --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.auth.service import create_tenant_with_key  # noqa: E402
from app.db import make_engine, make_session_factory  # noqa: E402
from bench.api_profile import PY_SPY, summarise  # noqa: E402
from bench.service_harness import free_port, scratch_service, worker_env  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def seed_periods(url: str, count: int) -> None:
    """``count`` finished periods with one check for every monitor (plain SQL on the columns the
    reads return; the worker's bookkeeping columns keep their defaults)."""
    if count <= 0:
        return
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("""
            INSERT INTO period_runs (id, monitor_id, seq, scheduled_for, horizon_index, t, status, started_at,
                                     finished_at, sampling_seconds, worker_id)
            SELECT gen_random_uuid(), m.id, s, now() - (s || ' minutes')::interval, 0, s, 'ok',
                   now() - (s || ' minutes')::interval, now() - (s || ' minutes')::interval + interval '5 seconds',
                   4.5, 'bench'
            FROM monitors m CROSS JOIN generate_series(1, :n) AS s
        """), {"n": count})
        c.execute(text("""
            INSERT INTO period_checks (id, period_run_id, check_id, a, b, n, p_hat, q_hat, d_hat, sigma_hat, z,
                                       statistic, threshold)
            SELECT gen_random_uuid(), r.id, ch.id, 40, 35, 100, 0.4, 0.35, 0.05, 0.07, 0.7, 1.5, 9.0
            FROM period_runs r JOIN checks ch ON ch.monitor_id = r.monitor_id
        """))
    engine.dispose()


def tenant_key(url: str) -> str:
    """A tenant with one admin key in the database at ``url``; the key."""
    engine = make_engine(url)
    with make_session_factory(engine)() as session:
        _, key = create_tenant_with_key(session, "acme", "k")
        session.commit()
    engine.dispose()
    return key


def start_api(tree: Path, url: str) -> tuple[subprocess.Popen[bytes], str]:
    """``dpwatch serve --no-worker`` from the source tree ``tree`` on the database at ``url``, once
    it answers /healthz; the process and its base URL."""
    port = free_port()
    env = {**os.environ, **worker_env(url), "DPWATCH_LOG_LEVEL": "INFO", "PYTHONPATH": str(tree)}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--no-worker", "--port", str(port)],
                            env=env, cwd=tree, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/healthz", trust_env=False).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return proc, base


def create_monitors(base: str, headers: dict[str, str], count: int) -> list[str]:
    """One mechanism and ``count`` monitors of one check each, through the API; their ids."""
    mechanism = httpx.post(f"{base}/v1/mechanisms", headers=headers, timeout=60, trust_env=False, json={
        "name": "m", "sampling_url": "http://127.0.0.1:9/x", "output_kind": "real"}).json()
    return [httpx.post(f"{base}/v1/monitors", headers=headers, timeout=60, trust_env=False, json={
        "name": f"m{i}", "mechanism_id": mechanism["id"], "epsilon": 1.0, "horizon": 100,
        "samples_per_period": 100, "period_seconds": 3600,
        "checks": [{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}]}).json()["id"]
        for i in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    ap.add_argument("--tree", action="append", default=None, help="a source tree to serve from (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--monitors", type=int, default=60)
    ap.add_argument("--periods", type=int, default=50)
    ap.add_argument("--gil-profile", type=int, default=0, metavar="TOP",
                    help="also sample each measured phase with py-spy --gil (frames holding the GIL, i.e. "
                    "the process's Python CPU) and print the TOP frames")
    args = ap.parse_args()
    trees = [Path(t).resolve() for t in (args.tree or [str(ROOT)])]
    results: dict[Path, list[float]] = {t: [] for t in trees}
    with scratch_service("api-cpu", pg=args.pg, keep_logs=False) as scratch:
        url = scratch.db_url
        headers = {"Authorization": f"Bearer {tenant_key(url)}"}
        ids: list[str] = []
        for round_ in range(args.rounds):
            for tree in trees:
                proc, base = start_api(tree, url)
                try:
                    if not ids:
                        ids = create_monitors(base, headers, args.monitors)
                        seed_periods(url, args.periods)

                    def path(i: int) -> str:
                        mid = ids[i % len(ids)]
                        return (f"/v1/monitors/{mid}", f"/v1/monitors/{mid}/status", "/v1/monitors?limit=50",
                                f"/v1/monitors/{mid}/periods?limit=50")[i % 4]

                    async def load(seconds: float, base: str = base) -> tuple[int, int]:
                        done = bad = 0
                        end = time.monotonic() + seconds
                        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30,
                                                     limits=httpx.Limits(max_connections=args.clients)) as client:
                            async def one(j: int) -> None:
                                nonlocal done, bad
                                i = j
                                while time.monotonic() < end:
                                    response = await client.get(path(i))
                                    bad += response.status_code != 200
                                    i += 1
                                    done += 1

                            await asyncio.gather(*(one(j) for j in range(args.clients)))
                        return done, bad

                    asyncio.run(load(3))  # warm
                    load0 = os.getloadavg()[0]
                    spy = None
                    if args.gil_profile:
                        raw = Path(tempfile.mkdtemp()) / "api.raw"
                        spy = subprocess.Popen([PY_SPY, "record", "--pid", str(proc.pid), "--gil", "--duration",
                                                str(int(args.seconds)), "--rate", "200", "--format", "raw",
                                                "--output", str(raw), "--nonblocking"],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    before = cpu_seconds(proc.pid)
                    done, bad = asyncio.run(load(args.seconds))
                    used = cpu_seconds(proc.pid) - before
                    per = used / done * 1e3
                    results[tree].append(per)
                    print(f"round {round_ + 1} {tree}: {done} requests ({done / args.seconds:.0f}/s, {bad} not 200), "
                          f"API CPU per request {per:.2f} ms; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}",
                          flush=True)
                    if spy is not None:
                        spy.wait(120)
                        summarise(raw, args.gil_profile)
                finally:
                    proc.terminate()
                    proc.wait(10)
        for tree, values in results.items():
            print(f"{tree}: CPU per request median {statistics.median(values):.2f} ms "
                  f"({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
