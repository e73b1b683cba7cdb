"""PipelineDP (``pipeline-dp``) as a keyed endpoint: ``DPEngine.aggregate`` on the local backend,
one engine and one ``NaiveBudgetAccountant`` per release, the way a batch job runs it.

The query's bounds become ``AggregateParams`` (``max_partitions_contributed``,
``max_contributions_per_partition``, ``min_value``/``max_value``); keys are public partitions
when the query has them, else PipelineDP's partition selection (truncated geometric by default)
picks them, an (ε, δ) claim. ``params`` passes any other ``AggregateParams`` field as is
(``noise_kind``, ``pre_threshold``, ``contribution_bounds_already_enforced``, ...);
``public_keys_of(rows)`` computes the public partitions from the table handed in (what a team
does when it believes its key set is public; dpwatch tests whether it is).

The claim is the accountant's: ``total_epsilon`` and ``total_delta`` (pure ε when δ = 0).

    pip install 'dpwatch-sdk[pipelinedp]'
"""

from __future__ import annotations

import typing
from collections.abc import Callable

from ..endpoint import Mechanism
from ..mechanism import Claim
from ..protocol import Output
from ._query import GroupBy, keyed_output, rows_of, table_domain

__all__ = ["claim_of", "mechanism"]


def _library() -> typing.Any:
    try:
        import pipeline_dp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the PipelineDP adapter needs pipeline-dp: pip install 'dpwatch-sdk[pipelinedp]'") from exc
    return pipeline_dp


_METRICS = {"count": "COUNT", "unit_count": "PRIVACY_ID_COUNT", "sum": "SUM", "mean": "MEAN"}


def _accountant(pdp: typing.Any, query: GroupBy) -> typing.Any:
    return pdp.NaiveBudgetAccountant(total_epsilon=query.epsilon, total_delta=query.delta)


def claim_of(query: GroupBy) -> Claim:
    """The accountant's total budget: (ε, δ), or ε when δ = 0."""
    accountant = _accountant(_library(), query)
    epsilon, delta = float(accountant.total_epsilon), float(accountant.total_delta)
    return Claim(epsilon=epsilon, delta=delta or None)


def _params(pdp: typing.Any, query: GroupBy, extra: dict[str, typing.Any]) -> typing.Any:
    args: dict[str, typing.Any] = {
        "metrics": [getattr(pdp.Metrics, _METRICS[query.metric])],
        "max_partitions_contributed": query.max_groups,
        "max_contributions_per_partition": query.max_rows_per_group,
    }
    if query.metric in ("sum", "mean"):
        args.update(min_value=query.low, max_value=query.high)
    if isinstance(extra.get("noise_kind"), str):
        extra = {**extra, "noise_kind": getattr(pdp.NoiseKind, extra["noise_kind"].upper())}
    args.update(extra)
    return pdp.AggregateParams(**args)


def mechanism(query: GroupBy, *, params: dict[str, typing.Any] | None = None,
              public_keys_of: Callable[[list[dict[str, typing.Any]]], typing.Iterable[str]] | None = None,
              size: tuple[int, int] = (0, 100), values: str = "open", categories: typing.Sequence[str] | None = None,
              name: str | None = None) -> Mechanism:
    """``query`` released with PipelineDP: a :class:`~dpwatch_sdk.Mechanism` with keyed outputs, the
    accountant's claim and the domain in ``details["domain"]``."""
    pdp = _library()
    extra = dict(params or {})
    _params(pdp, query, extra)  # refuse bad parameters now, not at the first request
    metric = _METRICS[query.metric].lower()
    unit = query.privacy_unit
    extractors = pdp.DataExtractors(
        partition_extractor=lambda r: r[1][query.by],
        privacy_id_extractor=(lambda r: repr(r[1][unit])) if unit is not None else (lambda r: r[0]),
        value_extractor=(lambda r: r[1][query.value]) if query.value is not None else (lambda r: 0))

    def release(indexed: list[tuple[int, dict[str, typing.Any]]], public: list[str] | None) -> dict[str, float]:
        accountant = _accountant(pdp, query)
        engine = pdp.DPEngine(accountant, pdp.LocalBackend())
        # PipelineDP refuses an empty list ("col must be non-empty"); an empty table is a database like any
        # other (public keys get their noisy values, selection releases nothing), so it gets an empty iterator.
        col: typing.Iterable[tuple[int, dict[str, typing.Any]]] = indexed if indexed else iter(())
        result = engine.aggregate(col, _params(pdp, query, extra), extractors, public_partitions=public)
        accountant.compute_budgets()
        return keyed_output((key, getattr(metrics, metric)) for key, metrics in result)

    def sample(database: typing.Any, n: int, rng: typing.Any) -> list[dict[str, float]]:
        rows = rows_of(database, query)
        indexed = list(enumerate(rows))
        public = list(query.public_keys) if query.public_keys is not None else None
        if public_keys_of is not None:
            public = [str(k) for k in public_keys_of(rows)]
        return [release(indexed, public) for _ in range(n)]

    keys = query.public_keys if public_keys_of is None else None
    domain = table_domain(query, size=size, values=values, categories=categories)
    return Mechanism(sample, Output("keyed", keys=keys), claim_of(query), name or f"pipelinedp-{query.metric}-by-{query.by}",
                     {"library": "pipeline-dp", "query": query, "params": extra, "domain": domain})
