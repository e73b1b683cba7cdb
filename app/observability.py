"""Logging (structlog, JSON or console) and Prometheus metrics.

Logs: every record — dpwatch's, uvicorn's, alembic's — goes through one structlog pipeline, with
the request id bound by :class:`RequestContextMiddleware`. Values under keys that look like
credentials are replaced before rendering, and the Authorization header is never logged. Secret
*values* (``whsec_…`` signing secrets, ``dpw_…`` API keys, a URL's password) are removed from
every string of a line after exceptions are rendered, tracebacks included; database errors never
hold their statement's values (``hide_parameters``, app/db.py).

Metrics: the objects below live in prometheus_client's default registry; the engine increments
them (periods, sampling time, alarms, webhook deliveries). ``dpwatch_monitors{state}`` is
recomputed from the database at every scrape (:func:`refresh_monitor_gauge`).
"""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid
from collections.abc import MutableMapping
from typing import Any

import structlog
from prometheus_client import Counter, Gauge, Histogram
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# ------------------------------------------------------------------------------------- metrics

PERIODS_TOTAL = Counter("dpwatch_periods_total", "Periods recorded, by status (ok or failed).", ["status"])
SAMPLING_SECONDS = Histogram(
    "dpwatch_sampling_seconds",
    "Wall time of sampling one period (all checks, x and x').",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
ALARMS_TOTAL = Counter("dpwatch_alarms_total", "Alarms raised.")
WEBHOOK_DELIVERIES_TOTAL = Counter(
    "dpwatch_webhook_deliveries_total",
    "Webhook delivery attempts, by outcome (delivered, retry, failed, disabled).",
    ["outcome"],
)
# mostrecent: under several API processes (multiprocess mode) the last scrape's count, not one per process.
MONITORS = Gauge("dpwatch_monitors", "Monitors by state (computed at scrape time).", ["state"],
                 multiprocess_mode="mostrecent")
HTTP_REQUESTS_TOTAL = Counter(
    "dpwatch_http_requests_total", "API requests, by method, route template and status.", ["method", "route", "status"]
)
HTTP_REQUEST_SECONDS = Histogram(
    "dpwatch_http_request_seconds",
    "API request latency, by method and route template.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

SAMPLING_REQUESTS_TOTAL = Counter(
    "dpwatch_sampling_requests_total",
    "HTTP attempts to mechanism endpoints, by outcome (ok or a failure reason).",
    ["outcome"],
)
SAMPLING_REQUEST_SECONDS = Histogram(
    "dpwatch_sampling_request_seconds",
    "Duration of one HTTP attempt to a mechanism endpoint.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


# Hooks for the engine (SamplingClient's on_request, the period runner, the deliverer). They are
# called after the transaction that recorded the event, so the counters count committed facts.


def observe_sampling_request(duration_seconds: float, outcome: str) -> None:
    """``SamplingClient(on_request=...)``: one HTTP attempt, ``outcome`` "ok" or a reason."""
    SAMPLING_REQUESTS_TOTAL.labels(outcome=outcome).inc()
    SAMPLING_REQUEST_SECONDS.observe(duration_seconds)


def observe_period(status: str, sampling_seconds: float | None = None) -> None:
    """A period was recorded with ``status`` "ok" or "failed"; sampling took ``sampling_seconds``."""
    PERIODS_TOTAL.labels(status=status).inc()
    if sampling_seconds is not None:
        SAMPLING_SECONDS.observe(sampling_seconds)


def observe_alarm(count: int = 1) -> None:
    ALARMS_TOTAL.inc(count)


def observe_delivery(outcome: str) -> None:
    """One webhook delivery attempt ended with ``outcome``: delivered, retry, failed or disabled."""
    WEBHOOK_DELIVERIES_TOTAL.labels(outcome=outcome).inc()


def refresh_monitor_gauge(session: Session) -> None:
    """Set ``dpwatch_monitors{state}`` from the database (every state, zeros included)."""
    from app.models.monitors import MONITOR_STATES, Monitor

    counts = {
        state: count for state, count in session.execute(select(Monitor.state, func.count()).group_by(Monitor.state))
    }
    for state in MONITOR_STATES:
        MONITORS.labels(state=state).set(counts.get(state, 0))


# ------------------------------------------------------------------------------------- collector


def freeze_startup_objects() -> None:
    """Move every object alive now (modules, settings, pools: what start-up built) out of the
    cyclic garbage collector's reach (``gc.freeze``), once a process has started its work.

    A full collection scans every tracked object, and a worker holds a few hundred thousand after
    its imports (SQLAlchemy, numpy, scikit-learn): each of its full collections held the event
    loop for ~250 ms of CPU, more than any period's work (bench/hostile.py: longest loop stretch
    255 ms, 54 ms after freezing; docs/hardening.md). Objects made later are collected as before.
    """
    import gc

    gc.collect()
    gc.freeze()


#: When the second freeze runs (``freeze_warm_objects_later``): after the first periods or requests
#: have made what start-up leaves for later (lazy imports, compiled statements, mapper caches).
WARM_FREEZE_SECONDS = 60.0


def freeze_warm_objects_later(delay: float = WARM_FREEZE_SECONDS) -> None:
    """Once ``delay`` seconds from now, freeze again (``gc.freeze()``, without a collection).

    What a process builds on its first periods or requests and keeps (lazy imports such as
    scipy's, SQLAlchemy's compiled statements and mapper caches, connection pools) lands in the
    old generation after the start-up freeze, and every full collection scanned it again: in
    bench/hostile.py those were the event loop's longest stalls (107-149 ms). Freezing again once
    warm moves it out of the collector's reach. No collection is run first, so the freeze itself
    does not stall the loop; the price is that cyclic garbage alive at that instant is never
    collected (a one-time, bounded amount: what is unreachable at that moment)."""
    import asyncio
    import gc

    asyncio.get_running_loop().call_later(delay, gc.freeze)


# ------------------------------------------------------------------------------------- logging

_SENSITIVE_KEY = re.compile(r"(authorization|secret|password|passwd|api[_-]?key|token|cookie)", re.IGNORECASE)
REDACTED = "[redacted]"


def redact_sensitive(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: blank values whose key names a credential (also one level down)."""
    for key, value in list(event_dict.items()):
        if key != "event" and _SENSITIVE_KEY.search(key):
            event_dict[key] = REDACTED
        elif isinstance(value, dict):
            event_dict[key] = {k: (REDACTED if _SENSITIVE_KEY.search(str(k)) else v) for k, v in value.items()}
    return event_dict


#: Secret *values*, wherever they appear in a line (a message, an exception's text, a traceback):
#: Standard Webhooks signing secrets, dpwatch API keys, and the password of a URL's userinfo.
#: Each with a substring every match contains: a text without it is not searched (most strings of
#: a line hold none of them; three searches of each string of every access line were a visible
#: share of a request's CPU).
_SECRET_VALUES = (
    (re.compile(r"whsec_[A-Za-z0-9+/=_-]+"), "whsec_" + REDACTED, "whsec_"),
    (re.compile(r"dpw_[A-Za-z0-9_-]{12,}"), "dpw_" + REDACTED, "dpw_"),
    (re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://[^:/@\s]*):[^@\s/]+@", re.IGNORECASE), r"\g<scheme>:" + REDACTED + "@",
     "@"),
)


def redact_text(text: str) -> str:
    """``text`` with every secret value replaced (see ``_SECRET_VALUES``)."""
    for pattern, replacement, needed in _SECRET_VALUES:
        if needed in text:
            text = pattern.sub(replacement, text)
    return text


def _redact_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if depth < 4 and isinstance(value, dict):
        return {k: _redact_value(v, depth + 1) for k, v in value.items()}
    if depth < 4 and isinstance(value, (list, tuple)):
        return type(value)(_redact_value(v, depth + 1) for v in value)
    if isinstance(value, BaseException):
        return redact_text(f"{type(value).__name__}: {value}")
    return value


def redact_secret_values(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor, after exceptions are rendered as text: secret values removed from
    every string of the line (the event, fields, the exception and its traceback)."""
    for key, value in list(event_dict.items()):
        event_dict[key] = _redact_value(value)
    return event_dict


#: Libraries whose INFO lines are routine chatter. APScheduler logs two lines per job run ("Running
#: job ...", "... executed successfully"): with five ticker jobs a second, 22,000 of an idle
#: day's 23,000 lines. They log at ``scheduler_level`` (WARNING by default) and above.
CHATTY_LOGGERS = ("apscheduler",)
#: Start-up chatter that says nothing an operator needs ("setup plugin ..." for each Alembic plugin).
#: httpx and httpcore: one INFO line per request ("HTTP Request: POST …") from the sampling client
#: and the webhook deliverer, 1,018 of 1,339 lines of a demo's log; at WARNING unless
#: the level is DEBUG.
QUIET_LOGGERS = ("alembic.runtime.plugins", "httpx", "httpcore")


class _SkippedRunFilter(logging.Filter):
    """Drop APScheduler's "skipped: maximum number of running instances reached" warning. Ticker
    jobs run with ``max_instances=1`` on purpose: a tick that finds the previous one still running
    (a slow claim on a busy machine) is simply skipped, which is not worth a warning per tick."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in record.getMessage()


def configure_logging(level: str = "INFO", fmt: str = "json", scheduler_level: str = "WARNING") -> None:
    """Route structlog and the standard library through one renderer (JSON lines or console).

    ``scheduler_level`` is the least level of APScheduler's own lines (``DPWATCH_SCHEDULER_LOG_LEVEL``)."""
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_sensitive,
    ]
    # Colours only on a terminal: in CI logs and files the ANSI codes are noise around every field.
    renderer: Any = (structlog.processors.JSONRenderer() if fmt == "json"
                     else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # Exceptions become text here in both formats (the console renderer would otherwise
            # format them itself, with local variables when rich is installed), so that the next
            # processor can take secret values out of the message and the traceback.
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            redact_secret_values,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.set_name("dpwatch")
    root = logging.getLogger()
    for existing in [h for h in root.handlers if h.get_name() == "dpwatch"]:
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(scheduler_level)
    skipped = logging.getLogger("apscheduler.scheduler")
    for existing in [f for f in skipped.filters if isinstance(f, _SkippedRunFilter)]:
        skipped.removeFilter(existing)
    if logging.getLevelName(scheduler_level) >= logging.WARNING:
        skipped.addFilter(_SkippedRunFilter())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if logging.getLevelName(level) <= logging.DEBUG
                                         else logging.WARNING)
    # uvicorn's own handlers would print every line twice; let them propagate to ours instead.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = name != "uvicorn.access"  # our middleware logs each request once


_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
REQUEST_ID_HEADER = "x-request-id"

access_log = structlog.get_logger("dpwatch.access")


def route_template(scope: Scope) -> str:
    """The matched route as a template (``/v1/monitors/{monitor_id}``), for bounded metric labels:
    the path with each path parameter's value put back as ``{name}``. A mounted app (the static
    files at ``/ui/static``, the offline docs' assets) is ``<mount path>/{path}``: Starlette's
    ``Mount`` leaves no ``route`` in the scope but sets ``endpoint`` and extends ``root_path``."""
    if scope.get("route") is None:
        if scope.get("endpoint") is not None and scope.get("app_root_path") is not None:
            mount = str(scope.get("root_path", ""))[len(str(scope.get("app_root_path") or "")):]
            if mount:
                return mount.rstrip("/") + "/{path}"
        return "unmatched"
    segments = str(scope.get("path", "")).split("/")
    for name, value in (scope.get("path_params") or {}).items():
        segments = ["{" + name + "}" if segment == str(value) else segment for segment in segments]
    return "/".join(segments)


class RequestContextMiddleware:
    """Bind a request id (the client's ``X-Request-ID`` if sane, else a new one) to every log
    line of the request, echo it in the response, log one access line and record HTTP metrics.
    Only method, route, path, status and duration are logged: never headers or bodies."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-id"), None)
        request_id = incoming if incoming and _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        status_code = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status_code
            if message["type"] == "http.response.start":
                status_code = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            template = route_template(scope)
            method = scope.get("method", "")
            HTTP_REQUESTS_TOTAL.labels(method=method, route=template, status=str(status_code)).inc()
            HTTP_REQUEST_SECONDS.labels(method=method, route=template).observe(elapsed)
            access_log.info(
                "request",
                method=method,
                route=template,
                path=scope.get("path"),
                status=status_code,
                duration_ms=round(elapsed * 1000, 2),
            )
            structlog.contextvars.unbind_contextvars("request_id")
