"""The library adapters (sdk/python/dpwatch_sdk/libraries) and the pipeline corpus
(app/reference/pipelines), each library in its own venv (tests/library_venvs.py; a library that
cannot be installed is skipped with the reason). The monitor demonstration is
tests/test_library_monitor.py.

The venvs are built once (minutes the first time, like tests/test_sdk.py's) and kept in
``$DPWATCH_LIBRARY_VENVS`` or ``~/.cache/dpwatch/library-venvs``.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from app.reference.pipelines.catalog import CATALOG, PAIRS, entry
from tests.support.library_venvs import ROOT, environment, require_python


def _run_in(library: str, code: str, timeout: float = 240) -> dict:
    python = require_python(library)
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
DRAWS = {"pipelinedp": 150, "pydp": 300, "smartnoise": 200, "opendp": 40}

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


# SmartNoise (~17 s) and OpenDP's Context (~35 s: a resolve and a polars plan per release) are slow.
@pytest.mark.parametrize("library", ["pipelinedp", "pydp", pytest.param("smartnoise", marks=pytest.mark.slow),
                                     pytest.param("opendp", marks=pytest.mark.slow)])
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
        assert g["claim"] == pytest.approx({k: v for k, v in e.claim.items() if v}, rel=1e-9), name
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


_EMPTY = """
import json, math
import numpy as np
from app.reference.pipelines.build import build
from app.reference.pipelines.catalog import CATALOG
out = {}
for e in CATALOG:
    if e.library == LIBRARY:
        outs = build(e.name).sample([], 5, np.random.default_rng(1))
        assert all(isinstance(o, dict) and all(math.isfinite(v) for v in o.values()) for o in outs), e.name
        out[e.name] = sorted({k for o in outs for k in o})
print(json.dumps(out))
"""


@pytest.mark.parametrize("library", ["pipelinedp", "pydp"])
def test_an_empty_table_is_a_database_like_any_other(library):
    """The domains the adapters declare start at 0 units, so the empty table must be answered (a
    search tries it first): keys selected from no data are never released. PipelineDP refuses an
    empty collection; its adapter hands it an empty iterator."""
    got = _run_in(library, f"LIBRARY = {library!r}\n" + _EMPTY)
    assert set(got) == {e.name for e in CATALOG if e.library == library}
    for name, keys in got.items():
        if "z" in keys:  # a key only the data can bring
            raise AssertionError((name, keys))


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


def test_opendp_selects_the_keys_of_a_sum_and_a_mean_and_answers_an_empty_table():
    """OpenDP's Context selects keys only on a noisy count (`dp.len()`) and needs a bound on the
    number of groups for a sum: the adapter adds both when the keys are not public (it failed to
    build, "max_groups must be known ..."). A mean over public keys on a table with no rows in a
    key divides by a noisy count that can be 0: that key is left out, not answered as inf (the
    endpoint answered 500)."""
    got = _run_in("opendp", """
        import json, math
        import numpy as np
        from dpwatch_sdk.libraries import GroupBy, opendp_context
        from dpwatch_sdk.protocol import check_outputs
        rng = np.random.default_rng(0)
        rows = [{"user": i, "city": "a", "spend": 5.0} for i in range(60)] + [{"user": 99, "city": "z", "spend": 5.0}]
        out = {}
        for metric in ("sum", "mean"):
            m = opendp_context.mechanism(GroupBy(by="city", metric=metric, value="spend", low=0, high=10,
                                                 epsilon=1.0, delta=1e-6))
            outs = check_outputs(m.sample(rows, 20, rng), 20, m.output)
            out[metric] = {"claim": m.claim.to_api(), "a": [o.get("a") for o in outs], "keys": sorted({k for o in outs for k in o})}
        mean = opendp_context.mechanism(GroupBy(by="age", metric="mean", value="spend", low=0, high=100,
                                                public_keys=(20, 30), epsilon=1.0))
        empty = check_outputs(mean.sample([], 200, rng), 200, mean.output)
        out["empty"] = sorted({k for o in empty for k in o})
        print(json.dumps(out))
    """)
    for metric, truth in (("sum", 300.0), ("mean", 5.0)):
        g = got[metric]
        assert g["claim"]["epsilon"] == pytest.approx(1.0) and 0 < g["claim"]["delta"] <= 1e-6, g
        assert g["keys"] == ["a"], g  # the 60 users' key always, the lone user's never
        assert all(v is not None and abs(v - truth) < truth for v in g["a"]), g
    assert set(got["empty"]) <= {"20", "30"}
