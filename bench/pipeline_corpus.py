"""Audit every pipeline of the library corpus (app/reference/pipelines) with its pair given, each
served over HTTP from its library's venv (tests/library_venvs.py), and print a table: entry,
library, true verdict, audit verdict (with the held-out lower bound), outputs per second.

    DPWATCH_LIBRARY_VENVS=.cache/library_venvs nice -n 10 .venv/bin/python bench/pipeline_corpus.py \\
        [--library pipelinedp ...] [--budget-scale 1.0] [--json out.json]

Outputs per second is the audit's samples over its wall time (HTTP, JSON and the engine
included). A library whose venv cannot be built is listed with the reason. Tumult runs one Spark
session per release (seconds each): its entries are audited with a few hundred outputs only.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.reference.pipelines.catalog import CATALOG, Entry, pairs_of  # noqa: E402
from tests.support.library_venvs import environment, python_of  # noqa: E402

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#: outputs per request at most: a request must be answered within the sampling client's timeout
#: (SmartNoise ~30 outputs/s, OpenDP's Context ~10/s, Tumult ~0.1/s under load)
MAX_BATCH = {"pipelinedp": 10_000, "pydp": 10_000, "smartnoise": 300, "opendp": 25, "tumult": 1}
DPWATCH = str(Path(sys.executable).with_name("dpwatch"))


def serve(e: Entry, python: Path, *extra: str) -> tuple[subprocess.Popen, dict]:
    """Start the entry's server in its library's venv; its first line says where it listens."""
    proc = subprocess.Popen([str(python), "-m", "app.reference.pipelines.serve", e.name, "--secret", SECRET, *extra],
                            cwd=ROOT, env=environment(e.library, python), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    if not line:
        proc.kill()
        raise RuntimeError(f"{e.name}: the server exited before listening (code {proc.wait()})")
    return proc, json.loads(line)


def audit(e: Entry, url: str, budget: int) -> dict:
    claim = ["--epsilon", repr(e.claim["epsilon"])]
    if e.claim.get("delta"):
        claim += ["--delta", repr(e.claim["delta"])]
    first = max(min(2_000, budget // 4), 100)  # the engine's smallest pilot
    done = subprocess.run([DPWATCH, "audit", url, "--pairs", json.dumps(pairs_of(e)), *claim, "--output-kind", "keyed",
                           "--budget", str(budget), "--first-round", str(first), "--max-batch", str(MAX_BATCH[e.library]),
                           "--secret", SECRET,
                           "--allow-networks", "127.0.0.0/8", "--no-progress", "--json"],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode not in (0, 1):
        reason = [line for line in done.stderr.splitlines() if "reason" in line or "rror" in line]
        raise RuntimeError(f"{e.name}: audit failed ({done.returncode}): {(reason or [done.stderr])[-1][-300:]}")
    return json.loads(done.stdout)


def run(entries: list[Entry], budget_scale: float) -> list[dict]:
    rows = []
    for e in entries:
        python, reason = python_of(e.library)
        row = {"entry": e.name, "library": e.library, "true": e.verdict, "mistake": e.mistake}
        if python is None:
            rows.append({**row, "audit": "not run", "why": reason})
            continue
        budget = max(int(e.audit_budget * budget_scale), 100)
        proc = None
        try:
            started = time.perf_counter()
            proc, info = serve(e, python)
            start_s = time.perf_counter() - started
            result = audit(e, info["listening"], budget)
            rows.append({**row, "audit": "refuted" if result["refuted"] else "not refuted",
                         "lower_bound": result.get("lower_bound"), "samples": result["samples_used"],
                         "seconds": result["seconds"], "outputs_per_s": result["samples_used"] / max(result["seconds"], 1e-9),
                         "start_s": start_s, "claim": e.claim})
        except Exception as exc:  # noqa: BLE001 - reported in the table
            rows.append({**row, "audit": "error", "why": str(exc)[:300]})
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'entry':38s} {'library':10s} {'true':9s} {'audit':12s} {'LB':>6s} {'outputs':>8s} {'out/s':>8s}",
             "(LB: the held-out lower bound on ε; outputs: drawn on both databases; out/s: over the audit's wall time)",
             "-" * 98]
    for r in rows:
        lb = r.get("lower_bound")
        lb_s = "" if lb is None or not math.isfinite(lb) else f"{lb:.2f}"
        ops = r.get("outputs_per_s")
        lines.append(f"{r['entry']:38s} {r['library']:10s} {r['true']:9s} {r['audit']:12s} {lb_s:>6s} "
                     f"{r.get('samples', ''):>8} {'' if ops is None else f'{ops:,.0f}':>8s}"
                     + (f"  ({r['why']})" if r.get("why") else ""))
    agree = sum((r["true"] == "violates") == (r["audit"] == "refuted") for r in rows if r["audit"] in ("refuted", "not refuted"))
    ran = sum(r["audit"] in ("refuted", "not refuted") for r in rows)
    lines.append(f"\naudit verdict agrees with the true verdict on {agree}/{ran} entries audited "
                 f"({len(rows) - ran} not audited)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", action="append", help="only these libraries (repeat)")
    parser.add_argument("--entry", action="append", help="only these entries (repeat)")
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply each entry's audit budget")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args()
    entries = [e for e in CATALOG if (not args.library or e.library in args.library)
               and (not args.entry or e.name in args.entry)]
    rows = run(entries, args.budget_scale)
    print(table(rows), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
