"""The sync client of the dpwatch REST API (docs/api.md), on httpx.

GENERATED from ``_async_client.py`` by ``scripts/unasync.py``: do not edit.
"""

from __future__ import annotations

import os
import time
import typing
from collections.abc import Iterator, Callable, Mapping

import httpx

from . import models as m
from ._retry import RETRY_STATUSES, retry_delay
from .errors import JobFailed, error_for

__all__ = ["Client"]

Id = str | Mapping[str, typing.Any]
Body = Mapping[str, typing.Any]
T = typing.TypeVar("T")

DEFAULT_TIMEOUT = 30.0
JOB_DONE = ("succeeded", "failed", "cancelled")
#: Final snapshot states: `state` (jobs' vocabulary) or, from older servers, `status`.
SNAPSHOT_DONE = ("succeeded", "done", "failed")


def _id(value: Id) -> str:
    """An id, or a resource (a dict with ``id``)."""
    if isinstance(value, Mapping):
        return str(value["id"])
    return str(value)


def _query(**params: typing.Any) -> dict[str, typing.Any]:
    out = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


class Client:
    """The dpwatch API. ``url`` and ``api_key`` default to ``$DPWATCH_URL`` and
    ``$DPWATCH_API_KEY``.

    Errors are raised as :mod:`dpwatch_sdk.errors` exceptions (``NotFound``, ``ValidationFailed``,
    …, each with the problem+json body). A ``503`` or ``429`` is retried up to ``max_retries``
    times, after the server's ``Retry-After`` when it sends one (and gives up when that is longer
    than ``max_retry_wait`` seconds), else after 0.5, 1, 2, … s; so is a connection that could not
    be made. Lists are iterators over every page (``limit`` is the page size).
    """

    def __init__(self, url: str | None = None, api_key: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = 3, max_retry_wait: float = 60.0, transport: typing.Any = None,
                 headers: Mapping[str, str] | None = None) -> None:
        url = url or os.environ.get("DPWATCH_URL")
        api_key = api_key or os.environ.get("DPWATCH_API_KEY")
        if not url:
            raise ValueError("give the service's URL (url= or $DPWATCH_URL), e.g. http://127.0.0.1:8000")
        if not api_key:
            raise ValueError("give an API key (api_key= or $DPWATCH_API_KEY); `dpwatch keys create` makes one")
        self.url = url.rstrip("/")
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport,
                                       headers={"authorization": f"Bearer {api_key}",
                                                "user-agent": "dpwatch-sdk/0.1", **(headers or {})})
        self.mechanisms = Mechanisms(self)
        self.monitors = Monitors(self)
        self.alarms = Alarms(self)
        self.webhooks = Webhooks(self)
        self.snapshots = Snapshots(self)
        self.jobs = Jobs(self)
        self.keys = Keys(self)
        self.silences = Silences(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, *, params: Mapping[str, typing.Any] | None = None,
                      json: typing.Any = None) -> typing.Any:
        """One API call, with the retries: the decoded JSON answer (None for 204)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(method, path, params=params, json=json)
            except httpx.ConnectError:
                if attempt > self.max_retries:
                    raise
                time.sleep(retry_delay(None, attempt))
                continue
            if response.status_code in RETRY_STATUSES and attempt <= self.max_retries:
                delay = retry_delay(response.headers.get("retry-after"), attempt)
                if delay <= self.max_retry_wait:
                    time.sleep(delay)
                    continue
            if response.status_code >= 400:
                raise error_for(response)
            if response.status_code == 204 or not response.content:
                return None
            return response.json()

    def _pages(self, path: str, params: Mapping[str, typing.Any]) -> Iterator[typing.Any]:
        cursor = None
        while True:
            page = self.request("GET", path, params={**params, **_query(cursor=cursor)})
            for item in page["items"]:
                yield item
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def health(self) -> m.Health:
        return self.request("GET", "/healthz")

    def ready(self) -> m.Readiness:
        return self.request("GET", "/readyz")

    def quotas(self) -> m.QuotaRead:
        """This tenant's quotas and what it uses of them (``GET /v1/quotas``)."""
        return self.request("GET", "/v1/quotas")


class _Resource:
    def __init__(self, client: Client) -> None:
        self._c = client


class Mechanisms(_Resource):
    def create(self, body: m.MechanismCreate | Body, *, validate: bool = False) -> m.MechanismCreated:
        """Register a mechanism; its ``secret`` is in this answer only."""
        return self._c.request("POST", "/v1/mechanisms", params=_query(validate=validate or None), json=body)

    def register(self, mechanism: typing.Any, sampling_url: str, *, name: str | None = None,
                       secret: str | None = None, validate: bool = False, **fields: typing.Any) -> m.MechanismCreated:
        """Register an SDK :class:`~dpwatch_sdk.Mechanism` served at ``sampling_url`` (its output kind
        and shape come from the mechanism)."""
        return self.create(mechanism.registration(sampling_url, name=name, secret=secret, **fields),
                                 validate=validate)

    def list(self, *, limit: int = 100) -> Iterator[m.MechanismRead]:
        for item in self._c._pages("/v1/mechanisms", _query(limit=limit)):
            yield item

    def get(self, mechanism: Id) -> m.MechanismRead:
        return self._c.request("GET", f"/v1/mechanisms/{_id(mechanism)}")

    def update(self, mechanism: Id, body: m.MechanismUpdate | Body, *,
                     validate: bool = False) -> m.MechanismUpdated:
        return self._c.request("PATCH", f"/v1/mechanisms/{_id(mechanism)}",
                                     params=_query(validate=validate or None), json=body)

    def delete(self, mechanism: Id, *, cascade: bool = False) -> None:
        """Delete it; ``cascade`` also deletes its monitors (409 otherwise while monitors use it)."""
        self._c.request("DELETE", f"/v1/mechanisms/{_id(mechanism)}", params=_query(cascade=cascade or None))

    def validate(self, mechanism: Id, body: m.ProbeRequest | Body | None = None) -> m.ProbeReport:
        return self._c.request("POST", f"/v1/mechanisms/{_id(mechanism)}/validate", json=body)

    def rotate_secret(self, mechanism: Id, body: m.RotateMechanismSecret | Body | None = None) -> m.SecretRotated:
        return self._c.request("POST", f"/v1/mechanisms/{_id(mechanism)}/rotate-secret", json=body)

    def discover(self, mechanism: Id, body: m.DiscoverRequest | Body) -> m.JobRead:
        """Start a discovery job (``client.jobs.wait(job)`` for its result)."""
        return self._c.request("POST", f"/v1/mechanisms/{_id(mechanism)}/discover", json=body)

    def audit(self, mechanism: Id, body: m.AuditRequest | Body) -> m.JobRead:
        """Start an audit job (``client.jobs.wait(job)`` for its result)."""
        return self._c.request("POST", f"/v1/mechanisms/{_id(mechanism)}/audits", json=body)

    def search(self, mechanism: Id, body: m.SearchRequest | Body) -> m.JobRead:
        """Start a search of the input domain (docs/search.md; ``client.jobs.wait(job)`` for it)."""
        return self._c.request("POST", f"/v1/mechanisms/{_id(mechanism)}/searches", json=body)


class Monitors(_Resource):
    def create(self, body: m.MonitorCreate | Body, *, validate: bool = False) -> m.MonitorCreated:
        return self._c.request("POST", "/v1/monitors", params=_query(validate=validate or None), json=body)

    def list(self, *, state: str | None = None, mechanism_id: str | None = None,
                   limit: int = 100) -> Iterator[m.MonitorRead]:
        for item in self._c._pages("/v1/monitors", _query(state=state, mechanism_id=mechanism_id, limit=limit)):
            yield item

    def get(self, monitor: Id) -> m.MonitorRead:
        return self._c.request("GET", f"/v1/monitors/{_id(monitor)}")

    def update(self, monitor: Id, body: m.MonitorUpdate | Body) -> m.MonitorRead:
        """Change it in place (a JSON merge patch): name, n, schedule, snapshot and discovery sizes keep
        its id, periods and running test; a field that defines the test raises a 409 ``ApiError``."""
        return self._c.request("PATCH", f"/v1/monitors/{_id(monitor)}", json=body)

    def delete(self, monitor: Id) -> None:
        """Delete it with its periods; its alarms are archived."""
        self._c.request("DELETE", f"/v1/monitors/{_id(monitor)}")

    def status(self, monitor: Id) -> m.MonitorStatus:
        return self._c.request("GET", f"/v1/monitors/{_id(monitor)}/status")

    def validate(self, monitor: Id) -> m.MonitorValidation:
        return self._c.request("POST", f"/v1/monitors/{_id(monitor)}/validate")

    def pause(self, monitor: Id) -> m.MonitorRead:
        return self._c.request("POST", f"/v1/monitors/{_id(monitor)}/pause")

    def resume(self, monitor: Id) -> m.MonitorRead:
        return self._c.request("POST", f"/v1/monitors/{_id(monitor)}/resume")

    def reset(self, monitor: Id) -> m.MonitorRead:
        return self._c.request("POST", f"/v1/monitors/{_id(monitor)}/reset")

    def periods(self, monitor: Id, *, limit: int = 100) -> Iterator[m.PeriodRead]:
        for item in self._c._pages(f"/v1/monitors/{_id(monitor)}/periods", _query(limit=limit)):
            yield item

    def check_from_search(self, monitor: Id, body: m.AdoptFindingRequest | Body) -> m.JobRead:
        """Add a check from a search's finding (docs/search.md)."""
        return self._c.request("POST", f"/v1/monitors/{_id(monitor)}/checks/from-search", json=body)

    def snapshot(self, monitor: Id, body: m.SnapshotRequest | Body | None = None) -> m.SnapshotSummary:
        """Ask for an MPL snapshot (``client.snapshots.wait(snapshot)`` for it)."""
        return self._c.request("POST", f"/v1/monitors/{_id(monitor)}/snapshots", json=body or {})

    def snapshots(self, monitor: Id, *, limit: int = 100) -> Iterator[m.SnapshotSummary]:
        for item in self._c._pages(f"/v1/monitors/{_id(monitor)}/snapshots", _query(limit=limit)):
            yield item


class Alarms(_Resource):
    def list(self, *, monitor_id: str | None = None, acknowledged: bool | None = None,
                   resolved: bool | None = None, kind: str | None = None, archived: bool | None = None,
                   limit: int = 100) -> Iterator[m.AlarmRead]:
        params = _query(monitor_id=monitor_id, acknowledged=acknowledged, resolved=resolved, kind=kind,
                        archived=archived, limit=limit)
        for item in self._c._pages("/v1/alarms", params):
            yield item

    def get(self, alarm: Id) -> m.AlarmRead:
        return self._c.request("GET", f"/v1/alarms/{_id(alarm)}")

    def acknowledge(self, alarm: Id, note: str | None = None) -> m.AlarmRead:
        return self._c.request("POST", f"/v1/alarms/{_id(alarm)}/acknowledge",
                                     json={"note": note} if note is not None else None)


class Webhooks(_Resource):
    def create(self, body: m.WebhookCreate | Body) -> m.WebhookCreated:
        """Subscribe; the ``secret`` is in this answer only."""
        return self._c.request("POST", "/v1/webhooks", json=body)

    def list(self, *, limit: int = 100) -> Iterator[m.WebhookRead]:
        for item in self._c._pages("/v1/webhooks", _query(limit=limit)):
            yield item

    def get(self, webhook: Id) -> m.WebhookRead:
        return self._c.request("GET", f"/v1/webhooks/{_id(webhook)}")

    def update(self, webhook: Id, body: m.WebhookUpdate | Body) -> m.WebhookRead:
        return self._c.request("PATCH", f"/v1/webhooks/{_id(webhook)}", json=body)

    def delete(self, webhook: Id) -> None:
        self._c.request("DELETE", f"/v1/webhooks/{_id(webhook)}")

    def test(self, webhook: Id) -> m.DeliveryRead:
        return self._c.request("POST", f"/v1/webhooks/{_id(webhook)}/test")

    def deliveries(self, webhook: Id, *, limit: int = 100) -> Iterator[m.DeliveryRead]:
        for item in self._c._pages(f"/v1/webhooks/{_id(webhook)}/deliveries", _query(limit=limit)):
            yield item

    def redeliver(self, webhook: Id, message: Id) -> m.DeliveryRead:
        """Queue one of the webhook's messages again (same body, a new ``webhook-id``)."""
        return self._c.request("POST", f"/v1/webhooks/{_id(webhook)}/deliveries/{_id(message)}/redeliver")

    def rotate_secret(self, webhook: Id, body: m.RotateSecret | Body | None = None) -> m.SecretRotated:
        return self._c.request("POST", f"/v1/webhooks/{_id(webhook)}/rotate-secret", json=body)


class Snapshots(_Resource):
    def get(self, snapshot: Id) -> m.SnapshotRead:
        return self._c.request("GET", f"/v1/snapshots/{_id(snapshot)}")

    def wait(self, snapshot: Id, *, timeout: float | None = None, poll_interval: float = 1.0) -> m.SnapshotRead:
        """Poll until the snapshot's ``state`` is ``succeeded`` (or ``failed``: its ``error`` says why)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            found = self.get(snapshot)
            if found.get("state", found.get("status")) in SNAPSHOT_DONE:
                return found
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"snapshot {_id(snapshot)} is still {found.get('state', found.get('status'))} after {timeout:g} s")
            time.sleep(poll_interval)


class Jobs(_Resource):
    def list(self, *, kind: str | None = None, state: str | None = None, mechanism_id: str | None = None,
                   monitor_id: str | None = None, limit: int = 100) -> Iterator[m.JobRead]:
        params = _query(kind=kind, state=state, mechanism_id=mechanism_id, monitor_id=monitor_id, limit=limit)
        for item in self._c._pages("/v1/jobs", params):
            yield item

    def get(self, job: Id) -> m.JobRead:
        return self._c.request("GET", f"/v1/jobs/{_id(job)}")

    def cancel(self, job: Id) -> m.JobRead:
        return self._c.request("POST", f"/v1/jobs/{_id(job)}/cancel")

    def wait(self, job: Id, *, timeout: float | None = None, poll_interval: float = 1.0,
                   on_progress: Callable[[m.JobRead], typing.Any] | None = None) -> m.JobRead:
        """Poll until the job ends: its last state when ``succeeded`` (``result`` holds what it
        found); :class:`~dpwatch_sdk.errors.JobFailed` when ``failed`` or ``cancelled``;
        ``TimeoutError`` after ``timeout`` seconds. ``on_progress(job)`` is called whenever its
        ``progress`` changes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            found = self.get(job)
            progress = (found.get("state"), (found.get("progress") or {}).get("fraction"),
                        (found.get("progress") or {}).get("message"))
            if on_progress is not None and progress != last:
                on_progress(found)
            last = progress
            if found["state"] == "succeeded":
                return found
            if found["state"] in JOB_DONE:
                raise JobFailed(found)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {_id(job)} is still {found['state']} after {timeout:g} s")
            time.sleep(poll_interval)


class Keys(_Resource):
    def create(self, body: m.ApiKeyCreate | Body) -> m.ApiKeyCreated:
        """A new key of this tenant; ``key`` is in this answer only."""
        return self._c.request("POST", "/v1/keys", json=body)

    def list(self, *, revoked: bool | None = None, limit: int = 100) -> Iterator[m.ApiKeyRead]:
        for item in self._c._pages("/v1/keys", _query(revoked=revoked, limit=limit)):
            yield item

    def get(self, key: Id) -> m.ApiKeyRead:
        return self._c.request("GET", f"/v1/keys/{_id(key)}")

    def revoke(self, key: Id) -> None:
        self._c.request("DELETE", f"/v1/keys/{_id(key)}")


class Silences(_Resource):
    def create(self, body: m.SilenceCreate | Body) -> m.SilenceRead:
        """Mute the webhooks of matching alarms from ``starts_at`` to ``ends_at`` (alarms stay recorded)."""
        return self._c.request("POST", "/v1/silences", json=body)

    def list(self, *, state: str | None = None, limit: int = 100) -> Iterator[m.SilenceRead]:
        for item in self._c._pages("/v1/silences", _query(state=state, limit=limit)):
            yield item

    def get(self, silence: Id) -> m.SilenceRead:
        return self._c.request("GET", f"/v1/silences/{_id(silence)}")

    def expire(self, silence: Id) -> m.SilenceRead:
        """End the silence now."""
        return self._c.request("DELETE", f"/v1/silences/{_id(silence)}")
