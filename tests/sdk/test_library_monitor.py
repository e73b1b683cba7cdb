"""The monitor demonstration on a library pipeline: a PipelineDP count with partition selection,
served through the SDK from PipelineDP's own venv (tests/library_venvs.py; skipped with the reason
when pipeline-dp cannot be installed), watched by a dpwatch monitor with a keyed event: silent on
the correct version, an alarm right after the deployment switches to a misconfigured one."""

from __future__ import annotations

import json
import subprocess

import pytest

from app.reference.pipelines.catalog import PAIRS, entry
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    FakeClock,
    arun,
    engine_settings,
    make_worker,
    session_factory,
)
from tests.monitors.test_rediscovery import _monitor_state, _tick
from tests.support.library_venvs import ROOT, environment, require_python

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _serve(name: str, *extra: str) -> tuple[subprocess.Popen, str]:
    e = entry(name)
    python = require_python(e.library)
    proc = subprocess.Popen([str(python), "-m", "app.reference.pipelines.serve", name, "--secret", SECRET, *extra],
                            cwd=ROOT, env=environment(e.library, python), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    if not line:
        raise AssertionError(f"{name}: the server exited ({proc.wait()})")
    return proc, json.loads(line)["listening"]


SWITCH_AT = 3


def _demo(client, db, make_worker, arun, deployments: dict[str, tuple[str, ...]], *, periods: int,  # noqa: ANN001, F811
          samples: int) -> dict[str, dict]:
    """Serve each deployment (serve's arguments), watch each with a monitor on "the key z is
    released" at (a user alone in z, the table without them) under the correct version's claim
    (1, 1e-5), run ``periods`` ticks; per deployment: its state, t, alarms and per-period counts."""
    x, x_prime = PAIRS["new_key"]
    procs, monitors = [], {}
    try:
        for name, args in deployments.items():
            proc, url = _serve(*args)
            procs.append(proc)
            made = client.post("/v1/mechanisms", json={"name": name, "sampling_url": url, "output_kind": "keyed",
                                                       "secret": SECRET})
            assert made.status_code == 201, made.text
            mon = client.post("/v1/monitors", json={
                "name": name, "mechanism_id": made.json()["id"], "claim": {"epsilon": 1.0, "delta": 1e-5},
                "horizon": max(periods + 5, 40), "samples_per_period": samples, "period_seconds": 60,
                "outputs_window": 10, "alarm_snapshot_samples": 0,
                "checks": [{"x": x, "x_prime": x_prime, "event": {"kind": "key", "key": "z"}}]})
            assert mon.status_code == 201, mon.text
            monitors[name] = mon.json()["id"]
        worker, clock = make_worker()
        for _ in range(periods):
            _tick(worker, clock, arun, jobs=False)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    out = {}
    for name, monitor_id in monitors.items():
        state, _ = _monitor_state(db, monitor_id)
        alarms = client.get("/v1/alarms", params={"monitor_id": monitor_id}).json()["items"]
        runs = client.get(f"/v1/monitors/{monitor_id}/periods", params={"limit": 200}).json()["items"]
        counts = sorted((p["t"], p["checks"][0]["a"], p["checks"][0]["b"]) for p in runs if p.get("checks"))
        out[name] = {"state": state.state, "t": state.t, "alarms": [(a["kind"], a["t"], a["a"], a["b"]) for a in alarms],
                     "counts": counts}
    return out


# SQLite only: the worker's periods run on both backends elsewhere.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_monitor_on_a_pipelinedp_count_with_partition_selection_alarms_after_a_switch(client, db, make_worker, arun):  # noqa: F811
    """Two deployments of PipelineDP's count per city with partition selection, (1, 1e-5)-DP by its
    accountant, served through the SDK, each watched by a monitor whose check is "the key z is
    released" on (a user alone in z, the same table without them). One stays correct: silent.
    The other switches at period 3 to public_partitions taken from the data: alarm right after."""
    got = _demo(client, db, make_worker, arun, {
        "steady": ("pipelinedp-count-selection",),
        "switched": ("pipelinedp-count-selection", "--switch-to", "pipelinedp-keys-from-data", "--at-period",
                     str(SWITCH_AT))}, periods=SWITCH_AT + 2, samples=80)
    steady = got["steady"]
    assert steady["state"] == "active" and steady["t"] >= SWITCH_AT + 1 and steady["alarms"] == []
    assert all(a <= 2 and b == 0 for _, a, b in steady["counts"])
    switched = got["switched"]
    assert switched["state"] == "alarm" and [a[0] for a in switched["alarms"]] == ["privacy"]
    _, t, a, b = switched["alarms"][0]
    assert SWITCH_AT <= t <= SWITCH_AT + 1 and a >= 60 and b == 0, switched["alarms"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_monitor_demo_measured_over_forty_periods(client, db, make_worker, arun, capsys):  # noqa: F811
    """The same monitors over 40 periods of 200 outputs: two correct deployments, one switched at
    period 20 to keys from the data, one switched at period 20 to the same pipeline configured with
    δ = 5e-3 (500 × the stated 1e-5). Prints the measured counts and alarm periods."""
    got = _demo(client, db, make_worker, arun, {
        "steady-1": ("pipelinedp-count-selection",), "steady-2": ("pipelinedp-count-selection",),
        "keys-from-data": ("pipelinedp-count-selection", "--switch-to", "pipelinedp-keys-from-data", "--at-period", "20"),
        "delta-500x": ("pipelinedp-count-selection", "--switch-to", "pipelinedp-selection-claimed-pure",
                       "--at-period", "20")}, periods=40, samples=200)
    with capsys.disabled():
        print("\n" + json.dumps({k: {**v, "counts": [c[1] for c in v["counts"]]} for k, v in got.items()}))
    for name in ("steady-1", "steady-2"):
        assert got[name]["alarms"] == [] and got[name]["t"] >= 38, got[name]
    alarm = got["keys-from-data"]["alarms"]
    assert alarm and alarm[0][0] == "privacy" and 20 <= alarm[0][1] <= 21
