"""How fast the dashboard's pages are with a monitor of 10,000 periods and 200 monitors.

Builds a database (SQLite by default, or ``--database-url postgresql+psycopg://…``) with one
tenant of ``--monitors`` monitors, one of which has ``--periods`` periods (with failed periods, a
stretch without periods and an alarm near the end), the others ``--small-periods`` each, a
snapshot with its curves, alarms and webhook deliveries; and a second tenant with
``--metrics-monitors`` more monitors for ``/metrics``. It then serves the app with uvicorn on
loopback, signs in through the form, and times every page and chart-data request over real HTTP
(``--repeat`` times each; the metrics cache is off, so every scrape runs its query). With
``--browser``, it also times, in headless Chromium, loading the big monitor's page until its
charts are drawn.

    nice -n 10 .venv/bin/python bench/dashboard_speed.py            # SQLite
    nice -n 10 .venv/bin/python bench/dashboard_speed.py --browser  # and the time to draw in Chromium
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import insert  # noqa: E402

from app.auth.service import create_tenant_with_key  # noqa: E402
from app.db import make_engine, make_session_factory, run_migrations  # noqa: E402
from app.models.alarms import Alarm, Webhook, WebhookAttempt, WebhookMessage  # noqa: E402
from app.models.auth import ApiKey, Tenant  # noqa: E402
from app.models.mechanisms import Mechanism  # noqa: E402
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun  # noqa: E402
from app.models.snapshots import Snapshot  # noqa: E402

THRESHOLD = 3.3


def _monitor_row(tenant_id: uuid.UUID, mechanism_id: uuid.UUID, name: str, t: int, horizon: int, state: str,
                 anchor: datetime) -> dict:
    return dict(id=uuid.uuid4(), tenant_id=tenant_id, mechanism_id=mechanism_id, name=name, epsilon=1.0, alpha=0.05,
                gamma=0.25, horizon=horizon, samples_per_period=1000, period_seconds=60, cron=None, variance="score",
                kappa=1e-6, symmetric=False, renew=False, outputs_window=20, snapshot_every=None,
                alarm_snapshot_samples=50000, state=state, paused_from_state=None, horizon_index=1,
                horizon_alpha=0.05, threshold=THRESHOLD, threshold_std_error=0.01, threshold_source="table", t=t,
                consecutive_failures=0, schedule_anchor=anchor, next_run_at=anchor + timedelta(seconds=60 * (t + 1)),
                last_period_at=anchor + timedelta(seconds=60 * t), created_at=anchor, updated_at=anchor)


def _periods(monitor_id: uuid.UUID, check_id: uuid.UUID, n: int, anchor: datetime, rng: np.random.Generator,
             alarm_at: int | None, failed_every: int, gap: tuple[int, int] | None) -> tuple[list, list, dict | None]:
    runs, checks = [], []
    seq = 0
    t = 0
    walk = np.abs(np.cumsum(rng.normal(0, 0.05, n))) % 2.5
    alarm_row = None
    slot = 0
    while t < n:
        slot += 1
        if gap and gap[0] <= slot < gap[1]:
            continue  # paused: no period in these slots
        seq += 1
        when = anchor + timedelta(seconds=60 * slot)
        run_id = uuid.uuid4()
        if failed_every and seq % failed_every == 0:
            runs.append(dict(id=run_id, monitor_id=monitor_id, seq=seq, scheduled_for=when, horizon_index=1, t=None,
                             status="failed", failure_reason="timeout", failure_detail="no answer in 10 s",
                             started_at=when, finished_at=when, sampling_seconds=10.0, worker_id="bench"))
            continue
        t += 1
        stat = float(walk[t - 1]) if t != alarm_at else THRESHOLD + 0.4
        p, q = 0.3 + 0.01 * rng.normal(), 0.29 + 0.01 * rng.normal()
        runs.append(dict(id=run_id, monitor_id=monitor_id, seq=seq, scheduled_for=when, horizon_index=1, t=t,
                         status="ok", failure_reason=None, failure_detail=None, started_at=when, finished_at=when,
                         sampling_seconds=0.2, worker_id="bench"))
        checks.append(dict(id=uuid.uuid4(), period_run_id=run_id, check_id=check_id, a=300, b=290, n=1000, p_hat=p,
                           q_hat=q, d_hat=p - np.e * q, sigma_hat=0.5, z=float(rng.normal()), statistic=stat,
                           threshold=THRESHOLD))
        if t == alarm_at:
            alarm_row = dict(period_run_id=run_id, t=t, statistic=stat, created_at=when)
    return runs, checks, alarm_row


def build(url: str, monitors: int, periods: int, small_periods: int, metrics_monitors: int) -> dict:
    run_migrations(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    rng = np.random.default_rng(1)
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    with factory() as session:
        tenant, key = create_tenant_with_key(session, "bench", "bench")
        other, _ = create_tenant_with_key(session, "bench-metrics", "bench")
        tid = tenant.id
        mech_ids = [uuid.uuid4() for _ in range(10)]
        session.execute(insert(Mechanism), [dict(id=m, tenant_id=tid, name=f"mechanism-{i}",
                                                 sampling_url="https://dp.example.org/s", output_kind="real", dim=None,
                                                 max_batch=10000, timeout_seconds=10.0, prefer_binary=False,
                                                 secret="whsec_x", created_at=anchor, updated_at=anchor)
                                            for i, m in enumerate(mech_ids)])
        rows = []
        for i in range(monitors):
            big = i == 0
            state = "alarm" if big or i % 25 == 3 else ("paused" if i % 40 == 7 else "active")
            n = periods if big else small_periods
            rows.append(_monitor_row(tid, mech_ids[i % 10], f"monitor {i:03d}" + (" (10k periods)" if big else ""),
                                     n, max(n, 100) if big else 1000, state, anchor))
        session.execute(insert(Monitor), rows)
        check_rows = [dict(id=uuid.uuid4(), monitor_id=m["id"], position=0, x=[0] * 10, x_prime=[0] * 9 + [1],
                           event={"kind": "interval", "low": None, "high": 0.0}, reversed=False, detector_state=None,
                           discovery=None, last_z=0.5, last_statistic=1.0, max_statistic=2.0) for m in rows]
        session.execute(insert(Check), check_rows)
        all_runs, all_checks, alarms = [], [], []
        for i, (m, c) in enumerate(zip(rows, check_rows)):
            big = i == 0
            runs, pcs, alarm = _periods(m["id"], c["id"], m["t"], anchor, rng,
                                        alarm_at=m["t"] - 200 if big else (m["t"] if m["state"] == "alarm" else None),
                                        failed_every=500 if big else 0, gap=(3000, 3400) if big else None)
            all_runs += runs
            all_checks += pcs
            if alarm:
                alarms.append(dict(id=uuid.uuid4(), tenant_id=tid, monitor_id=m["id"], check_id=c["id"],
                                   horizon_index=1, threshold=THRESHOLD, a=330, b=250, n=1000, z=4.1,
                                   fingerprint=uuid.uuid4().hex[:16],
                                   evidence={"snapshot_id": None, "lower_bound": 1.4, "epsilon_hat": 1.9,
                                             "statement": "the mechanism is at best 1.4-DP at 95% confidence",
                                             "confidence": 0.95,
                                             "window": {"from_t": alarm["t"] - 30, "to_t": alarm["t"]}},
                                   **alarm))
        for start in range(0, len(all_runs), 5000):
            session.execute(insert(PeriodRun), all_runs[start:start + 5000])
        for start in range(0, len(all_checks), 5000):
            session.execute(insert(PeriodCheck), all_checks[start:start + 5000])
        session.execute(insert(Alarm), alarms)
        grid = np.linspace(-3, 3, 400)
        loss = np.abs(0.8 * grid + 0.1 * rng.normal(size=400))
        result = {"kind": "continuous", "alpha": 0.05, "claimed_epsilon": 1.0, "chosen_pair": 0,
                  "epsilon_hat": float(loss.max()), "t_hat": [2.9], "lower_bound": 1.4, "exceeds_claim": True,
                  "statement": "the mechanism is at best 1.4-DP at 95% confidence",
                  "pairs": [{"check_id": str(check_rows[0]["id"]), "position": 0, "epsilon_hat": float(loss.max()),
                             "lower_bound": 1.4, "t_hat": [2.9], "loss_curve": {"grid": [grid.tolist()],
                                                                                 "loss": loss.tolist(),
                                                                                 "f_x": loss.tolist(),
                                                                                 "f_xp": loss.tolist()},
                             "privacy_profile": {"epsilons": [0.1 * i for i in range(41)],
                                                 "delta": [max(0.0, 0.3 - 0.01 * i) for i in range(41)]}}]}
        snaps = [dict(id=uuid.uuid4(), tenant_id=tid, monitor_id=rows[0]["id"], alarm_id=None, trigger="schedule",
                      status="done", params={"extra_samples": 0, "alpha": 0.05, "window": 20}, result=result,
                      created_at=anchor + timedelta(hours=k)) for k in range(30)]
        session.execute(insert(Snapshot), snaps)
        hook = dict(id=uuid.uuid4(), tenant_id=tid, url="https://hooks.example.org/x", event_types=["alarm.firing"],
                    secret="whsec_x", enabled=True, disabled_reason=None, created_at=anchor)
        session.execute(insert(Webhook), [hook])
        messages = [dict(id=f"msg_{uuid.uuid4().hex}", tenant_id=tid, webhook_id=hook["id"], event_type="alarm.firing",
                         payload={"type": "alarm.firing", "data": {"i": k}}, created_at=anchor + timedelta(minutes=k),
                         status="delivered" if k % 7 else "failed", attempts=1 if k % 7 else 11, next_attempt_at=None,
                         last_status_code=204 if k % 7 else 500, last_error=None if k % 7 else "HTTP 500",
                         delivered_at=anchor) for k in range(2000)]
        session.execute(insert(WebhookMessage), messages)
        session.execute(insert(WebhookAttempt), [dict(id=uuid.uuid4(), message_id=m["id"], attempted_at=m["created_at"],
                                                      status_code=m["last_status_code"], error=m["last_error"],
                                                      duration_ms=12.0, worker_id="bench") for m in messages])
        # The second tenant: many monitors for the metrics scrape.
        mech = uuid.uuid4()
        session.execute(insert(Mechanism), [dict(id=mech, tenant_id=other.id, name="m", sampling_url="https://x.org/s",
                                                 output_kind="real", dim=None, max_batch=10000, timeout_seconds=10.0,
                                                 prefer_binary=False, secret="whsec_x", created_at=anchor,
                                                 updated_at=anchor)])
        extra = [_monitor_row(other.id, mech, f"metrics {i}", 10, 100, "active", anchor)
                 for i in range(metrics_monitors)]
        for start in range(0, len(extra), 5000):
            session.execute(insert(Monitor), extra[start:start + 5000])
            session.execute(insert(Check), [dict(id=uuid.uuid4(), monitor_id=m["id"], position=0, x=[0], x_prime=[1],
                                                 event={"kind": "interval", "low": None, "high": 0.0}, reversed=False,
                                                 detector_state=None, discovery=None, last_z=0.1, last_statistic=0.5,
                                                 max_statistic=1.0) for m in extra[start:start + 5000]])
        session.commit()
        big = rows[0]["id"]
        info = {"key": key, "big": str(big), "check": str(check_rows[0]["id"]), "small": str(rows[1]["id"]),
                "snapshot": str(snaps[-1]["id"]), "alarm": str(alarms[0]["id"]), "webhook": str(hook["id"]),
                "tenants": session.query(Tenant).count(), "keys": session.query(ApiKey).count()}
    engine.dispose()
    return info


def children_cpu_seconds() -> float:
    """User + system CPU time of this process's descendants (Playwright's driver and Chromium's
    processes), read from /proc: what a page load costs the browser, whatever else runs."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        used[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
    me, total = os.getpid(), 0.0
    for pid in parents:
        p = pid
        while p in parents and p not in (0, 1, me):
            p = parents[p]
        if p == me and pid != me:
            total += used[pid]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None, help="default: a SQLite file in a temporary folder")
    parser.add_argument("--monitors", type=int, default=200)
    parser.add_argument("--periods", type=int, default=10_000)
    parser.add_argument("--small-periods", type=int, default=60)
    parser.add_argument("--metrics-monitors", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also time drawing the big monitor in Chromium")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args()

    import httpx

    from app.main import create_app
    from app.settings import Settings
    from tests.support.sampling_server import serve_app

    tmp = tempfile.mkdtemp(prefix="dpwatch-bench-web-")
    url = args.database_url or f"sqlite:///{tmp}/bench.sqlite3"
    started = time.perf_counter()
    info = build(url, args.monitors, args.periods, args.small_periods, args.metrics_monitors)
    print(f"built the database in {time.perf_counter() - started:.1f} s: {args.monitors} monitors "
          f"(one with {args.periods} periods), {args.metrics_monitors} more for /metrics; {url.split(':')[0]}")
    settings = Settings(_env_file=None, database_url=url, migrate_on_start=False, log_level="WARNING",
                        metrics_cache_seconds=0)
    app = create_app(settings)
    results = []
    with serve_app(app, lifespan="on") as base, httpx.Client(base_url=base, timeout=60) as http:
        login = http.get("/ui/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', login.text).group(1)
        assert http.post("/ui/login", data={"csrf_token": token, "api_key": info["key"]}).status_code in (200, 303)
        pages = [
            ("monitor list (200 monitors)", "/ui/monitors"),
            ("monitor list, filtered (state=alarm)", "/ui/monitors?state=alarm"),
            ("monitor page, 10k periods", f"/ui/monitors/{info['big']}"),
            ("chart data, 10k periods", f"/ui/data/monitors/{info['big']}/checks/{info['check']}/series"),
            ("monitor page, 60 periods", f"/ui/monitors/{info['small']}"),
            ("snapshot page", f"/ui/snapshots/{info['snapshot']}"),
            ("snapshot chart data", f"/ui/data/snapshots/{info['snapshot']}"),
            ("alarms", "/ui/alarms"),
            ("one alarm", f"/ui/alarms/{info['alarm']}"),
            ("alarms, filtered and grouped (kind, unacknowledged, 7 d)", "/ui/alarms?kind=privacy&acknowledged=no&since=7d"),
            ("webhooks", "/ui/webhooks"),
            ("deliveries (2000 messages)", f"/ui/webhooks/{info['webhook']}"),
            ("keys", "/ui/keys"),
            ("silences", "/ui/silences"),
            ("mechanisms", "/ui/mechanisms"),
            ("new monitor form", "/ui/monitors/new"),
            (f"/metrics ({args.monitors + args.metrics_monitors} monitors, no cache)", "/metrics"),
            ("/docs", "/docs"),
            ("/redoc", "/redoc"),
        ]
        for label, path in pages:
            times, cpu, size = [], [], 0
            for _ in range(args.repeat):
                c0, t0 = time.process_time(), time.perf_counter()
                response = http.get(path, follow_redirects=False)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                assert response.status_code == 200, (path, response.status_code, response.text[:300])
                size = len(response.content)
            results.append({"page": label, "path": path, "min_ms": round(1000 * min(times), 1),
                            "median_ms": round(1000 * statistics.median(times), 1),
                            "max_ms": round(1000 * max(times), 1), "cpu_ms": round(1000 * statistics.median(cpu), 1),
                            "bytes": size})
        series = http.get(pages[3][1]).json()
        if args.browser:
            from tests.support.web_browser import browser

            with browser() as chrome:
                context = chrome.new_context(viewport={"width": 1400, "height": 900})
                context.add_cookies([{"name": k, "value": v, "url": base + "/ui"} for k, v in http.cookies.items()])
                page = context.new_page()

                drawn = {f"/ui/monitors/{info['big']}": ".chart-p canvas", f"/ui/monitors/{info['small']}": ".chart-p canvas",
                         f"/ui/snapshots/{info['snapshot']}": "#snapshot-charts canvas"}
                browser_pages = [(f"Chromium: {label}" + (", until its charts are drawn" if path in drawn else ", loaded"),
                                  path, drawn.get(path, "footer.foot"))
                                 for label, path in pages if path.startswith("/ui/") and "/data/" not in path]
                for label, path, selector in browser_pages:
                    times, cpu = [], []
                    for _ in range(args.repeat):
                        c0, t0 = children_cpu_seconds() + time.process_time(), time.perf_counter()
                        page.goto(f"{base}{path}")
                        page.wait_for_selector(selector)
                        times.append(time.perf_counter() - t0)
                        cpu.append(children_cpu_seconds() + time.process_time() - c0)
                    results.append({"page": label, "path": path, "min_ms": round(1000 * min(times), 1),
                                    "median_ms": round(1000 * statistics.median(times), 1),
                                    "max_ms": round(1000 * max(times), 1),
                                    "cpu_ms": round(1000 * statistics.median(cpu), 1), "bytes": None})
                # The same on a phone (390 px): the monitor list folds into cards.
                phone = chrome.new_context(viewport={"width": 390, "height": 844})
                phone.add_cookies([{"name": k, "value": v, "url": base + "/ui"} for k, v in http.cookies.items()])
                page = phone.new_page()
                for label, path, selector in (("Chromium 390 px: monitor list (200 monitors), loaded", "/ui/monitors",
                                               "footer.foot"),
                                              ("Chromium 390 px: monitor page, 10k periods, charts drawn",
                                               f"/ui/monitors/{info['big']}", ".chart-p canvas")):
                    times = []
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        page.goto(f"{base}{path}")
                        page.wait_for_selector(selector)
                        times.append(time.perf_counter() - t0)
                    width = page.evaluate("() => document.documentElement.scrollWidth")
                    results.append({"page": f"{label} (scrollWidth {width})", "path": path,
                                    "min_ms": round(1000 * min(times), 1),
                                    "median_ms": round(1000 * statistics.median(times), 1),
                                    "max_ms": round(1000 * max(times), 1), "cpu_ms": None, "bytes": None})
    print(f"\nload average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; {args.repeat} requests each")
    print(f"chart data of the 10k-period monitor: {series['periods']} periods drawn as {series['points']} points, "
          f"alarm at t = {series['alarm']['t']} kept: {series['alarm']['x'] in series['x']}\n")
    print("CPU ms: CPU time used during the request by this process (the server and the client), and for the")
    print("Chromium rows also by Chromium's processes (from /proc). It depends much less on the load of a shared")
    print("machine than the wall-clock times.\n")
    print(f"| {'page':<90} | min ms | median ms | max ms | CPU ms | bytes |")
    print(f"|{'-' * 92}|-------:|----------:|-------:|-------:|------:|")
    for r in results:
        cpu_text = r["cpu_ms"] if r["cpu_ms"] is not None else ""
        print(f"| {r['page']:<90} | {r['min_ms']:>6} | {r['median_ms']:>9} | {r['max_ms']:>6} | {cpu_text:>6} | "
              f"{r['bytes'] if r['bytes'] else '':>5} |")
    pages_only = [r for r in results if not r["path"].startswith("/metrics")]
    worst = max(r["max_ms"] for r in pages_only)
    print(f"\nslowest page or chart data, wall clock: {worst} ms ({'under' if worst < 1000 else 'OVER'} 1 s); "
          f"largest median CPU: {max(r['cpu_ms'] or 0 for r in pages_only)} ms")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "load": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
