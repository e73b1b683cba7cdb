"""Audits of a sampling endpoint over HTTP: pairs, a shape probe, the engine, the report.

``audit_endpoint`` is what ``dpwatch audit`` and the service's audit jobs call; ``probe_shape``
detects an endpoint's output shape from one raw answer; ``format_report`` renders a result.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pydantic_core

from app.audit.engine import AuditResult, AuditSettings, Progress, Sampler, run_engine
from app.reporting.text import number
from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.protocol import ACCEPT_JSON, JSON_MEDIA_TYPE, SamplingError, encode_request, sign_headers
from app.sampling.safe_http import SafeAsyncClient, SafeHttpConfig, SafeHttpError
from app.sampling.timing import RateMeasurement, TimedSampler, budget_estimate, format_duration, measure_rate
from app.stats.claims import Claim
from app.stats.mpl import table1_pairs
from app.stats.shapes import OutputShape, ShapeDetection, detect_shape

__all__ = ["audit_endpoint", "endpoint_sampler", "format_report", "probe_shape", "read_pairs"]

log = logging.getLogger("dpwatch.audit")


def read_pairs(source: str | Path) -> list[tuple[Any, Any]]:
    """Pairs from a JSON file or inline JSON: ``[{"x": …, "x_prime": …}, …]``, ``[[x, x'], …]`` or
    ``{"pattern": "table1", "queries": k}`` (seed 003's Table I, from StatDP)."""
    text = str(source)
    path = Path(text)
    try:
        raw = path.read_text() if not text.lstrip().startswith(("[", "{")) else text
    except OSError as exc:
        raise ValueError(f"cannot read pairs from {source}: {exc}") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"cannot read pairs from {source}: {exc}") from exc
    if isinstance(data, dict) and data.get("pattern") == "table1":
        return [(list(p.x), list(p.xp)) for p in table1_pairs(int(data.get("queries", 5)))]
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


def endpoint_sampler(client: SamplingClient, endpoint: MechanismEndpoint, *, label: str = "audit") -> Sampler:
    """A sampler drawing from ``endpoint`` with the shape it declares (``endpoint.shape``)."""
    counter = {"i": 0}

    async def sample(database: Any, n: int) -> Any:
        counter["i"] += 1
        return await client.sample(endpoint, database, n, monitor_id=label, period=0,
                                   request_id_prefix=f"{label}-{counter['i']}")

    return sample


async def probe_shape(endpoint: MechanismEndpoint, database: Any, n: int, *,
                      http_config: SafeHttpConfig) -> ShapeDetection:
    """Draw ``n`` outputs once as raw JSON and detect their shape (app.stats.shapes.detect_shape)."""
    body = encode_request(database, n, "probe-shape", "audit", 0)
    headers = sign_headers((endpoint.secret, *endpoint.previous_secrets), "probe-shape", body)
    headers.update({"content-type": JSON_MEDIA_TYPE, "accept": ACCEPT_JSON})
    async with SafeAsyncClient(http_config) as http:
        try:
            resp = await http.request("POST", endpoint.sampling_url, content=body, headers=headers,
                                      max_bytes=64 * 1024 * 1024, timeout=endpoint.timeout_seconds)
        except SafeHttpError as exc:
            raise SamplingError(exc.reason, exc.detail) from None
    if resp.status_code != 200:
        raise SamplingError("http_status", f"HTTP {resp.status_code} while probing the output shape",
                            status_code=resp.status_code)
    try:
        doc = pydantic_core.from_json(resp.content, allow_inf_nan=False)
    except ValueError as exc:
        raise SamplingError("invalid_json", f"the probe's answer is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("samples"), list):
        raise SamplingError("invalid_json", "the probe's answer has no 'samples' array")
    try:
        return detect_shape(doc["samples"])
    except ValueError as exc:
        raise SamplingError("wrong_type", f"cannot tell the output shape: {exc}") from None


async def audit_endpoint(endpoint: MechanismEndpoint, pairs: list[tuple[Any, Any]], claim: Claim | None,
                         settings: AuditSettings, *, http_config: SafeHttpConfig,
                         progress: Callable[[Progress], Any] | None = None, cancel: Any = None,
                         label: str = "audit", time_limit: float | None = None,
                         on_estimate: Callable[[str], Any] | None = None,
                         measured: RateMeasurement | None = None) -> AuditResult:
    """Run the engine against an HTTP endpoint whose ``shape`` is set (declare or probe it first).

    The endpoint's rate is measured first (app.sampling.timing) and ``on_estimate`` receives one
    line: how long the budget will take. With ``time_limit`` (seconds) the budget per database is
    sized to what the rate allows, draws stop at the limit, and the result keeps its verdict and
    power; a request that times out stops the audit too (it is never an input's failure).
    ``measured``: a rate measured before (app.sampling.timing.endpoint_rate), not measured again."""
    if endpoint.shape is None:
        raise ValueError("the endpoint needs a shape (declared, or from probe_shape)")
    started = time.monotonic()
    deadline = None if time_limit is None else started + max(0.5 * time_limit, time_limit - TIME_RESERVE)
    config = SamplingClientConfig(deadline_seconds=600 if time_limit is None else max(5.0, min(600.0, time_limit)))
    async with SamplingClient(config=config, http_config=http_config) as client:
        raw = endpoint_sampler(client, endpoint, label=label)
        if measured is None:
            measured = await measure_rate(raw, pairs[0][0], max_outputs=50_000)
        n_dbs = len({json.dumps(db, sort_keys=True) for pair in pairs for db in pair})
        usable = math.inf
        asked = settings.budget * n_dbs
        if deadline is not None:
            usable = measured.rate * max(0.0, deadline - time.monotonic()) * TIME_USABLE
            per_db = int(usable // max(1, n_dbs))
            first = max(100, min(settings.first_round, per_db // 8))
            settings = replace(settings, first_round=first, budget=max(2 * first, min(settings.budget, per_db)))
        if on_estimate is not None:
            on_estimate(budget_estimate(measured, asked, time_limit, usable=usable))
        timed = TimedSampler(raw, rate=measured.rate, deadline=deadline)

        async def on_progress(p: Progress) -> Any:
            if progress is None:
                return None
            left = max(0, p.budget_samples - p.samples_used) / max(timed.rate, 1e-9)
            if deadline is not None:
                left = min(left, max(0.0, deadline - time.monotonic()))
            p.message = f"{p.message} · at most {format_duration(left)} left"
            out = progress(p)
            if inspect.isawaitable(out):
                out = await out
            return out

        result = await run_engine(timed, pairs, endpoint.shape, claim, settings, progress=on_progress, cancel=cancel,
                                  deadline=deadline)
    result.settings["rate"] = {**measured.to_dict(), "outputs_per_second_at_end": round(timed.rate, 1)}
    return await with_power(result, claim)


async def with_power(result: AuditResult, claim: Claim | None) -> AuditResult:
    """``result`` with its power (app.audit.power) when a claim was tested and not refuted."""
    if claim is not None and not result.refuted:
        from app.audit.power import power_rows

        try:
            result.power = await asyncio.to_thread(power_rows, result.tests, claim)
        except ValueError:
            result.power = None
    return result


#: Seconds kept after the last draw for the verdict, its power and the report.
TIME_RESERVE = 4.0
#: Share of (rate × time left) an audit with a time limit plans to draw.
TIME_USABLE = 0.85




def format_report(result: AuditResult | dict[str, Any]) -> str:
    from app.alarms.verdict import audit_verdict

    r = result.to_dict() if isinstance(result, AuditResult) else result
    conf = 100 * (1 - r["alpha"])
    verdict = audit_verdict(r)
    shape = OutputShape.model_validate(r["shape"]).describe()
    lines = [f"verdict: {verdict.sentence}", "",
             f"audit of {len(r['pairs'])} pair(s), outputs: {shape}",
             f"samples used: {r['samples_used']:,} in {r['seconds']:.1f} s over {len(r['rounds'])} round(s) "
             f"(stopped: {r['stopped']})", ""]
    if r["rounds"]:
        lines.append(f"{'round':>5}  {'n/db':>9}  {'α_r':>9}  {'pairs':>5}  LB this round")
        for rd in r["rounds"]:
            lines.append(f"{rd['round']:>5}  {rd['n_per_database']:>9,}  {rd['alpha']:>9.2e}  {len(rd['pairs']):>5}  "
                         f"{number(rd['lower_bound'], infinity='inf')}")
        lines.append("")
    best = r.get("best")
    if best:
        h = best["held_out"]
        lines += [f"best event: {best['describe']}",
                  f"  on x = {json.dumps(best['x'])}, x' = {json.dumps(best['x_prime'])}",
                  f"  held out: {h['a']}/{h['n_x']} vs {h['b']}/{h['n_xp']} (p̂ = {h['p_hat']:.4g}, q̂ = {h['q_hat']:.4g})"]
    lb = r["lower_bound"]
    # μ-GDP and ρ-zCDP claims (app.stats.claims.Claim.bound) bound their own parameter
    param = "μ" if r["claim"].endswith("-GDP") else "ρ" if r["claim"].endswith("-zCDP") else "ε"
    lines.append(f"LB = {number(lb, infinity='inf')}: a {conf:g}% lower confidence bound on {param} (held-out Clopper–Pearson, "
                 "valid over all rounds and events)")
    lines.append(f"ε̂ = {number(r['epsilon_hat'], infinity='inf')} (MPL point estimate"
                 + (f", {r['mpl']['kind']} on {r['mpl']['on']})" if r.get("mpl") else ")"))
    if r.get("note"):
        lines.append(f"note: {r['note']}")
    if r["claimed_epsilon"] is not None or param != "ε":
        if r["refuted"]:
            lines.append(f"claim {r['claim']}: REFUTED at level α = {r['alpha']:g} (the held-out counts lie outside "
                         "the claim's region)")
        else:
            lines.append(f"claim {r['claim']}: not refuted with these pairs and this budget "
                         f"(LB = {number(lb, infinity='inf')}); this does not show that the mechanism satisfies it")
            if r.get("power") is not None:
                from app.audit.power import power_sentence

                lines.append(power_sentence(r["power"]))
    lines.append("estimators:")
    lines += [f"  {e.name.replace('_', ' ')}: {e.figure} ({e.label})" for e in verdict.estimators]
    return "\n".join(lines)
