"""How long `dpwatch --help` and a usage error take, cold, in fresh processes.

    .venv/bin/python bench/cli_speed.py [--runs 10] [--dpwatch .venv/bin/dpwatch]

Each command runs ``--runs`` times, each in a new process (the interpreter starts, imports and
exits every time); the script prints the median and the maximum wall-clock time of each and the
1-minute load average before and after, since the machine is shared. "Cold" means a fresh
process: the OS file cache stays warm after the first run (the first run is reported as well).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "dpwatch --help": ["--help"],
    "usage error (dpwatch audit, no argument)": ["audit"],
    "usage error (unknown option)": ["threshold", "--bogus"],
    "dpwatch audit --help": ["audit", "--help"],
    "dpwatch demo --help": ["demo", "--help"],
    "usage error (dpwatch audit URL without --pairs)": ["audit", "http://127.0.0.1:9/"],
    "usage error (dpwatch search URL without --domain)": ["search", "http://127.0.0.1:9/"],
    "dpwatch --version": ["--version"],
    "dpwatch secret": ["secret"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dpwatch", default=str(ROOT / ".venv" / "bin" / "dpwatch"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()
    out = {}
    for label, argv in COMMANDS.items():
        times, cpu, codes = [], [], set()
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            proc = subprocess.run([args.dpwatch, *argv], capture_output=True, text=True)
            times.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            codes.add(proc.returncode)
        out[label] = {"median_s": statistics.median(times), "max_s": max(times), "first_s": times[0],
                      "median_cpu_s": statistics.median(cpu), "exit_codes": sorted(codes)}
    load_after = os.getloadavg()
    result = {"runs": args.runs, "python": sys.version.split()[0], "cpus": os.cpu_count(),
              "load_1min_before": load_before[0], "load_1min_after": load_after[0], "commands": out}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.runs} fresh processes each; load average (1 min) {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after; {os.cpu_count()} CPUs")
    for label, r in out.items():
        print(f"  {label:50s} median {r['median_s']:.3f} s  max {r['max_s']:.3f} s  first {r['first_s']:.3f} s  "
              f"CPU {r['median_cpu_s']:.3f} s  exit {r['exit_codes']}")


if __name__ == "__main__":
    main()
