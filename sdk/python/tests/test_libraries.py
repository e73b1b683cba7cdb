"""The library adapters' shared part (dpwatch_sdk.libraries), without any DP library: the query's
checks, the table the adapters read, contribution bounding, the keyed output and the tabular
domain in the issue's JSON form. The adapters themselves run against the real libraries in the
main suite (tests/test_library_adapters.py, one venv per library)."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest
from dpwatch_sdk.libraries import GroupBy, bound_contributions, keyed_output, rows_of, table_domain


def test_importing_the_package_imports_no_library():
    """In a fresh interpreter (other tests of this suite import OpenDP)."""
    code = ("import sys, dpwatch_sdk.libraries; print([m for m in ('pipeline_dp', 'pydp', 'opendp', 'snsql', 'tmlt', "
            "'pyspark', 'polars', 'pandas', 'numpy') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("kwargs, field", [
    ({"metric": "median"}, "metric"),
    ({"metric": "sum", "value": "spend"}, "value, low and high"),
    ({"metric": "sum", "value": "spend", "low": 5, "high": 1}, "low, high"),
    ({"metric": "unit_count", "privacy_unit": None}, "privacy_unit"),
    ({"max_groups": 0}, "max_groups"),
    ({"epsilon": 0}, "epsilon"),
    ({"delta": 0.0}, "partition selection"),
    ({"public_keys": ("a", "a"), "delta": 0.0}, "public_keys"),
])
def test_a_bad_query_is_refused_with_its_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        GroupBy(**{"by": "city", "delta": 1e-5, **kwargs})


def test_rows_are_checked_and_keys_become_strings():
    q = GroupBy(by="city", metric="sum", value="spend", low=0, high=10, public_keys=(1, 2))
    assert q.public_keys == ("1", "2")
    rows = rows_of([{"user": 1, "city": 1, "spend": 3}], q)
    assert rows == [{"user": 1, "city": "1", "spend": 3.0}]
    with pytest.raises(ValueError, match="JSON list of row objects"):
        rows_of({"user": 1}, q)
    with pytest.raises(ValueError, match=r"row 0: missing column\(s\) \['spend'\]"):
        rows_of([{"user": 1, "city": "a"}], q)
    with pytest.raises(ValueError, match="row 1: spend must be a finite number"):
        rows_of([{"user": 1, "city": "a", "spend": 1}, {"user": 2, "city": "a", "spend": math.inf}], q)


def test_contribution_bounding_keeps_at_most_the_bounds_per_unit():
    q = GroupBy(by="city", max_groups=2, max_rows_per_group=3, delta=1e-5)
    rows = rows_of([{"user": 7, "city": c} for c in "abcd" for _ in range(5)] + [{"user": 8, "city": "a"}], q)
    for seed in range(20):
        kept = bound_contributions(rows, q, random.Random(seed))
        mine = [r for r in kept if r["user"] == 7]
        assert len({r["city"] for r in mine}) == 2
        assert all(sum(r["city"] == c for r in mine) == 3 for c in {r["city"] for r in mine})
        assert [r for r in kept if r["user"] == 8] == [{"user": 8, "city": "a"}]
    row_level = GroupBy(by="city", privacy_unit=None, delta=1e-5)
    assert bound_contributions(rows, row_level, random.Random(0)) == rows


def test_a_keyed_output_drops_what_was_not_released():
    assert keyed_output([("a", 1), (2, 2.5), ("c", None), ("d", float("nan"))]) == {"a": 1.0, "2": 2.5}


def test_a_keyed_output_drops_a_value_the_library_could_not_compute():
    """OpenDP's mean is a noisy sum over a noisy count: over a group with no rows (a public key nobody
    holds, an empty table) the count can come out 0 and the mean ±inf. That is no number to release
    (the protocol refuses it, and the endpoint answered 500 for every request on such a table); the
    key is left out, which is post-processing of the library's output."""
    inf = float("inf")
    assert keyed_output([("20", inf), ("30", -inf), ("40", 3.5)]) == {"40": 3.5}


def test_the_domain_has_the_tabular_form_and_leaves_open_what_the_library_enforces():
    q = GroupBy(by="city", metric="sum", value="spend", low=0, high=100, public_keys=("a", "b"))
    assert table_domain(q) == {
        "table": {"columns": {"user": {"type": "id"}, "city": {"type": "category", "values": ["a", "b"]},
                              "spend": {"type": "real"}},
                  "privacy_unit": "user", "rows_per_unit": {"min": 1}},
        "size": {"min": 0, "max": 100}, "neighbours": ["add_remove_unit"]}
    declared = table_domain(q, values="declared", size=(1, 50))
    assert declared["table"]["columns"]["spend"] == {"type": "real", "low": 0, "high": 100}
    assert declared["size"] == {"min": 1, "max": 50}
    selected = table_domain(GroupBy(by="city", delta=1e-5))
    assert selected["table"]["columns"]["city"] == {"type": "category"}  # open keys
    with pytest.raises(ValueError, match="values"):
        table_domain(q, values="clamped")
    with pytest.raises(ValueError, match="size"):
        table_domain(q, size=(5, 1))
