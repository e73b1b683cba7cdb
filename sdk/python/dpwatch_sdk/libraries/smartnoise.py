"""SmartNoise SQL (``smartnoise-sql``, import name ``snsql``) as a keyed endpoint: the query as SQL
over a pandas DataFrame (``snsql.from_df``), ``SELECT by, AGG(...) FROM t GROUP BY by``.

The query's bounds become SmartNoise's table metadata: the privacy unit is the ``private_id``
column, ``max_ids`` (rows one unit may contribute in all) is ``max_groups × max_rows_per_group``,
the value column's ``lower``/``upper`` are the clamp. SmartNoise selects keys itself
(``censor_dims``: a key is released when its noisy count of units passes a threshold τ, the δ of
the claim), so the query has no public key set here. ``table_options`` overrides any metadata
field as is (``row_privacy``, ``censor_dims``, ``clamp_counts``, ``max_ids``, ...).

The claim is the library's own: ``reader.get_privacy_cost(sql)`` for one release.

Speed: SmartNoise finds each noise scale by a binary search over OpenDP measurements on every
execution (about 0.16 s per aggregate). The scale is a function of the mechanism's class, ε, δ,
bounds and contribution bound only, so the adapter memoises it per process
(:func:`cache_noise_scales`, on by default; ``cache_scales=False`` leaves the library as is).

    pip install 'dpwatch-sdk[smartnoise]'
"""

from __future__ import annotations

import typing

from ..endpoint import Mechanism
from ..mechanism import Claim
from ..protocol import Output
from ._query import GroupBy, keyed_output, rows_of, table_domain

__all__ = ["claim_of", "mechanism", "sql_of"]

TABLE = "t"


def _library() -> tuple[typing.Any, typing.Any]:
    try:
        import pandas
        import snsql
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the SmartNoise adapter needs smartnoise-sql: pip install 'dpwatch-sdk[smartnoise]'") from exc
    return snsql, pandas


def cache_noise_scales() -> None:
    """Memoise ``_compute_noise_scale`` of SmartNoise's additive mechanisms on the attributes the
    scale depends on (class, ε, δ, lower, upper, max_contrib, bit depth); the scale found is the
    library's own, computed once per key."""
    from snsql.sql._mechanisms import gaussian, laplace

    for cls in (laplace.Laplace, gaussian.Gaussian):
        original = cls._compute_noise_scale
        if getattr(original, "dpwatch_cached", False):
            continue
        cache: dict[tuple[typing.Any, ...], float] = {}

        def compute(self: typing.Any, _original: typing.Any = original, _cache: dict = cache) -> None:
            if self.scale is not None:
                return
            key = (type(self), self.epsilon, self.delta, self.lower, self.upper, self.max_contrib,
                   getattr(self, "bit_depth", None))
            if key not in _cache:
                _original(self)
                _cache[key] = self.scale
            self.scale = _cache[key]

        compute.dpwatch_cached = True  # type: ignore[attr-defined]
        cls._compute_noise_scale = compute


def sql_of(query: GroupBy) -> str:
    """The query as SmartNoise SQL."""
    agg = {"count": "COUNT(*)", "unit_count": f"COUNT(DISTINCT {query.privacy_unit})",
           "sum": f"SUM({query.value})", "mean": f"AVG({query.value})"}[query.metric]
    return f"SELECT {query.by}, {agg} AS v FROM {TABLE} GROUP BY {query.by}"


def _metadata(query: GroupBy, options: dict[str, typing.Any]) -> dict[str, typing.Any]:
    table: dict[str, typing.Any] = {"max_ids": query.max_groups * query.max_rows_per_group,
                                    "row_privacy": query.privacy_unit is None}
    if query.privacy_unit is not None:
        # with row_privacy (every row its own unit) SmartNoise refuses a private_id column
        table[query.privacy_unit] = {"type": "string", "private_id": not options.get("row_privacy", False)}
    table[query.by] = {"type": "string"}
    if query.value is not None:
        table[query.value] = {"type": "float", "lower": query.low, "upper": query.high, "nullable": False}
    table.update(options)
    return {"": {"": {TABLE: table}}}


def _frame(pandas: typing.Any, rows: list[dict[str, typing.Any]], query: GroupBy) -> typing.Any:
    data: dict[str, list[typing.Any]] = {}
    if query.privacy_unit is not None:
        data[query.privacy_unit] = [repr(r[query.privacy_unit]) for r in rows]
    data[query.by] = [r[query.by] for r in rows]
    if query.value is not None:
        data[query.value] = [float(r[query.value]) for r in rows]
    return pandas.DataFrame(data, columns=list(data))


def _reader(query: GroupBy, rows: list[dict[str, typing.Any]], options: dict[str, typing.Any]) -> typing.Any:
    snsql, pandas = _library()
    privacy = snsql.Privacy(epsilon=query.epsilon, delta=query.delta)
    return snsql.from_df(_frame(pandas, rows, query), privacy=privacy, metadata=_metadata(query, options))


def claim_of(query: GroupBy, table_options: dict[str, typing.Any] | None = None) -> Claim:
    """``get_privacy_cost`` of one release of the query's SQL."""
    if query.public_keys is not None:
        raise ValueError("SmartNoise SQL selects keys itself (censor_dims); give public_keys=None")
    probe = [{c: ("0" if c != query.value else 0.0) for c in query.columns}]
    epsilon, delta = _reader(query, probe, dict(table_options or {})).get_privacy_cost(sql_of(query))
    return Claim(epsilon=float(epsilon), delta=float(delta) or None)


def mechanism(query: GroupBy, *, table_options: dict[str, typing.Any] | None = None, size: tuple[int, int] = (0, 100),
              values: str = "open", categories: typing.Sequence[str] | None = None, name: str | None = None,
              cache_scales: bool = True) -> Mechanism:
    """``query`` released with SmartNoise SQL: keyed outputs, ``get_privacy_cost``'s claim, and the
    domain in ``details["domain"]``."""
    if cache_scales:
        _library()
        cache_noise_scales()
    options = dict(table_options or {})
    claim = claim_of(query, options)
    sql = sql_of(query)

    def sample(database: typing.Any, n: int, rng: typing.Any) -> list[dict[str, float]]:
        rows = rows_of(database, query)
        if not rows:  # SmartNoise cannot read an empty frame's types; no key can be released
            return [{} for _ in range(n)]
        reader = _reader(query, rows, options)
        out = []
        for _ in range(n):
            result = reader.execute(sql)
            out.append(keyed_output((row[0], row[1]) for row in result[1:]))
        return out

    domain = table_domain(query, size=size, values=values, categories=categories)
    return Mechanism(sample, Output("keyed"), claim, name or f"smartnoise-{query.metric}-by-{query.by}",
                     {"library": "smartnoise-sql", "query": query, "sql": sql, "table_options": options,
                      "domain": domain})
