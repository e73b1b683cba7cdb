"""Quiet logs: APScheduler's per-run lines are gone by default, an idle worker writes
nothing, and ``dpwatch demo`` says its success line once."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from app.observability import configure_logging
from app.scheduler.worker import Worker
from tests.monitors.test_engine import session_factory  # noqa: F401


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


def _fake_demo(monkeypatch, receiver, *, webhook_after: int | None):  # noqa: ANN001, ANN202
    """drive() against a mocked API: m1 (harmful) has alarmed, m2 (benign) never ends; the alarm's
    webhook reaches ``receiver`` after ``webhook_after`` sleeps (never with None)."""
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
    sleeps = [0]

    async def sleep(seconds: float) -> None:
        sleeps[0] += 1
        if webhook_after is not None and sleeps[0] == webhook_after:
            receiver.events.append({"type": "alarm.firing", "data": {
                "labels": {"monitor_id": "m1"}, "annotations": {"summary": "Monitor '(a) harmful' exceeds",
                                                                "verdict": "Refuted: ε ≥ 1.42 > claimed 1"}}})
        await real_sleep(0.01)

    monkeypatch.setattr(demo, "_create_key", fake_key)
    monkeypatch.setattr(demo, "register_demo", fake_register)
    monkeypatch.setattr(demo.asyncio, "sleep", sleep)
    return demo


def test_the_demo_stops_its_table_once_every_harmful_change_alarmed(monkeypatch, capsys, tmp_path):
    """The table is printed until every harmful change has alarmed (not until every
    monitor ends), the success line once; with --exit-when-done the demo waits for the last alarm's
    webhook (sent after its snapshot), prints it with its verdict, then exits."""
    receiver = __import__("app.demo", fromlist=["Receiver"]).Receiver()
    demo = _fake_demo(monkeypatch, receiver, webhook_after=6)
    opts = demo.DemoOptions(timeout_seconds=30, data_dir=tmp_path, exit_when_done=True)
    assert asyncio.run(demo.drive(opts, None, receiver, "s")) == 0
    out = capsys.readouterr().out
    assert out.count("max_statistic=  4.20") == 1  # one table: m1 had alarmed at the first look
    assert out.count("Every harmful change raised an alarm") == 1
    assert "webhook alarm.firing (signature verified)" in out and "verdict: Refuted: ε ≥ 1.42" in out
    assert out.index("Every harmful change") < out.index("webhook alarm.firing")
    assert "M_t" not in out


def test_the_demo_times_out_waiting_for_the_webhook(monkeypatch, capsys, tmp_path):
    receiver = __import__("app.demo", fromlist=["Receiver"]).Receiver()
    demo = _fake_demo(monkeypatch, receiver, webhook_after=None)
    opts = demo.DemoOptions(timeout_seconds=0.3, data_dir=tmp_path, exit_when_done=True)
    assert asyncio.run(demo.drive(opts, None, receiver, "s")) == 1
    out = capsys.readouterr().out
    assert out.count("max_statistic=  4.20") == 1
    assert "timed out waiting for the alarm webhooks of (a) harmful" in out


@pytest.mark.parametrize(("name", "cut"), [
    ("(g) Report Noisy Max: change the noise type to exponential", "(g) Report Noisy Max: change the noise type to…"),
    ("short name", "short name"),
    ("x" * 70, "x" * 49 + "…"),
])
def test_demo_names_are_cut_at_a_word_boundary(name: str, cut: str) -> None:
    from app.demo import display_name, fit

    assert fit(name, 50) == cut and len(fit(name, 50)) <= 50
    shown = display_name("g", "Report Noisy Max: change the noise type to exponential (benign)", benign=True)
    assert shown == "(g) Report Noisy Max: change the noise type to… [benign]" and len(shown) <= 60
    assert display_name("a", "Laplace mechanism: decrease the noise scale") == \
        "(a) Laplace mechanism: decrease the noise scale"


@pytest.mark.parametrize(("level", "expected"), [("INFO", logging.WARNING), ("DEBUG", logging.DEBUG)])
def test_httpx_and_httpcore_log_at_warning(level: str, expected: int) -> None:
    """httpx's "HTTP Request: POST …" line per request at INFO was 1,018 of a demo's
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


@pytest.mark.parametrize("tty", [False, True])
def test_console_logs_are_coloured_only_on_a_terminal(monkeypatch, tty: bool) -> None:
    """`dpwatch audit` and `search` log problems in the console format; in CI or a file (no terminal)
    the lines came with ANSI colour codes (`\\x1b[2m2026-…\\x1b[0m [\\x1b[33m\\x1b[1mwarning …`)."""
    import io

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    stream = Stream()
    monkeypatch.setattr("sys.stderr", stream)
    try:
        configure_logging("WARNING", "console")
        logging.getLogger("dpwatch.sampling").warning("sampling.failed")
        text = stream.getvalue()
        assert "sampling.failed" in text
        assert ("\x1b[" in text) == tty, text
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h.get_name() == "dpwatch"]:
            root.removeHandler(handler)
