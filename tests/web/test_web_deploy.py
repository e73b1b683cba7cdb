"""deploy/: the Grafana dashboard and the Prometheus rules use only metrics /metrics exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from app.metrics.monitors import render_monitor_metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC = re.compile(r"\b(dpwatch_[a-z_]+)\b")


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def exported_names(session) -> set[str]:  # noqa: ANN001
    from prometheus_client import REGISTRY, generate_latest

    import app.observability  # noqa: F401 - registers the service-wide metrics

    text = (generate_latest(REGISTRY) + render_monitor_metrics(session)).decode()
    names = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    return names | {n + suffix for n in names for suffix in ("_total", "_bucket", "_sum", "_count")}


def test_grafana_and_alert_rules_use_exported_metrics(db) -> None:  # noqa: ANN001
    with db() as session:
        names = exported_names(session)
    dashboard = json.loads((DEPLOY / "grafana" / "dpwatch.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert {"dpwatch_monitor_statistic", "dpwatch_monitor_threshold", "dpwatch_monitor_alarm"} <= used
    assert used <= names, used - names
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_alert_rules_pass_promtool_when_it_is_installed() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus); the YAML is checked above")
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]):
        result = subprocess.run([promtool, *args], cwd=DEPLOY / "prometheus", capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
