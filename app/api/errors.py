"""Errors as ``application/problem+json`` (RFC 9457).

Every error the API returns has the members ``type``, ``title``, ``status``, ``detail`` and
``instance``; validation errors add ``errors``, one entry per bad field with a JSON pointer into
the request and a message a person can act on. Unexpected exceptions become a bare 500: the
traceback goes to the log, never to the client.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://dpwatch.dev/problems/"

log = structlog.get_logger("dpwatch.api")


class FieldProblem(BaseModel):
    """One invalid input."""

    pointer: str = Field(
        description="Where: a JSON pointer into the body (`#/checks/0/epsilon`), "
        "or `query:<name>`, `path:<name>`, `header:<name>`."
    )
    location: list[str | int] = Field(description='The same place as a path: `["body", "checks", 0, "epsilon"]`.')
    message: str = Field(description="What is wrong, in words.")
    type: str = Field(description="Machine-readable kind of error (pydantic's error type).")


class Problem(BaseModel):
    """An RFC 9457 problem details object."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "type": "https://dpwatch.dev/problems/not-found",
                    "title": "Not Found",
                    "status": 404,
                    "detail": "Monitor 0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1 not found.",
                    "instance": "/v1/monitors/0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1",
                }
            ]
        }
    )

    type: str = Field("about:blank", description="URI that identifies the kind of problem.")
    title: str = Field(description="Short summary of the kind of problem.")
    status: int = Field(description="The HTTP status code.")
    detail: str | None = Field(None, description="What went wrong in this occurrence.")
    instance: str | None = Field(None, description="The request path that failed.")
    errors: list[FieldProblem] | None = Field(None, description="Validation errors, one per invalid input.")


class ProblemError(Exception):
    """Raised by services and routers; rendered as problem+json with ``status``."""

    status: int = 400
    slug: str = "bad-request"

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        slug: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status
        if slug is not None:
            self.slug = slug
        self.errors = errors
        self.headers = headers


class NotFoundError(ProblemError):
    status = 404
    slug = "not-found"


class ConflictError(ProblemError):
    status = 409
    slug = "conflict"


class InvalidInputError(ProblemError):
    """A request that is well-formed but not acceptable (422), e.g. a cron that never fires."""

    status = 422
    slug = "validation-error"

    def __init__(self, detail: str, *, field: list[str | int] | None = None, error_type: str = "value_error") -> None:
        errors = [field_problem(field, detail, error_type)] if field else None
        super().__init__(detail, errors=errors)


class ForbiddenError(ProblemError):
    """An authenticated key whose scope does not allow the request (403)."""

    status = 403
    slug = "forbidden"


class UnauthorizedError(ProblemError):
    status = 401
    slug = "unauthorized"

    def __init__(self, detail: str, *, error: str | None = None) -> None:
        challenge = "Bearer" if error is None else f'Bearer error="{error}"'
        super().__init__(detail, headers={"WWW-Authenticate": challenge})


def field_problem(location: list[str | int] | tuple[str | int, ...], message: str, error_type: str) -> dict[str, Any]:
    loc = list(location)
    if loc and loc[0] == "body":
        pointer = "#/" + "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in loc[1:])
    elif loc and loc[0] in ("query", "path", "header", "cookie"):
        pointer = f"{loc[0]}:{'.'.join(str(p) for p in loc[1:])}"
    else:
        pointer = "#/" + "/".join(str(part) for part in loc)
    return {"pointer": pointer, "location": loc, "message": message, "type": error_type}


def _clean_message(error: dict[str, Any]) -> str:
    message = str(error.get("msg", "Invalid value"))
    # pydantic prefixes messages of custom validators with "Value error, " / "Assertion failed, ".
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    if error.get("type") == "missing":
        message = "This field is required."
    elif error.get("type") == "extra_forbidden":
        message = "This field is not allowed here (unknown field)."
    elif error.get("type") == "json_invalid":
        message = f"The body is not valid JSON: {error.get('ctx', {}).get('error', message)}."
    return message


#: RFC 9110's reason phrases where Python's ``HTTPStatus`` (before 3.13) keeps the older RFC 7231
#: ones, so that every 413 and 422 has one title, here and in app/api/limits.py.
RFC9110_TITLES = {413: "Content Too Large", 422: "Unprocessable Content"}


def _title(status: int) -> str:
    if status in RFC9110_TITLES:
        return RFC9110_TITLES[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem_response(
    request: Request,
    status: int,
    detail: str | None,
    *,
    slug: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + slug if slug else "about:blank",
        "title": _title(status),
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


async def _problem_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return problem_response(request, exc.status, exc.detail, slug=exc.slug, errors=exc.errors, headers=exc.headers)


async def _http_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else None
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"No route matches {request.method} {request.url.path}."
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        detail = f"Method {request.method} is not allowed on {request.url.path}."
        headers = {**(headers or {}), "Allow": _allowed_methods(request, (headers or {}).get("Allow"))}
    return problem_response(request, exc.status_code, detail, headers=headers)


def _allowed_methods(request: Request, fallback: str | None) -> str:
    """Every method the OpenAPI description gives this path (Starlette's own 405 names only the
    methods of the first route that matched the path)."""
    import re

    paths = request.app.openapi().get("paths", {})
    methods: set[str] = set()
    for template, item in paths.items():
        pattern = "^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, request.url.path):
            methods |= {m.upper() for m in item if m in ("get", "put", "post", "patch", "delete", "head", "options")}
    return ", ".join(sorted(methods)) if methods else (fallback or "")


async def _validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        field_problem(e.get("loc", ()), _clean_message(e), str(e.get("type", "value_error"))) for e in exc.errors()
    ]
    count = len(errors)
    summary = "; ".join(f"{err['pointer']}: {err['message']}" for err in errors[:3])
    detail = f"The request has {count} invalid input{'s' if count != 1 else ''}: {summary}" + (
        "; …" if count > 3 else ""
    )
    return problem_response(request, 422, detail, slug="validation-error", errors=errors)


#: Postgres SQLSTATEs of the timeouts set on API sessions (app.api.deps).
_TIMEOUT_SQLSTATES = {"57014": "statement_timeout", "55P03": "lock_timeout"}


def database_unavailable_kind(exc: BaseException) -> str:
    """What a database error that maps to 503 was: ``statement_timeout``, ``lock_timeout``,
    ``pool_timeout`` or ``unavailable`` (connection refused or lost, SQLite busy...)."""
    if isinstance(exc, PoolTimeoutError):
        return "pool_timeout"
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return _TIMEOUT_SQLSTATES.get(str(sqlstate), "unavailable")


async def _database_unavailable_handler(request: Request, exc: Exception) -> JSONResponse:
    """A database timeout (statement, lock, pool checkout) or an unreachable database: 503 with
    ``Retry-After``. Logged once, as a warning with the kind, never with the SQL or its values."""
    kind = database_unavailable_kind(exc)
    log.warning("database_unavailable", kind=kind, path=request.url.path, method=request.method)
    settings = getattr(request.app.state, "settings", None)
    retry_after = str(getattr(settings, "retry_after_seconds", 2))
    detail = {
        "statement_timeout": "The database did not answer in time; retry later.",
        "lock_timeout": "The data is locked by another operation; retry later.",
        "pool_timeout": "Every database connection is busy; retry later.",
    }.get(kind, "The database is unavailable; retry later.")
    return problem_response(request, 503, detail, slug="database-unavailable", headers={"Retry-After": retry_after})


def _unexpected_body(path: str) -> bytes:
    import json

    return json.dumps({
        "type": PROBLEM_TYPE_BASE + "internal-error",
        "title": "Internal Server Error",
        "status": 500,
        "detail": "An unexpected error occurred; it has been logged.",
        "instance": path,
    }).encode()


class UnexpectedErrorMiddleware:
    """Turn an unexpected exception into a bare 500 problem+json, logged once with its traceback.

    It sits inside Starlette's ``ServerErrorMiddleware``: an ``Exception`` handler registered with
    ``add_exception_handler`` runs there, after which Starlette re-raises the exception and the
    server logs it a second time. Catching it here ends it after one log line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            log.error("unhandled_exception", path=scope.get("path"), method=scope.get("method"), exc_info=exc)
            if started:
                return
            body = _unexpected_body(str(scope.get("path", "")))
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ProblemError, _problem_error_handler)
    app.add_exception_handler(StarletteHTTPException, _http_exception_handler)
    app.add_exception_handler(RequestValidationError, _validation_error_handler)
    app.add_exception_handler(OperationalError, _database_unavailable_handler)
    app.add_exception_handler(PoolTimeoutError, _database_unavailable_handler)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the given error statuses (moved to problem+json later)."""
    descriptions = {
        400: "Bad request (a `Content-Length` that is not a number).",
        401: "Missing, unknown or revoked API key (`WWW-Authenticate: Bearer`).",
        403: "The API key's scope does not allow this request (a `read` key on a write route).",
        404: "No such resource for this tenant (another tenant's resources are reported as missing).",
        409: "The request conflicts with the resource's current state.",
        422: "Invalid input; `errors` lists every invalid field.",
        429: "Over one of the tenant's quotas (`GET /v1/quotas`); retry after `Retry-After` seconds, or once usage has gone down.",
        413: "The request body is larger than `DPWATCH_MAX_BODY_BYTES` (1 MiB by default).",
        500: "Unexpected server error (details are logged, not returned).",
        503: "The database is unavailable or did not answer in time (statement, lock or connection-pool "
        "timeout); retry after `Retry-After` seconds.",
    }
    return {status: {"model": Problem, "description": descriptions.get(status, _title(status))} for status in statuses}
