"""``dpwatch demo``: the service, the reference mechanisms and a webhook receiver in one process.

It starts the API and a worker on SQLite (a fresh file under ./data), serves the reference
mechanisms under ``/reference`` on loopback, and then drives the service through its own REST
API, as a client would: it registers one mechanism per scenario, (a)–(h) of the monitoring paper
and the Gaussian claim scenarios (i)–(l) (the deployment changes at period ``change_period``),
creates a monitor on each (12 by default), subscribes a webhook receiver (``/demo/webhook``, which
verifies every signature with ``standardwebhooks``), and prints the monitors' progress until every
harmful change has raised an alarm. Then it stops printing the table and prints the webhooks as
they arrive; with ``exit_when_done`` it waits for the ``alarm.firing`` webhook of every harmful
monitor (sent once the alarm's snapshot is done), prints it, and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request, Response
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.main import create_app
from app.reference.gaussian import CLAIM_SCENARIOS
from app.reference.scenarios import SCENARIOS
from app.reference.server import reference_router, scenario_dim, scenario_output_kind
from app.sampling.protocol import generate_secret
from app.scheduler import attach_worker
from app.settings import Settings

LOOPBACK = ["127.0.0.0/8", "::1/128"]


@dataclass
class DemoOptions:
    port: int = 8000
    horizon: int = 100
    samples_per_period: int = 200
    period_seconds: int = 1
    change_period: int = 10
    data_dir: Path = Path("data")
    scenarios: str = "abcdefghijkl"
    exit_when_done: bool = False
    timeout_seconds: float = 600.0


@dataclass
class Receiver:
    """The demo's webhook endpoint: verifies and keeps what it receives."""

    secret: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        if self.secret is None:
            return Response(status_code=503)
        try:
            payload = Webhook(self.secret).verify(body, dict(request.headers))
        except WebhookVerificationError:
            self.rejected += 1
            return Response(status_code=401)
        self.events.append(payload)
        return Response(status_code=204)


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def build_demo_app(opts: DemoOptions, receiver: Receiver, mechanism_secret: str) -> tuple[FastAPI, Settings]:
    db_file = opts.data_dir / "demo.sqlite3"
    opts.data_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_file}{suffix}").unlink(missing_ok=True)
    settings = Settings(
        database_url=f"sqlite:///{db_file.as_posix()}", allow_networks=LOOPBACK,
        public_url=f"http://127.0.0.1:{opts.port}", tick_seconds=0.25, lease_seconds=30,
        log_level="WARNING", log_format="console",
    )
    app = create_app(settings)
    attach_worker(app, settings)
    app.include_router(reference_router(mechanism_secret, change_period=opts.change_period), prefix="/reference",
                       include_in_schema=False)
    app.add_api_route("/demo/webhook", receiver.handle, methods=["POST"], include_in_schema=False)
    return app, settings


async def _create_key(settings: Settings) -> str:
    from app.auth.service import add_key_to_tenant
    from app.db import make_engine, make_session_factory

    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            # A new key on the "demo" tenant, which a previous run on the same database made already.
            _, _, key, _ = add_key_to_tenant(session, "demo", "demo key")
            session.commit()
        return key
    finally:
        engine.dispose()


#: Width of the name column of the demo's table.
NAME_WIDTH = 60


def fit(text: str, width: int = NAME_WIDTH) -> str:
    """``text`` cut at a word boundary to at most ``width`` characters, with an ellipsis when cut
    (``textwrap.shorten``; a single word longer than ``width`` is cut inside it)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = textwrap.shorten(text, width=width, placeholder="…")
    return cut if cut != "…" else text[: width - 1] + "…"


def display_name(key: str, title: str, benign: bool = False, width: int = NAME_WIDTH) -> str:
    """``(g) Report Noisy Max: change the noise type to… [benign]``: the scenario's letter, its title
    cut at a word boundary, and the benign tag kept whole."""
    head, tag = f"({key}) ", " [benign]" if benign else ""
    title = title.replace("(benign)", "").strip() if benign else title
    return head + fit(title, width - len(head) - len(tag)) + tag


def _table(monitors: list[dict[str, Any]], names: dict[str, str]) -> str:
    rows = []
    for m in monitors:
        checks = m.get("checks") or []
        best = max((c.get("max_statistic") or float("-inf") for c in checks), default=float("-inf"))
        thr = m.get("threshold")
        rows.append(f"  {fit(names.get(m['id'], m['name'])):<{NAME_WIDTH}} {m['state']:<11} "
                    f"t={m['t']:>3}/{m['horizon']:<4} "
                    f"max_statistic={best:6.2f}  threshold={thr if thr is None else round(thr, 3)}")
    return "\n".join(rows)


def _print_events(events: list[dict[str, Any]]) -> None:
    """Each webhook the receiver verified: its summary, its one verdict, then its evidence."""
    for ev in events:
        data = ev.get("data", {})
        annotations = data.get("annotations") or {}
        summary = annotations.get("summary") or data.get("monitor") or ""
        _say(f"  webhook {ev['type']} (signature verified): {summary}")
        if annotations.get("verdict"):
            _say(f"    verdict: {annotations['verdict']}")
        evidence = data.get("evidence") or {}
        if evidence.get("check"):
            _say(f"    evidence: {evidence['check']['statement']}")
        if evidence.get("contract"):
            _say(f"    contract: {evidence['contract']['detail']}")
        if evidence.get("snapshot"):
            _say(f"    then: {evidence['snapshot']['statement']}")
            terms = evidence["snapshot"].get("claim_terms")
            if terms and terms.get("statement"):
                _say(f"    in the claim's terms: {terms['statement']}")


def fired_monitors(events: list[dict[str, Any]]) -> set[str]:
    """The monitors whose ``alarm.firing`` webhook has arrived."""
    return {str((ev.get("data") or {}).get("labels", {}).get("monitor_id")) for ev in events
            if ev.get("type") == "alarm.firing"}


async def register_demo(http: httpx.AsyncClient, opts: DemoOptions, receiver: Receiver, mechanism_secret: str,
                        base: str | None = None) -> tuple[dict[str, str], set[str]]:
    """Through the API (``http`` carries the key): the receiver's webhook, and one mechanism and
    monitor per scenario, served at ``base`` (default: loopback at ``opts.port``). Returns the
    monitors' display names and the ids of the harmful ones."""
    base = base or f"http://127.0.0.1:{opts.port}"
    hook = (await http.post("/v1/webhooks", json={"url": f"{base}/demo/webhook", "event_types": [
        "alarm.firing", "alarm.resolved", "monitor.degraded", "monitor.completed"]})).raise_for_status().json()
    receiver.secret = hook["secret"]
    names: dict[str, str] = {}
    harmful: set[str] = set()
    for key_ in opts.scenarios:
        if key_ in CLAIM_SCENARIOS:  # (i)-(l): Gaussian mechanisms under (ε, δ) and GDP claims
            csc = CLAIM_SCENARIOS[key_]
            mech = (await http.post("/v1/mechanisms", json={
                "name": f"scenario-{key_}", "sampling_url": f"{base}/reference/scenarios/{key_}",
                "output_kind": csc.output_kind, "secret": mechanism_secret,
                "dim": len(csc.x[0]) if csc.output_kind == "vector" else None,
            })).raise_for_status().json()
            mon = (await http.post("/v1/monitors", json={
                "name": f"({key_}) {csc.title}", "mechanism_id": mech["id"], "claim": csc.claim,
                "checks": [{"x": csc.x, "x_prime": csc.x_prime, "event": csc.event.model_dump(mode="json")}],
                "horizon": opts.horizon, "samples_per_period": opts.samples_per_period,
                "period_seconds": opts.period_seconds,
            })).raise_for_status().json()
            names[mon["id"]] = display_name(key_, csc.title)
            harmful.add(mon["id"])
            continue
        sc = SCENARIOS[key_]
        mech = (await http.post("/v1/mechanisms", json={
            "name": f"scenario-{key_}", "sampling_url": f"{base}/reference/scenarios/{key_}",
            "output_kind": scenario_output_kind(sc), "dim": scenario_dim(sc), "secret": mechanism_secret,
        })).raise_for_status().json()
        mon = (await http.post("/v1/monitors", json={
            "name": f"({key_}) {sc.title}", "mechanism_id": mech["id"], "epsilon": sc.epsilon,
            "checks": [{"x": sc.x, "x_prime": sc.x_prime, "event": sc.event.model_dump(mode="json")}],
            "horizon": opts.horizon, "samples_per_period": opts.samples_per_period,
            "period_seconds": opts.period_seconds,
        })).raise_for_status().json()
        names[mon["id"]] = display_name(key_, sc.title, benign=not sc.harmful)
        if sc.harmful:
            harmful.add(mon["id"])
    return names, harmful


async def drive(opts: DemoOptions, settings: Settings, receiver: Receiver, mechanism_secret: str) -> int:
    base = f"http://127.0.0.1:{opts.port}"
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        for _ in range(200):
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get("/readyz")).status_code == 200:
                    break
            await asyncio.sleep(0.1)
        key = await _create_key(settings)
        http.headers["Authorization"] = f"Bearer {key}"
        names, harmful = await register_demo(http, opts, receiver, mechanism_secret)
        _say(f"dpwatch demo at {base}  (dashboard: {base}/ui, OpenAPI: {base}/docs)   API key: {key}")
        _say(f"{len(names)} monitors, T={opts.horizon}, n={opts.samples_per_period} per side, one period every "
             f"{opts.period_seconds}s; each mechanism changes at period {opts.change_period}.\n")
        started = time.monotonic()
        seen_events = 0
        announced = False
        while True:
            await asyncio.sleep(2)
            if not announced:  # the table, until every harmful change has alarmed
                monitors = (await http.get("/v1/monitors", params={"limit": 100})).raise_for_status().json()["items"]
                statuses = [(await http.get(f"/v1/monitors/{m['id']}/status")).json() for m in monitors]
                _say(f"[{time.monotonic() - started:5.0f}s]\n" + _table(statuses, names))
                alarmed = {s["id"] for s in statuses if s["state"] == "alarm"}
            _print_events(receiver.events[seen_events:])
            seen_events = len(receiver.events)
            if not announced and harmful <= alarmed:
                _say(f"\nEvery harmful change raised an alarm ({len(alarmed)} alarms). "
                     f"Try: curl -H 'Authorization: Bearer {key}' {base}/v1/alarms")
                if opts.exit_when_done:
                    _say("Waiting for the alarms' webhooks (each is sent once its MPL snapshot is done).")
                else:
                    _say(f"The service keeps running ({base}/ui); webhooks are printed as they arrive. "
                         "Ctrl-C to stop.")
                announced = True
            if announced and opts.exit_when_done and harmful <= fired_monitors(receiver.events):
                return 0
            if time.monotonic() - started > opts.timeout_seconds and (not announced or opts.exit_when_done):
                if not announced:
                    _say("demo timed out before every harmful change was detected")
                else:
                    missing = sorted(names[m] for m in harmful - fired_monitors(receiver.events))
                    _say(f"demo timed out waiting for the alarm webhooks of {', '.join(missing)}")
                return 1


async def _serve_and_drive(opts: DemoOptions) -> int:
    receiver = Receiver()
    mechanism_secret = generate_secret()
    app, settings = build_demo_app(opts, receiver, mechanism_secret)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=opts.port, log_level="warning", lifespan="on"))
    serve_task = asyncio.create_task(server.serve())
    try:
        return await drive(opts, settings, receiver, mechanism_secret)
    finally:
        # Stop the worker before the server: its mechanisms are served by this same server.
        worker = getattr(app.state, "worker", None)
        if worker is not None:
            await worker.stop()
            app.state.worker = None
        server.should_exit = True
        await serve_task


def run_demo(opts: DemoOptions) -> int:
    try:
        return asyncio.run(_serve_and_drive(opts))
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 0
