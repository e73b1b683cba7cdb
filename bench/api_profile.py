"""Where one API process spends its time on the read path: py-spy over `dpwatch serve --no-worker`
(docs/hardening.md, "The API under load: several processes").

A fresh Postgres database with one tenant and ``--monitors`` monitors, then ``--clients``
closed-loop clients rotating GET /v1/monitors/{id}, …/status, /v1/monitors?limit=50 and
…/periods?limit=50 (bench/api_load.py's rotation) for ``--seconds``, while py-spy samples the API
process. Prints the API's CPU per request (utime + stime from /proc) and the frames with the most
busy samples, self and inclusive. Needs py-spy (``.venv/bin/pip install py-spy``).

    .venv/bin/python bench/api_profile.py [--seconds 15] [--clients 20] [--monitors 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.auth.service import create_tenant_with_key  # noqa: E402
from app.db import make_engine, make_session_factory, run_migrations  # noqa: E402
from tests.support.sampling_server import free_port  # noqa: E402

PY_SPY = str(ROOT / ".venv" / "bin" / "py-spy")
IDLE = ("select (selectors", "wait (threading", "epoll", "Runner.run (asyncio")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summarise(raw: Path, top: int) -> None:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        if any(word in frames[-1] for word in IDLE):
            continue
        n = int(count)
        total += n
        own[frames[-1]] += n
        for name in {f.split(":")[0] for f in frames}:
            inclusive[name] += n
    print(f"\nbusy samples: {total}\n\nself:")
    for name, n in own.most_common(top):
        print(f"{n / total:6.1%}  {name[:140]}")
    print("\ninclusive:")
    for name, n in inclusive.most_common(top * 2):
        print(f"{n / total:6.1%}  {name[:140]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--monitors", type=int, default=60)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    name = "api_profile_" + uuid.uuid4().hex[:8]
    admin = create_engine(f"{args.pg}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{args.pg}/{name}"
    proc = None
    try:
        run_migrations(url)
        engine = make_engine(url)
        with make_session_factory(engine)() as session:
            _, key = create_tenant_with_key(session, "acme", "k")
            session.commit()
        engine.dispose()
        port = free_port()
        env = {**os.environ, "DPWATCH_DATABASE_URL": url, "DPWATCH_MIGRATE_ON_START": "false",
               "DPWATCH_LOG_LEVEL": "WARNING", "DPWATCH_ALLOW_NETWORKS": "127.0.0.0/8"}
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--no-worker", "--port", str(port)],
                                env=env, cwd=ROOT)
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        headers = {"Authorization": f"Bearer {key}"}
        mechanism = httpx.post(f"{base}/v1/mechanisms", headers=headers, json={
            "name": "m", "sampling_url": "http://127.0.0.1:9/x", "output_kind": "real"}).json()
        ids = [httpx.post(f"{base}/v1/monitors", headers=headers, json={
            "name": f"m{i}", "mechanism_id": mechanism["id"], "epsilon": 1.0, "horizon": 100,
            "samples_per_period": 100, "period_seconds": 60,
            "checks": [{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}]}).json()["id"]
            for i in range(args.monitors)]

        def path(i: int) -> str:
            mid = ids[i % len(ids)]
            return (f"/v1/monitors/{mid}", f"/v1/monitors/{mid}/status", "/v1/monitors?limit=50",
                    f"/v1/monitors/{mid}/periods?limit=50")[i % 4]

        async def load(seconds: float) -> int:
            done = 0
            end = time.monotonic() + seconds
            async with httpx.AsyncClient(base_url=base, headers=headers,
                                         limits=httpx.Limits(max_connections=args.clients)) as client:
                async def one(j: int) -> None:
                    nonlocal done
                    i = j
                    while time.monotonic() < end:
                        await client.get(path(i))
                        i += 1
                        done += 1

                await asyncio.gather(*(one(j) for j in range(args.clients)))
            return done

        asyncio.run(load(3))  # warm
        raw = Path(tempfile.mkdtemp()) / "api.raw"
        spy = subprocess.Popen([PY_SPY, "record", "--pid", str(proc.pid), "--duration", str(int(args.seconds)),
                                "--rate", "250", "--format", "raw", "--output", str(raw), "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        before = cpu_seconds(proc.pid)
        done = asyncio.run(load(args.seconds))
        used = cpu_seconds(proc.pid) - before
        spy.wait(120)
        print(f"{done} requests in {args.seconds:g} s ({done / args.seconds:.0f}/s) from {args.clients} clients; "
              f"API CPU per request {used / done * 1e3:.2f} ms; load average {os.getloadavg()[0]:.1f}")
        summarise(raw, args.top)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
