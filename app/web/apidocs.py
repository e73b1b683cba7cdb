"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) with their scripts served by the service itself.

FastAPI's default pages load Swagger UI and ReDoc from a CDN, so they are blank on a machine
without internet. The assets here come from the ``fastapi-offline`` package (installed from
PyPI with dpwatch) and are served under ``/docs-assets``; Google fonts are off in ReDoc and the
online spec validator is off in Swagger UI. Both pages are served with a Content-Security-Policy
that allows this origin only, so the browser does not even try another host (ReDoc's sidebar
asks for a Redocly logo from a CDN: the policy blocks it and ReDoc leaves the logo out).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
#: FastAPI's pages start the UIs with an inline script; ReDoc styles inline and searches in a blob worker.
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def _offline(response: HTMLResponse) -> HTMLResponse:
    response.headers["Content-Security-Policy"] = DOCS_CSP
    return response


def assets_directory() -> Path:
    """The folder of Swagger UI's and ReDoc's files inside the installed ``fastapi-offline``."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


def install_offline_docs(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve the API docs from local assets. Create the app with ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_directory()), name="docs-assets")
    oauth2_redirect = f"{docs_url}/oauth2-redirect"

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _offline(get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{oauth2_redirect}",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={**(app.swagger_ui_parameters or {}), "validatorUrl": None},
        ))

    @app.get(oauth2_redirect, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _offline(get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        ))
