"""Dependencies shared by every router, as ``Annotated`` aliases (``SessionDep``, ``CurrentPrincipal``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.api.errors import ForbiddenError, UnauthorizedError
from app.auth.service import Principal, authenticate
from app.settings import Settings


def get_session(request: Request) -> Iterator[Session]:
    """A session whose transaction the request owns: commit when the handler returns, roll back
    when it raises. Services only ``flush``."""
    session: Session = request.app.state.session_factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


# scope="function": the commit happens before the response is sent, so a failed commit is a 500
# rather than a 2xx for a change that was never stored.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(get_app_settings)]

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    bearerFormat="dpw_…",
    description="An API key: `Authorization: Bearer dpw_…`. Create one with `dpwatch keys create`.",
)


def get_principal(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal:
    """The tenant behind the bearer key; 401 with ``WWW-Authenticate: Bearer`` otherwise."""
    if credentials is None:
        raise UnauthorizedError("Send an API key as `Authorization: Bearer <key>`.")
    principal = authenticate(session, credentials.credentials)
    if principal is None:
        raise UnauthorizedError("The API key is unknown or has been revoked.", error="invalid_token")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


#: Methods a ``read`` key may use; every other method needs an ``admin`` key.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def authorize(request: Request, principal: CurrentPrincipal) -> Principal:
    """The one place key scopes are enforced, for every ``/v1`` route (the router's dependency):
    a ``read`` key may only read; any other method answers 403 problem+json. The dashboard asks
    the same question through app.web.permissions.may_change_monitor."""
    if request.method not in READ_METHODS and not principal.may_write:
        raise ForbiddenError(
            f"This API key has the read scope; {request.method} {request.url.path} needs an admin key."
        )
    return principal


def document_scope_responses(schema: dict[str, Any], prefix: str = "/v1/") -> None:
    """Add the 403 that :func:`authorize` may answer to every write operation under ``prefix``
    of an OpenAPI document (the dependency is router-wide, so FastAPI cannot tell per route)."""
    ref = {"$ref": "#/components/schemas/Problem"}  # every /v1 route documents its 401 with it
    for path, item in schema.get("paths", {}).items():
        if not path.startswith(prefix):
            continue
        for method, operation in item.items():
            if method.upper() in READ_METHODS or not isinstance(operation, dict):
                continue
            operation.setdefault("responses", {}).setdefault(
                "403",
                {
                    "description": "The API key's scope does not allow this request (a `read` key on a write route).",
                    "content": {"application/problem+json": {"schema": ref}},
                },
            )
