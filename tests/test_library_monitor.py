"""The monitor demonstration on a library pipeline: a PipelineDP count with partition selection,
served through the SDK from PipelineDP's own venv (tests/library_venvs.py; skipped with the reason
when pipeline-dp cannot be installed), watched by a dpwatch monitor with a keyed event: silent on
the correct version, an alarm right after the deployment switches to a misconfigured one."""

from __future__ import annotations

import json
import subprocess

import pytest

from app.reference.pipelines.catalog import PAIRS, entry
from tests.library_venvs import ROOT, environment, python_of
from tests.test_engine import (  # noqa: F401  (fixtures)
    FakeClock,
    arun,
    engine_settings,
    make_worker,
    session_factory,
)
from tests.test_rediscovery import _monitor_state, _tick

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _serve(name: str, *extra: str) -> tuple[subprocess.Popen, str]:
    e = entry(name)
    python, reason = python_of(e.library)
    if python is None:
        pytest.skip(reason)
    proc = subprocess.Popen([str(python), "-m", "app.reference.pipelines.serve", name, "--secret", SECRET, *extra],
                            cwd=ROOT, env=environment(e.library, python), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    if not line:
        raise AssertionError(f"{name}: the server exited ({proc.wait()})")
    return proc, json.loads(line)["listening"]


SWITCH_AT = 4


# SQLite only: the worker's periods run on both backends elsewhere.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_monitor_on_a_pipelinedp_count_with_partition_selection_alarms_after_a_switch(client, db, make_worker, arun):  # noqa: F811
    """Two deployments of PipelineDP's count per city with partition selection, (1, 1e-5)-DP by its
    accountant, served through the SDK, each watched by a monitor whose check is "the key z is
    released" on (a user alone in z, the same table without them). One stays correct: silent.
    The other switches at period 4 to public_partitions taken from the data: alarm right after."""
    x, x_prime = PAIRS["new_key"]
    procs = []
    try:
        steady, steady_url = _serve("pipelinedp-count-selection")
        procs.append(steady)
        switched, switched_url = _serve("pipelinedp-count-selection", "--switch-to", "pipelinedp-keys-from-data",
                                        "--at-period", str(SWITCH_AT))
        procs.append(switched)
        monitors = {}
        for name, url in (("steady", steady_url), ("switched", switched_url)):
            made = client.post("/v1/mechanisms", json={"name": name, "sampling_url": url, "output_kind": "keyed",
                                                       "secret": SECRET})
            assert made.status_code == 201, made.text
            mon = client.post("/v1/monitors", json={
                "name": name, "mechanism_id": made.json()["id"], "claim": {"epsilon": 1.0, "delta": 1e-5},
                "horizon": 40, "samples_per_period": 100, "period_seconds": 60, "outputs_window": 10,
                "alarm_snapshot_samples": 0, "checks": [{"x": x, "x_prime": x_prime, "event": {"kind": "key", "key": "z"}}]})
            assert mon.status_code == 201, mon.text
            monitors[name] = mon.json()["id"]
        worker, clock = make_worker()
        for _ in range(SWITCH_AT + 2):
            _tick(worker, clock, arun, jobs=False)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    steady_state, _ = _monitor_state(db, monitors["steady"])
    assert steady_state.state == "active" and steady_state.t >= SWITCH_AT + 1
    assert client.get("/v1/alarms", params={"monitor_id": monitors["steady"]}).json()["items"] == []
    periods = client.get(f"/v1/monitors/{monitors['steady']}/periods").json()["items"]
    assert all(p["checks"][0]["a"] <= 2 and p["checks"][0]["b"] == 0 for p in periods if p.get("checks"))
    state, _ = _monitor_state(db, monitors["switched"])
    assert state.state == "alarm"
    alarms = client.get("/v1/alarms", params={"monitor_id": monitors["switched"]}).json()["items"]
    assert [a["kind"] for a in alarms] == ["privacy"]
    assert SWITCH_AT <= alarms[0]["t"] <= SWITCH_AT + 1, alarms[0]["t"]
    assert alarms[0]["a"] >= 60 and alarms[0]["b"] == 0
