"""API CPU per request, per kind of read: one `dpwatch serve --no-worker` on a fresh Postgres database
(60 monitors of one check, 50 periods each, as bench/api_cpu.py seeds them), then, for each kind in
turn, ``--clients`` closed-loop clients sending only that request for ``--seconds`` after a 2 s
warm-up; the process's CPU (utime + stime) over the requests answered.

    nice -n 10 .venv/bin/python bench/api_read_kinds.py [--clients 10] [--seconds 8]

Kinds: GET /v1/monitors/{id}, …/status, /v1/monitors?limit=50, …/periods?limit=50, and /healthz
(no key and no query: the floor of the HTTP stack). Compare the kinds with one another; on a
shared machine the absolute figures move with the load, which is printed on each line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_cpu import cpu_seconds, create_monitors, seed_periods, start_api, tenant_key  # noqa: E402
from bench.service_harness import scratch_service  # noqa: E402

KINDS = ("get", "status", "list", "periods", "healthz")


def path_of(kind: str, ids: list[str], i: int) -> str:
    mid = ids[i % len(ids)]
    return {"get": f"/v1/monitors/{mid}", "status": f"/v1/monitors/{mid}/status", "list": "/v1/monitors?limit=50",
            "periods": f"/v1/monitors/{mid}/periods?limit=50", "healthz": "/healthz"}[kind]


async def load(base: str, headers: dict[str, str], kind: str, ids: list[str], clients: int, seconds: float) -> int:
    done = 0
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30, trust_env=False) as client:

        async def one(j: int) -> None:
            nonlocal done
            i = j
            while time.monotonic() < end:
                response = await client.get(path_of(kind, ids, i))
                if response.status_code != 200:
                    raise SystemExit(f"{kind}: {response.status_code} {response.text[:200]}")
                i += 1
                done += 1

        await asyncio.gather(*(one(j) for j in range(clients)))
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    with scratch_service("api-read-kinds", pg=args.pg, keep_logs=False) as scratch:
        url = scratch.db_url
        headers = {"Authorization": f"Bearer {tenant_key(url)}"}
        proc, base = start_api(ROOT, url)
        try:
            ids = create_monitors(base, headers, 60)
            seed_periods(url, 50)
            print(f"| kind | requests in {args.seconds:g} s | API CPU per request | load average |")
            print("|---|---|---|---|")
            for kind in KINDS:
                asyncio.run(load(base, headers, kind, ids, args.clients, 2.0))
                before = cpu_seconds(proc.pid)
                done = asyncio.run(load(base, headers, kind, ids, args.clients, args.seconds))
                per = (cpu_seconds(proc.pid) - before) / done * 1e3
                print(f"| {kind} | {done} | {per:.2f} ms | {os.getloadavg()[0]:.1f} |", flush=True)
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
