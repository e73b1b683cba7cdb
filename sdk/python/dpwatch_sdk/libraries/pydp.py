"""Google's differential privacy library through ``python-dp`` (import name ``pydp``) as a keyed
endpoint: a group-by count, distinct-unit count, sum or mean, with partition selection
(``pydp.algorithms.partition_selection``) when the keys are not public.

python-dp is a library of building blocks: it noises one aggregate (``Count``, ``BoundedSum``,
``BoundedMean``) given its sensitivities (``l0_sensitivity``: groups per unit,
``linf_sensitivity``: rows per unit and group) but leaves contribution bounding to the caller.
This adapter bounds contributions as the library's documentation asks
(:func:`~dpwatch_sdk.libraries._query.bound_contributions`) unless ``enforce_bounds=False``, the
mistake of declaring sensitivities without enforcing them.

The budget: with partition selection, ε is split evenly between the selection and the
aggregate, δ goes to the selection. The claim is read back from the library's objects: the sum of
their ``epsilon`` and the selection's ``delta``.

    pip install 'dpwatch-sdk[pydp]'
"""

from __future__ import annotations

import typing

from ..endpoint import Mechanism
from ..mechanism import Claim
from ..protocol import Output
from ._query import GroupBy, bound_contributions, keyed_output, rows_of, table_domain

__all__ = ["mechanism"]


def _library() -> typing.Any:
    try:
        import pydp.algorithms.laplacian as laplacian
        import pydp.algorithms.partition_selection as selection
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the python-dp adapter needs python-dp: pip install 'dpwatch-sdk[pydp]'") from exc
    return laplacian, selection


def _budget(query: GroupBy) -> tuple[float, float]:
    """(ε of the aggregate, ε of the selection)."""
    if query.public_keys is not None:
        return query.epsilon, 0.0
    return query.epsilon / 2, query.epsilon / 2


def _aggregate(laplacian: typing.Any, query: GroupBy, epsilon: float) -> typing.Any:
    if query.metric == "count":
        return laplacian.Count(epsilon=epsilon, l0_sensitivity=query.max_groups,
                               linf_sensitivity=query.max_rows_per_group, dtype="int")
    if query.metric == "unit_count":
        return laplacian.Count(epsilon=epsilon, l0_sensitivity=query.max_groups, linf_sensitivity=1, dtype="int")
    cls = laplacian.BoundedSum if query.metric == "sum" else laplacian.BoundedMean
    return cls(epsilon=epsilon, lower_bound=query.low, upper_bound=query.high, l0_sensitivity=query.max_groups,
               linf_sensitivity=query.max_rows_per_group, dtype="float")


def _selection(selection: typing.Any, query: GroupBy, epsilon: float) -> typing.Any:
    return selection.create_partition_strategy("truncated_geometric", epsilon, query.delta, query.max_groups)


def claim_of(query: GroupBy) -> Claim:
    """The claim the library's own objects make for one release of ``query``."""
    laplacian, selection = _library()
    eps_agg, eps_sel = _budget(query)
    epsilon = float(_aggregate(laplacian, query, eps_agg).epsilon)
    delta = 0.0
    if query.public_keys is None:
        strategy = _selection(selection, query, eps_sel)
        epsilon += float(strategy.epsilon)
        delta = float(strategy.delta)
    return Claim(epsilon=epsilon, delta=delta or None)


def mechanism(query: GroupBy, *, enforce_bounds: bool = True, size: tuple[int, int] = (0, 100), values: str = "open",
              categories: typing.Sequence[str] | None = None, name: str | None = None) -> Mechanism:
    """``query`` released with python-dp: a :class:`~dpwatch_sdk.Mechanism` with keyed outputs,
    its claim (:func:`claim_of`) and its domain in ``details["domain"]``."""
    laplacian, selection = _library()
    eps_agg, eps_sel = _budget(query)

    def release(rows: list[dict[str, typing.Any]], rng: typing.Any) -> dict[str, float]:
        kept = bound_contributions(rows, query, rng) if enforce_bounds else rows
        groups: dict[str, list[dict[str, typing.Any]]] = {}
        for row in kept:
            groups.setdefault(row[query.by], []).append(row)
        keys = query.public_keys if query.public_keys is not None else sorted(groups)
        out = []
        for key in keys:
            mine = groups.get(key, [])
            if query.public_keys is None:
                units = len({repr(r[query.privacy_unit]) for r in mine}) if query.privacy_unit else len(mine)
                if not _selection(selection, query, eps_sel).should_keep(units):
                    continue
            algorithm = _aggregate(laplacian, query, eps_agg)
            if query.metric == "count":
                entries: list[typing.Any] = [1] * len(mine)
            elif query.metric == "unit_count":
                entries = [1] * len({repr(r[query.privacy_unit]) for r in mine})
            else:
                entries = [r[query.value] for r in mine]
            out.append((key, algorithm.quick_result(entries)))
        return keyed_output(out)

    def sample(database: typing.Any, n: int, rng: typing.Any) -> list[dict[str, float]]:
        rows = rows_of(database, query)
        return [release(rows, rng) for _ in range(n)]

    integer = query.metric in ("count", "unit_count")
    output = Output("keyed", keys=query.public_keys, values="integer" if integer else "real")
    domain = table_domain(query, size=size, values=values, categories=categories)
    return Mechanism(sample, output, claim_of(query), name or f"pydp-{query.metric}-by-{query.by}",
                     {"library": "python-dp", "query": query, "enforce_bounds": enforce_bounds, "domain": domain})
