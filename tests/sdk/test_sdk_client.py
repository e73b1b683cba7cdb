"""The SDK's typed client (dpwatch_sdk.Client / AsyncClient) against the live API, and its models
against the live OpenAPI so that they cannot drift."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import typing
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest
from dpwatch_sdk import AsyncClient, Client, models
from dpwatch_sdk.adapters import from_function
from dpwatch_sdk.errors import Conflict, JobFailed, NotFound, ServiceUnavailable, Unauthorized, ValidationFailed

from tests.support.api_helpers import MONITOR
from tests.support.sampling_server import serve_app

SDK = Path(__file__).resolve().parents[2] / "sdk" / "python"


@pytest.fixture
def backend() -> str:
    return "sqlite"  # the client's behaviour does not depend on the database (the API tests cover both)


# ------------------------------------------------------------------------ the models and the OpenAPI


def _typeddicts() -> dict[str, typing.Any]:
    return {name: obj for name, obj in vars(models).items()
            if isinstance(obj, type) and issubclass(obj, dict) and hasattr(obj, "__required_keys__")}


def _object_schemas(schema: dict[str, typing.Any]) -> list[dict[str, typing.Any]]:
    """The object alternatives of a component schema: one, or one per branch of a oneOf/anyOf (with
    the schema's own properties, when it has some, and each branch's requirements)."""
    branches = schema.get("oneOf", schema.get("anyOf"))
    if "properties" in schema and branches:
        return [{"properties": {**branch.get("properties", {}), **schema["properties"]},
                 "required": [*schema.get("required", []), *branch.get("required", [])]} for branch in branches]
    if "properties" in schema:
        return [schema]
    return [s for s in schema.get("oneOf", schema.get("anyOf", [])) if "properties" in s]


def _literal_values(annotation: typing.Any) -> set[typing.Any] | None:
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            return set(typing.get_args(arg))
        inner = _literal_values(arg) if typing.get_args(arg) and arg is not annotation else None
        if inner:
            return inner
    return None


def _enum(prop: dict[str, typing.Any]) -> set[typing.Any] | None:
    if "enum" in prop:
        return set(prop["enum"])
    if "const" in prop:
        return {prop["const"]}
    for alternative in prop.get("anyOf", []):
        if "enum" in alternative:
            return set(alternative["enum"])
    return None


def test_the_models_match_the_live_openapi(app):
    schemas = app.openapi()["components"]["schemas"]
    dicts = _typeddicts()
    names = {re.sub(r"[^A-Za-z0-9]", "", name) for name in schemas}  # Page_MechanismRead_ -> PageMechanismRead
    stale = {n for n in dicts if re.sub(r"\d+$", "", n) not in names}
    assert not stale, f"models of no API schema (regenerate: bash sdk/python/scripts/generate_models.sh): {stale}"
    for raw_name, schema in schemas.items():
        name = re.sub(r"[^A-Za-z0-9]", "", raw_name)
        alternatives = _object_schemas(schema)
        if not alternatives:
            continue  # scalar or enum schemas are inlined as Literal types
        variants = [dicts[name]] if len(alternatives) == 1 else [dicts[f"{name}{i + 1}"] for i in range(len(alternatives))]
        for model, alternative in zip(variants, alternatives, strict=True):
            where = f"{raw_name} vs models.{model.__name__} (regenerate: bash sdk/python/scripts/generate_models.sh)"
            props = alternative["properties"]
            assert set(model.__annotations__) == set(props), where
            assert set(model.__required_keys__) == set(alternative.get("required", [])), where
            hints = typing.get_type_hints(model)
            for key, prop in props.items():
                wanted = _enum(prop)
                if wanted is not None and all(isinstance(v, str) for v in wanted):
                    assert _literal_values(hints[key]) == wanted, f"{where}: {key}"


def test_the_client_covers_every_operation_and_the_sync_client_is_generated(app):
    ops = {(method.upper(), re.sub(r"\{[^}]+\}", "{}", path))
           for path, item in app.openapi()["paths"].items() for method in item
           if path.startswith("/v1/") or path in ("/healthz", "/readyz")}
    source = (SDK / "dpwatch_sdk" / "_async_client.py").read_text()
    called = {(method, re.sub(r"\{[^}]+\}", "{}", path))
              for method, path in re.findall(r'request\("([A-Z]+)", f?"([^"]+)"', source)}
    called |= {("GET", re.sub(r"\{[^}]+\}", "{}", path)) for path in re.findall(r'_pages\(f?"([^"]+)"', source)}
    assert ops - called == set(), "API operations the client cannot call"
    done = subprocess.run([sys.executable, str(SDK / "scripts" / "unasync.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------ the sync client over HTTP


def test_the_sync_client_against_the_service(app, tenants):
    with serve_app(app) as base, Client(base, tenants[0].key, max_retries=0) as dpwatch:
        assert dpwatch.health() == {"status": "ok"}
        sdk_mechanism = from_function(lambda db, n, rng: [0.0] * n, epsilon=1.0, name="zeros")
        created = dpwatch.mechanisms.register(sdk_mechanism, "https://dp.example.org/zeros")
        assert created["secret"].startswith("whsec_") and created["output_kind"] == "real"
        for i in range(3):
            dpwatch.mechanisms.create({"name": f"m{i}", "sampling_url": f"https://dp.example.org/{i}",
                                       "output_kind": "real"})
        listed = list(dpwatch.mechanisms.list(limit=1))  # four pages of one
        assert [m["name"] for m in listed] == ["m2", "m1", "m0", "zeros"]
        assert dpwatch.mechanisms.update(created, {"max_batch": 500})["max_batch"] == 500
        assert dpwatch.mechanisms.get(created["id"])["max_batch"] == 500

        with pytest.raises(NotFound) as missing:
            dpwatch.monitors.get(str(uuid.uuid4()))
        assert missing.value.status == 404 and missing.value.slug == "not-found"
        with pytest.raises(ValidationFailed) as invalid:
            dpwatch.monitors.create({**MONITOR, "mechanism_id": created["id"], "epsilon": -1})
        assert any(e["pointer"] == "#/epsilon" for e in invalid.value.errors)

        monitor = dpwatch.monitors.create({**MONITOR, "mechanism_id": created["id"]})
        assert dpwatch.monitors.status(monitor)["state"] == "active"
        assert dpwatch.monitors.pause(monitor)["state"] == "paused"
        assert dpwatch.monitors.resume(monitor)["state"] == "active"
        updated = dpwatch.monitors.update(monitor, {"samples_per_period": 3000, "name": "renamed"})
        assert (updated["id"], updated["samples_per_period"], updated["name"]) == (monitor["id"], 3000, "renamed")
        with pytest.raises(Conflict) as conflict:
            dpwatch.monitors.update(monitor, {"alpha": 0.01})
        assert conflict.value.slug == "monitor-test-change" and conflict.value.errors[0]["pointer"] == "#/alpha"
        assert list(dpwatch.monitors.periods(monitor)) == []
        assert [m["id"] for m in dpwatch.monitors.list(mechanism_id=created["id"])] == [monitor["id"]]
        with pytest.raises(Conflict):
            dpwatch.mechanisms.delete(created)  # a monitor uses it
        assert list(dpwatch.alarms.list(monitor_id=monitor["id"])) == []

        hook = dpwatch.webhooks.create({"url": "https://hooks.example.org/x", "event_types": ["alarm.firing"]})
        assert hook["secret"].startswith("whsec_")
        assert dpwatch.webhooks.update(hook, {"enabled": False})["enabled"] is False
        dpwatch.webhooks.delete(hook)
        with pytest.raises(NotFound):
            dpwatch.webhooks.get(hook)

        job = dpwatch.mechanisms.audit(created, {"pairs": [{"x": [0], "x_prime": [1]}], "epsilon": 1.0})
        assert job["state"] == "queued" and job["kind"] == "audit"
        with pytest.raises(TimeoutError):
            dpwatch.jobs.wait(job, timeout=0.2, poll_interval=0.05)  # no worker in this test
        assert dpwatch.jobs.cancel(job)["state"] == "cancelled"
        with pytest.raises(JobFailed, match="cancelled"):
            dpwatch.jobs.wait(job)

        key = dpwatch.keys.create({"name": "ci", "scope": "read"})
        assert key["key"].startswith("dpw_") and any(k["id"] == key["id"] for k in dpwatch.keys.list())
        with Client(base, key["key"], max_retries=0) as reader:
            assert reader.mechanisms.get(created)["id"] == created["id"]
        dpwatch.keys.revoke(key)
        with Client(base, key["key"], max_retries=0) as revoked, pytest.raises(Unauthorized):
            revoked.mechanisms.get(created)


def test_the_async_client(app, tenants):
    async def scenario() -> None:
        async with AsyncClient("http://dpwatch.test", tenants[0].key,
                               transport=httpx.ASGITransport(app=app)) as dpwatch:
            made = await dpwatch.mechanisms.create({"name": "a", "sampling_url": "https://dp.example.org/a",
                                                    "output_kind": "discrete"})
            assert [m["id"] async for m in dpwatch.mechanisms.list()] == [made["id"]]
            assert (await dpwatch.mechanisms.get(made))["output_kind"] == "discrete"
            monitor = await dpwatch.monitors.create({**MONITOR, "mechanism_id": made["id"],
                                                     "checks": [{"x": [0], "x_prime": [1],
                                                                 "event": {"kind": "set", "values": [1]}}]})
            updated = await dpwatch.monitors.update(monitor, {"period_seconds": None, "cron": "0 * * * *"})
            assert updated["id"] == monitor["id"] and updated["cron"] == "0 * * * *"
            assert updated["period_seconds"] is None
            with pytest.raises(NotFound):
                await dpwatch.alarms.get(str(uuid.uuid4()))

    asyncio.run(scenario())


# ------------------------------------------------------------------------ retries and jobs, scripted


class Scripted:
    """A transport that answers from a list and records the requests."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.pop(0)


def _problem(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, json={"type": "https://dpwatch.dev/problems/unavailable",
                                                         "title": "Service Unavailable", "status": status,
                                                         "detail": "The database did not answer in time."})


def test_503_is_retried_after_retry_after(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr("dpwatch_sdk._sync_client.time.sleep", slept.append)
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    script = Scripted(_problem(503, **{"retry-after": "2"}), _problem(429, **{"retry-after": when}),
                      httpx.Response(200, json={"status": "ok"}))
    with Client("http://x", "dpw_k", transport=httpx.MockTransport(script)) as dpwatch:
        assert dpwatch.health() == {"status": "ok"}
    assert len(script.requests) == 3 and slept[0] == 2 and 25 < slept[1] <= 30
    assert script.requests[0].headers["authorization"] == "Bearer dpw_k"

    script = Scripted(*[_problem(503) for _ in range(3)])
    slept.clear()
    with Client("http://x", "dpw_k", transport=httpx.MockTransport(script), max_retries=2) as dpwatch:
        with pytest.raises(ServiceUnavailable, match="did not answer in time"):
            dpwatch.health()
    assert len(script.requests) == 3 and len(slept) == 2 and all(0.3 < s < 1.3 for s in slept)

    script = Scripted(_problem(503, **{"retry-after": "3600"}))  # longer than max_retry_wait: give up now
    with Client("http://x", "dpw_k", transport=httpx.MockTransport(script)) as dpwatch:
        with pytest.raises(ServiceUnavailable):
            dpwatch.health()
    assert len(script.requests) == 1


def test_jobs_are_awaited_with_progress(monkeypatch):
    monkeypatch.setattr("dpwatch_sdk._sync_client.time.sleep", lambda s: None)

    def job(state: str, fraction: float | None = None, **extra: typing.Any) -> httpx.Response:
        return httpx.Response(200, json={"id": "j1", "kind": "audit", "state": state,
                                         "progress": {"fraction": fraction, "message": f"{state} {fraction}"},
                                         **extra})

    script = Scripted(job("queued"), job("running", 0.25), job("running", 0.25), job("running", 0.75),
                      job("succeeded", 1.0, result={"verdict": "refuted"}))
    seen: list[typing.Any] = []
    with Client("http://x", "dpw_k", transport=httpx.MockTransport(script)) as dpwatch:
        done = dpwatch.jobs.wait("j1", on_progress=lambda j: seen.append(j["progress"]["fraction"]))
    assert done["result"] == {"verdict": "refuted"} and seen == [None, 0.25, 0.75, 1.0]

    script = Scripted(job("failed", 0.5, error="sampling failed (timeout)"))
    with Client("http://x", "dpw_k", transport=httpx.MockTransport(script)) as dpwatch:
        with pytest.raises(JobFailed, match="sampling failed"):
            dpwatch.jobs.wait({"id": "j1"})
