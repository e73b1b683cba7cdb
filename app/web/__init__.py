"""The dashboard: server-rendered pages under ``/ui`` (docs/dashboard.md).

:func:`install_dashboard` adds the pages, their static files (``/ui/static``, with the vendored
uPlot) and the error pages to an app. The pages use the app's session factory and settings, like
the API. Sign-in and CSRF are in :mod:`app.web.session`; who may change a monitor is decided in
:mod:`app.web.permissions`; how a claim is shown and drawn, in :mod:`app.web.claims`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.errors import ProblemError, problem_response
from app.settings import Settings
from app.web.manage import build_manage_router
from app.web.pages import Forbidden, SignInRequired, build_router, error_page, make_templates
from app.web.session import SessionSigner

STATIC_DIR = Path(__file__).resolve().parent / "static"


_AsyncHandler = Callable[[Request, Exception], Awaitable[Response]]


def _is_page(request: Request) -> bool:
    path = request.url.path
    return (path == "/ui" or path.startswith("/ui/")) and not path.startswith(("/ui/data/", "/ui/static/"))


def install_dashboard(app: FastAPI, settings: Settings) -> None:
    app.state.web_signer = SessionSigner(settings)
    app.state.web_templates = make_templates()
    app.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="ui-static")
    app.include_router(build_manage_router())  # first: /ui/monitors/new before /ui/monitors/{id}
    app.include_router(build_router())

    async def sign_in_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SignInRequired)
        if exc.data_request:
            return problem_response(request, 401, "Sign in to the dashboard first.", slug="unauthorized")
        target = "/ui/login" if exc.next_url == "/ui/monitors" else f"/ui/login?next={quote(exc.next_url, safe='')}"
        return RedirectResponse(target, status_code=303)

    async def forbidden(request: Request, exc: Exception) -> Response:
        if _is_page(request):
            return error_page(request, 403, str(exc))
        return problem_response(request, 403, str(exc), slug="forbidden")

    app.add_exception_handler(SignInRequired, sign_in_required)
    app.add_exception_handler(Forbidden, forbidden)

    # Errors on pages are pages; the API's (and the chart data's) stay problem+json.
    for exc_class in (ProblemError, StarletteHTTPException, RequestValidationError):
        # app.api.errors installs async (request, exc) -> response handlers for these three;
        # Starlette's map types its values more widely (sync handlers, websocket handlers).
        original = cast(_AsyncHandler, app.exception_handlers[exc_class])

        async def handler(request: Request, exc: Exception, _original: _AsyncHandler = original) -> Response:
            if not _is_page(request):
                return await _original(request, exc)
            if isinstance(exc, ProblemError):
                return error_page(request, exc.status, exc.detail)
            if isinstance(exc, StarletteHTTPException):
                detail = exc.detail if isinstance(exc.detail, str) and exc.detail != "Not Found" else "No such page."
                return error_page(request, exc.status_code, detail)
            return error_page(request, 400, "The address has an invalid parameter.")

        app.add_exception_handler(exc_class, handler)

