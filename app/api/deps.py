"""Dependencies shared by every router, as ``Annotated`` aliases (``SessionDep``, ``CurrentPrincipal``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.api.errors import UnauthorizedError
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
