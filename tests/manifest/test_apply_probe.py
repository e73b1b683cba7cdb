"""A trailing-slash or redirect mismatch is caught before any monitor samples it: at registration
(`POST /v1/mechanisms?validate=true`, the dashboard's probe) and by `dpwatch apply`, which probes
every mechanism before it creates monitors, with the fix named."""

from __future__ import annotations

import pytest
import yaml
from dpwatch_sdk import Client, Endpoint, generate_secret
from dpwatch_sdk.errors import ValidationFailed
from fastapi import FastAPI
from typer.testing import CliRunner

from app.cli import app as cli
from app.mechanisms.service import redirect_advice
from tests.support.sampling_server import serve_app

SECRET = generate_secret()


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def service(app, tenants):
    with serve_app(app) as base:
        yield base, tenants[0].key


@pytest.fixture
def users_service():
    """A user's FastAPI service that mounts its endpoint at /dp: it answers /dp/ and redirects /dp."""
    users = FastAPI()
    users.mount("/dp", Endpoint(lambda db, n, rng: [float(sum(db))] * n, secret=SECRET).asgi)
    with serve_app(users) as base:
        yield base


def manifest(url: str) -> dict:
    return {"version": 1,
            "mechanisms": [{"name": "sum", "sampling_url": url, "output_kind": "real", "secret_env": "DPWATCH_SECRET_SUM"}],
            "monitors": [{"name": "sum watch", "mechanism": "sum", "epsilon": 1.0,
                          "checks": [{"x": [1, 0], "x_prime": [1], "event": {"kind": "interval", "low": 0.5}}],
                          "horizon": 10, "samples_per_period": 100, "period_seconds": 3600}]}


def run_apply(service, data, tmp_path):
    path = tmp_path / "dpwatch.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    base, key = service
    return CliRunner().invoke(cli, ["apply", "-f", str(path), "--url", base, "--api-key", key],
                              env={"DPWATCH_SECRET_SUM": SECRET})


def test_apply_probes_before_creating_monitors_and_names_the_trailing_slash(service, users_service, tmp_path):
    wrong = run_apply(service, manifest(f"{users_service}/dp"), tmp_path)
    assert wrong.exit_code == 1, wrong.output
    assert f"fix: register sampling_url '{users_service}/dp/' (with the trailing slash)" in wrong.stderr
    assert 'app.mount("/dp", …)' in wrong.stderr and "No monitor was created" in wrong.stderr
    base, key = service
    with Client(base, key) as dpwatch:
        assert list(dpwatch.monitors.list()) == []
    fixed = run_apply(service, manifest(f"{users_service}/dp/"), tmp_path)
    assert fixed.exit_code == 0, fixed.output
    assert 'probe   mechanism "sum": 10 outputs' in fixed.stdout
    with Client(base, key) as dpwatch:
        assert [m["name"] for m in dpwatch.monitors.list()] == ["sum watch"]


def test_registration_with_validate_names_the_fix(service, users_service):
    base, key = service
    with Client(base, key) as dpwatch:
        with pytest.raises(ValidationFailed) as caught:
            dpwatch.mechanisms.create({"name": "sum", "sampling_url": f"{users_service}/dp", "output_kind": "real",
                                       "secret": SECRET, "probe_database": [1, 0]}, validate=True)
        messages = [e["message"] for e in caught.value.errors]
        assert any("redirects are not followed (got HTTP 307" in m for m in messages), messages
        assert any(f"register sampling_url '{users_service}/dp/'" in m for m in messages), messages
        assert list(dpwatch.mechanisms.list()) == []  # nothing saved
        made = dpwatch.mechanisms.create({"name": "sum", "sampling_url": f"{users_service}/dp/", "output_kind": "real",
                                          "secret": SECRET, "probe_database": [1, 0]}, validate=True)
        assert made["validation"]["ok"]


def test_redirect_advice_reads_the_target():
    assert redirect_advice("http://h:1/dp", "redirects are not followed (got HTTP 307 to http://h:1/dp/); x") == (
        "fix: register sampling_url 'http://h:1/dp/' (with the trailing slash): the endpoint redirects http://h:1/dp "
        "to http://h:1/dp/ (HTTP 307), and dpwatch never follows redirects (FastAPI/Starlette's app.mount(\"/dp\", …) "
        "serves \"/dp/\" and redirects \"/dp\" there)")
    assert "without the trailing slash" in redirect_advice("http://h:1/dp/", "(got HTTP 308 to http://h:1/dp)")
    assert redirect_advice("http://h:1/a", "(got HTTP 302 to /b)").startswith("fix: register sampling_url 'http://h:1/b'")
    assert "register the URL it redirects to" in redirect_advice("http://h:1/a", "(got HTTP 301)")
