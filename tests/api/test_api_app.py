"""The application shell: health, readiness, metrics, OpenAPI, problem+json, logging, settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.db import make_engine, utcnow
from app.main import create_app
from app.settings import Settings


def _settings(**overrides: object) -> Settings:
    return Settings(_env_file=None, **overrides)  # type: ignore[call-arg]


def test_healthz_and_readyz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready", "database": "ok", "migrations": "current"}
    # Operations endpoints need no key.
    assert client.get("/healthz", headers={"Authorization": ""}).status_code == 200


def test_readyz_503_without_migrations(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    app = create_app(_settings(database_url=url, migrate_on_start=False))
    with TestClient(app) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert "not at the latest migration" in response.json()["detail"]


def test_readyz_503_when_the_database_is_unreachable() -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1"
    app = create_app(_settings(database_url=url, migrate_on_start=False))
    with TestClient(app) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["detail"] == "The database is unreachable."


def test_lifespan_migrates_a_fresh_database_and_runs_hooks(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'dpwatch.sqlite3'}"
    app = create_app(_settings(database_url=url))
    events: list[str] = []

    async def started(app_) -> None:  # noqa: ANN001
        events.append(f"start:{app_.state.session_factory is not None}")

    app.state.on_startup_hooks.append(started)
    app.state.on_shutdown_hooks.append(lambda app_: events.append("stop"))
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200  # the folder was created and migrated
    assert events == ["start:True", "stop"]
    assert app.state.session_factory is None  # the engine was disposed


def test_utc_datetimes_round_trip_timezone_aware(db, session_factory) -> None:  # noqa: ANN001
    from app.models.auth import Tenant

    with db() as session:
        tenant = Tenant(name="tz", created_at=utcnow())
        session.add(tenant)
        session.flush()
        tenant_id = tenant.id
    with db() as session:
        created = session.get(Tenant, tenant_id).created_at
        assert created.tzinfo is not None and created.utcoffset().total_seconds() == 0
    with session_factory() as session, pytest.raises(Exception, match="naive datetime"):
        from datetime import datetime

        session.add(Tenant(name="naive", created_at=datetime(2030, 1, 1)))
        session.flush()


def test_metrics(client: TestClient) -> None:
    from prometheus_client import REGISTRY

    labels = {"method": "POST", "route": "/v1/monitors", "status": "201"}
    created_before = REGISTRY.get_sample_value("dpwatch_http_requests_total", labels) or 0.0
    mechanism = client.post(
        "/v1/mechanisms", json={"name": "m", "sampling_url": "https://e.org/", "output_kind": "real"}
    ).json()
    base = {
        "name": "x",
        "mechanism_id": mechanism["id"],
        "epsilon": 1,
        "horizon": 100,
        "samples_per_period": 10,
        "period_seconds": 60,
        "checks": [{"x": [0], "x_prime": [1], "event": {"kind": "interval", "low": 0}}],
    }
    client.post("/v1/monitors", json=base)
    client.post("/v1/monitors", json={**base, "horizon": 37})
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'dpwatch_monitors{state="active"} 1.0' in text
    assert 'dpwatch_monitors{state="calibrating"} 1.0' in text
    assert 'dpwatch_monitors{state="paused"} 0.0' in text
    for name in (
        "dpwatch_periods_total",
        "dpwatch_sampling_seconds",
        "dpwatch_alarms_total",
        "dpwatch_webhook_deliveries_total",
        "dpwatch_http_requests_total",
    ):
        assert f"# TYPE {name}" in text, name
    assert REGISTRY.get_sample_value("dpwatch_http_requests_total", labels) == created_before + 2
    status_labels = {"method": "GET", "route": "/v1/monitors/{monitor_id}/status", "status": "200"}
    status_before = REGISTRY.get_sample_value("dpwatch_http_requests_total", status_labels) or 0.0
    monitor_id = client.get("/v1/monitors").json()["items"][0]["id"]
    client.get(f"/v1/monitors/{monitor_id}/status")
    assert REGISTRY.get_sample_value("dpwatch_http_requests_total", status_labels) == status_before + 1


def test_engine_metric_hooks() -> None:
    from prometheus_client import REGISTRY

    from app import observability as obs

    def value(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = (
        value("dpwatch_periods_total", status="failed"),
        value("dpwatch_alarms_total"),
        value("dpwatch_webhook_deliveries_total", outcome="retry"),
        value("dpwatch_sampling_seconds_count"),
    )
    obs.observe_period("failed", sampling_seconds=1.5)
    obs.observe_alarm()
    obs.observe_delivery("retry")
    after = (
        value("dpwatch_periods_total", status="failed"),
        value("dpwatch_alarms_total"),
        value("dpwatch_webhook_deliveries_total", outcome="retry"),
        value("dpwatch_sampling_seconds_count"),
    )
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1, 1]


def test_openapi_lists_every_route_with_problem_responses(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    operations = {(m.upper(), p) for p, item in schema["paths"].items() for m in item}
    mechanism, monitor, webhook = (
        "/v1/mechanisms/{mechanism_id}",
        "/v1/monitors/{monitor_id}",
        "/v1/webhooks/{webhook_id}",
    )
    assert operations == {
        ("POST", "/v1/mechanisms"),
        ("GET", "/v1/mechanisms"),
        ("GET", mechanism),
        ("PATCH", mechanism),
        ("DELETE", mechanism),
        ("POST", mechanism + "/validate"),
        ("POST", mechanism + "/discover"),
        ("POST", mechanism + "/audits"),
        ("POST", mechanism + "/searches"),
        ("POST", monitor + "/checks/from-search"),
        ("GET", "/v1/jobs"),
        ("GET", "/v1/jobs/{job_id}"),
        ("POST", "/v1/jobs/{job_id}/cancel"),
        ("POST", "/v1/monitors"),
        ("GET", "/v1/monitors"),
        ("GET", monitor),
        ("PATCH", monitor),
        ("DELETE", monitor),
        ("GET", monitor + "/status"),
        ("POST", monitor + "/validate"),
        ("POST", monitor + "/pause"),
        ("POST", monitor + "/resume"),
        ("POST", monitor + "/reset"),
        ("GET", monitor + "/periods"),
        ("POST", monitor + "/snapshots"),
        ("GET", monitor + "/snapshots"),
        ("GET", "/v1/snapshots/{snapshot_id}"),
        ("GET", "/v1/alarms"),
        ("GET", "/v1/alarms/{alarm_id}"),
        ("POST", "/v1/alarms/{alarm_id}/acknowledge"),
        ("POST", "/v1/webhooks"),
        ("GET", "/v1/webhooks"),
        ("GET", webhook),
        ("PATCH", webhook),
        ("DELETE", webhook),
        ("POST", webhook + "/test"),
        ("GET", webhook + "/deliveries"),
        ("POST", webhook + "/rotate-secret"),
        ("POST", webhook + "/deliveries/{message_id}/redeliver"),
        ("POST", mechanism + "/rotate-secret"),
        ("POST", "/v1/silences"),
        ("GET", "/v1/silences"),
        ("GET", "/v1/silences/{silence_id}"),
        ("DELETE", "/v1/silences/{silence_id}"),
        ("GET", "/v1/quotas"),
        ("POST", "/v1/keys"),
        ("GET", "/v1/keys"),
        ("GET", "/v1/keys/{key_id}"),
        ("DELETE", "/v1/keys/{key_id}"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
    }
    assert schema["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "dpw_…",
        "description": "An API key: `Authorization: Bearer dpw_…`. Create one with `dpwatch keys create`.",
    }
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert operation.get("summary") and operation.get("tags"), (method, path)
            for code, response in operation["responses"].items():
                if int(code) >= 400 and "content" in response:
                    assert list(response["content"]) == ["application/problem+json"], (method, path, code)
            if path.startswith("/v1"):
                assert operation["security"] == [{"ApiKey": []}]
                assert {"401", "422"} <= set(operation["responses"]), (method, path)
                if "{" in path:
                    assert "404" in operation["responses"], (method, path)
    create = schema["paths"]["/v1/monitors"]["post"]
    assert create["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/MonitorCreated")
    monitor_create = schema["components"]["schemas"]["MonitorCreate"]
    assert monitor_create["examples"][0]["checks"]
    event_kinds = set(schema["components"]["schemas"]["CheckCreate"]["properties"]["event"]["discriminator"]["mapping"])
    assert event_kinds == {
        "interval", "union", "set", "box", "lattice", "rows", "projection", "auto",
        "key", "key_value", "key_count", "key_set", "key_sets", "key_sum",
    }


def test_unknown_route_and_method_are_problems(client: TestClient) -> None:
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "No route matches GET /v1/nothing-here."
    response = client.put("/v1/mechanisms")
    assert response.status_code == 405 and response.json()["title"] == "Method Not Allowed"


def test_unexpected_errors_leak_nothing(app) -> None:  # noqa: ANN001
    def explode() -> None:
        raise RuntimeError("database password is hunter2")

    app.add_api_route("/boom", explode, methods=["GET"])
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["detail"] == "An unexpected error occurred; it has been logged."
    assert "hunter2" not in response.text and "Traceback" not in response.text


def test_request_id_and_logs_without_secrets(settings, session_factory, tenants, capsys) -> None:  # noqa: ANN001
    settings = settings.model_copy(update={"log_level": "INFO", "log_format": "json"})
    app = create_app(settings, session_factory=session_factory)
    key = tenants[0].key
    with TestClient(app, headers={"Authorization": f"Bearer {key}"}) as client:
        response = client.get("/v1/mechanisms", headers={"X-Request-ID": "req-123"})
        assert response.headers["x-request-id"] == "req-123"
        generated = client.get("/healthz").headers["x-request-id"]
        assert len(generated) == 32 and generated != "req-123"
        assert client.get("/healthz", headers={"X-Request-ID": "bad id!"}).headers["x-request-id"] != "bad id!"
        created = client.post(
            "/v1/mechanisms", json={"name": "m", "sampling_url": "https://e.org/", "output_kind": "real"}
        ).json()
        import structlog

        structlog.get_logger("dpwatch.test").info("explicit", secret=created["secret"], api_key=key, authorization=key)
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("event") == "request"]
    assert any(
        line["request_id"] == "req-123" and line["route"] == "/v1/mechanisms" and line["status"] == 200
        for line in access
    )
    explicit = next(line for line in lines if line.get("event") == "explicit")
    assert explicit["secret"] == explicit["api_key"] == explicit["authorization"] == "[redacted]"
    assert key not in err and created["secret"] not in err


def test_settings_refuse_unsafe_production_combinations() -> None:
    with pytest.raises(ValidationError, match="opens every address"):
        _settings(env="production", allow_networks=["0.0.0.0/0"])
    with pytest.raises(ValidationError, match="cloud metadata"):
        _settings(env="production", allow_networks=["169.254.0.0/16"])
    with pytest.raises(ValidationError, match="is not a CIDR"):
        _settings(allow_networks=["not-a-network"])
    with pytest.raises(ValidationError, match="lease_seconds must be more than twice tick_seconds"):
        _settings(lease_seconds=1, tick_seconds=1.0)
    assert _settings(env="development", allow_networks=["0.0.0.0/0"]).allow_networks == ["0.0.0.0/0"]
    assert _settings(env="production", allow_networks=["10.0.0.0/8"]).allow_networks == ["10.0.0.0/8"]


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPWATCH_ALLOW_NETWORKS", "127.0.0.0/8, ::1/128")
    monkeypatch.setenv("DPWATCH_TICK_SECONDS", "")  # empty means default (env_ignore_empty)
    monkeypatch.setenv("DPWATCH_LOG_LEVEL", "debug")
    monkeypatch.setenv("DPWATCH_PUBLIC_URL", "https://dpwatch.example.org/")
    settings = _settings()
    assert settings.allow_networks == ["127.0.0.0/8", "::1/128"]
    assert settings.tick_seconds == 1.0 and settings.log_level == "DEBUG"
    assert settings.public_url == "https://dpwatch.example.org"
    assert settings.database_url == "sqlite:///data/dpwatch.sqlite3"
    assert "-" in settings.worker_id


def test_sqlite_engine_pragmas(tmp_path: Path) -> None:
    from sqlalchemy import text

    engine = make_engine(f"sqlite:///{tmp_path / 'sub' / 'x.sqlite3'}")
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 5000
    engine.dispose()
    assert (tmp_path / "sub").is_dir()


def test_module_app_imports_without_touching_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import app.main
    from app.settings import get_settings

    target = tmp_path / "never" / "db.sqlite3"
    monkeypatch.setenv("DPWATCH_DATABASE_URL", f"sqlite:///{target}")
    get_settings.cache_clear()
    try:
        module = importlib.reload(app.main)
        assert module.app.state.session_factory is None
        assert not target.parent.exists()
    finally:
        get_settings.cache_clear()
