"""The API's errors (``application/problem+json``, RFC 9457) as exceptions."""

from __future__ import annotations

import typing

import httpx

__all__ = [
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "JobFailed",
    "NotFound",
    "RateLimited",
    "ServerError",
    "ServiceUnavailable",
    "Unauthorized",
    "ValidationFailed",
    "error_for",
]


class ApiError(Exception):
    """An error answer of the dpwatch API. ``problem`` is the problem+json body (``type``,
    ``title``, ``status``, ``detail``, ``instance``, and ``errors`` for 422s); ``response`` the
    httpx response."""

    status: int = 0

    def __init__(self, status: int, problem: dict[str, typing.Any], response: httpx.Response | None = None) -> None:
        self.status = status
        self.problem = problem
        self.response = response
        self.title = str(problem.get("title") or "")
        self.detail = problem.get("detail")
        self.type = str(problem.get("type") or "about:blank")
        self.errors: list[dict[str, typing.Any]] = list(problem.get("errors") or [])
        text = f"{status} {self.title}".strip()
        if self.detail:
            text += f": {self.detail}"
        for error in self.errors[:5]:
            text += f"\n  {error.get('pointer', '')}: {error.get('message', '')}"
        super().__init__(text)

    @property
    def slug(self) -> str:
        """The last part of ``type`` (``not-found``, ``conflict``, ``last-admin-key``, …)."""
        return self.type.rstrip("/").rsplit("/", 1)[-1]


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class ValidationFailed(ApiError):
    """422: ``errors`` holds one entry per invalid input (``pointer``, ``location``, ``message``, ``type``)."""

    status = 422


class RateLimited(ApiError):
    status = 429


class ServiceUnavailable(ApiError):
    """503 (after the client's retries): the database or the service is not available now."""

    status = 503


class ServerError(ApiError):
    """Any other 5xx."""


class JobFailed(Exception):
    """A job ended ``failed`` or ``cancelled``; ``job`` is its last state."""

    def __init__(self, job: typing.Mapping[str, typing.Any]) -> None:
        self.job = job
        super().__init__(f"job {job.get('id')} ({job.get('kind')}) {job.get('state')}: {job.get('error') or ''}".strip())


_BY_STATUS: dict[int, type[ApiError]] = {cls.status: cls for cls in (BadRequest, Unauthorized, Forbidden, NotFound,
                                                                    Conflict, ValidationFailed, RateLimited,
                                                                    ServiceUnavailable)}


def error_for(response: httpx.Response) -> ApiError:
    """The exception for an error response (problem+json, or any body)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"title": response.reason_phrase, "status": response.status_code,
                "detail": response.text[:500] if response.text else None}
    cls = _BY_STATUS.get(response.status_code) or (ServerError if response.status_code >= 500 else ApiError)
    return cls(response.status_code, body, response)
