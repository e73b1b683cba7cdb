"""The offline reproduction of the paper's scenarios (fast subset; the full study is bench/slow)."""

import json
import math

import pytest
from typer.testing import CliRunner

from app.cli import app
from app.reference import SCENARIOS
from app.simulation import SimulationConfig, run


def test_fast_subset_detects_harmful_and_not_benign():
    cfg = SimulationConfig(replications=40, horizon=60, samples_per_period=200, change_at=15, seed=3)
    results = {r.key: r for r in run(["c", "e", "g"], cfg)}
    for key in ("c", "e"):
        agg = results[key].detectors[0]
        assert agg.detector == "aggregator-score"
        assert agg.alarm_rate_by_horizon >= 0.9
        assert agg.false_alarms_before_change <= 0.1
    benign = results["g"].detectors[0]
    assert benign.alarm_rate_by_horizon <= 0.1
    # The curve is a proportion by period: non-decreasing, between 0 and 1.
    curve = results["c"].detectors[0].detected_by_period
    assert len(curve) == 60 and all(0 <= a <= b <= 1 for a, b in zip(curve, curve[1:]))


def test_cli_simulate_writes_table_csv_figure_and_json(tmp_path):
    res = CliRunner().invoke(app, ["simulate", "--scenarios", "e", "-R", "5", "-T", "12", "-n", "50",
                                   "--change-at", "4", "--out-dir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["scenarios"][0]["key"] == "e"
    assert {d["detector"] for d in summary["scenarios"][0]["detectors"]} == {"aggregator-score", "aggregator-wald", "naive"}
    assert (tmp_path / "detection_curves.csv").read_text().startswith("scenario,detector,period,proportion_detected")
    assert (tmp_path / "detection_curves.png").stat().st_size > 1000


def test_cli_rejects_unknown_scenario_and_bad_change(tmp_path):
    res = CliRunner().invoke(app, ["simulate", "--scenarios", "z", "--out-dir", str(tmp_path)])
    assert res.exit_code == 2 and "unknown scenario" in res.output
    res = CliRunner().invoke(app, ["simulate", "--change-at", "500", "--out-dir", str(tmp_path)])
    assert res.exit_code == 2 and "change_at" in res.output


def test_cli_threshold_uses_table_and_simulates_off_grid():
    res = CliRunner().invoke(app, ["threshold", "--horizon", "200", "--gamma", "0.25", "--alpha", "0.05", "--json"])
    assert res.exit_code == 0
    est = json.loads(res.stdout)
    assert est["source"] == "table" and est["value"] == pytest.approx(2.46, abs=0.02)
    res = CliRunner().invoke(app, ["threshold", "-T", "30", "--alpha", "0.05", "--replications", "2000", "--seed", "1", "--json"])
    est = json.loads(res.stdout)
    assert est["source"] == "monte_carlo" and est["replications"] == 2000 and math.isfinite(est["std_error"])
    res = CliRunner().invoke(app, ["threshold", "-T", "30", "--gamma", "0.7"])
    assert res.exit_code == 2 and "gamma" in res.output


@pytest.mark.slow
def test_full_study_meets_the_issue_criteria():
    cfg = SimulationConfig(replications=500)
    for res in run(sorted(SCENARIOS), cfg):
        agg, _, naive = res.detectors
        if res.harmful:
            assert agg.alarm_rate_by_horizon >= 0.95, res.key
            assert agg.median_delay <= naive.median_delay, res.key
        else:
            assert agg.alarm_rate_by_horizon <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 500), res.key
