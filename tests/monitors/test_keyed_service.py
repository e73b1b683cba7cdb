"""Keyed mechanisms end to end, served on loopback: `dpwatch audit --output-kind keyed`, registration
with a declared key universe, monitors whose checks hold keyed events (an alarm on the mechanism
that takes its key set from the data, none on the correct histogram), a contract alarm when a key
outside the universe appears, an MPL snapshot of keyed outputs; and nullable vectors declared
with `output_kind: vector` (the CLI and the API)."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from app.cli import app as cli
from app.reference.keyed import LaplaceHistogram, LeakyHistogram, PartitionCounts
from app.reference.server import endpoint_router
from app.stats.shapes import OutputShape
from tests.monitors.test_engine import (  # noqa: F401  (fixtures)
    FakeClock,
    arun,
    engine_settings,
    make_worker,
    session_factory,
)
from tests.monitors.test_rediscovery import _monitor_state, _tick
from tests.support.sampling_server import serve_app

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OPEN = OutputShape(container="keyed")
HIST = LaplaceHistogram(epsilon=1.0, keys=("a", "b", "c"))
LEAKY = LeakyHistogram(epsilon=1.0)
PARTITION = PartitionCounts(epsilon=1.0, delta=0.01)
X, X_PRIME = ["a"] * 10 + ["b"] * 4 + ["secret"], ["a"] * 10 + ["b"] * 4


def nullable_histogram(database, n, rng):  # noqa: ANN001, ANN201
    """A 5-bin histogram whose bins below a threshold are null (suppressed cells)."""
    counts = np.bincount(np.asarray(database, dtype=int), minlength=5)[:5].astype(float)
    noisy = counts[None, :] + rng.laplace(0.0, 1.0, size=(n, 5))
    rows = noisy.tolist()
    return [[None if v < 1.0 else v for v in row] for row in rows]


def switching(period_from: int):  # noqa: ANN201
    """The histogram, releasing the integer key 7 as well from ``period_from`` on (a key outside
    the declared universe: a contract breach)."""

    def sample(database, n, rng, period=0):  # noqa: ANN001, ANN202
        out = HIST.sample(database, n, rng)
        if period < period_from:
            return out
        return [{**row, "7": 1.0} for row in out.tolist()]

    return sample


def _server():
    api = FastAPI()
    api.include_router(endpoint_router({
        "/hist": (HIST.sample, OPEN), "/leaky": (LEAKY.sample, "keyed"), "/partition": (PARTITION.sample, OPEN),
        "/switching": (switching(4), OPEN),
        "/nullvec": (nullable_histogram, OutputShape(container="vector", length=5, nullable=True)),
    }, secret=SECRET, seed=5))
    return serve_app(api)


def _audit(url: str, *extra: str):
    return CliRunner().invoke(cli, ["audit", url, "--secret", SECRET, "--allow-networks", "127.0.0.0/8",
                                    "--no-progress", *extra])


def test_audit_keyed_outputs_refutes_a_key_set_from_the_data_and_not_the_correct_ones():
    pairs = json.dumps([{"x": X, "x_prime": X_PRIME}])
    with _server() as base:
        leaky = _audit(f"{base}/leaky", "--pairs", pairs, "--epsilon", "1", "--output-kind", "keyed",
                       "--budget", "8000", "--json")
        hist = _audit(f"{base}/hist", "--pairs", json.dumps([{"x": ["a"] * 10 + ["b"] * 4, "x_prime": ["a"] * 9 +
                                                               ["b"] * 4}]), "--epsilon", "1", "--output-kind", "keyed",
                      "--budget", "16000")
        partition = _audit(f"{base}/partition", "--pairs", pairs, "--epsilon", "1", "--delta", "0.01",
                           "--output-kind", "keyed", "--budget", "16000")
        detected = _audit(f"{base}/leaky", "--pairs", pairs, "--epsilon", "1", "--budget", "8000")
    assert leaky.exit_code == 1, leaky.output
    result = json.loads(leaky.stdout)
    assert result["refuted"] and result["lower_bound"] > 1.0
    assert result["shape"]["container"] == "keyed"
    assert result["best"]["event"]["kind"] in ("key", "key_value", "key_count", "key_set", "key_sets")
    assert hist.exit_code == 0, hist.output
    assert hist.stdout.startswith("verdict: Not refuted")
    assert partition.exit_code == 0, partition.output
    assert detected.exit_code == 1, detected.output
    assert "detected output shape: keyed" in detected.stderr


def test_nullable_vectors_declared_as_vector_kind_in_the_cli_and_the_api(client):
    pairs = json.dumps([{"x": [0, 0, 1, 1, 1, 2], "x_prime": [0, 0, 1, 1, 2]}])
    with _server() as base:
        res = _audit(f"{base}/nullvec", "--pairs", pairs, "--epsilon", "1", "--output-kind", "vector", "--dim", "5",
                     "--budget", "8000")
        created = client.post("/v1/mechanisms", params={"validate": "true"}, json={
            "name": "nullvec", "sampling_url": f"{base}/nullvec", "output_kind": "vector", "dim": 5,
            "secret": SECRET, "probe_database": [0, 1, 1, 2]})
    assert res.exit_code in (0, 1), res.output  # sampled and tested (2: the answers were refused)
    assert "allows no null" not in res.output
    assert created.status_code == 201, created.text
    assert created.json()["validation"]["ok"], created.json()["validation"]


def test_registration_of_keyed_mechanisms_and_keyed_check_events(client):
    base = "http://127.0.0.1:9"
    shape = {"container": "keyed", "keys": ["a", "b", "c"], "values": "real"}
    made = client.post("/v1/mechanisms", json={"name": "hist", "sampling_url": f"{base}/hist", "output_kind": "keyed",
                                               "output_shape": shape, "secret": SECRET})
    assert made.status_code == 201, made.text
    assert made.json()["output_kind"] == "keyed" and made.json()["output_shape"]["keys"] == ["a", "b", "c"]
    bad = client.post("/v1/mechanisms", json={"name": "x", "sampling_url": f"{base}/x", "output_kind": "keyed",
                                              "dim": 3, "secret": SECRET})
    assert bad.status_code == 422 and "dim must be null" in bad.text
    bad = client.post("/v1/mechanisms", json={"name": "y", "sampling_url": f"{base}/y", "output_kind": "real",
                                              "output_shape": shape, "secret": SECRET})
    assert bad.status_code == 422 and "read as output_kind 'keyed'" in bad.text
    mech = made.json()["id"]

    def monitor(event):  # noqa: ANN001, ANN202
        return client.post("/v1/monitors", json={
            "name": f"m-{uuid.uuid4().hex[:6]}", "mechanism_id": mech, "epsilon": 1.0, "horizon": 20,
            "samples_per_period": 100, "period_seconds": 60,
            "checks": [{"x": ["a"], "x_prime": [], "event": event}]})

    assert monitor({"kind": "key_value", "key": "a", "event": {"kind": "interval", "low": 1}}).status_code == 201
    refused = monitor({"kind": "interval", "low": 1})
    assert refused.status_code == 422 and "keyed" in refused.text
    refused = monitor({"kind": "key", "key": "zz"})
    assert refused.status_code == 422 and "not a declared key" in refused.text
    real = client.post("/v1/mechanisms", json={"name": "r", "sampling_url": f"{base}/r", "output_kind": "real",
                                               "secret": SECRET}).json()
    refused = client.post("/v1/monitors", json={
        "name": "r", "mechanism_id": real["id"], "epsilon": 1.0, "horizon": 20, "samples_per_period": 100,
        "period_seconds": 60, "checks": [{"x": [1], "x_prime": [0], "event": {"kind": "key", "key": "a"}}]})
    assert refused.status_code == 422 and "applies to keyed outputs" in refused.text


# SQLite only: the worker's periods, leases and snapshots run on both backends elsewhere.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_monitors_with_keyed_events_alarm_on_the_leak_and_check_the_contract(client, db, make_worker, arun):
    with _server() as base:
        mechs = {}
        for name, path, shape in (("leaky", "/leaky", None), ("hist", "/switching",
                                                                 {"container": "keyed", "keys": ["a", "b", "c"]})):
            body = {"name": name, "sampling_url": f"{base}{path}", "output_kind": "keyed", "secret": SECRET}
            if shape is not None:
                body["output_shape"] = shape
            made = client.post("/v1/mechanisms", json=body)
            assert made.status_code == 201, made.text
            mechs[name] = made.json()["id"]
        leak = client.post("/v1/monitors", json={
            "name": "leak", "mechanism_id": mechs["leaky"], "epsilon": 1.0, "horizon": 30, "samples_per_period": 200,
            "period_seconds": 60, "outputs_window": 10, "alarm_snapshot_samples": 0,
            "checks": [{"x": X, "x_prime": X_PRIME, "event": {"kind": "key", "key": "secret"}}]}).json()
        hist = client.post("/v1/monitors", json={
            "name": "hist", "mechanism_id": mechs["hist"], "epsilon": 1.0, "horizon": 30, "samples_per_period": 200,
            "period_seconds": 60, "outputs_window": 10, "alarm_snapshot_samples": 0,
            "checks": [{"x": ["a"] * 10, "x_prime": ["a"] * 9,
                        "event": {"kind": "key_value", "key": "a", "event": {"kind": "interval", "low": 10}}}]}).json()
        worker, clock = make_worker()
        for _ in range(6):
            _tick(worker, clock, arun, jobs=False)
        snapshot = client.post(f"/v1/monitors/{hist['id']}/snapshots", json={"extra_samples": 4000})
        assert snapshot.status_code == 202, snapshot.text
        arun(worker.tick_snapshots())
    monitor, checks = _monitor_state(db, leak["id"])
    assert monitor.state == "alarm" and monitor.t <= 3
    alarms = client.get("/v1/alarms", params={"monitor_id": leak["id"]}).json()["items"]
    assert [a["kind"] for a in alarms] == ["privacy"] and alarms[0]["a"] > 150 and alarms[0]["b"] == 0
    with db() as session:
        from app.models.mechanisms import Mechanism

        detected = session.get(Mechanism, uuid.UUID(mechs["leaky"]))
        assert detected.output_shape["container"] == "keyed" and detected.output_shape_source == "detected"
    # the histogram: no privacy alarm; from period 4 it releases the key 7 outside its universe
    monitor, checks = _monitor_state(db, hist["id"])
    assert monitor.state == "active" and monitor.t >= 5
    alarms = client.get("/v1/alarms", params={"monitor_id": hist["id"]}).json()["items"]
    assert [a["kind"] for a in alarms] == ["contract"] and alarms[0]["t"] == 4
    contract = alarms[0]["evidence"]["contract"]
    assert contract["breach"] == "support" and "'7', which is not a declared key" in contract["detail"]
    assert contract["sample"]["7"] == 1.0
    periods = client.get(f"/v1/monitors/{hist['id']}/periods").json()["items"]
    assert all(p["checks"][0]["a"] > 0 for p in periods if p.get("checks"))  # counted through the breach
    snap = client.get(f"/v1/snapshots/{snapshot.json()['id']}").json()
    assert snap["status"] == "done", snap["error"]
    pair = snap["result"]["pairs"][0]
    assert pair["statistic"]["kind"] in ("key", "key_set", "count")
    assert snap["epsilon_hat"] > 0 and pair["suggested_event"]["kind"] in ("key_value", "key", "key_sets",
                                                                           "key_count")


def test_the_search_certifies_a_key_set_from_the_data_and_not_the_correct_histogram():
    """`dpwatch search`'s run on keyed outputs (screening through the engine's candidates), in process."""
    import asyncio

    from app.search.domain import InputDomain
    from app.search.draws import function_sampler
    from app.search.run import SearchSettings, run_search
    from app.stats.claims import PureDP

    domain = InputDomain.model_validate({"records": {"type": "category", "values": ["a", "b", "c", "d"]},
                                         "size": {"min": 0, "max": 12}, "neighbours": ["add_remove"]})
    correct = LaplaceHistogram(epsilon=1.0, keys=("a", "b", "c", "d"))
    verdicts = {}
    for mech in (LEAKY, correct):
        result = asyncio.run(run_search(function_sampler(mech.sample, mech.shape, 3), domain, PureDP(1.0),
                                        mech.shape, SearchSettings(budget=60_000, max_candidates=16, refine_trials=4)))
        verdicts[mech.name] = result.certified
        for f in result.findings:
            assert domain.relation(f["x"], f["x_prime"]) is not None
    assert verdicts == {"leaky-histogram": True, "laplace-histogram": False}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_auto_events_on_keyed_outputs_are_discovered_under_pure_and_approximate_claims(client, db, make_worker, arun):
    """Calibration's discovery on keyed outputs: the engine's candidates for a pure-ε claim, the
    claim-aware key-set events for an (ε, δ) claim; both adopt a keyed event and alarm on the leak."""
    with _server() as base:
        mech = client.post("/v1/mechanisms", json={"name": "leaky", "sampling_url": f"{base}/leaky",
                                                   "output_kind": "keyed", "secret": SECRET}).json()
        monitors = []
        for claim in ({"epsilon": 1.0}, {"epsilon": 1.0, "delta": 0.01}):
            made = client.post("/v1/monitors", json={
                "name": f"auto-{len(monitors)}", "mechanism_id": mech["id"], "claim": claim, "horizon": 30,
                "samples_per_period": 200, "period_seconds": 60, "outputs_window": 0, "alarm_snapshot_samples": 0,
                "discovery_samples": 8000,
                "checks": [{"x": X, "x_prime": X_PRIME, "event": {"kind": "auto"}}]})
            assert made.status_code == 201, made.text
            monitors.append(made.json()["id"])
        worker, clock = make_worker()
        for _ in range(4):
            _tick(worker, clock, arun, jobs=False)
    for monitor_id in monitors:
        monitor, checks = _monitor_state(db, monitor_id)
        assert checks[0].event["kind"] in ("key", "key_value", "key_count", "key_set", "key_sets"), checks[0].event
        assert monitor.state == "alarm", (checks[0].event, monitor.t)
