"""The FastAPI application: ``create_app()`` and the module-level ``app`` for uvicorn.

Nothing touches the database at import time: the engine is made, and migrations run, in the
lifespan. Background work (the scheduler, the webhook deliverer) is started from
``app.state.on_startup_hooks`` and stopped from ``app.state.on_shutdown_hooks``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
import structlog
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from app.alarms.router import alarms_router, webhooks_router
from app.api.contract import complete_openapi
from app.api.deps import (
    apply_timeouts,
    authorize,
    document_scope_responses,
    record_key_use_after,
    reject_unknown_query,
)
from app.api.errors import (
    PROBLEM_MEDIA_TYPE,
    UnexpectedErrorMiddleware,
    install_problem_handlers,
    problem_response,
    problem_responses,
)
from app.api.limits import RequestLimitsMiddleware, SecurityHeadersMiddleware, refuse_booleans_for_numbers
from app.auth.key_cache import KEY_CACHE
from app.auth.key_use import KeyUseRecorder
from app.db import make_engine, make_session_factory, migrations_current, run_migrations
from app.jobs.router import router as jobs_router
from app.keys.router import router as keys_router
from app.mechanisms.router import router as mechanisms_router
from app.metrics.monitors import MonitorMetrics
from app.monitors.router import router as monitors_router
from app.observability import (
    RequestContextMiddleware,
    configure_logging,
    freeze_startup_objects,
    freeze_warm_objects_later,
    refresh_monitor_gauge,
)
from app.quotas.router import router as quotas_router
from app.settings import Settings, get_settings
from app.silences.router import router as silences_router
from app.snapshots.router import router as snapshots_router
from app.web import install_dashboard
from app.web.apidocs import install_offline_docs

log = structlog.get_logger("dpwatch.app")

#: A startup or shutdown hook: ``hook(app)``, plain or async.
Hook = Callable[[FastAPI], Awaitable[None] | None]

API_DESCRIPTION = """
dpwatch monitors deployed differentially private mechanisms over time and raises an alarm when
their outputs contradict the claimed ε.

Register a **mechanism** (an HTTP endpoint that returns outputs on request), create **monitors**
of it (pairs of neighbouring databases x, x', events E, the claimed ε, a false-alarm level α, a
horizon of T periods), and receive **alarms** by polling or through **webhooks**.

All `/v1` endpoints need `Authorization: Bearer <api key>`; a key sees only its tenant's
resources. A key with the `read` scope may only use GET; any other method answers 403 (see the
`keys` endpoints). Errors are `application/problem+json` (RFC 9457). Lists are paginated with
`?limit=&cursor=` and return `{"items": [...], "next_cursor": ...}`.
"""

TAGS = [
    {"name": "mechanisms", "description": "The HTTP endpoints dpwatch samples."},
    {"name": "monitors", "description": "Monitors, their status and their periods."},
    {"name": "alarms", "description": "Alarms raised by monitors."},
    {"name": "webhooks", "description": "Event subscriptions and their delivery log."},
    {"name": "snapshots", "description": "MPL snapshots: estimates of ε and a lower confidence bound from raw outputs."},
    {"name": "jobs", "description": "Long work run by workers (discovery, audits, a monitor's re-discovery): "
     "progress, cancellation, and the result kept."},
    {"name": "keys", "description": "API keys of the calling tenant: create (shown once), list, revoke. "
     "Scopes: `read` (GET only) and `admin` (everything)."},
    {"name": "silences", "description": "On-call silences (Alertmanager's model): matchers, a start, an end and a "
     "comment. Matching alarms are recorded; their webhooks are not sent."},
    {"name": "operations", "description": "Health, readiness and metrics (no authentication)."},
]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    database: str
    migrations: str


async def _run_hooks(app: FastAPI, hooks: list[Hook]) -> None:
    for hook in hooks:
        result = hook(app)
        if inspect.isawaitable(result):
            await result


def _problem_openapi(app: FastAPI) -> dict[str, Any]:
    """OpenAPI with error responses under ``application/problem+json``."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
    )
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            for code, response in operation.get("responses", {}).items():
                content = response.get("content")
                if code.isdigit() and int(code) >= 400 and content and "application/json" in content:
                    content[PROBLEM_MEDIA_TYPE] = content.pop("application/json")
    document_scope_responses(schema)
    complete_openapi(schema)
    for unused in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(unused, None)
    app.openapi_schema = schema
    return schema


def create_app(
    settings: Settings | None = None,
    *,
    session_factory: sessionmaker[Session] | None = None,
) -> FastAPI:
    """Build the app. Pass ``session_factory`` to run on an existing engine or connection (tests);
    otherwise the lifespan makes an engine from ``settings.database_url`` and, if
    ``settings.migrate_on_start``, upgrades the schema to head first."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_level, settings.log_format, settings.scheduler_log_level)
        engine = None
        if app.state.session_factory is None:
            if settings.migrate_on_start:
                await anyio.to_thread.run_sync(run_migrations, settings.database_url)
            # Connections that were in use within the last second are not pinged at checkout (a
            # round trip per request under load); one killed meanwhile fails its request once (503)
            # and SQLAlchemy replaces the pool's connections (app/db.py).
            # The requests' statement and lock timeouts are set once per connection, when it is
            # opened, rather than by each request's transaction (a round trip per request):
            # this engine serves only the API (an in-process worker has its own,
            # app.scheduler.attach_worker).
            # Its 20 connections are all kept open (pool_size 20, no overflow): with 10 kept and
            # 10 of overflow, a load of more than 10 concurrent requests opened and closed a
            # Postgres connection over and over (one connection's start-up is a process on the
            # server and several milliseconds of CPU here). The most it opens is 20, as before.
            engine = make_engine(settings.database_url, pool_timeout=settings.db_pool_timeout_seconds,
                                 ping_after_idle=1.0, statement_timeout_ms=settings.db_statement_timeout_ms,
                                 lock_timeout_ms=settings.db_lock_timeout_ms, pool_size=20, max_overflow=0)
            app.state.engine = engine
            app.state.session_factory = make_session_factory(engine)
            app.state.timeouts_at_connect = True
            if engine.dialect.name == "postgresql":  # GETs read in autocommit (app.api.deps.get_session)
                app.state.read_session_factory = make_session_factory(
                    engine.execution_options(isolation_level="AUTOCOMMIT"))
        log.info(
            "startup",
            env=settings.env,
            worker_id=settings.worker_id,
            database=engine.url.render_as_string(hide_password=True) if engine else "external",
        )
        try:
            await _run_hooks(app, app.state.on_startup_hooks)
            freeze_startup_objects()  # full collections no longer scan start-up's objects
            freeze_warm_objects_later()  # ... nor, after a minute, what the first requests built
            yield
        finally:
            await _run_hooks(app, list(reversed(app.state.on_shutdown_hooks)))
            if engine is not None:
                engine.dispose()
                app.state.session_factory = None
                app.state.read_session_factory = None
                app.state.engine = None
                app.state.timeouts_at_connect = False
            log.info("shutdown")

    app = FastAPI(
        title="dpwatch",
        version="0.1.0",
        description=API_DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        docs_url=None,  # served from local assets by install_offline_docs
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.state.engine = None
    #: True when the engine sets the requests' timeouts on each new connection (the lifespan's own
    #: engine); with a session factory given (tests), each request's transaction sets them.
    app.state.timeouts_at_connect = False
    app.state.read_session_factory = None
    app.state.on_startup_hooks = []
    app.state.on_shutdown_hooks = []
    app.state.key_use = KeyUseRecorder()  # API keys' last_used_at, off the requests' transactions
    KEY_CACHE.ttl = settings.key_cache_seconds  # the process's resolved keys (app.auth.key_cache)

    install_problem_handlers(app)
    # Outermost first: request id and access log, then the last-resort 500, then the limits
    # (body size, strict JSON, query strings) before anything reads the request.
    app.add_middleware(RequestLimitsMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(UnexpectedErrorMiddleware)
    app.add_middleware(SecurityHeadersMiddleware, hsts=settings.env != "development")
    app.add_middleware(RequestContextMiddleware)

    # reject_unknown_query: 422 for undeclared query parameters; authorize: the bearer key's
    # tenant, and its scope checked against the method (403); refuse_booleans_for_numbers: 422 for
    # true/false where the published schema wants a number (pydantic's lax mode reads false as 0).
    # record_key_use_after: the key's last_used_at, written after the request in a transaction of its own.
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(record_key_use_after), Depends(reject_unknown_query),
                                               Depends(authorize), Depends(refuse_booleans_for_numbers)])
    v1.include_router(mechanisms_router)
    v1.include_router(monitors_router)
    v1.include_router(alarms_router)
    v1.include_router(webhooks_router)
    v1.include_router(snapshots_router)
    v1.include_router(jobs_router)
    v1.include_router(keys_router)
    v1.include_router(silences_router)
    v1.include_router(quotas_router)
    app.include_router(v1)
    install_offline_docs(app)
    install_dashboard(app, settings)
    app.state.monitor_metrics = MonitorMetrics(settings.metrics_cache_seconds)

    @app.get("/healthz", tags=["operations"], response_model=Health, summary="Liveness")
    def healthz() -> Health:
        """The process is up (no dependency is checked)."""
        return Health(status="ok")

    @app.get(
        "/readyz",
        tags=["operations"],
        response_model=Readiness,
        summary="Readiness",
        responses=problem_responses(503),
    )
    def readyz(request: Request) -> Any:
        """The database answers within `DPWATCH_READYZ_TIMEOUT_MS` (its own statement and lock timeout,
        1 s by default) and its schema is at the latest migration; 503 with `Retry-After` otherwise."""
        factory = request.app.state.session_factory
        if factory is None:
            return problem_response(request, 503, "The application has not started.", slug="not-ready")
        timeout_ms = request.app.state.settings.readyz_timeout_ms
        try:
            with factory() as session:
                # Its own short statement and lock timeouts (Postgres): a database that does not
                # answer within them, or a locked alembic_version, turns /readyz red.
                apply_timeouts(session, timeout_ms, timeout_ms)
                session.execute(text("SELECT 1"))
                current = migrations_current(session.connection())
        except Exception as exc:  # noqa: BLE001 - any failure here means "not ready"
            log.warning("readyz.database_unreachable", error=type(exc).__name__)
            return problem_response(request, 503, "The database is unreachable.",
                                    slug="not-ready", headers={"Retry-After": "1"})
        if not current:
            return problem_response(
                request,
                503,
                "The database schema is not at the latest migration; run `dpwatch migrate`.",
                slug="not-ready",
            )
        return Readiness(status="ready", database="ok", migrations="current")

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}, "description": "Prometheus text format."}},
    )
    def metrics(request: Request) -> Response:
        """Metrics in the Prometheus text format; `dpwatch_monitors{state}` is counted now, and each
        check's detector is exported as `dpwatch_monitor_statistic`, `_threshold`, `_alarm`, `_period`
        (labels tenant, monitor, check), cached for `DPWATCH_METRICS_CACHE_SECONDS`."""
        factory = request.app.state.session_factory
        per_monitor = b""
        if factory is not None:
            try:
                with factory() as session:
                    refresh_monitor_gauge(session)
                per_monitor = request.app.state.monitor_metrics.text(factory)
            except Exception as exc:  # noqa: BLE001 - serve the other metrics anyway
                log.warning("metrics.monitor_gauge_failed", error=type(exc).__name__)
        return Response(generate_latest(metrics_registry()) + per_monitor, media_type=CONTENT_TYPE_LATEST)

    app.openapi = lambda: _problem_openapi(app)  # type: ignore[method-assign]
    return app


def metrics_registry() -> Any:
    """The registry /metrics renders: this process's, or, when several API processes share the work
    (``dpwatch serve --workers N`` sets PROMETHEUS_MULTIPROC_DIR), every process's counters and
    histograms added up (prometheus_client's multiprocess mode)."""
    import os

    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    from prometheus_client import CollectorRegistry, multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


app = create_app()
