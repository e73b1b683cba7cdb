"""Monitors as code: `dpwatch apply -f` / `dpwatch export` against a running service (its REST API on
loopback), and the manifest's JSON Schema."""

from __future__ import annotations

import copy
import json

import jsonschema_rs
import pytest
import yaml
from dpwatch_sdk import Client, Endpoint, generate_secret
from typer.testing import CliRunner

from app.cli import app as cli
from app.manifest.schema import SCHEMA_PATH, schema_text
from tests.support.api_helpers import record_period
from tests.support.sampling_server import serve_app

CHECK = {"x": [1, 1, 0], "x_prime": [1, 1, 1], "event": {"kind": "interval", "low": 2.5}}
MANIFEST = {
    "version": 1,
    "mechanisms": [
        {"name": "count", "sampling_url": "https://dp.example.org/count", "output_kind": "real", "max_batch": 5000},
        {"name": "histogram", "sampling_url": "https://dp.example.org/hist", "output_kind": "vector", "dim": 3},
    ],
    "monitors": [
        {"name": "count neighbours", "mechanism": "count", "epsilon": 1.0, "checks": [CHECK], "horizon": 100,
         "samples_per_period": 1000, "period_seconds": 3600},
        {"name": "count, (1, 1e-5)", "mechanism": "count", "claim": {"epsilon": 1.0, "delta": 1e-5},
         "checks": [CHECK, {**CHECK, "claim": {"gdp_mu": 0.5}}], "horizon": 100, "samples_per_period": 2000,
         "cron": "0 * * * *", "symmetric": True},
        {"name": "histogram bins", "mechanism": "histogram", "epsilon": 0.5, "detector": "e-process",
         "checks": [{"x": [1, 1, 1], "x_prime": [2, 1, 1],
                     "event": {"kind": "box", "low": [1.5, None, None], "high": [None, None, None]}}],
         "samples_per_period": 500, "period_seconds": 600, "paused": True},
    ],
    "webhooks": [{"url": "https://hooks.example.org/dpwatch", "event_types": ["alarm.firing", "alarm.resolved"]}],
}


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def service(app, tenants):
    with serve_app(app) as base:
        yield base, tenants[0].key


def apply(service, manifest, *flags, tmp_path, env=None, probe=False):
    """`dpwatch apply` on the manifest; without probing unless asked (the manifests above name
    endpoints at dp.example.org, which do not exist: tests/test_apply_probe.py probes real ones)."""
    path = tmp_path / "dpwatch.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    base, key = service
    extra = [] if probe else ["--no-probe"]
    return CliRunner().invoke(cli, ["apply", "-f", str(path), "--url", base, "--api-key", key, *extra, *flags], env=env)


def state(service):
    base, key = service
    with Client(base, key) as dpwatch:
        return {"mechanisms": {m["name"]: m for m in dpwatch.mechanisms.list()},
                "monitors": {m["name"]: m for m in dpwatch.monitors.list()},
                "webhooks": {w["url"]: w for w in dpwatch.webhooks.list()}}


def test_apply_twice_changes_nothing_and_one_n_updates_one_monitor(service, tmp_path, db):
    first = apply(service, MANIFEST, tmp_path=tmp_path)
    assert first.exit_code == 0, first.output
    assert "Plan: 6 to create, 0 to update, 0 to replace, 0 to destroy, 0 unchanged." in first.stdout
    assert "its signing secret, shown once: whsec_" in first.stderr  # the webhook's, and the generated ones
    before = state(service)
    assert before["monitors"]["histogram bins"]["state"] == "paused"
    assert before["mechanisms"]["count"]["max_batch"] == 5000

    again = apply(service, MANIFEST, tmp_path=tmp_path)
    assert again.exit_code == 0, again.output
    assert "Plan: 0 to create, 0 to update, 0 to replace, 0 to destroy, 6 unchanged." in again.stdout
    assert "Nothing to do." in again.stdout
    assert state(service) == before  # nothing was written: same ids, same updated_at

    # The monitor has run two periods: they are its history, which an update in place keeps.
    count_id = before["monitors"]["count neighbours"]["id"]
    with db() as session:
        record_period(session, count_id, statistic=0.5)
        record_period(session, count_id, statistic=1.5)
    before = state(service)
    history = periods(service, count_id)
    assert [p["seq"] for p in history] == [2, 1]

    changed = copy.deepcopy(MANIFEST)
    changed["monitors"][0]["samples_per_period"] = 4000
    dry = apply(service, changed, "--dry-run", tmp_path=tmp_path)
    assert dry.exit_code == 0 and "Dry run: nothing was changed." in dry.stdout
    assert 'update    monitor "count neighbours": samples_per_period: 1000 → 4000' in dry.stdout
    assert state(service) == before

    done = apply(service, changed, tmp_path=tmp_path)
    assert done.exit_code == 0, done.output
    assert "Plan: 0 to create, 1 to update, 0 to replace, 0 to destroy, 5 unchanged." in done.stdout
    after = state(service)
    count = after["monitors"]["count neighbours"]
    assert count["samples_per_period"] == 4000
    assert count["id"] == count_id and count["t"] == 2 and periods(service, count_id) == history
    old = before["monitors"]["count neighbours"]
    assert {k: v for k, v in count.items() if k not in ("samples_per_period", "updated_at")} == \
        {k: v for k, v in old.items() if k not in ("samples_per_period", "updated_at")}
    for name in ("count, (1, 1e-5)", "histogram bins"):
        assert after["monitors"][name] == before["monitors"][name]
    assert after["mechanisms"] == before["mechanisms"] and after["webhooks"] == before["webhooks"]
    again = apply(service, changed, tmp_path=tmp_path)
    assert "0 to update, 0 to replace, 0 to destroy, 6 unchanged." in again.stdout and state(service) == after


def test_a_changed_test_is_replaced_only_with_allow_replace(service, tmp_path, db):
    assert apply(service, MANIFEST, tmp_path=tmp_path).exit_code == 0
    count_id = state(service)["monitors"]["count neighbours"]["id"]
    with db() as session:
        record_period(session, count_id)
    before = state(service)
    changed = copy.deepcopy(MANIFEST)
    changed["monitors"][0]["alpha"] = 0.01  # the test changes: its threshold and levels
    changed["monitors"][0]["cron"], changed["monitors"][0]["period_seconds"] = "*/5 * * * *", None
    changed["monitors"][2]["samples_per_period"] = 800
    plan = apply(service, changed, "--dry-run", tmp_path=tmp_path)
    assert plan.exit_code == 0
    assert 'replace   monitor "count neighbours": alpha: 0.05 → 0.01; period_seconds: 3600 → null; cron: null → ' \
        '*/5 * * * *; alpha defines the running test' in plan.stdout
    assert "deleted with its periods and history" in plan.stdout and "needs --allow-replace" in plan.stdout
    assert 'update    monitor "histogram bins": samples_per_period: 500 → 800' in plan.stdout
    assert "Plan: 0 to create, 1 to update, 1 to replace, 0 to destroy, 4 unchanged." in plan.stdout

    refused = apply(service, changed, tmp_path=tmp_path)
    assert refused.exit_code == 2 and "--allow-replace" in refused.stderr and "Nothing was changed" in refused.stderr
    assert state(service) == before  # not even the in-place update of the other monitor

    done = apply(service, changed, "--allow-replace", tmp_path=tmp_path)
    assert done.exit_code == 0, done.output
    after = state(service)
    replaced = after["monitors"]["count neighbours"]
    assert replaced["id"] != count_id and replaced["alpha"] == 0.01 and replaced["cron"] == "*/5 * * * *"
    assert after["monitors"]["histogram bins"]["id"] == before["monitors"]["histogram bins"]["id"]
    assert after["monitors"]["histogram bins"]["samples_per_period"] == 800
    assert after["monitors"]["histogram bins"]["state"] == "paused"
    assert "0 to replace, 0 to destroy, 6 unchanged" in apply(service, changed, tmp_path=tmp_path).stdout


def periods(service, monitor_id):
    base, key = service
    with Client(base, key) as dpwatch:
        return list(dpwatch.monitors.periods(monitor_id))


def test_in_place_updates_prune_and_export_round_trip(service, tmp_path):
    assert apply(service, MANIFEST, tmp_path=tmp_path).exit_code == 0
    changed = copy.deepcopy(MANIFEST)
    changed["mechanisms"][0]["max_batch"] = 2000
    changed["monitors"][2]["paused"] = False
    changed["webhooks"][0]["event_types"] = ["alarm.firing"]
    changed["monitors"].pop(1)
    before = state(service)
    result = apply(service, changed, "--prune", tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    assert 'update    mechanism "count": max_batch: 5000 → 2000' in result.stdout
    assert 'update    monitor "histogram bins": paused: true → false' in result.stdout
    assert 'destroy   monitor "count, (1, 1e-5)"' in result.stdout
    after = state(service)
    assert after["mechanisms"]["count"]["max_batch"] == 2000 and after["mechanisms"]["count"]["id"] == \
        before["mechanisms"]["count"]["id"]
    assert after["monitors"]["histogram bins"]["state"] == "active"
    assert after["monitors"]["histogram bins"]["id"] == before["monitors"]["histogram bins"]["id"]
    assert "count, (1, 1e-5)" not in after["monitors"]
    assert after["webhooks"]["https://hooks.example.org/dpwatch"]["event_types"] == ["alarm.firing"]

    base, key = service
    exported = CliRunner().invoke(cli, ["export", "-o", str(tmp_path / "export.yaml"), "--url", base,
                                        "--api-key", key])
    assert exported.exit_code == 0, exported.output
    text = (tmp_path / "export.yaml").read_text()
    assert "whsec_" not in text and "secret" not in text.split("yaml-language-server")[1].replace("secret_env", "")
    data = yaml.safe_load(text)
    jsonschema_rs.validate(json.loads(SCHEMA_PATH.read_text()), data)
    assert [m["name"] for m in data["monitors"]] == ["count neighbours", "histogram bins"]
    again = CliRunner().invoke(cli, ["apply", "-f", str(tmp_path / "export.yaml"), "--url", base, "--api-key", key])
    assert again.exit_code == 0 and "0 to create, 0 to update, 0 to replace, 0 to destroy, 5 unchanged" in again.stdout


def test_secrets_come_from_the_environment(service, tmp_path):
    secret = generate_secret()
    with Endpoint(lambda db, n, rng: [float(sum(db))] * n, secret=secret).start() as endpoint:
        manifest = {"mechanisms": [{"name": "local", "sampling_url": endpoint.url, "output_kind": "real",
                                    "secret_env": "DPWATCH_SECRET_LOCAL", "probe_database": [1, 2]}]}
        missing = apply(service, manifest, tmp_path=tmp_path, env={"DPWATCH_SECRET_LOCAL": ""})
        assert missing.exit_code == 2 and "DPWATCH_SECRET_LOCAL (secret_env) is not set" in missing.stderr
        made = apply(service, manifest, tmp_path=tmp_path, env={"DPWATCH_SECRET_LOCAL": secret})
        assert made.exit_code == 0, made.output and "whsec_" not in made.output
        base, key = service
        with Client(base, key) as dpwatch:
            mechanism = next(iter(dpwatch.mechanisms.list()))
            assert dpwatch.mechanisms.validate(mechanism)["ok"]  # dpwatch signs with the secret the endpoint checks
    in_file = {"mechanisms": [{"name": "x", "sampling_url": "https://dp.example.org/x", "output_kind": "real",
                               "secret": secret}]}
    refused = apply(service, in_file, tmp_path=tmp_path)
    assert refused.exit_code == 2 and "secrets are never stored in the manifest" in refused.stderr


def test_values_the_service_ignores_do_not_make_changes(service, tmp_path):
    """rediscover_every without auto events is ignored by the service (stored as 0): applying such
    a file twice still changes nothing the second time."""
    manifest = copy.deepcopy(MANIFEST)
    manifest["monitors"][0]["rediscover_every"] = 7
    manifest["monitors"][1]["rediscover_every"] = 0
    assert apply(service, manifest, tmp_path=tmp_path).exit_code == 0
    again = apply(service, manifest, tmp_path=tmp_path)
    assert "0 to create, 0 to update, 0 to replace, 0 to destroy, 6 unchanged" in again.stdout, again.stdout


def test_an_e_process_horizon_is_part_of_its_test(service, tmp_path):
    """An e-process monitor created with a horizon runs a design tuned to it: applying the same file
    again changes nothing, and another horizon replaces the monitor (PATCH would be a 409)."""
    manifest = copy.deepcopy(MANIFEST)
    manifest["monitors"][2]["horizon"] = 200
    assert apply(service, manifest, tmp_path=tmp_path).exit_code == 0
    assert state(service)["monitors"]["histogram bins"]["design_horizon"] == 200
    again = apply(service, manifest, tmp_path=tmp_path)
    assert "0 to create, 0 to update, 0 to replace, 0 to destroy, 6 unchanged" in again.stdout, again.stdout
    manifest["monitors"][2]["horizon"] = 300
    plan = apply(service, manifest, "--dry-run", tmp_path=tmp_path)
    assert "1 to replace" in plan.stdout and "horizon: 200 → 300" in plan.stdout, plan.stdout


def test_bad_files_are_usage_errors(service, tmp_path):
    unknown = {"monitors": [{**MANIFEST["monitors"][0], "mechanism": "nope"}]}
    result = apply(service, unknown, tmp_path=tmp_path)
    assert result.exit_code == 2 and 'no mechanism named "nope"' in result.stderr
    typo = {"mechanisms": [{**MANIFEST["mechanisms"][0], "max_bach": 3}]}
    result = apply(service, typo, tmp_path=tmp_path)
    assert result.exit_code == 2 and "mechanisms.0.max_bach: Extra inputs are not permitted" in result.stderr
    twice = {"mechanisms": [MANIFEST["mechanisms"][0], MANIFEST["mechanisms"][0]]}
    assert "appears twice" in apply(service, twice, tmp_path=tmp_path).stderr
    nothing = CliRunner().invoke(cli, ["apply", "-f", str(tmp_path / "none.yaml"), "--url", "http://127.0.0.1:9",
                                       "--api-key", "k"])
    assert nothing.exit_code == 2 and "cannot read" in nothing.stderr
    assert state(service)["mechanisms"] == {}


def test_the_shipped_json_schema_is_current_and_checks_files():
    assert SCHEMA_PATH.read_text() == schema_text(), "run: python -m app.manifest.schema"
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema_rs.validate(schema, MANIFEST)
    bad = copy.deepcopy(MANIFEST)
    bad["monitors"][0]["samples_per_period"] = "many"
    with pytest.raises(jsonschema_rs.ValidationError):
        jsonschema_rs.validate(schema, bad)
    with pytest.raises(jsonschema_rs.ValidationError):
        jsonschema_rs.validate(schema, {"mechanisms": [{**MANIFEST["mechanisms"][0], "secret": "whsec_x"}]})
