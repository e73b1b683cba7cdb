"""Monitors with ``auto`` events whose deployment changes at a random period (the auto-event monitor's
criterion), run through the real service: API, SQLite, the worker's periods, calibration and
re-discovery jobs, against endpoints served on loopback, with a fake clock.

Each case is a correct deployment that changes, at a random period t0, to a violating one (or,
for the benign cases, to another correct one). A monitor watches it with one ``auto`` check on
the case's pair; re-discovery runs every K periods (and when the outputs change shape). For each
run the table reports whether it alarmed before t0 (a false alarm), whether it alarmed after t0,
the delay, which check fired (the initial one or one re-discovery added) and whether the alarm's
evidence bounds ε above the claim.

    nice -n 10 .venv/bin/python bench/auto_events.py --runs 4 --horizon 60 --seed 1

``--mode far`` measures the false-alarm rate of the re-discovery rule itself, without the HTTP
and database layers but with the same statistics (discovery, held-out assessment, levels
α_j·2^−(r+1), thresholds, detectors): correct mechanisms throughout, R monitors each.

    nice -n 10 .venv/bin/python bench/auto_events.py --mode far --runs 100 --horizon 50 --cases dlap,a
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI

from app.reference import SCENARIOS
from app.reference.server import scenario_dim, scenario_output_kind

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support.sampling_server


# --------------------------------------------------------------------------------------- cases


class DiscreteLaplace:
    """k = Σx + two-sided geometric noise, P(k) ∝ e^{−ε|k − Σx|} (exactly ε-DP for sums one apart).
    The broken version (``broken``) maps the outputs of databases with Σx = 0 that fall in
    ``broken`` to 0: those values become impossible under x, far from where the loss peaked."""

    def __init__(self, epsilon: float, broken: tuple[int, ...] = ()) -> None:
        self.a = math.exp(-epsilon)
        self.broken = broken

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        center = int(round(sum(database)))
        k = center + rng.geometric(1 - self.a, n) - rng.geometric(1 - self.a, n)
        if self.broken and center == 0:
            k = np.where(np.isin(k, self.broken), center, k)
        return k


@dataclass(frozen=True)
class Case:
    name: str
    output_kind: str
    dim: int | None
    x: Any
    x_prime: Any
    epsilon: float
    harmful: bool
    before: Callable[..., np.ndarray]
    after: Callable[..., np.ndarray]

    def function(self, change: int) -> Callable[..., np.ndarray]:
        def sample(database: Any, n: int, rng: np.random.Generator, period: int = 0) -> np.ndarray:
            out = (self.before if period < change else self.after)(database, n, rng)
            return out.astype(np.float64) if self.output_kind == "real" else out

        return sample


def _scenario_case(key: str) -> Case:
    sc = SCENARIOS[key]
    before, after = sc.before_mechanism(), sc.after_mechanism()
    return Case(name=f"({key}) {sc.title}", output_kind=scenario_output_kind(sc), dim=scenario_dim(sc),
                x=list(sc.x), x_prime=list(sc.x_prime), epsilon=sc.epsilon, harmful=sc.harmful,
                before=before.sample, after=after.sample)


def cases(names: str) -> list[Case]:
    out = []
    for key in names.split(","):
        key = key.strip()
        if key == "dlap":
            out.append(Case(name="discrete Laplace, broken at 4-5", output_kind="discrete", dim=None, x=[0],
                            x_prime=[1], epsilon=0.5, harmful=True, before=DiscreteLaplace(0.5).sample,
                            after=DiscreteLaplace(0.5, broken=(4, 5)).sample))
        elif key in SCENARIOS:
            out.append(_scenario_case(key))
        else:
            raise SystemExit(f"unknown case {key!r}")
    return out


# ------------------------------------------------------------------------------ service mode


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(milliseconds=5)

    def __call__(self) -> datetime:
        return self.now


def run_service(selected: list[Case], runs: int, horizon: int, samples: int, every: int, disc_n: int,
                disc_N: int, seed: int) -> list[dict[str, Any]]:
    from fastapi.testclient import TestClient
    from sqlalchemy import select

    from app.auth.service import create_tenant_with_key
    from app.db import make_engine, make_session_factory, run_migrations
    from app.main import create_app
    from app.models.monitors import Check
    from app.reference.server import endpoint_router
    from app.scheduler.worker import Worker
    from app.settings import Settings
    from tests.support.sampling_server import serve_app

    rng = np.random.default_rng(seed)
    tmp = Path(tempfile.mkdtemp(prefix="svc8-auto-"))
    url = f"sqlite:///{tmp}/bench.sqlite3"
    run_migrations(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    with factory() as session:
        _, key = create_tenant_with_key(session, "bench", "bench")
        session.commit()
    settings = Settings(_env_file=None, database_url=url, migrate_on_start=False, allow_networks=["127.0.0.0/8"],
                        worker_id="bench", log_level="WARNING", max_in_flight=8, max_jobs_in_flight=4,
                        discovery_samples=disc_n, discovery_fresh_samples=disc_N)  # type: ignore[call-arg]
    plan = []
    routes = {}
    for case in selected:
        for r in range(runs):
            change = int(rng.integers(8, horizon - 15))
            path = f"/m{len(plan)}"
            routes[path] = (case.function(change), case.output_kind)
            plan.append({"case": case, "change": change, "path": path, "run": r})
    endpoints = FastAPI()
    endpoints.include_router(endpoint_router(routes, secret=SECRET, seed=seed))
    api = create_app(settings, session_factory=factory)
    out = []
    started = time.perf_counter()
    with serve_app(endpoints) as base, TestClient(api, headers={"Authorization": f"Bearer {key}"}) as client:
        for item in plan:
            case = item["case"]
            mech = client.post("/v1/mechanisms", json={
                "name": f"{item['path']}", "sampling_url": f"{base}{item['path']}", "output_kind": case.output_kind,
                "dim": case.dim, "secret": SECRET, "prefer_binary": case.output_kind != "discrete",
                "timeout_seconds": 30})
            assert mech.status_code == 201, mech.text
            mon = client.post("/v1/monitors", json={
                "name": item["path"], "mechanism_id": mech.json()["id"], "epsilon": case.epsilon, "horizon": horizon,
                "samples_per_period": samples, "period_seconds": 60, "rediscover_every": every,
                "outputs_window": 0, "alarm_snapshot_samples": 0,
                "checks": [{"x": case.x, "x_prime": case.x_prime, "event": {"kind": "auto"}}]})
            assert mon.status_code == 201, mon.text
            item["monitor_id"] = mon.json()["id"]
        clock = FakeClock()
        worker = Worker(settings, factory, clock=clock)

        async def loop() -> None:
            await worker.open()
            while await worker.tick_calibration():
                pass
            for _ in range(horizon + 1):
                while await worker.tick_periods():
                    await worker.drain()
                while await worker.tick_jobs():
                    await worker.drain_jobs()
                clock.now += timedelta(seconds=60)
            await worker.http.aclose()

        asyncio.run(loop())
        for item in plan:
            case, change, monitor_id = item["case"], item["change"], item["monitor_id"]
            alarms = client.get("/v1/alarms", params={"monitor_id": monitor_id}).json()["items"]
            privacy = sorted((a for a in alarms if a["kind"] == "privacy"), key=lambda a: a["t"])
            contract = [a for a in alarms if a["kind"] == "contract"]
            jobs = client.get("/v1/jobs", params={"monitor_id": monitor_id, "limit": 200}).json()["items"]
            with factory() as session:
                checks = {str(c.id): c for c in session.scalars(select(Check).where(
                    Check.monitor_id == uuid.UUID(monitor_id)))}
            first = privacy[0] if privacy else None
            fired = checks.get(first["check_id"]) if first else None
            evidence = (first or {}).get("evidence") or {}
            out.append({
                "case": case.name, "harmful": case.harmful, "change": change,
                "false_alarm": bool(first and first["t"] < change),
                "alarm_after": bool(first and first["t"] >= change),
                "delay": (first["t"] - change) if first and first["t"] >= change else None,
                "fired_by": None if fired is None else (fired.origin if fired.joined_t == 0 else
                                                         f"{fired.origin}@{fired.joined_t}"),
                "evidence_lb": (evidence.get("check") or {}).get("epsilon_lower_bound"),
                "evidence_above": bool((evidence.get("check") or {}).get("exceeds_claim")),
                "claim": case.epsilon,
                "checks": len(checks), "rediscoveries": len(jobs),
                "adopted": sum(1 for j in jobs if (j.get("result") or {}).get("adopted")),
                "contract_alarms": len(contract),
                "job_results": [{"state": j["state"], "error": j["error"], "params": j["params"],
                                 "adopted": (j.get("result") or {}).get("adopted"),
                                 "reason": (j.get("result") or {}).get("reason"),
                                 "top": [{k: c.get(k) for k in ("describe", "lower_bound", "informative", "why")}
                                         for c in ((j.get("result") or {}).get("candidates") or [])[:3]]}
                                for j in jobs],
            })
    engine.dispose()
    print(f"# {len(plan)} monitors, {time.perf_counter() - started:.0f} s", flush=True)
    return out


def print_service_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'case':<44} {'t0':>3} {'false':>5} {'alarm':>5} {'delay':>5} {'fired by':<16} {'ε_lb':>7} "
          f"{'>claim':>6} {'checks':>6} {'redisc':>6} {'contract':>8}")
    for r in rows:
        lb = "" if r["evidence_lb"] is None else f"{r['evidence_lb']:.3g}"
        print(f"{r['case'][:44]:<44} {r['change']:>3} {str(r['false_alarm']):>5} {str(r['alarm_after']):>5} "
              f"{'' if r['delay'] is None else r['delay']:>5} {str(r['fired_by'] or ''):<16} {lb:>7} "
              f"{str(r['evidence_above']):>6} {r['checks']:>6} {r['rediscoveries']:>6} {r['contract_alarms']:>8}")
    harmful = [r for r in rows if r["harmful"]]
    benign = [r for r in rows if not r["harmful"]]
    if harmful:
        print(f"\nharmful: {sum(r['alarm_after'] for r in harmful)}/{len(harmful)} changes alarmed, "
              f"{sum(r['false_alarm'] for r in harmful)} false alarms before the change, "
              f"{sum(r['evidence_above'] for r in harmful if r['alarm_after'])}/"
              f"{sum(r['alarm_after'] for r in harmful)} alarms with ε_lb above the claim; "
              f"median delay {np.median([r['delay'] for r in harmful if r['delay'] is not None]):.0f} periods")
    if benign:
        print(f"benign: {sum(r['false_alarm'] or r['alarm_after'] for r in benign)}/{len(benign)} alarmed (false)")


# ---------------------------------------------------------------------------------- far mode


def run_far(selected: list[Case], runs: int, horizon: int, samples: int, every: int, disc_n: int, disc_N: int,
            alpha: float, gamma: float, seed: int) -> None:
    """The rule's false-alarm rate on correct mechanisms: the service's statistics (the engine's
    discovery, the comparison on fresh draws, levels α·2^−(r+1), thresholds, detectors), no I/O."""

    from app.audit.discovery import discover_checks
    from app.audit.engine import AuditSettings
    from app.monitors.rediscovery import assess_candidates
    from app.stats.aggregator import WeightedAggregator
    from app.stats.events import event_contains, parse_event
    from app.stats.multiple import initial_check_alpha, rediscovery_alpha
    from app.stats.period import period_statistic
    from app.stats.shapes import OutputShape
    from app.stats.thresholds import threshold_for

    @functools.cache
    def threshold(t: int, level: float) -> float:
        return threshold_for(t, gamma, level, replications=50_000).value

    rng = np.random.default_rng(seed)
    print(f"{'case':<44} {'runs':>5} {'alarms':>6} {'FAR':>7} {'95% CI':>17} {'checks/run':>10} {'s':>6}")
    for case in selected:
        draw = case.before  # correct throughout
        shape = OutputShape.from_output_kind(case.output_kind, case.dim)
        settings = AuditSettings(alpha=alpha, budget=disc_n, first_round=max(100, min(2000, disc_n // 8)))
        started = time.perf_counter()
        false, added_total = 0, 0

        async def sampler(database: Any, n: int) -> np.ndarray:
            return draw(database, n, rng)

        def discover(existing: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
            found = asyncio.run(discover_checks(sampler, [(case.x, case.x_prime)], shape, settings=settings))
            draws = None
            if existing is not None:
                draws = {json.dumps(db, sort_keys=True): draw(db, disc_N, rng) for db in (case.x, case.x_prime)}
            out, _ = assess_candidates(found["candidates"], draws, alpha, existing or [])
            return out

        for _ in range(runs):
            level0 = initial_check_alpha(alpha, 1, True)
            chosen = next((c for c in discover(None) if c["better"]), None)
            checks: list[dict[str, Any]] = []
            if chosen is not None:
                checks.append({"x": chosen["x"], "x_prime": chosen["x_prime"], "event": chosen["event"],
                               "det": WeightedAggregator(horizon, gamma, threshold(horizon, level0))})
            r, alarmed = 0, False
            for t in range(1, horizon + 1):
                outs = {json.dumps(db, sort_keys=True): draw(db, samples, rng) for db in (case.x, case.x_prime)}
                for c in checks:
                    ev = parse_event(c["event"])
                    a = int(np.count_nonzero(event_contains(ev, outs[json.dumps(c["x"], sort_keys=True)])))
                    b = int(np.count_nonzero(event_contains(ev, outs[json.dumps(c["x_prime"], sort_keys=True)])))
                    if c["det"].update(float(period_statistic(a, b, samples, case.epsilon).z)).alarm:
                        alarmed = True
                if alarmed:
                    break
                if t % every == 0 and horizon - t >= 2:
                    best = next((c for c in discover([{"id": str(i), **c} for i, c in enumerate(checks)])
                                 if c["better"]), None)
                    if best is not None:
                        r += 1
                        checks.append({"x": best["x"], "x_prime": best["x_prime"], "event": best["event"],
                                       "det": WeightedAggregator(horizon - t, gamma, threshold(
                                           horizon - t, rediscovery_alpha(alpha, r)))})
            false += alarmed
            added_total += r
        lo, hi = _wilson(false, runs)
        print(f"{case.name[:44]:<44} {runs:>5} {false:>6} {false / runs:>7.3f} [{lo:.3f}, {hi:.3f}] "
              f"{added_total / runs:>10.2f} {time.perf_counter() - started:>6.0f}", flush=True)


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("service", "far"), default="service")
    ap.add_argument("--cases", default="dlap,a,c,d,e,f,g,h")
    ap.add_argument("--runs", type=int, default=3, help="runs per case (service: random change points)")
    ap.add_argument("--horizon", "-T", type=int, default=60)
    ap.add_argument("--samples", "-n", type=int, default=1000, help="outputs per side and period")
    ap.add_argument("--every", type=int, default=5, help="K: re-discovery every K periods")
    ap.add_argument("--discovery-samples", type=int, default=32000, help="discovery's budget per database")
    ap.add_argument("--discovery-fresh-samples", type=int, default=10000, help="comparison draws per database")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--gamma", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args()
    selected = cases(args.cases)
    if args.mode == "far":
        run_far(selected, args.runs, args.horizon, args.samples, args.every, args.discovery_samples,
                args.discovery_fresh_samples, args.alpha, args.gamma, args.seed)
        return
    rows = run_service(selected, args.runs, args.horizon, args.samples, args.every, args.discovery_samples,
                       args.discovery_fresh_samples, args.seed)
    print_service_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
