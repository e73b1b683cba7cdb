"""Tumult Analytics (``tmlt.analytics``) on Spark as a keyed endpoint: one ``Session`` per
release over the table handed in, ``protected_change=AddRowsWithID(privacy_unit)``, the
contribution bounds as ``enforce(MaxGroupsPerID(...))`` and ``enforce(MaxRowsPerGroupPerID(...))``.

Keys are a public ``KeySet`` when the query has them (a pure-ε count or sum); otherwise the
session first spends half of ε and all of δ on ``get_groups`` (Tumult's partition selection),
then counts over the groups it released. ``protected_change`` replaces the protected change as
is (e.g. ``AddOneRow()``: every row its own unit); ``keys_of(rows)`` computes the public keys
from the table handed in.

The claim is the session's budget, read back from ``session.remaining_privacy_budget`` before
the first query. Spark makes each release slow (seconds): Tumult suits short audits and
monitors with few samples per period, not long searches. Needs Java 17 and ``PYSPARK_PYTHON``
set to the interpreter that has tmlt.analytics.

    pip install 'dpwatch-sdk[tumult]'
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Callable

from ..endpoint import Mechanism
from ..mechanism import Claim
from ..protocol import Output
from ._query import GroupBy, keyed_output, rows_of, table_domain

__all__ = ["claim_of", "mechanism", "spark"]

_SPARK_LOCK = threading.Lock()


def _library() -> typing.Any:
    try:
        import tmlt.analytics as tmlt
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the Tumult adapter needs tmlt.analytics: pip install 'dpwatch-sdk[tumult]'") from exc
    return tmlt


def spark() -> typing.Any:
    """A local Spark session, one core, no UI, quiet (created once per process)."""
    from pyspark.sql import SparkSession

    with _SPARK_LOCK:
        session = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "1").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", "1g").getOrCreate())
        session.sparkContext.setLogLevel("ERROR")
        return session


def _budget(tmlt: typing.Any, epsilon: float, delta: float) -> typing.Any:
    return tmlt.ApproxDPBudget(epsilon, delta) if delta > 0 else tmlt.PureDPBudget(epsilon)


def _session(tmlt: typing.Any, query: GroupBy, frame: typing.Any, protected_change: typing.Any) -> typing.Any:
    change = protected_change if protected_change is not None else tmlt.AddRowsWithID(query.privacy_unit)
    return tmlt.Session.from_dataframe(privacy_budget=_budget(tmlt, query.epsilon, query.delta), source_id="t",
                                       dataframe=frame, protected_change=change)


def _frame(rows: list[dict[str, typing.Any]], query: GroupBy) -> typing.Any:
    from pyspark.sql import types as T

    fields = []
    if query.privacy_unit is not None:
        fields.append(T.StructField(query.privacy_unit, T.StringType(), False))
    fields.append(T.StructField(query.by, T.StringType(), False))
    if query.value is not None:
        fields.append(T.StructField(query.value, T.DoubleType(), False))
    data = [tuple([repr(r[query.privacy_unit])] if query.privacy_unit is not None else []) + (r[query.by],)
            + ((float(r[query.value]),) if query.value is not None else ()) for r in rows]
    return spark().createDataFrame(data, T.StructType(fields))


def _builder(tmlt: typing.Any, query: GroupBy, row_level: bool) -> typing.Any:
    builder = tmlt.QueryBuilder("t")
    if not row_level:
        builder = builder.enforce(tmlt.MaxGroupsPerID(query.by, query.max_groups))
        builder = builder.enforce(tmlt.MaxRowsPerGroupPerID(query.by, query.max_rows_per_group))
    return builder


def _aggregate(grouped: typing.Any, query: GroupBy) -> typing.Any:
    if query.metric == "count":
        return grouped.count(name="v")
    if query.metric == "unit_count":
        return grouped.count_distinct([query.privacy_unit], name="v")
    if query.metric == "sum":
        return grouped.sum(query.value, query.low, query.high, name="v")
    return grouped.average(query.value, query.low, query.high, name="v")


def claim_of(query: GroupBy, protected_change: typing.Any = None) -> Claim:
    """The session's budget as Tumult reports it before any query."""
    tmlt = _library()
    probe = _frame([{c: ("0" if c != query.value else 0.0) for c in query.columns}], query)
    budget = _session(tmlt, query, probe, protected_change).remaining_privacy_budget
    epsilon = float(budget.epsilon)
    delta = float(getattr(budget, "delta", 0.0) or 0.0)
    return Claim(epsilon=epsilon, delta=delta or None)


def mechanism(query: GroupBy, *, protected_change: typing.Any = None,
              keys_of: Callable[[list[dict[str, typing.Any]]], typing.Iterable[str]] | None = None,
              size: tuple[int, int] = (0, 100), values: str = "open", categories: typing.Sequence[str] | None = None,
              name: str | None = None) -> Mechanism:
    """``query`` released with Tumult Analytics: keyed outputs, the session's claim and the domain in
    ``details["domain"]``."""
    tmlt = _library()
    row_level = protected_change is not None and type(protected_change).__name__ != "AddRowsWithID"
    claim = claim_of(query, protected_change)

    def release(frame: typing.Any, keys: list[str] | None) -> dict[str, float]:
        session = _session(tmlt, query, frame, protected_change)
        if keys is None:
            half = query.epsilon / 2
            groups = session.evaluate(_builder(tmlt, query, row_level).get_groups([query.by]),
                                      _budget(tmlt, half, query.delta))
            keyset = tmlt.KeySet.from_dataframe(groups)
            budget = _budget(tmlt, half, 0.0)
        else:
            keyset = tmlt.KeySet.from_dict({query.by: keys})
            budget = _budget(tmlt, query.epsilon, query.delta)
        released = session.evaluate(_aggregate(_builder(tmlt, query, row_level).groupby(keyset), query), budget)
        return keyed_output((r[query.by], r["v"]) for r in released.collect())

    def sample(database: typing.Any, n: int, rng: typing.Any) -> list[dict[str, float]]:
        rows = rows_of(database, query)
        keys = list(query.public_keys) if query.public_keys is not None else None
        if keys_of is not None:
            keys = sorted({str(k) for k in keys_of(rows)})
        if keys == [] or (keys is None and not rows):
            return [{} for _ in range(n)]
        frame = _frame(rows, query).cache()
        try:
            return [release(frame, keys) for _ in range(n)]
        finally:
            frame.unpersist()

    keys = query.public_keys if keys_of is None else None
    integer = query.metric in ("count", "unit_count")
    domain = table_domain(query, size=size, values=values, categories=categories)
    return Mechanism(sample, Output("keyed", keys=keys, values="integer" if integer else "real"), claim,
                     name or f"tumult-{query.metric}-by-{query.by}",
                     {"library": "tmlt.analytics", "query": query, "protected_change": repr(protected_change),
                      "domain": domain})
