"""Quiet logs (issue 11): APScheduler's per-run lines are gone by default, an idle worker writes
nothing, and ``dpwatch demo`` says its success line once."""

from __future__ import annotations

import asyncio
import logging
import sys

import httpx
import pytest

from app.observability import configure_logging
from app.scheduler.worker import Worker
from tests.test_engine import session_factory  # noqa: F401


def _idle_lines(settings, session_factory, capsys, seconds: float) -> list[str]:  # noqa: F811
    configure_logging(settings.log_level, "json", settings.scheduler_log_level)
    try:
        async def idle() -> None:
            worker = Worker(settings, session_factory)
            await worker.start()
            try:
                await asyncio.sleep(seconds)
            finally:
                await worker.stop()

        capsys.readouterr()
        asyncio.run(idle())
        lines = capsys.readouterr().err.splitlines()
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h.get_name() == "dpwatch"]:
            root.removeHandler(handler)
        logging.getLogger("apscheduler").setLevel(logging.NOTSET)
    return [line for line in lines if '"worker_started"' not in line and '"worker_stopped"' not in line]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_an_idle_worker_writes_no_line_per_tick(settings, session_factory, capsys):  # noqa: F811
    """Five ticker jobs every 0.2 s for 2 s: 50 job runs, and not one line at INFO (the default
    level). With APScheduler at INFO (as before) the same run writes two lines per job run."""
    quiet = settings.model_copy(update={"log_level": "INFO", "tick_seconds": 0.2})
    assert quiet.scheduler_log_level == "WARNING"
    assert _idle_lines(quiet, session_factory, capsys, 2.0) == []
    chatty = quiet.model_copy(update={"scheduler_log_level": "INFO"})
    lines = _idle_lines(chatty, session_factory, capsys, 1.0)
    assert len(lines) >= 10 and all('"apscheduler' in line for line in lines), lines[:3]


def test_the_demo_says_its_success_line_once(monkeypatch, capsys, tmp_path):
    """The demo's loop keeps printing progress after every harmful monitor alarmed (until all end):
    the success line is printed the first time only."""
    import app.demo as demo

    monitors = [{"id": "m1", "name": "(a) harmful", "state": "alarm", "t": 12, "horizon": 100, "threshold": 3.0,
                 "checks": [{"max_statistic": 4.2}]},
                {"id": "m2", "name": "(b) benign", "state": "active", "t": 12, "horizon": 100, "threshold": 3.0,
                 "checks": [{"max_statistic": 0.4}]}]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/monitors":
            return httpx.Response(200, json={"items": monitors})
        if request.url.path.endswith("/status"):
            return httpx.Response(200, json=next(m for m in monitors if m["id"] in request.url.path))
        return httpx.Response(200)

    real_client = httpx.AsyncClient
    monkeypatch.setattr(demo.httpx, "AsyncClient",
                        lambda **kw: real_client(transport=httpx.MockTransport(handler), **kw))

    async def fake_key(settings):
        return "dpw_test"

    async def fake_register(http, opts, receiver, secret):
        return {"m1": "(a) harmful", "m2": "(b) benign"}, {"m1"}

    real_sleep = asyncio.sleep
    monkeypatch.setattr(demo, "_create_key", fake_key)
    monkeypatch.setattr(demo, "register_demo", fake_register)
    monkeypatch.setattr(demo.asyncio, "sleep", lambda s: real_sleep(0.01))
    opts = demo.DemoOptions(timeout_seconds=0.5, data_dir=tmp_path)
    assert asyncio.run(demo.drive(opts, None, demo.Receiver(), "s")) == 1  # times out: m2 never ends
    out = capsys.readouterr().out
    assert out.count("max_statistic=  4.20") > 5  # many progress tables ...
    assert out.count("Every harmful change raised an alarm") == 1  # ... one success line
    assert "M_t" not in out


@pytest.mark.parametrize(("level", "expected"), [("INFO", logging.WARNING), ("DEBUG", logging.DEBUG)])
def test_httpx_and_httpcore_log_at_warning(level: str, expected: int) -> None:
    """Issue 18 item 8: httpx's "HTTP Request: POST …" line per request at INFO was 1,018 of a demo's
    1,339 log lines; the sampling client's and the deliverer's requests are logged by dpwatch itself."""
    try:
        configure_logging(level, "json")
        for name in ("httpx", "httpcore"):
            assert logging.getLogger(name).getEffectiveLevel() == expected
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO) or level == "DEBUG"
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h.get_name() == "dpwatch"]:
            root.removeHandler(handler)
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_static_files_are_logged_with_their_route() -> None:
    """A mounted app (the dashboard's static files) is logged as `<mount>/{path}`, not "unmatched"."""
    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles
    from fastapi.testclient import TestClient

    import app.observability as obs
    from app.web import STATIC_DIR

    seen: list[str] = []
    api = FastAPI()

    @api.get("/v1/things/{thing_id}")
    def thing(thing_id: int) -> dict[str, int]:
        return {"id": thing_id}

    api.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="ui-static")
    inner = obs.RequestContextMiddleware(api)

    async def spy(scope, receive, send):  # noqa: ANN001, ANN202
        await inner(scope, receive, send)
        if scope["type"] == "http":
            seen.append(obs.route_template(scope))

    client = TestClient(spy)
    assert client.get("/ui/static/dashboard.css").status_code == 200
    assert client.get("/v1/things/7").status_code == 200
    assert client.get("/nowhere").status_code == 404
    assert seen == ["/ui/static/{path}", "/v1/things/{thing_id}", "unmatched"]
