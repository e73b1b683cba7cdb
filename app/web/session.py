"""Dashboard sign-in: a signed session cookie, and CSRF tokens (double submit, signed).

**Session.** Signing in with an API key opens a server-side session (``web_sessions``) and sets
the cookie ``dpwatch_session``: an itsdangerous ``URLSafeTimedSerializer`` signature over
``{"k": api key id, "t": tenant id, "s": session id, "c": CSRF nonce}``. The key itself is never
in the cookie. Every request looks the key and the session up again by id, so revoking the key
ends its sessions, and signing out ends the session: a copy of the cookie no longer works. The cookie is ``HttpOnly``, ``SameSite=Lax``, ``Path=/ui`` and
``Secure`` unless ``DPWATCH_COOKIE_SECURE=false`` (by default it is off only in development).

**CSRF.** Each form carries ``csrf_token``, a signature (another salt) over a random nonce.
Signed in, the nonce is the one inside the session cookie. Before sign-in, for the sign-in
form, it lives in a cookie of its own, ``dpwatch_csrf`` (signed too). A POST is accepted only
when the form's token is validly signed, not older than the session lifetime, and carries the
nonce of the request's cookie. An attacker's page can neither read the cookie nor sign a token
for it. When the browser sends ``Origin``, it must also be this host.
"""

from __future__ import annotations

import hmac
import secrets
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from app.auth.service import Principal, web_session_live
from app.models.auth import ApiKey
from app.settings import Settings

SESSION_COOKIE = "dpwatch_session"
CSRF_COOKIE = "dpwatch_csrf"
FLASH_COOKIE = "dpwatch_flash"
COOKIE_PATH = "/ui"
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class WebSession:
    api_key_id: uuid.UUID
    tenant_id: uuid.UUID
    csrf_nonce: str
    session_id: uuid.UUID


class CsrfError(Exception):
    """A state-changing request without a valid CSRF token (answered with 403)."""


class SessionSigner:
    """Signs and checks the dashboard's cookies and CSRF tokens with one process-wide key."""

    def __init__(self, settings: Settings) -> None:
        secret = settings.session_secret.get_secret_value() if settings.session_secret else secrets.token_urlsafe(32)
        self._session = URLSafeTimedSerializer(secret, salt="dpwatch.web.session")
        self._csrf_cookie = URLSafeTimedSerializer(secret, salt="dpwatch.web.csrf-cookie")
        self._csrf_token = URLSafeTimedSerializer(secret, salt="dpwatch.web.csrf-token")
        self._flash = URLSafeTimedSerializer(secret, salt="dpwatch.web.flash")
        self.max_age = settings.session_max_age_seconds
        self.secure = settings.cookie_secure if settings.cookie_secure is not None else settings.env != "development"

    # ------------------------------------------------------------------------------ cookies

    def _set(self, response: Response, name: str, value: str) -> None:
        response.set_cookie(name, value, max_age=self.max_age, path=COOKIE_PATH, secure=self.secure,
                            httponly=True, samesite="lax")

    def _clear(self, response: Response, name: str) -> None:
        response.delete_cookie(name, path=COOKIE_PATH, secure=self.secure, httponly=True, samesite="lax")

    def start_session(self, response: Response, api_key_id: uuid.UUID, tenant_id: uuid.UUID,
                      session_id: uuid.UUID) -> None:
        """Sign in (``session_id``: the server-side session, app.auth.service.open_web_session): a
        session with a fresh CSRF nonce; the pre-sign-in nonce is dropped."""
        value = self._session.dumps({"k": str(api_key_id), "t": str(tenant_id), "s": str(session_id),
                                     "c": secrets.token_urlsafe(16)})
        self._set(response, SESSION_COOKIE, value)
        self._clear(response, CSRF_COOKIE)

    def end_session(self, response: Response) -> None:
        self._clear(response, SESSION_COOKIE)
        self._clear(response, CSRF_COOKIE)

    def read_session(self, request: Request) -> WebSession | None:
        """The session in the request's cookie, if its signature and age are valid."""
        raw = request.cookies.get(SESSION_COOKIE)
        if not raw:
            return None
        try:
            data: Any = self._session.loads(raw, max_age=self.max_age)
            return WebSession(uuid.UUID(data["k"]), uuid.UUID(data["t"]), str(data["c"]), uuid.UUID(data["s"]))
        except (BadSignature, KeyError, TypeError, ValueError):
            return None

    def set_flash(self, response: Response, message: str, *, error: bool = False) -> None:
        """A one-time message for the page the response redirects to (post/redirect/get)."""
        response.set_cookie(FLASH_COOKIE, self._flash.dumps({"e": error, "m": message[:500]}), max_age=60,
                            path=COOKIE_PATH, secure=self.secure, httponly=True, samesite="lax")

    def take_flash(self, request: Request, response: Response) -> dict[str, Any] | None:
        """The request's one-time message, if any (its cookie is cleared on ``response``)."""
        raw = request.cookies.get(FLASH_COOKIE)
        if not raw:
            return None
        self._clear(response, FLASH_COOKIE)
        try:
            value = self._flash.loads(raw, max_age=60)
            return {"error": bool(value["e"]), "message": str(value["m"])}
        except (BadSignature, KeyError, TypeError):
            return None

    # ------------------------------------------------------------------------------ CSRF

    def _anonymous_nonce(self, request: Request) -> str | None:
        raw = request.cookies.get(CSRF_COOKIE)
        if not raw:
            return None
        try:
            return str(self._csrf_cookie.loads(raw, max_age=self.max_age))
        except BadSignature:
            return None

    def csrf_token(self, request: Request, response: Response | None = None) -> str:
        """A token for the forms of this page. Without a session, a pre-sign-in nonce is made
        (and its cookie set on ``response``) if the request has none."""
        session = self.read_session(request)
        if session is not None:
            nonce = session.csrf_nonce
        else:
            nonce = self._anonymous_nonce(request) or ""
            if not nonce:
                nonce = secrets.token_urlsafe(16)
                if response is not None:
                    self._set(response, CSRF_COOKIE, self._csrf_cookie.dumps(nonce))
        return str(self._csrf_token.dumps(nonce))

    def check_csrf(self, request: Request, token: str | None) -> None:
        """Raise :class:`CsrfError` unless ``token`` belongs to the request's session (or, before
        sign-in, to its CSRF cookie) and the request comes from this origin."""
        origin = request.headers.get("origin")
        if origin and origin != "null":
            host = request.headers.get("host", "")
            if urlsplit(origin).netloc.lower() != host.lower():
                raise CsrfError("The request comes from another origin.")
        if not token:
            raise CsrfError("The form has no CSRF token; reload the page and try again.")
        try:
            nonce = str(self._csrf_token.loads(token, max_age=self.max_age))
        except BadSignature as exc:
            raise CsrfError("The form's CSRF token is invalid or expired; reload the page and try again.") from exc
        session = self.read_session(request)
        expected = session.csrf_nonce if session is not None else self._anonymous_nonce(request)
        if not expected or not hmac.compare_digest(nonce, expected):
            raise CsrfError("The form's CSRF token does not belong to this session; reload the page and try again.")


def principal_of(session: Session, web_session: WebSession | None) -> Principal | None:
    """The principal of a session that has not ended, whose key still exists, is not revoked and
    is the tenant's."""
    if web_session is None:
        return None
    api_key = session.get(ApiKey, web_session.api_key_id)
    if api_key is None or api_key.revoked_at is not None or api_key.tenant_id != web_session.tenant_id:
        return None
    if not web_session_live(session, web_session.session_id, api_key.id):
        return None
    return Principal(tenant_id=api_key.tenant_id, api_key_id=api_key.id, scope=api_key.scope)


def safe_next(target: str | None) -> str:
    """A post-sign-in redirect target: only a path under /ui on this site."""
    if not target or not target.startswith("/ui") or target.startswith("//") or "\\" in target:
        return "/ui/monitors"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return "/ui/monitors"
    return target
