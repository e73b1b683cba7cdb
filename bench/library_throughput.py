"""Outputs per second of each library adapter in process (no HTTP), on the corpus's base table
(30 users, one row each, two cities), one keyed release per output:

    DPWATCH_LIBRARY_VENVS=.cache/library_venvs nice -n 10 .venv/bin/python bench/library_throughput.py [--n 200]

Each library runs in its own venv (tests/library_venvs.py); the table gives the library, the
query, the outputs drawn, the seconds and outputs per second. Tumult draws 3 (seconds each).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.library_venvs import environment, python_of  # noqa: E402

CODE = """
import json, time
import numpy as np
from dpwatch_sdk.libraries import GroupBy
from app.reference.pipelines.catalog import BASE
import dpwatch_sdk.libraries.{module} as lib
out = []
for label, query in (("count, partition selection", GroupBy(by="city", epsilon=1.0, delta=1e-5)),
                     ("sum, public keys", GroupBy(by="city", metric="sum", value="spend", low=0.0, high=10.0,
                                                  public_keys=("a", "b"), epsilon=1.0))):
    if "{module}" == "smartnoise" and query.public_keys is not None:
        query = GroupBy(by="city", metric="sum", value="spend", low=0.0, high=10.0, epsilon=1.0, delta=1e-5)
        label = "sum, SmartNoise's key selection"
    m = lib.mechanism(query)
    m.sample(BASE, 1, np.random.default_rng(0))  # warm up (imports, Spark)
    t = time.perf_counter()
    m.sample(BASE, N, np.random.default_rng(1))
    s = time.perf_counter() - t
    out.append({{"query": label, "n": N, "seconds": s, "per_s": N / s}})
print(json.dumps(out))
"""

MODULES = {"pipelinedp": "pipelinedp", "pydp": "pydp", "opendp": "opendp_context", "smartnoise": "smartnoise",
           "tumult": "tumult"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--library", action="append")
    args = parser.parse_args()
    print(f"{'library':12s} {'query':34s} {'outputs':>8s} {'seconds':>8s} {'out/s':>9s}")
    for library, module in MODULES.items():
        if args.library and library not in args.library:
            continue
        python, reason = python_of(library)
        if python is None:
            print(f"{library:12s} not run: {reason}")
            continue
        n = 3 if library == "tumult" else args.n
        code = f"N = {n}\n" + textwrap.dedent(CODE).format(module=module)
        done = subprocess.run([str(python), "-c", code], cwd=ROOT, env=environment(library, python),
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            print(f"{library:12s} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
            continue
        for row in json.loads(done.stdout.strip().splitlines()[-1]):
            print(f"{library:12s} {row['query']:34s} {row['n']:8d} {row['seconds']:8.2f} {row['per_s']:9.1f}", flush=True)


if __name__ == "__main__":
    main()
