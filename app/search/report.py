"""The search's report in words, and the body that turns a finding into a monitor (docs/search.md §2)."""

from __future__ import annotations

import json
from typing import Any

from app.reporting.text import database, number

__all__ = ["format_search_report", "monitor_body"]




def format_search_report(result: Any, *, url: str | None = None) -> str:
    r = result.to_dict() if hasattr(result, "to_dict") else result
    conf = f"{100 * (1 - r['alpha']):g}%"
    s, c = r["samples"], r["candidates"]
    by = ", ".join(f"{k} {v}" for k, v in c["by_source"].items())
    rungs = r["screening"]["rungs"]
    lines = [f"search{' of ' + url if url else ''}",
             f"claim: {r['claim']} (α = {r['alpha']:g}); domain: {_domain(r['domain'])}",
             f"candidates: {c['generated']} pairs ({by})"
             + (f"; screened in {len(rungs)} rung(s), {rungs[0]['pairs']} → {rungs[-1]['pairs']} pairs, up to "
                f"{rungs[-1]['n_per_database']:,} outputs per database" if rungs else ""),
             f"refined: {len(r['refinement'])} pair(s)"
             + ("" if not r["refinement"] else " (" + ", ".join(
                 f"{x['trials']} trials, {'moved' if x['improved'] else 'kept'}" for x in r["refinement"]) + ")"),
             _certified_line(r),
             f"samples: screening {s['screening']:,} + refinement {s['refinement']:,} + certification "
             f"{s['certification']:,}" + (f" + severity {s['severity']:,}" if s.get("severity") else "")
             + f" = {s['total']:,} of a budget of {r['budget']:,}; {r['seconds']['total']:.1f} s "
             f"(stopped: {r['stopped']})", ""]
    f = r.get("finding")
    if r["certified"] and f:
        h = f["held_out"]
        lines += ["VIOLATION CERTIFIED",
                  f"  x  = {database(f['x'])}",
                  f"  x′ = {database(f['x_prime'])}",
                  f"  neighbours by {f['relation']}; found by {f['source']} ({f['note']})",
                  f"  event: {f['describe']}",
                  f"  held out: {h['a']}/{h['n_x']} vs {h['b']}/{h['n_xp']} (p̂ = {h['p_hat']:.4g}, q̂ = {h['q_hat']:.4g}), "
                  f"tested at level {h['alpha']:.2e}",
                  f"  {r['parameter']} ≥ {number(f['lower_bound'])} at {conf} confidence (claimed {r['parameter']} = "
                  f"{number(r['claimed_value'])})"]
        sev = r.get("severity")
        if sev and sev.get("lower_bound") is not None:
            hs = sev["held_out"]
            lines += ["SEVERITY (the bound to act on; fresh outputs of the certified pair, after the certification)",
                      f"  event: {sev['describe']} ({sev['family']})",
                      f"  held out: {hs['a']:,}/{hs['n_x']:,} vs {hs['b']:,}/{hs['n_xp']:,}, {sev['events']} events "
                      f"each at level {sev['level_per_event']:.2e}",
                      f"  {r['parameter']} ≥ {number(sev['lower_bound'])} at {conf} confidence"
                      + (f" ({sev['lower_bound'] / r['claimed_value']:.3g} × the claim)" if r['claimed_value'] else "")]
            if sev.get("never_seen"):
                lines.append(f"  x′ never produced this output in {hs['n_xp']:,} draws: the bound is limited by the "
                             "draws and the loss may be unbounded in truth")
    else:
        lb = r["certification"].get("lower_bound")
        lines += ["no violation certified within the budget (this does not show that the claim holds)"]
        if lb is not None:
            lines.append(f"  largest lower bound on {r['parameter']} certified on fresh samples: {number(lb)}")
        power = r.get("power")
        if power:
            lines.append("  power (each row: the smallest violation one tested event would have revealed with "
                         "probability ≥ 0.9, at event probability q on x′; nothing about other pairs or events):")
            for row in power[:6]:
                got = ", ".join(f"q={d['q']:g}: {number(d['theta'], 3) if d['theta'] is not None else 'none'}"
                                for d in row["detected"])
                lines.append(f"    {database(row['x'], 30)} vs {database(row['x_prime'], 30)}, {row['family']}, "
                             f"{row['n_per_side']:,}/side: {row['parameter']} ≥ … {got}")
    fails = r["failing_inputs"]
    if fails:
        lines += ["", f"failing inputs ({len(fails)}; the endpoint did not answer them, findings too):"]
        for item in fails[:10]:
            code = f" {item['status_code']}" if item.get("status_code") else ""
            detail = item["detail"].split(": ", 1)[1] if item["detail"].startswith("HTTP ") else item["detail"]
            lines.append(f"  {item['reason']}{code}: {database(item['database'], 60)} — {detail[:120]}")
        if len(fails) > 10:
            lines.append(f"  … and {len(fails) - 10} more (--json lists them all)")
    lines += ["", r["statement"]]
    return "\n".join(lines)


def _certified_line(r: dict[str, Any]) -> str:
    cert = r["certification"]
    stages = cert.get("stages") or []
    tested = sum(st["tests"] for st in stages)
    line = (f"certified on fresh samples: {tested} staged test(s) in {len(stages)} stage(s)"
            + (f", then {r['candidates']['finalists']} finalist(s) by the audit engine" if "rounds" in cert else ""))
    first = cert.get("first_certification")
    if first:
        where = "the final certification" if first["stage"] == "final" else f"stage {first['stage']} ({first['after']})"
        line += f"; first certified at {where}, after {first['samples']:,} outputs"
    return line


def _domain(d: dict[str, Any]) -> str:
    from app.search.domain import InputDomain

    try:
        return InputDomain.model_validate(d).describe()
    except ValueError:
        return json.dumps(d)


def monitor_body(result: Any, *, mechanism_id: str | None = None, finding: int = 1, horizon: int = 100,
                 samples_per_period: int = 5_000, period_seconds: int = 3_600) -> dict[str, Any] | None:
    """A ``POST /v1/monitors`` body that watches a finding (the ``finding``-th, 1-based) from now on:
    one call, with the pair, the event and the claim. None when there is no informative finding."""
    r = result.to_dict() if hasattr(result, "to_dict") else result
    usable = [f for f in r["findings"] if f.get("informative")]
    if not 1 <= finding <= len(usable):
        return None
    f = usable[finding - 1]
    return {"name": f"search finding: {f['describe']}"[:200], "mechanism_id": mechanism_id or "<mechanism id>",
            "claim": r["claim_json"], "checks": [{"x": f["x"], "x_prime": f["x_prime"], "event": f["event"]}],
            "horizon": horizon, "samples_per_period": samples_per_period, "period_seconds": period_seconds}
