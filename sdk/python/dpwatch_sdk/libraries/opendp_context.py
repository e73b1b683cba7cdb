"""OpenDP's ``Context`` over a polars LazyFrame as a keyed endpoint:
``context.query().truncate_per_group(k).group_by(by).agg(...)``, released through the query's
resolved measurement.

The privacy unit is ``dp.unit_of(contributions=1, identifier=privacy_unit)`` and each unit's
rows are truncated to ``max_groups × max_rows_per_group`` (``truncate_per_group`` without ``by``;
``truncate_num_groups`` fails on polars 1.36 in OpenDP 0.16, "multiple fields with name ...").
Keys are public when the query has them (``.with_keys(...)``, a pure-ε release with Laplace
noise), else OpenDP selects them with a noisy threshold, an (ε, δ) claim. ``unit`` replaces the
``unit_of`` arguments as is (e.g. ``{"contributions": 1}``: every row its own unit);
``keys_of(rows)`` computes the public keys from the table handed in.

The claim is the library's privacy map: the resolved measurement's ``map(context.d_in)``
(:func:`dpwatch_sdk.adapters.opendp_claim`).

    pip install 'dpwatch-sdk[opendp]'
"""

from __future__ import annotations

import typing
from collections.abc import Callable

from ..adapters import opendp_claim
from ..endpoint import Mechanism
from ..mechanism import Claim
from ..protocol import Output
from ._query import GroupBy, keyed_output, rows_of, table_domain

__all__ = ["claim_of", "mechanism"]

#: OpenDP needs a public bound on the rows of a group for sums and means; this one is loose.
MAX_LENGTH = 10_000_000


def _library() -> tuple[typing.Any, typing.Any]:
    try:
        import opendp.prelude as dp
        import polars as pl
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the OpenDP adapter needs opendp with polars: pip install 'dpwatch-sdk[opendp]'") from exc
    dp.enable_features("contrib")
    return dp, pl


def _frame(pl: typing.Any, rows: list[dict[str, typing.Any]], query: GroupBy) -> typing.Any:
    data: dict[str, typing.Any] = {}
    if query.privacy_unit is not None:
        data[query.privacy_unit] = pl.Series(query.privacy_unit, [repr(r[query.privacy_unit]) for r in rows], dtype=pl.String)
    data[query.by] = pl.Series(query.by, [r[query.by] for r in rows], dtype=pl.String)
    if query.value is not None:
        data[query.value] = pl.Series(query.value, [float(r[query.value]) for r in rows], dtype=pl.Float64)
    return pl.DataFrame(data).lazy()


def _measurement(query: GroupBy, frame: typing.Any, unit: dict[str, typing.Any] | None,
                 keys: list[str] | None) -> tuple[typing.Any, typing.Any]:
    dp, pl = _library()
    unit_args = dict(unit) if unit is not None else {"contributions": 1, "identifier": query.privacy_unit}
    if unit_args.get("identifier") is None:
        unit_args.pop("identifier", None)
    margins = [dp.polars.Margin(by=[query.by], max_length=MAX_LENGTH)] if query.metric in ("sum", "mean") else []
    loss = dp.loss_of(epsilon=query.epsilon, delta=query.delta) if query.delta > 0 else dp.loss_of(epsilon=query.epsilon)
    context = dp.Context.compositor(data=frame, privacy_unit=dp.unit_of(**unit_args), privacy_loss=loss,
                                    split_evenly_over=1, margins=margins)
    q = context.query()
    if "identifier" in unit_args:
        q = q.truncate_per_group(query.max_groups * query.max_rows_per_group)
    if query.metric == "count":
        agg = dp.len(signed=False)
    elif query.metric == "sum":
        agg = pl.col(query.value).fill_null(0.0).dp.sum((float(query.low), float(query.high)))
    elif query.metric == "mean":
        agg = pl.col(query.value).fill_null(0.0).dp.mean((float(query.low), float(query.high)))
    else:
        raise ValueError("the OpenDP adapter serves count, sum and mean (a distinct-unit count has no "
                         "group-by form in OpenDP's Context)")
    q = q.group_by(query.by).agg(agg.alias("v"))
    if keys is not None:
        q = q.with_keys(pl.LazyFrame({query.by: keys}, schema={query.by: pl.String}))
    return q.resolve(), context


def claim_of(query: GroupBy, unit: dict[str, typing.Any] | None = None) -> Claim:
    """The resolved measurement's privacy map at the context's ``d_in``."""
    _, pl = _library()
    probe = [{c: ("0" if c != query.value else 0.0) for c in query.columns}]
    keys = list(query.public_keys) if query.public_keys is not None else None
    measurement, context = _measurement(query, _frame(pl, probe, query), unit, keys)
    return opendp_claim(measurement, context.d_in)


def mechanism(query: GroupBy, *, unit: dict[str, typing.Any] | None = None,
              keys_of: Callable[[list[dict[str, typing.Any]]], typing.Iterable[str]] | None = None,
              claim: Claim | None = None, size: tuple[int, int] = (0, 100), values: str = "open",
              categories: typing.Sequence[str] | None = None, name: str | None = None) -> Mechanism:
    """``query`` released through OpenDP's Context: keyed outputs, the privacy map's claim (or
    ``claim``, when the keys come from ``keys_of`` and the probe cannot say) and the domain in
    ``details["domain"]``."""
    _, pl = _library()
    read = claim_of(query if keys_of is None or query.public_keys is not None else
                    GroupBy(**{**query.__dict__, "public_keys": ("0",), "delta": 0.0}), unit)

    def sample(database: typing.Any, n: int, rng: typing.Any) -> list[dict[str, float]]:
        rows = rows_of(database, query)
        keys = list(query.public_keys) if query.public_keys is not None else None
        if keys_of is not None:
            keys = sorted({str(k) for k in keys_of(rows)})
        frame = _frame(pl, rows, query)
        if keys == []:
            return [{} for _ in range(n)]
        measurement, _ = _measurement(query, frame, unit, keys)
        out = []
        for _ in range(n):
            released = measurement(frame).collect()
            out.append(keyed_output(zip(released[query.by].to_list(), released["v"].to_list(), strict=True)))
        return out

    keys = query.public_keys if keys_of is None else None
    integer = query.metric == "count"
    domain = table_domain(query, size=size, values=values, categories=categories)
    return Mechanism(sample, Output("keyed", keys=keys, values="integer" if integer else "real"), claim or read,
                     name or f"opendp-{query.metric}-by-{query.by}",
                     {"library": "opendp", "query": query, "unit": unit, "domain": domain})
