"""Typed clients of the dpwatch REST API: :class:`Client` (sync) and :class:`AsyncClient`.

    from dpwatch_sdk import Client

    with Client("http://127.0.0.1:8000", api_key) as dpwatch:
        mechanism = dpwatch.mechanisms.create({...})
        for monitor in dpwatch.monitors.list(state="alarm"):
            ...
        job = dpwatch.mechanisms.audit(mechanism, {"pairs": [...], "epsilon": 1.0})
        done = dpwatch.jobs.wait(job, on_progress=lambda j: print(j["progress"]))

Answers are the TypedDicts of :mod:`dpwatch_sdk.models` (generated from the OpenAPI); errors are
the exceptions of :mod:`dpwatch_sdk.errors`.
"""

from ._async_client import AsyncClient
from ._sync_client import Client
from .errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    JobFailed,
    NotFound,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    Unauthorized,
    ValidationFailed,
)

__all__ = ["ApiError", "AsyncClient", "BadRequest", "Client", "Conflict", "Forbidden", "JobFailed", "NotFound",
           "RateLimited", "ServerError", "ServiceUnavailable", "Unauthorized", "ValidationFailed"]
