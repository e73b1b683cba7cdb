"""OpenDP's ``Context`` over a polars LazyFrame as a keyed endpoint:
``context.query().truncate_per_group(k).group_by(by).agg(...)``, released through the query's
resolved measurement.

The privacy unit is ``dp.unit_of(contributions=1, identifier=privacy_unit)`` and each unit's
rows are truncated to ``max_groups × max_rows_per_group`` (``truncate_per_group`` without ``by``;
``truncate_num_groups`` fails on polars 1.36 in OpenDP 0.16, "multiple fields with name ...").
Keys are public when the query has them (``.with_keys(...)``, a pure-ε release with Laplace
noise), else OpenDP selects them with a noisy threshold, an (ε, δ) claim; for a sum or mean the
threshold is on a noisy count released beside it (``dp.len()``, which OpenDP requires; it is in the
claim, not in the output), with a bound on the number of groups (``margin=``). ``unit`` replaces the
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
#: When OpenDP selects the keys of a sum or mean it also needs a bound on the number of groups, and
#: the noise of a float sum grows with max_length × max_groups (at 10⁷ × 10⁷ its standard deviation
#: was 1.3 × 10⁷ on a sum clamped to [0, 10]; at 10⁵ × 10³, 19): the defaults there are the most rows
#: a searched table holds (docs/search.md §8.1) and 1 000 groups; ``margin=`` sets them.
SELECTED_MARGIN = {"max_length": 100_000, "max_groups": 1_000}
#: The companion count a sum or mean needs for OpenDP's key selection (not part of the output).
_COUNT = "__dpwatch_count"


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
                 keys: list[str] | None, margin: dict[str, typing.Any] | None = None) -> tuple[typing.Any, typing.Any]:
    dp, pl = _library()
    unit_args = dict(unit) if unit is not None else {"contributions": 1, "identifier": query.privacy_unit}
    if unit_args.get("identifier") is None:
        unit_args.pop("identifier", None)
    selected = keys is None
    numeric = query.metric in ("sum", "mean")
    # A sum or mean needs public bounds on a group's rows, and, when OpenDP selects the keys, on the
    # number of groups too ("max_groups must be known ..."); both are loose here.
    bounds: dict[str, typing.Any] = dict(SELECTED_MARGIN) if selected else {"max_length": MAX_LENGTH}
    bounds.update(margin or {})
    margins = [dp.polars.Margin(by=[query.by], **bounds)] if numeric else []
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
    aggs = [agg.alias("v")]
    if selected and numeric:
        # OpenDP selects keys on a noisy count of the group ("stable key release requires a `dp.len()`
        # expression"): the count is released with the sum and is part of the claim; the output keeps "v".
        aggs.append(dp.len(signed=False).alias(_COUNT))
    q = q.group_by(query.by).agg(*aggs)
    if keys is not None:
        q = q.with_keys(pl.LazyFrame({query.by: keys}, schema={query.by: pl.String}))
    return q.resolve(), context


def claim_of(query: GroupBy, unit: dict[str, typing.Any] | None = None,
             margin: dict[str, typing.Any] | None = None) -> Claim:
    """The resolved measurement's privacy map at the context's ``d_in``."""
    _, pl = _library()
    probe = [{c: ("0" if c != query.value else 0.0) for c in query.columns}]
    keys = list(query.public_keys) if query.public_keys is not None else None
    measurement, context = _measurement(query, _frame(pl, probe, query), unit, keys, margin)
    return opendp_claim(measurement, context.d_in)


def mechanism(query: GroupBy, *, unit: dict[str, typing.Any] | None = None,
              keys_of: Callable[[list[dict[str, typing.Any]]], typing.Iterable[str]] | None = None,
              claim: Claim | None = None, size: tuple[int, int] = (0, 100), values: str = "open",
              categories: typing.Sequence[str] | None = None, name: str | None = None,
              margin: dict[str, typing.Any] | None = None) -> Mechanism:
    """``query`` released through OpenDP's Context: keyed outputs, the privacy map's claim (or
    ``claim``, when the keys come from ``keys_of`` and the probe cannot say) and the domain in
    ``details["domain"]``. ``margin``: the public bounds of a sum's or mean's groups
    (``max_length``, ``max_groups``: ``dp.polars.Margin``'s arguments), over the defaults."""
    _, pl = _library()
    read = claim_of(query if keys_of is None or query.public_keys is not None else
                    GroupBy(**{**query.__dict__, "public_keys": ("0",), "delta": 0.0}), unit, margin)

    def sample(database: typing.Any, n: int, rng: typing.Any) -> list[dict[str, float]]:
        rows = rows_of(database, query)
        keys = list(query.public_keys) if query.public_keys is not None else None
        if keys_of is not None:
            keys = sorted({str(k) for k in keys_of(rows)})
        frame = _frame(pl, rows, query)
        if keys == []:
            return [{} for _ in range(n)]
        measurement, _ = _measurement(query, frame, unit, keys, margin)
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
                     {"library": "opendp", "query": query, "unit": unit, "margin": margin, "domain": domain})
