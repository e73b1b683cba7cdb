"""The search (app/search): the domain schema, the generators, and ``dpwatch search`` end to end over
HTTP against the search corpus served on loopback (docs/search.md)."""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from app.cli import app
from app.reference.search_corpus import search_corpus
from app.reference.server import endpoint_router
from app.sampling.protocol import generate_secret
from app.search.domain import DOMAIN_EXAMPLES, InputDomain
from app.search.generators import candidate_pairs, edge_pairs, halton_pairs, statdp_patterns, uniform_pair
from tests.support.sampling_server import serve_app

SECRET = generate_secret()
CORPUS = search_corpus()


def D(data):
    return InputDomain.model_validate(data)


# ------------------------------------------------------------------------------------- domain


@pytest.mark.parametrize("bad, message", [
    ({"records": {"type": "real", "low": 1, "high": 0}, "size": {"min": 0, "max": 3}, "neighbours": ["add_remove"]},
     "low must be below high"),
    ({"records": {"type": "real"}, "size": {"min": 3, "max": 3}, "neighbours": ["add_remove"]}, "size.max > size.min"),
    ({"records": {"type": "real"}, "size": {"min": 3, "max": 5}, "neighbours": ["linf"], "sensitivity": 1},
     "fixed number of answers"),
    ({"records": {"type": "real"}, "size": {"min": 3, "max": 3}, "neighbours": ["linf"]}, "sensitivity"),
    ({"records": {"type": "real"}, "size": {"min": 0, "max": 3}, "neighbours": ["add_remove"], "sensitivity": 1},
     "applies to linf and l1"),
    ({"records": {"type": "category", "values": ["a"]}, "size": {"min": 1, "max": 3}, "neighbours": ["replace_one"]},
     "two categories"),
    ({"records": {"type": "category", "values": ["a", "a"]}, "size": {"min": 1, "max": 3}, "neighbours": ["replace_one"]},
     "different"),
    ({"records": {"type": "vector", "dim": 2, "low": [0, 0, 0]}, "size": {"min": 0, "max": 3},
      "neighbours": ["add_remove"]}, "dim = 2"),
    ({"records": {"type": "real"}, "size": {"min": 4, "max": 4}, "neighbours": ["linf", "add_remove"],
      "sensitivity": 1}, "declare one kind"),
    ({"records": {"type": "integer"}, "size": {"min": 4, "max": 4}, "neighbours": ["l1"], "sensitivity": 1.5},
     "integer sensitivity"),
    ({"records": {"type": "real"}, "size": {"min": 0, "max": 3}, "neighbours": ["add_remove", "add_remove"]},
     "must not repeat"),
    ({"records": {"type": "real", "low": "nan"}, "size": {"min": 0, "max": 3}, "neighbours": ["add_remove"]}, "finite"),
    ({"records": {"type": "text"}, "size": {"min": 0, "max": 3}, "neighbours": ["add_remove"]}, "type"),
])
def test_bad_domains_are_refused_with_the_reason(bad, message):
    from app.search.service import read_domain

    with pytest.raises(ValueError) as info:
        read_domain(bad)
    assert message in str(info.value)


def test_relation_is_exact():
    unit = D(DOMAIN_EXAMPLES[0])
    assert unit.relation([0.5, 1.0], [1.0]) == "add_remove"
    assert unit.relation([1.0, 0.5], [0.5, 1.0]) == "identical"  # a multiset: order carries nothing
    assert unit.relation([0.5], [0.2]) is None  # a replacement is not add/remove
    assert unit.relation([0.5, 1.5], [0.5]) is None  # outside the bounds
    assert unit.relation([0.5] * 11, [0.5] * 10) is None  # too large
    linf = D({"records": {"type": "real"}, "size": {"min": 2, "max": 2}, "neighbours": ["linf"], "sensitivity": 1})
    assert linf.relation([0.1, 0.0], [1.1, -1.0]) is None  # 1.1 − 0.1 is 1.0000000000000002 in floats
    assert linf.relation([0.0, 0.0], [1.0, -1.0]) == "linf"
    assert linf.relation([0.0, 0.0], [0.0, 0.0]) == "identical"
    l1 = D({"records": {"type": "integer"}, "size": {"min": 3, "max": 3}, "neighbours": ["l1"], "sensitivity": 2})
    assert l1.relation([0, 0, 0], [1, -1, 0]) == "l1" and l1.relation([0, 0, 0], [1, -1, 1]) is None
    assert l1.relation([0, 0, 0], [0.5, 0, 0]) is None  # not an integer answer
    cat = D(DOMAIN_EXAMPLES[2])
    assert cat.relation(["a", "b"], ["a", "c"]) == "replace_one" and cat.relation(["a", "b"], ["c", "d"]) is None
    assert cat.relation(["a", "x"], ["a", "b"]) is None


_ALL = DOMAIN_EXAMPLES + [entry.domain for entry in CORPUS.values()] + [
    {"records": {"type": "integer", "low": 0}, "size": {"min": 3, "max": 3}, "neighbours": ["linf", "l1"],
     "sensitivity": 2},
    {"records": {"type": "real", "high": 0}, "size": {"min": 1, "max": 60}, "neighbours": ["replace_one", "add_remove"]},
    {"records": {"type": "vector", "dim": 3}, "size": {"min": 0, "max": 4}, "neighbours": ["add_remove", "replace_one"]},
    {"records": {"type": "real", "low": 0, "high": 10}, "size": {"min": 4, "max": 4}, "neighbours": ["l1"],
     "sensitivity": 0.3},
]
DOMAINS = list({json.dumps(d, sort_keys=True): d for d in _ALL}.values())


@pytest.mark.parametrize("data", DOMAINS, ids=[json.dumps(d)[:60] for d in DOMAINS])
def test_every_generated_pair_is_a_neighbour_in_the_domain(data):
    domain = D(data)
    rng = np.random.default_rng(0)
    families = {"statdp": statdp_patterns(domain), "halton": halton_pairs(domain), "edge": edge_pairs(domain),
                "uniform": [uniform_pair(domain, rng) for _ in range(20)]}
    for name, pairs in families.items():
        for p in pairs:
            assert domain.relation(p.x, p.x_prime) == p.relation, (name, p)
            json.dumps([p.x, p.x_prime], allow_nan=False)  # strict JSON, as the protocol sends it
    assert families["halton"] and families["statdp"] or domain.is_vector
    chosen = candidate_pairs(domain, limit=50)
    assert 0 < len(chosen) <= 50 and len({p.key for p in chosen}) == len(chosen)


def test_edge_cases_reach_the_places_bugs_live():
    unbounded = D(CORPUS["clamp-forgotten"].domain)
    edges = edge_pairs(unbounded)
    flat = [v for p in edges for v in p.x + p.x_prime]
    assert any(p.x == [] or p.x_prime == [] for p in edges)  # the empty database
    assert max(abs(v) for v in flat) == 1.7976931348623157e308  # extreme magnitudes
    assert any(abs(v) == 1e6 for v in flat)  # far outside any clamp
    assert any(p.note.startswith("reversed order") for p in edges)
    asym = D(CORPUS["sum-maxabs-sensitivity"].domain)
    assert any(sorted(set(p.x) ^ set(p.x_prime)) == [-1.0, 3.0] for p in edge_pairs(asym))  # low replaced by high
    linf = D(CORPUS["rnm-value"].domain)
    notes = {p.note for p in statdp_patterns(linf)}
    assert {"all answers 1, all above", "all answers 1, one above rest below", "x shape"} <= notes


# ------------------------------------------------------------------------------------- dpwatch search


def _picky(db, n, rng):
    """clamp-correct, but records beyond ±10⁶ make it answer NaN (the endpoint answers 500):
    failing inputs, not a violation."""
    if any(abs(v) > 1e6 for v in db):
        return np.full(n, np.nan)
    return CORPUS["clamp-correct"].sample(db, n, rng)


def _server(slugs):
    api = FastAPI()
    routes = {f"/{s}": (CORPUS[s].sample, CORPUS[s].shape) for s in slugs}
    routes["/picky"] = (_picky, "real")
    api.include_router(endpoint_router(routes, secret=SECRET, seed=11))
    return serve_app(api)


def _search(url, slug, *extra):
    entry = CORPUS[slug]
    claim = [item for k, v in entry.claim.items() for item in ({"epsilon": "--epsilon", "delta": "--delta",
                                                                 "gdp_mu": "--mu", "zcdp_rho": "--rho"}[k], str(v))]
    return CliRunner().invoke(app, ["search", url, "--secret", SECRET, "--allow-networks", "127.0.0.0/8",
                                    "--domain", json.dumps(entry.domain), "--candidates", "40", *claim, *extra])


def test_search_finds_and_certifies_input_dependent_bugs_over_http(tmp_path):
    body = tmp_path / "monitor.json"
    with _server(["clamp-forgotten", "empty-returns-zero"]) as base:
        clamp = _search(f"{base}/clamp-forgotten", "clamp-forgotten", "--output-kind", "real", "--budget", "300000",
                        "--json", "--no-progress", "--monitor-body", str(body), "--mechanism-id", "m-1")
        empty = _search(f"{base}/empty-returns-zero", "empty-returns-zero", "--budget", "300000", "--progress")
        picky = _search(f"{base}/picky", "clamp-correct", "--output-kind", "real", "--budget", "200000",
                        "--no-progress", "--json")
    assert clamp.exit_code == 1, clamp.output
    r = json.loads(clamp.stdout)
    f = r["finding"]
    assert r["certified"] and f["lower_bound"] > 1 and f["held_out"]["refutes"]
    assert D(r["domain"]).relation(f["x"], f["x_prime"]) == f["relation"] == "add_remove"
    # one call to watch it: a POST /v1/monitors body with the pair, the event and the claim
    monitor = json.loads(body.read_text())
    assert monitor["mechanism_id"] == "m-1" and monitor["claim"] == {"epsilon": 1.0}
    assert monitor["checks"] == [{"x": f["x"], "x_prime": f["x_prime"], "event": f["event"]}]
    from app.monitors.schemas import MonitorCreate

    MonitorCreate.model_validate({**monitor, "mechanism_id": "4f1c2b7e-9a0d-4c3b-8e6f-2d1a0b9c8e7f"})
    assert r["samples"]["total"] <= 300_000 and r["samples"]["certification"] > 0 and r["seconds"]["total"] > 0
    assert r["candidates"]["generated"] == 40 and r["candidates"]["by_source"]["edge"] > 0
    # inputs the endpoint refuses (a 500) do not stop the search; they are listed as findings
    assert picky.exit_code == 0, picky.output
    p = json.loads(picky.stdout)
    assert p["failing_inputs"] and all(item["status_code"] == 500 for item in p["failing_inputs"])
    assert all(max(map(abs, item["database"])) > 1e6 for item in p["failing_inputs"])
    assert p["samples"]["certification"] > 0 and not p["certified"]
    assert empty.exit_code == 1, empty.output
    assert "VIOLATION CERTIFIED" in empty.stdout and "detected output shape" in empty.stderr
    assert "outputs" in empty.stderr  # the progress bar
    from app.search.report import format_search_report

    correct = format_search_report(p)
    assert "no violation certified within the budget (this does not show that the claim holds)" in correct
    assert "does not show that the mechanism satisfies its claim" in correct
    assert "holds" not in correct.replace("does not show that the claim holds", "")
    assert "failing inputs" in correct and "returned invalid outputs" in correct and "NaN or infinity" in correct


def test_search_usage_errors_exit_2(tmp_path):
    url = "http://127.0.0.1:9/x"
    dom = json.dumps(CORPUS["laplace-sum"].domain)
    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, ["search", url, "--no-progress", "--allow-networks", "127.0.0.0/8", *args])

    assert run("--epsilon", "1").exit_code == 2  # no domain
    res = run("--domain", '{"records": {"type": "real"}}', "--epsilon", "1")
    assert res.exit_code == 2 and "size" in res.output
    res = run("--domain", str(tmp_path / "missing.json"), "--epsilon", "1")
    assert res.exit_code == 2 and "cannot read the domain" in res.output
    assert run("--domain", dom).exit_code == 2  # no claim
    assert run("--domain", dom, "--epsilon", "1", "--mu", "1").exit_code == 2
    assert run("--domain", dom, "--epsilon", "1", "--budget", "10").exit_code == 2
    res = run("--domain", dom, "--epsilon", "1", "--output-kind", "real", "--budget", "100000")
    assert res.exit_code == 2 and "failed on every one" in res.output  # nothing listens on port 9


def test_time_limit_stops_the_search_and_says_so():
    from app.search.draws import function_sampler
    from app.search.run import SearchSettings, run_search
    from app.stats.claims import PureDP

    entry = CORPUS["laplace-sum"]

    def slow(db, n, rng):
        import time

        time.sleep(0.01)
        return entry.sample(db, n, rng)

    result = asyncio.run(run_search(function_sampler(slow, entry.shape, 1), D(entry.domain), PureDP(1.0),
                                    entry.shape, SearchSettings(budget=4_000_000, time_limit=3.0)))
    assert result.seconds["total"] < 8
    assert result.stopped == "time limit" and not result.certified
    assert "does not show" in result.statement


@pytest.mark.parametrize("slug, domain, claim, certified", [
    # output shapes beyond reals: a list with the cutoff, a label, a lattice, an integer with bounds
    # (the testers' corpus at ε = 0.1); nullable vectors are in the benches (svt1 in the corpus)
    ("svt5-list", {"records": {"type": "real"}, "size": {"min": 10, "max": 10}, "neighbours": ["linf"],
                   "sensitivity": 1}, 0.1, True),
    ("rnm-laplace-label", {"records": {"type": "integer"}, "size": {"min": 5, "max": 5}, "neighbours": ["linf"],
                           "sensitivity": 1}, 1.0, False),
    ("laplace-rounded", {"records": {"type": "real"}, "size": {"min": 1, "max": 1}, "neighbours": ["l1"],
                         "sensitivity": 1}, 1.0, False),
    ("truncated-geometric-resampled", {"records": {"type": "integer", "low": 0, "high": 5}, "size": {"min": 1, "max": 1},
                                       "neighbours": ["linf"], "sensitivity": 1}, 0.1, None),
])
def test_every_output_shape_searches(slug, domain, claim, certified):
    """A search runs on every output shape (in process, a small budget); the flagrant violation is
    certified, and a claim far above the true ε is not."""
    from app.reference.corpus import corpus
    from app.search.draws import function_sampler
    from app.search.run import SearchSettings, run_search
    from app.stats.claims import PureDP

    mech = corpus()[slug]
    dom = D(domain)
    result = asyncio.run(run_search(function_sampler(mech.sample, mech.shape, 3), dom, PureDP(claim), mech.shape,
                                    SearchSettings(budget=60_000, max_candidates=16, refine_trials=4)))
    if certified is not None:
        assert result.certified is certified, result.statement
    for f in result.findings:
        assert dom.relation(f["x"], f["x_prime"]) is not None
    assert result.samples["total"] <= 60_000 and not result.failing_inputs
    json.dumps(result.to_dict(), allow_nan=True)


# ------------------------------------------------------------------------------------- staged certification


def _run(slug, budget, seed=0, **kw):
    from app.search.draws import function_sampler
    from app.search.run import SearchSettings, run_search
    from app.search.service import make_claim

    entry = CORPUS[slug]
    return asyncio.run(run_search(function_sampler(entry.sample, entry.shape, seed), D(entry.domain),
                                  make_claim(entry.claim), entry.shape, SearchSettings(budget=budget, seed=seed, **kw)))


def test_stage_levels_sum_below_alpha():
    from app.search.certify import FINAL_SHARE, stage_alpha

    alpha = 0.05
    assert stage_alpha(alpha, 1) == alpha / 4 and stage_alpha(alpha, 2) == alpha / 8
    assert math.fsum(stage_alpha(alpha, s) for s in range(1, 200)) + FINAL_SHARE * alpha <= alpha
    with pytest.raises(ValueError):
        stage_alpha(alpha, 0)
    # a full search (no stop at the first certification) that ran stages and the final certification
    r = _run("sum-maxabs-sensitivity", 400_000, seed=4, stop_at_first=False).to_dict()
    cert = r["certification"]
    assert cert["stages"] and "rounds" in cert  # stages ran, and so did the engine
    assert [st["stage"] for st in cert["stages"]] == list(range(1, len(cert["stages"]) + 1))
    for st in cert["stages"]:
        assert st["alpha"] == stage_alpha(0.05, st["stage"])
        assert st["tests"] * st["level_per_test"] <= st["alpha"] * (1 + 1e-12)
    assert cert["engine_settings"] and cert["alpha"]["final"] == 0.025
    assert cert["alpha"]["spent_at_most"] <= 0.05
    for f in r["findings"]:  # every test's level is its stage's share (or the final one's)
        level = f["held_out"]["alpha"]
        assert level <= (stage_alpha(0.05, f["stage"]) / 3 if f["stage"] else 0.025) * (1 + 1e-12)
    assert r["samples"]["total"] <= 400_000
    # staging off: the final certification gets all of α
    off = _run("laplace-sum", 60_000, seed=1, staged=False).to_dict()
    assert not off["certification"]["stages"] and off["certification"]["alpha"]["final"] == 0.05


def test_a_flagrant_bug_certifies_at_the_first_stage():
    r = _run("empty-returns-zero", 2_000_000, seed=3)
    first = r.certification["first_certification"]
    assert r.certified and r.stopped == "certified" and first["stage"] == 1, r.statement
    # it stops searching there; only the severity phase draws after it, on the certified pair
    assert first["samples"] == r.samples["total"] - r.samples.get("severity", 0) < 100_000
    assert r.samples["refinement"] == 0 and "rounds" not in r.certification  # no refinement, no engine
    assert r.finding["stage"] == 1 and r.finding["held_out"]["refutes"] and r.finding["lower_bound"] > 1
    assert D(r.domain).relation(r.finding["x"], r.finding["x_prime"]) == "add_remove"
    from app.search.report import format_search_report

    assert "first certified at stage 1 (screening rung 0)" in format_search_report(r)


@pytest.mark.parametrize("slug, seed", [("laplace-sum", 0), ("laplace-sum", 1), ("clamp-correct", 2),
                                        ("gaussian-range", 3)])
def test_a_correct_mechanism_is_not_certified_on_a_small_budget(slug, seed):
    r = _run(slug, 150_000, seed=seed)
    assert not r.certified and r.certification["first_certification"] is None, r.statement
    assert r.samples["total"] <= 150_000
    lb = r.certification["lower_bound"]
    assert lb is None or lb <= CORPUS[slug].claimed


def test_staged_tests_never_count_the_outputs_that_chose_them(monkeypatch):
    """Every output a staged test (or the final engine) counts was drawn after its pair and event were
    chosen: no value it counts was ever passed to a choosing step before (continuous outputs, so
    values identify draws)."""
    import app.audit.engine as engine
    import app.search.certify as certify
    import app.search.screening as screening

    seen: set[float] = set()  # every value passed to a choosing step so far
    tested: list[tuple[str, set[float], set[float]]] = []

    def values(outputs):
        return set(np.asarray(outputs, dtype=float).ravel().tolist())

    def choosing(original):
        def wrapped(x, y, *args, **kw):
            seen.update(values(x) | values(y))
            return original(x, y, *args, **kw)
        return wrapped

    def counting(where, original):
        def wrapped(event, outputs):
            tested.append((where, values(outputs), set(seen)))
            return original(event, outputs)
        return wrapped

    monkeypatch.setattr(screening, "propose", choosing(screening.propose))
    monkeypatch.setattr(certify, "propose", choosing(certify.propose))
    monkeypatch.setattr(engine, "propose", choosing(engine.propose))
    monkeypatch.setattr(certify, "event_contains", counting("stage", certify.event_contains))
    monkeypatch.setattr(engine, "event_contains", counting("engine", engine.event_contains))
    r = _run("sum-maxabs-sensitivity", 400_000, seed=7, stop_at_first=False)
    stage_counts = [t for t in tested if t[0] == "stage"]
    assert stage_counts and any(t[0] == "engine" for t in tested)
    for where, counted, before in tested:
        assert counted and not counted & before, where
    # the staged tests' outputs are certification draws, separate from the screening ones
    assert r.samples["certification"] >= sum(st["samples"] for st in r.certification["stages"]) > 0


def test_an_unusable_endpoint_stops_the_draws_it_started_without_leaving_them_running():
    """When the first databases all fail (an endpoint down), the draw raises EndpointUnusable once:
    the databases still being drawn are cancelled, not left to fail in turn (`dpwatch search` printed
    "unhandled exception during asyncio.run() shutdown" with a traceback per leftover draw, after
    the error), and no database is asked for after the failure."""
    from app.sampling.protocol import SamplingError
    from app.search.draws import UNUSABLE_AFTER, EndpointUnusable, SearchDraws

    calls: list[int] = []
    unhandled: list[dict] = []

    async def down(db, n):  # noqa: ANN001, ANN202
        calls.append(db[0])
        await asyncio.sleep(0.01 * (db[0] % 3))
        raise SamplingError("connection_error", "ConnectError: All connection attempts failed")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: unhandled.append(ctx))
        draws = SearchDraws(down, concurrency=4)
        with pytest.raises(EndpointUnusable, match="failed on every one of the first"):
            await draws.draw([[i] for i in range(40)], 10, "screening")
        started = len(calls)
        await asyncio.sleep(0.2)
        assert len(calls) == started  # nothing drawn after the failure
        assert started <= UNUSABLE_AFTER + 4  # the failures, and the draws in flight then (concurrency 4)

    asyncio.run(main())
    import gc

    gc.collect()
    assert unhandled == []


def test_the_report_tells_apart_failing_tables_that_share_their_first_rows():
    """Tables a search tries often share their first rows: the failing inputs (and the power rows)
    were printed as the same 60 characters ("[{"user": 1, "city": "a"}, {"user": 2, …") for tables of
    31 to 60 users, so the report could not say which sizes failed. A cut database now starts with
    its size."""
    from app.reporting.text import database
    from app.search.draws import function_sampler
    from app.search.report import format_search_report
    from app.search.run import SearchSettings, run_search
    from app.search.service import make_claim
    from app.stats.shapes import OutputShape

    def picky(db, n, rng):  # noqa: ANN001, ANN202 - fails on tables of more than 30 rows
        if len(db) > 30:
            raise MemoryError("table too large for the release job")
        return [{"a": sum(r["city"] == "a" for r in db) + float(v)} for v in rng.laplace(0, 1, n)]

    domain = D({"table": {"columns": {"user": {"type": "id"}, "city": {"type": "category", "values": ["a", "b"]}},
                          "privacy_unit": "user", "rows_per_unit": {"min": 1, "max": 1}},
                "size": {"min": 0, "max": 60}, "neighbours": ["add_remove_unit"]})
    shape = OutputShape(container="keyed", keys=["a"])
    r = asyncio.run(run_search(function_sampler(picky, shape, 0), domain, make_claim({"epsilon": 1.0}), shape,
                               SearchSettings(budget=20_000, seed=0)))
    fails = r.to_dict()["failing_inputs"]
    assert len(fails) > 1
    report = format_search_report(r)
    lines = [line for line in report.splitlines() if "table too large" in line]
    assert len(lines) == min(len(fails), 10) and len(set(lines)) == len(lines), lines
    assert all(f"{len(f['database'])} rows: [" in report for f in fails[:10])
    assert database([1, 2], 100) == "[1, 2]" and database(list(range(100)), 20).startswith("100 records: [0, 1")
