"""The library adapters (sdk/python/dpwatch_sdk/libraries) and the pipeline corpus
(app/reference/pipelines), each library in its own venv (tests/library_venvs.py; a library that
cannot be installed is skipped with the reason), and the monitor demonstration: a PipelineDP count
with partition selection served through the SDK, a dpwatch monitor with a keyed event, silent on
the correct version and alarming after the deployment switches to a misconfigured one.

The venvs are built once (minutes the first time, like tests/test_sdk.py's) and kept in
``$DPWATCH_LIBRARY_VENVS`` or ``~/.cache/dpwatch/library-venvs``.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from app.reference.pipelines.catalog import CATALOG, PAIRS, entry
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


def _python(library: str):
    python, reason = python_of(library)
    if python is None:
        pytest.skip(reason)
    return python


def _run_in(library: str, code: str, timeout: float = 240) -> dict:
    python = _python(library)
    done = subprocess.run([str(python), "-c", textwrap.dedent(code)], cwd=ROOT, env=environment(library, python),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _units(rows):  # noqa: ANN001, ANN202
    return {r["user"] for r in rows}


def test_the_catalog_needs_no_library_and_its_pairs_are_unit_neighbours():
    """Each pair differs by one user with all their rows (add_remove_unit); every misconfigured entry
    names its mistake and has no finite ε; the catalog covers the mistakes the corpus is about."""
    for name, (x, x_prime) in PAIRS.items():
        extra = [r for r in x if r not in x_prime]
        assert len(_units(x) - _units(x_prime)) == 1 and _units(x_prime) <= _units(x), name
        gone = (_units(x) - _units(x_prime)).pop()
        assert [r for r in x if r["user"] != gone] == x_prime and all(r["user"] == gone for r in extra), name
    for e in CATALOG:
        assert e.verdict in ("correct", "violates")
        assert (e.mistake is not None) == e.violates and (e.true_epsilon == float("inf")) == e.violates, e.name
    mistakes = {e.mistake for e in CATALOG if e.mistake}
    assert mistakes == {"contribution bounds not enforced", "rows counted where the claim is about people",
                        "key set from the data claimed public", "partition selection claimed as pure ε",
                        "deterministic suppression of small cells", "clipping after the noise",
                        "a threshold at one size"}
    assert {e.library for e in CATALOG} == {"pipelinedp", "pydp", "opendp", "smartnoise", "tumult"}


#: outputs drawn per database in the adapters' test (OpenDP's Context takes ~60 ms per release)
DRAWS = {"pipelinedp": 300, "pydp": 300, "smartnoise": 200, "opendp": 40}

_DRAW = """
import json, math
import numpy as np
from app.reference.pipelines.build import build
from app.reference.pipelines.catalog import CATALOG, PAIRS
out = {}
rng = np.random.default_rng(3)
for e in CATALOG:
    if e.library != LIBRARY:
        continue
    m = build(e.name)  # raises unless the library's own claim is the catalog's
    x, xp = PAIRS[e.pair]
    a, b = m.sample(x, N, rng), m.sample(xp, N, rng)
    assert all(isinstance(o, dict) and all(isinstance(k, str) and math.isfinite(v) for k, v in o.items()) for o in a + b)
    keys = {"heavy": "a", "new_key": "z", "cell_10": "c", "size_10": "a", "big_spend": "a"}[e.pair]
    def mean_value(outs, key=keys):
        vals = [o[key] for o in outs if key in o]
        return sum(vals) / len(vals) if vals else None
    out[e.name] = {"present_x": sum(keys in o for o in a) / N, "present_xp": sum(keys in o for o in b) / N,
                   "mean_x": mean_value(a), "mean_xp": mean_value(b), "claim": m.claim.to_api(),
                   "shape": m.output.shape(), "domain": m.details.get("domain")}
print(json.dumps(out))
"""


@pytest.mark.parametrize("library", ["pipelinedp", "pydp", "smartnoise", "opendp"])
def test_each_pipeline_behaves_as_its_verdict_says_on_its_pair(library):
    """Built in its library's venv (the library's own claim must equal the catalog's), each entry's
    outputs on its pair show the mechanism behind its verdict: a key from the data always there
    with its user and never without; a count moved by the heavy user's 10 rows unless contributions
    are bounded; a partition-selected lone key (almost) never released."""
    n = DRAWS[library]
    got = _run_in(library, f"LIBRARY = {library!r}\nN = {n}\n" + _DRAW)
    assert set(got) == {e.name for e in CATALOG if e.library == library}
    for name, g in got.items():
        e = entry(name)
        assert g["claim"] == {k: v for k, v in e.claim.items() if v}, name
        assert g["shape"]["container"] == "keyed", name
        if e.pair == "new_key":
            if e.mistake == "key set from the data claimed public":
                assert g["present_x"] == 1.0 and g["present_xp"] == 0.0, (name, g)
            else:  # partition selection: the lone user's key is (almost) never released
                assert g["present_x"] <= 0.05 and g["present_xp"] == 0.0, (name, g)
        elif e.pair == "heavy":
            shift = g["mean_x"] - g["mean_xp"]
            if e.violates:
                assert shift > 6, (name, g)  # 10 rows counted
            else:
                assert shift < 4, (name, g)
        elif e.pair in ("cell_10", "size_10"):
            assert g["present_x"] == 1.0 and g["present_xp"] == 0.0, (name, g)
        elif e.pair == "big_spend":
            assert abs(g["mean_x"] - g["mean_xp"]) < (60 if not e.violates else 1e9), (name, g)
    domains = [g["domain"] for g in got.values() if g["domain"] is not None]
    assert domains, "the adapters declare a domain"
    for d in domains:  # the tabular form
        assert set(d) == {"table", "size", "neighbours"} and d["neighbours"] == ["add_remove_unit"]
        table = d["table"]
        assert table["privacy_unit"] == "user" and table["columns"]["user"] == {"type": "id"}
        assert table["rows_per_unit"] == {"min": 1}  # unbounded: the library promises to bound it
        assert table["columns"]["city"]["type"] == "category"


@pytest.mark.slow
def test_tumult_builds_and_releases_through_spark():
    """Tumult Analytics on local Spark: the session's claim, and releases (seconds each)."""
    got = _run_in("tumult", """
        import json
        from app.reference.pipelines.build import build
        from app.reference.pipelines.catalog import PAIRS
        x, xp = PAIRS["heavy"]
        res = {}
        for name in ("tumult-count-public", "tumult-count-one-row"):
            m = build(name)
            res[name] = [m.sample(x, 2, None), m.sample(xp, 2, None), m.claim.to_api()]
        print(json.dumps(res))
    """, timeout=1200)
    for name, (a, b, claim) in got.items():
        assert claim == {"epsilon": 1.0} and all(set(o) == {"a", "b"} for o in a + b), (name, a, b)
    bounded = got["tumult-count-public"]
    assert min(o["a"] for o in bounded[0]) < 27  # 21 users in a after truncation (+ Laplace(1) noise)
    rows = got["tumult-count-one-row"]
    assert min(o["a"] for o in rows[0]) > 24  # 30 rows in a


def _serve(name: str, *extra: str) -> tuple[subprocess.Popen, str]:
    e = entry(name)
    python = _python(e.library)
    proc = subprocess.Popen([str(python), "-m", "app.reference.pipelines.serve", name, "--secret", SECRET, *extra],
                            cwd=ROOT, env=environment(e.library, python), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    if not line:
        raise AssertionError(f"{name}: the server exited ({proc.wait()})")
    return proc, json.loads(line)["listening"]


SWITCH_AT = 6


# SQLite only: the worker's periods run on both backends elsewhere.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_monitor_on_a_pipelinedp_count_with_partition_selection_alarms_after_a_switch(client, db, make_worker, arun):  # noqa: F811
    """Two deployments of PipelineDP's count per city with partition selection, (1, 1e-5)-DP by its
    accountant, served through the SDK, each watched by a monitor whose check is "the key z is
    released" on (a user alone in z, the same table without them). One stays correct: silent.
    The other switches at period 6 to public_partitions taken from the data: alarm right after."""
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
                "horizon": 40, "samples_per_period": 200, "period_seconds": 60, "outputs_window": 10,
                "alarm_snapshot_samples": 0, "checks": [{"x": x, "x_prime": x_prime, "event": {"kind": "key", "key": "z"}}]})
            assert mon.status_code == 201, mon.text
            monitors[name] = mon.json()["id"]
        worker, clock = make_worker()
        for _ in range(SWITCH_AT + 4):
            _tick(worker, clock, arun, jobs=False)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    steady_state, _ = _monitor_state(db, monitors["steady"])
    assert steady_state.state == "active" and steady_state.t >= SWITCH_AT + 3
    assert client.get("/v1/alarms", params={"monitor_id": monitors["steady"]}).json()["items"] == []
    periods = client.get(f"/v1/monitors/{monitors['steady']}/periods").json()["items"]
    assert all(p["checks"][0]["a"] <= 2 and p["checks"][0]["b"] == 0 for p in periods if p.get("checks"))
    state, _ = _monitor_state(db, monitors["switched"])
    assert state.state == "alarm"
    alarms = client.get("/v1/alarms", params={"monitor_id": monitors["switched"]}).json()["items"]
    assert [a["kind"] for a in alarms] == ["privacy"]
    assert SWITCH_AT <= alarms[0]["t"] <= SWITCH_AT + 2, alarms[0]["t"]
    assert alarms[0]["a"] > 150 and alarms[0]["b"] == 0
