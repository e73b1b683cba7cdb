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
    assert [d.detector for d in results["c"].detectors] == ["aggregator", "naive", "e-process", "e-detector"]
    for key in ("c", "e"):
        for d in results[key].detectors:
            assert d.false_alarms_before_change <= 0.1, (key, d.detector)
            if d.detector != "naive":
                assert d.alarm_rate_by_horizon >= 0.9, (key, d.detector)
    for d in results["g"].detectors:
        assert d.alarm_rate_by_horizon <= 0.1, d.detector
    # The curve is a proportion by period: non-decreasing, between 0 and 1.
    curve = results["c"].detectors[0].detected_by_period
    assert len(curve) == 60 and all(0 <= a <= b <= 1 for a, b in zip(curve, curve[1:]))


def _strict_loads(text):
    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")
    return json.loads(text, parse_constant=refuse)


def test_cli_simulate_writes_table_csv_figures_and_strict_json(tmp_path):
    res = CliRunner().invoke(app, ["simulate", "--scenarios", "g", "-R", "5", "-T", "12", "-n", "50",
                                   "--change-at", "4", "--detectors", "aggregator,aggregator-wald,naive,naive-normal,"
                                   "e-process,e-detector", "--out-dir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    summary = _strict_loads(res.stdout)  # benign: no run detects, so delays are null, not Infinity
    assert summary["scenarios"][0]["key"] == "g"
    dets = summary["scenarios"][0]["detectors"]
    assert [d["detector"] for d in dets] == ["aggregator", "aggregator-wald", "naive", "naive-normal", "e-process",
                                              "e-detector"]
    assert all(d["median_delay"] is None and d["median_samples"] is None for d in dets)
    assert "null" in summary["nulls"]
    assert _strict_loads((tmp_path / "summary.json").read_text()) == summary
    assert (tmp_path / "detection_curves.csv").read_text().startswith("scenario,detector,period,proportion_detected")
    assert (tmp_path / "detection_curves.png").stat().st_size > 1000
    assert (tmp_path / "summary.png").stat().st_size > 1000
    table = CliRunner().invoke(app, ["simulate", "--scenarios", "e", "-R", "5", "-T", "12", "-n", "50",
                                     "--change-at", "4", "--out-dir", str(tmp_path)])
    assert table.exit_code == 0 and "e-detector" in table.stdout and "M>=240" in table.stdout


def test_cli_simulate_long_run_mode(tmp_path):
    res = CliRunner().invoke(app, ["simulate", "--long-run", "--scenarios", "c", "--change-at", "300", "--after",
                                   "60", "-R", "20", "-n", "100", "--renew-horizon", "100", "--threshold-replications", "20000", "--out-dir",
                                   str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    summary = _strict_loads(res.stdout)
    assert summary["config"]["mode"] == "long-run" and summary["config"]["length"] == 359
    dets = {d["detector"]: d for d in summary["scenarios"][0]["detectors"]}
    assert set(dets) == {"aggregator", "naive", "e-process", "e-detector"}
    assert dets["e-detector"]["alarm_rate_by_horizon"] > 0.8 and dets["e-detector"]["threshold"] == 359 / 0.05


def test_cli_rejects_unknown_detector(tmp_path):
    res = CliRunner().invoke(app, ["simulate", "--detectors", "aggregator,cusum", "--out-dir", str(tmp_path)])
    assert res.exit_code == 2 and "unknown detector" in res.output


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
def test_full_study_alarms_harmful_changes_and_keeps_the_false_alarm_rate():
    cfg = SimulationConfig(replications=500, detectors=("aggregator", "aggregator-wald", "naive"))
    for res in run(sorted(SCENARIOS), cfg):
        agg, _, naive = res.detectors
        if res.harmful:
            assert agg.alarm_rate_by_horizon >= 0.95, res.key
            if naive.median_delay > 2:  # one period carries weak evidence: what aggregation is for
                assert agg.median_delay <= naive.median_delay, res.key
            else:  # one period is already strong (scenario (e)): the aggregator may lag by a period or two
                # (measured in docs/sequential.md: 3.9 against 2.8 periods, 3.6 against 2.3)
                assert agg.median_delay <= naive.median_delay + 2, res.key
        else:
            assert agg.alarm_rate_by_horizon <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 500), res.key


def test_evaluate_alarms_keeps_the_older_call_form():
    import numpy as np

    from app.simulation import evaluate_alarms

    cfg = SimulationConfig(replications=4, horizon=10, samples_per_period=20, change_at=5)
    old = evaluate_alarms("aggregator-score", np.array([0, 3, 6, 9]), 2.4, cfg)
    new = evaluate_alarms("aggregator-score", np.array([0, 3, 6, 9]), 2.4, 5, 10, 20)
    assert old == new and old.false_alarms_before_change == 0.25 and old.median_delay == 4
