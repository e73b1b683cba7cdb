"""An audit's resident size over its run, read every 50 ms by a thread: the peak, the progress
message it came at, and the peak per step (docs/benchmarks.md, "Late re-ranking as the default").

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/audit_rss.py svt3-values 7 1 [claim]

Arguments: slug, seed, late re-ranking (1 on, 0 off), claim (0.1). MiB.
"""
import asyncio
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from app.audit import AuditSettings, local_sampler, run_engine
from app.reference.corpus import corpus
from app.stats.claims import PureDP

slug, seed, late = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
claim = float(sys.argv[4]) if len(sys.argv) > 4 else 0.1
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
state = {"msg": "start", "peak": 0, "at": "", "stop": False, "round_peak": {}}
def watch():
    while not state["stop"]:
        r = rss()
        rp = state["round_peak"]
        key = state["msg"].split(":")[0]
        rp[key] = max(rp.get(key, 0), r)
        if r > state["peak"]:
            state["peak"], state["at"] = r, state["msg"]
        time.sleep(0.05)
threading.Thread(target=watch, daemon=True).start()
print("rss after imports MB", rss() / 2**20)
m = corpus()[slug]
def prog(p):
    state["msg"] = p.message
t0 = time.time()
res = asyncio.run(run_engine(local_sampler(m.sample, seed=seed), m.pairs, m.shape, PureDP(claim),
                             AuditSettings(seed=seed, rescore_late=late), progress=prog))
state["stop"] = True
print(f"refuted {res.refuted} LB {res.lower_bound:.4g} samples {res.samples_used:,} {time.time()-t0:.0f}s")
print("peak MB", state["peak"] / 2**20, "at", state["at"])
for k, v in state["round_peak"].items():
    print(f"  {k}: {v/2**20:.0f} MB")
