"""``dpwatch audit``: a one-shot MPL audit of a sampling endpoint (seed 003, Algorithm 4).

1. Draw n outputs on each database of the B candidate pairs and run DPL on each pair (ε̂, t̂).
2. Take the pair with the largest ε̂ and draw N fresh outputs on its two databases.
3. Bound the loss at its t̂: LB (eq. 26). [LB, ∞) covers the privacy loss with 1 − α.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.safe_http import SafeHttpConfig
from app.snapshots.discovery import table1_candidates
from app.stats.mpl import MPLParams, dpl, kind_for_output, mpl_lower_bound


def read_pairs(path: Path) -> list[tuple[Any, Any]]:
    """Pairs from JSON: ``[{"x": …, "x_prime": …}, …]``, ``[[x, x'], …]`` or ``{"pattern": "table1", "queries": k}``."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read pairs from {path}: {exc}") from exc
    if isinstance(data, dict) and data.get("pattern") == "table1":
        return table1_candidates(int(data.get("queries", 5)))
    if not isinstance(data, list) or not data:
        raise ValueError('pairs must be a non-empty JSON list of {"x": …, "x_prime": …} or [x, x\'] items, '
                         'or {"pattern": "table1", "queries": k}')
    pairs = []
    for i, item in enumerate(data):
        if isinstance(item, dict) and {"x", "x_prime"} <= set(item):
            pairs.append((item["x"], item["x_prime"]))
        elif isinstance(item, list) and len(item) == 2:
            pairs.append((item[0], item[1]))
        else:
            raise ValueError(f"pair {i}: expected {{\"x\": …, \"x_prime\": …}} or [x, x'], got {item!r}")
    return pairs


async def run_audit(endpoint: MechanismEndpoint, pairs: list[tuple[Any, Any]], params: MPLParams, *,
                    allow_networks: list[str], epsilon: float | None,
                    progress: Callable[[str], None]) -> dict[str, Any]:
    kind = kind_for_output(endpoint.output_kind)
    started = time.perf_counter()
    dbs: dict[str, Any] = {}
    for x, xp in pairs:
        for db in (x, xp):
            dbs.setdefault(json.dumps(db, sort_keys=True), db)
    config = SamplingClientConfig(deadline_seconds=600)
    async with SamplingClient(config=config, http_config=SafeHttpConfig(allow_networks=tuple(allow_networks))) as client:
        progress(f"step 1/3: drawing n={params.n} outputs on each of {len(dbs)} databases ({len(pairs)} pairs)")
        drawn: dict[str, np.ndarray] = {}
        for i, (key, db) in enumerate(dbs.items(), start=1):
            drawn[key] = await client.sample(endpoint, db, params.n, monitor_id="audit", period=0,
                                             request_id_prefix=f"audit-n-{i}")
            progress(f"  database {i}/{len(dbs)} done ({time.perf_counter() - started:.1f} s)")
        progress("step 2/3: DPL on each pair")
        rows = []
        for i, (x, xp) in enumerate(pairs):
            res = await asyncio.to_thread(dpl, drawn[json.dumps(x, sort_keys=True)],
                                          drawn[json.dumps(xp, sort_keys=True)], kind, params)
            rows.append({"pair": i, "x": x, "x_prime": xp, "epsilon_hat": res.epsilon_hat,
                         "t_hat": res.to_dict(include_curve=False)["t_hat"], "_t_hat": res.t_hat})
        best = max(rows, key=lambda r: r["epsilon_hat"])
        progress(f"step 3/3: N={params.N} fresh outputs on pair {best['pair']} (largest ε̂ = {best['epsilon_hat']:.3f})")
        fresh_x = await client.sample(endpoint, best["x"], params.N, monitor_id="audit", period=0,
                                      request_id_prefix="audit-N-x")
        fresh_xp = await client.sample(endpoint, best["x_prime"], params.N, monitor_id="audit", period=0,
                                       request_id_prefix="audit-N-xp")
    bound = await asyncio.to_thread(mpl_lower_bound, fresh_x, fresh_xp, best["_t_hat"], kind, params)
    for r in rows:
        r.pop("_t_hat")
    return {
        "kind": kind, "pairs": rows, "chosen_pair": best["pair"], "epsilon_hat": best["epsilon_hat"],
        "t_hat": best["t_hat"], "lower_bound": bound.lower_bound, "alpha": params.alpha,
        "claimed_epsilon": epsilon, "refutes_claim": None if epsilon is None else bound.exceeds(epsilon),
        "params": params.to_dict(), "bound": bound.to_dict(), "seconds": round(time.perf_counter() - started, 2),
    }


def format_report(result: dict[str, Any]) -> str:
    lines = [f"MPL audit ({result['kind']} outputs, {len(result['pairs'])} pairs, {result['seconds']} s)", ""]
    lines.append(f"{'pair':>4}  {'ε̂':>8}  t̂")
    for r in result["pairs"]:
        mark = "  <- chosen" if r["pair"] == result["chosen_pair"] else ""
        lines.append(f"{r['pair']:>4}  {r['epsilon_hat']:8.4f}  {json.dumps(r['t_hat'])}{mark}")
    conf = 100 * (1 - result["alpha"])
    lb = result["lower_bound"]
    lines += ["", f"ε̂ = {result['epsilon_hat']:.4f} at t̂ = {json.dumps(result['t_hat'])}",
              f"LB = {lb:.4f}: " + (f"ε is at least {lb:.3g} at {conf:g}% confidence (a lower bound only)" if lb > 0
                                    else f"no privacy loss is established at {conf:g}% confidence; this does not "
                                         "show that the mechanism is private")]
    if result["claimed_epsilon"] is not None:
        verdict = ("REFUTED: LB exceeds the claim" if result["refutes_claim"]
                   else "not refuted at this level (LB does not exceed the claim)")
        lines.append(f"claimed ε = {result['claimed_epsilon']:g}: {verdict}")
    return "\n".join(lines)
