"""Tabular input domains, the size ladder and bisection, and the search on tables (docs/search.md §8)."""

from __future__ import annotations

import asyncio
import copy

import numpy as np
import pytest
from pydantic import ValidationError

from app.reference.table_corpus import mean_zero_below, records_mean_zero_below, table_corpus
from app.search.domain import InputDomain
from app.search.draws import SearchDraws, function_sampler
from app.search.generators import candidate_pairs
from app.search.run import SearchSettings, run_search
from app.search.service import make_claim
from app.search.sizes import bisect_sizes, size_ladder
from app.stats.shapes import OutputShape

ISSUE_FORM = {"table": {"columns": {"user": {"type": "id"},
                                    "city": {"type": "category", "values": ["a", "b", "c", "d"]},
                                    "spend": {"type": "real", "low": 0, "high": 100}},
                        "privacy_unit": "user", "rows_per_unit": {"min": 1, "max": 5}},
              "size": {"min": 0, "max": 200}, "neighbours": ["add_remove_unit"]}


def _with(**changes):
    d = copy.deepcopy(ISSUE_FORM)
    for path, value in changes.items():
        node = d
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return d


def test_the_declared_form_parses_and_every_column_type_is_accepted():
    d = InputDomain.model_validate(ISSUE_FORM)
    assert d.is_table and d.table.max_rows == 5 and "200 units" in d.describe()
    every = _with(table__columns={"u": {"type": "id"}, "n": {"type": "integer", "low": 0, "high": 9},
                                  "x": {"type": "real"}, "k": {"type": "category"}, "f": {"type": "bool"}},
                  table__privacy_unit="u", table__rows_per_unit={"min": 1})
    d2 = InputDomain.model_validate(every)
    assert d2.table.max_rows is None  # unbounded
    assert d2.problem([{"u": "p1", "n": 3, "x": -1e9, "k": "any string", "f": True}] * 50) is None
    # without a privacy unit every row is its own unit: size counts rows
    rows = _with(table__privacy_unit=None, table__rows_per_unit=None, size={"min": 0, "max": 2})
    d3 = InputDomain.model_validate(rows)
    row = {"user": 1, "city": "a", "spend": 1.0}
    assert d3.problem([row, row]) is None and "3 units" in d3.problem([row, row, row])
    # the old list-of-records domains are unchanged
    assert InputDomain.model_validate({"records": {"type": "real"}, "size": {"min": 0, "max": 3},
                                       "neighbours": ["add_remove"]}).table is None


@pytest.mark.parametrize("changes, field, reason", [
    ({"table__privacy_unit": "person"}, "table", "not one of the columns"),
    ({"table__privacy_unit": "city"}, "table", "must be a column of type id"),
    ({"table__rows_per_unit": {"min": 4, "max": 2}}, "table.rows_per_unit", "must not exceed"),
    ({"table__privacy_unit": None}, "table", "needs a privacy_unit"),
    ({"table__columns__spend": {"type": "real", "low": 5, "high": 1}}, "table.columns.spend", "low must be below high"),
    ({"table__columns__city": {"type": "category", "values": ["a", "a"]}}, "table.columns.city", "different"),
    ({"table__columns__city": {"type": "date"}}, "table.columns.city", "does not match any of the expected tags"),
    ({"neighbours": ["add_remove"]}, "", "add_remove_unit, replace_unit"),
    ({"size": {"min": 3, "max": 3}}, "", "add_remove_unit needs size.max > size.min"),
    ({"records": {"type": "real"}}, "", "exactly one of records"),
    ({"table": None}, "", "exactly one of records"),
])
def test_bad_table_domains_are_refused_with_the_field_and_the_reason(changes, field, reason):
    with pytest.raises(ValidationError) as info:
        InputDomain.model_validate(_with(**changes))
    err = info.value.errors()[0]
    assert reason in str(info.value)
    assert ".".join(str(p) for p in err["loc"]).startswith(field)


def test_records_domains_refuse_table_relations():
    with pytest.raises(ValidationError, match="for table domains"):
        InputDomain.model_validate({"records": {"type": "real"}, "size": {"min": 0, "max": 3},
                                    "neighbours": ["add_remove_unit"]})


def test_databases_outside_the_table_domain_are_named():
    d = InputDomain.model_validate(ISSUE_FORM)
    ok = {"user": 1, "city": "a", "spend": 1.0}
    assert "missing column" in d.problem([{"user": 1, "city": "a"}])
    assert "undeclared column" in d.problem([{**ok, "age": 3}])
    assert "not one of the categories" in d.problem([{**ok, "city": "z"}])
    assert "above high" in d.problem([{**ok, "spend": 101}])
    assert "not an id" in d.problem([{**ok, "user": True}])
    assert "owns 6 rows" in d.problem([ok] * 6)
    assert "a JSON list of rows" in d.problem({"rows": []})


def test_the_neighbour_relation_on_tables():
    spec = _with(neighbours=["add_remove_unit", "replace_unit", "add_remove_row", "replace_row"])
    d = InputDomain.model_validate(spec)
    u1 = [{"user": 1, "city": "a", "spend": 1.0}, {"user": 1, "city": "b", "spend": 2.0}]
    u2 = [{"user": 2, "city": "a", "spend": 3.0}]
    x = u1 + u2
    assert d.relation(x, x[::-1]) == "identical"
    assert d.relation(x, u2) == "add_remove_unit"  # one unit with all its rows
    assert d.relation(x, [{"user": 1, "city": "a", "spend": 1}] + u2) == "replace_unit"  # 1 == 1.0
    assert d.relation(x, u1 + [{"user": 2, "city": "c", "spend": 3.0}]) == "replace_unit"
    only_rows = InputDomain.model_validate(_with(neighbours=["add_remove_row", "replace_row"]))
    assert only_rows.relation(x, x[1:]) == "add_remove_row"
    assert only_rows.relation(x, u1 + [{"user": 2, "city": "c", "spend": 3.0}]) == "replace_row"
    assert only_rows.relation(x, u2) is None  # two rows away
    units_only = InputDomain.model_validate(ISSUE_FORM)
    assert units_only.relation(x, x[1:]) is None  # one row of a two-row unit: not a unit neighbour
    # a new row carrying an existing id merges into that unit: not "one unit added"
    assert units_only.relation(u2, u2 + [{"user": 2, "city": "b", "spend": 0.0}]) is None
    assert units_only.relation(u2, u2 + [{"user": 3, "city": "b", "spend": 0.0}]) == "add_remove_unit"


def test_generated_table_pairs_are_neighbours_and_cover_the_unit_moves():
    spec = _with(neighbours=["add_remove_unit", "replace_unit", "add_remove_row", "replace_row"],
                 table__rows_per_unit={"min": 1}, table__columns__spend={"type": "real"}, size={"min": 0, "max": 6})
    d = InputDomain.model_validate(spec)
    pairs = candidate_pairs(d, limit=400)
    assert len(pairs) == 400
    assert all(d.relation(p.x, p.x_prime) in (p.relation, "identical") for p in pairs)
    notes = " | ".join(p.note for p in pairs)
    for expected in ("1000 rows in one group", "one row in each of", "a group nobody else has", "far+",
                     "extreme+", "a duplicate of unit", "rows in reverse order", "unit 1 removed", "replaced by"):
        assert expected in notes, expected
    # a row moved within a unit is also a unit replaced: the relation reports the unit relation first
    assert {p.relation for p in pairs} >= {"add_remove_unit", "replace_unit"}
    rows_only = InputDomain.model_validate(_with(neighbours=["add_remove_row", "replace_row"], size={"min": 0, "max": 20}))
    row_pairs = candidate_pairs(rows_only, limit=300)
    assert {p.relation for p in row_pairs} >= {"add_remove_row", "replace_row"}
    assert all(rows_only.relation(p.x, p.x_prime) == p.relation for p in row_pairs)
    open_keys = InputDomain.model_validate(_with(table__columns__city={"type": "category"}))
    assert any("zz-only-this-unit" in str(p.x_prime) for p in candidate_pairs(open_keys))


def test_the_ladder_is_dense_then_geometric():
    ladder = size_ladder(0, 10_000)
    assert ladder[:13] == list(range(13)) and ladder[-1] == 10_000 and len(ladder) < 45
    assert size_ladder(5, 7) == [5, 6, 7]


@pytest.mark.parametrize("t", [2, 9, 13, 37, 50, 151, 199])
def test_the_bisection_crosses_a_threshold_at_any_size(t):
    """A rule at t is bracketed by a pair of sizes (t − 1, t), for tables and for records, and the
    probe outputs are never stored (they choose, they are never tested)."""
    for domain, fn in ((ISSUE_FORM, mean_zero_below(t)),
                       ({"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 0, "max": 200},
                         "neighbours": ["add_remove"]}, records_mean_zero_below(t))):
        d = InputDomain.model_validate(domain)
        draws = SearchDraws(function_sampler(fn, OutputShape(), seed=t))
        found = asyncio.run(bisect_sizes(draws, d, probe=60, budget=10_000))
        assert draws.store == {}
        assert any(b["sizes"] == [t - 1, t] for b in found.boundaries), found.boundaries
        sizes = {(len(d.table and {r["user"] for r in p.x} or p.x), len(d.table and {r["user"] for r in p.x_prime}
                                                                       or p.x_prime)) for p in found.pairs}
        assert (t - 1, t) in sizes
        assert found.outputs <= 10_000


def _search(slug: str, budget: int, seed: int, t: int = 10, candidates: int = 80):
    e = table_corpus(t)[slug]
    return asyncio.run(run_search(function_sampler(e.sample, e.shape, seed), InputDomain.model_validate(e.domain),
                                  make_claim(e.claim), e.shape,
                                  SearchSettings(budget=budget, seed=seed, max_candidates=candidates)))


def test_a_tabular_violation_is_certified_without_a_pair():
    r = _search("counts-zero-below-t", 150_000, 3, t=17)
    assert r.certified and r.certification["lower_bound"] > 1
    d = InputDomain.model_validate(table_corpus(17)["counts-zero-below-t"].domain)
    assert d.relation(r.finding["x"], r.finding["x_prime"]) == "add_remove_unit"
    assert any(b["sizes"] == [16, 17] for b in r.candidates["size_bisection"]["boundaries"])


def test_a_correct_tabular_pipeline_is_not_certified_on_a_small_budget():
    r = _search("partition-selection", 40_000, 5)
    assert not r.certified
    assert "does not show that the mechanism satisfies its claim" in r.statement
    assert np.isfinite(r.samples["total"]) and r.samples["total"] <= 40_000 + 5_000
