"""Searches and audits against a slow endpoint: the time estimate, progress and --time-limit.

Serves a Laplace sum (records in [0, 1], Lap(1/ε): exactly ε-DP; ``--scale 0.5`` makes it 2-DP) through dpwatch_sdk.Endpoint on
127.0.0.1, throttled to ``--rate`` outputs per second in all (one lock: concurrent requests queue),
then runs ``dpwatch search`` and ``dpwatch audit`` with ``--time-limit`` as subprocesses, and
prints for each: when the time estimate line appeared on stderr, the wall time to exit, the exit
code, the verdict and the power line, and whether any failing input was listed.

    nice -n 10 .venv/bin/python bench/time_limit.py --rate 1000 --time-limit 60
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.reference.server import endpoint_app  # noqa: E402
from app.sampling.protocol import generate_secret  # noqa: E402
from tests.support.sampling_server import serve_app  # noqa: E402

DOMAIN = {"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 0, "max": 10}, "neighbours": ["add_remove"]}


def throttled(rate: float, scale: float = 1.0):
    lock = threading.Lock()

    def laplace_sum(database, n, rng):
        with lock:  # the endpoint serves `rate` outputs per second in all
            time.sleep(n / rate)
        return float(np.clip(np.asarray(database, dtype=float), 0, 1).sum()) + rng.laplace(0, scale, n)

    return laplace_sum


def run(cmd: list[str], limit: float) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COLUMNS="200"))
    estimate_at, err_lines = None, []

    def read_err() -> None:
        nonlocal estimate_at
        for line in proc.stderr:  # type: ignore[union-attr]
            err_lines.append(line.rstrip())
            if estimate_at is None and "endpoint rate:" in line:
                estimate_at = time.monotonic() - t0

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    out = proc.stdout.read()  # type: ignore[union-attr]
    proc.wait()
    reader.join(5)
    wall = time.monotonic() - t0
    return {"wall": wall, "code": proc.returncode, "estimate_at": estimate_at, "stdout": out, "stderr": err_lines,
            "limit": limit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", default="search,audit")
    ap.add_argument("--scale", type=float, default=1.0, help="Laplace scale: 1 is exactly 1-DP, 0.5 is 2-DP (a violation)")
    args = ap.parse_args()
    secret = generate_secret()
    dpwatch = str(Path(sys.executable).with_name("dpwatch"))
    with serve_app(endpoint_app({"/": (throttled(args.rate, args.scale), "real")}, secret=secret, seed=1)) as url:
        common = ["--secret", secret, "--allow-networks", "127.0.0.0/8", "--epsilon", "1", "--time-limit",
                  str(args.time_limit), "--output-kind", "real", "--no-progress"]
        jobs = {"search": [dpwatch, "search", url + "/", "--domain", json.dumps(DOMAIN), *common],
                "audit": [dpwatch, "audit", url + "/", "--pairs", json.dumps([{"x": [1.0], "x_prime": []}]), *common]}
        for name in args.only.split(","):
            r = run(jobs[name], args.time_limit)
            text = r["stdout"]
            power = next((ln for ln in text.splitlines() if "Power:" in ln), "")
            power = power[power.index("Power:"):][:200] if power else "(no power line)"
            verdict = next((ln for ln in text.splitlines() if ln.startswith(("verdict:", "no violation", "VIOLATION"))),
                           text.splitlines()[0] if text else "")
            severity = next((ln for ln in text.splitlines() if "× the claim" in ln and "≥" in ln), "")
            if severity:
                verdict += f" / severity: {severity.strip()}"
            print(f"{name}: --time-limit {args.time_limit:g} at {args.rate:g} outputs/s: estimate printed after "
                  f"{r['estimate_at'] if r['estimate_at'] is None else round(r['estimate_at'], 1)} s; exited {r['code']} "
                  f"after {r['wall']:.1f} s (limit + 5 = {args.time_limit + 5:g}); failing inputs listed: "
                  f"{'yes' if 'failing inputs' in text else 'no'}")
            print(f"  stderr: {next((ln for ln in r['stderr'] if 'endpoint rate:' in ln), '')}")
            print(f"  {verdict}")
            samples = next((ln for ln in text.splitlines() if ln.startswith(("samples", "samples used"))), "")
            print(f"  {samples}")
            print(f"  {power}", flush=True)


if __name__ == "__main__":
    main()
