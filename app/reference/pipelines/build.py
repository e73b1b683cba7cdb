"""The pipelines of the catalog, built with the SDK's library adapters (run this in the library's
own venv: ``tests/library_venvs.py``). Each returns a :class:`dpwatch_sdk.Mechanism` whose claim
is the entry's and whose outputs are keyed."""

from __future__ import annotations

import math
from typing import Any

from dpwatch_sdk import Claim, Mechanism

from app.reference.pipelines.catalog import Entry, entry

__all__ = ["build", "switching"]

CITIES = ("a", "b", "c", "z")


def _claim(e: Entry) -> Claim:
    return Claim.of(**e.claim)


def _units(rows: list[dict[str, Any]]) -> int:
    return len({repr(r["user"]) for r in rows})


def _wrap(inner: Mechanism, sample: Any, claim: Claim, name: str, output: Any = None) -> Mechanism:
    return Mechanism(sample, output or inner.output, claim, name, {**inner.details, "wrapped": True})


def _pipelinedp(e: Entry) -> Mechanism:
    from dpwatch_sdk.libraries import GroupBy, pipelinedp, table_domain

    public = GroupBy(by="city", public_keys=("a", "b"), epsilon=1.0)
    if e.name == "pipelinedp-count-selection":
        return pipelinedp.mechanism(GroupBy(by="city", epsilon=1.0, delta=1e-5), categories=CITIES, name=e.name)
    if e.name == "pipelinedp-sum-public":
        return pipelinedp.mechanism(GroupBy(by="city", metric="sum", value="spend", low=0.0, high=10.0,
                                            public_keys=("a", "b")), name=e.name)
    if e.name == "pipelinedp-bounds-already-enforced":
        return pipelinedp.mechanism(public, params={"contribution_bounds_already_enforced": True}, name=e.name)
    if e.name == "pipelinedp-rows-as-units":
        m = pipelinedp.mechanism(GroupBy(by="city", public_keys=("a", "b"), privacy_unit=None), name=e.name)
        m.details["domain"] = table_domain(public)  # the claim is about users, whatever the pipeline counts
        return m
    if e.name == "pipelinedp-keys-from-data":
        return pipelinedp.mechanism(public, public_keys_of=lambda rows: sorted({r["city"] for r in rows}),
                                    categories=CITIES, name=e.name)
    if e.name == "pipelinedp-selection-claimed-pure":
        inner = pipelinedp.mechanism(GroupBy(by="city", epsilon=1.0, delta=5e-3), categories=CITIES)
        return Mechanism(inner.sample, inner.output, _claim(e), e.name, inner.details)
    if e.name == "pipelinedp-threshold-at-size":
        inner = pipelinedp.mechanism(public)

        def sample(database: Any, n: int, rng: Any) -> list[dict[str, float]]:
            if not isinstance(database, list) or _units(database) < 10:
                return [{} for _ in range(n)]
            return inner.sample(database, n, rng)

        from dpwatch_sdk import Output

        return _wrap(inner, sample, inner.claim, e.name, Output("keyed"))  # type: ignore[arg-type]
    raise KeyError(e.name)


def _pydp(e: Entry) -> Mechanism:
    from dpwatch_sdk.libraries import GroupBy, pydp, rows_of

    if e.name == "pydp-count-selection":
        return pydp.mechanism(GroupBy(by="city", epsilon=1.0, delta=1e-5), categories=CITIES, name=e.name)
    if e.name == "pydp-bounds-not-enforced":
        return pydp.mechanism(GroupBy(by="city", public_keys=("a", "b")), enforce_bounds=False, name=e.name)
    if e.name == "pydp-suppress-small-cells":
        inner = pydp.mechanism(GroupBy(by="city", public_keys=("a", "b", "c")))
        query = inner.details["query"]

        def sample(database: Any, n: int, rng: Any) -> list[dict[str, float]]:
            rows = rows_of(database, query)
            small = {k for k in query.public_keys if _units([r for r in rows if r["city"] == k]) < 10}
            return [{k: v for k, v in out.items() if k not in small} for out in inner.sample(database, n, rng)]

        return _wrap(inner, sample, inner.claim, e.name)  # type: ignore[arg-type]
    if e.name == "pydp-clip-after-noise":
        import pydp.algorithms.numerical_mechanisms as nm
        from dpwatch_sdk import Output

        query = GroupBy(by="city", metric="sum", value="spend", low=0.0, high=10.0, public_keys=("a", "b"))

        def sample(database: Any, n: int, rng: Any) -> list[dict[str, float]]:
            rows = rows_of(database, query)
            out = []
            for _ in range(n):
                released = {}
                for key in query.public_keys:
                    mine = [r["spend"] for r in rows if r["city"] == key]
                    noisy = nm.LaplaceMechanism(1.0, 10.0).add_noise(float(sum(mine)))
                    released[key] = min(max(noisy, 0.0), 10.0 * len(mine))
                out.append(released)
            return out

        return Mechanism(sample, Output("keyed", keys=("a", "b")), _claim(e), e.name,
                         {"library": "python-dp", "query": query})
    raise KeyError(e.name)


def _opendp(e: Entry) -> Mechanism:
    from dpwatch_sdk.libraries import GroupBy, opendp_context

    if e.name == "opendp-count-selection":
        return opendp_context.mechanism(GroupBy(by="city", epsilon=1.0, delta=1e-6), categories=CITIES, name=e.name)
    if e.name == "opendp-rows-as-units":
        return opendp_context.mechanism(GroupBy(by="city", public_keys=("a", "b")), unit={"contributions": 1},
                                        name=e.name)
    if e.name == "opendp-keys-from-data":
        return opendp_context.mechanism(GroupBy(by="city", public_keys=("a",)),
                                        keys_of=lambda rows: {r["city"] for r in rows}, categories=CITIES, name=e.name)
    raise KeyError(e.name)


def _smartnoise(e: Entry) -> Mechanism:
    from dpwatch_sdk.libraries import GroupBy, smartnoise

    users = GroupBy(by="city", metric="unit_count", epsilon=1.0, delta=1e-3)
    if e.name == "smartnoise-count-users":
        return smartnoise.mechanism(users, categories=CITIES, name=e.name)
    if e.name == "smartnoise-row-privacy":
        return smartnoise.mechanism(GroupBy(by="city", epsilon=1.0, delta=1e-3), table_options={"row_privacy": True},
                                    categories=CITIES, name=e.name)
    if e.name == "smartnoise-no-censor":
        return smartnoise.mechanism(users, table_options={"censor_dims": False}, categories=CITIES, name=e.name)
    raise KeyError(e.name)


def _tumult(e: Entry) -> Mechanism:
    from dpwatch_sdk.libraries import GroupBy, tumult

    public = GroupBy(by="city", public_keys=("a", "b"))
    if e.name == "tumult-count-public":
        return tumult.mechanism(public, name=e.name)
    if e.name == "tumult-count-one-row":
        import tmlt.analytics as tmlt

        return tumult.mechanism(public, protected_change=tmlt.AddOneRow(), name=e.name)
    raise KeyError(e.name)


_BUILDERS = {"pipelinedp": _pipelinedp, "pydp": _pydp, "opendp": _opendp, "smartnoise": _smartnoise, "tumult": _tumult}


def build(name: str) -> Mechanism:
    """The entry's pipeline as a mechanism; its claim is checked against the catalog's (the
    library's own accounting must say what the catalog says, unless the entry's mistake is the
    claim itself)."""
    e = entry(name)
    mechanism = _BUILDERS[e.library](e)
    claim = mechanism.claim
    want = _claim(e)
    if claim is None or not (math.isclose(claim.epsilon or 0, want.epsilon or 0, rel_tol=1e-9)
                             and math.isclose(claim.delta or 0, want.delta or 0, rel_tol=1e-6, abs_tol=1e-15)):
        raise AssertionError(f"{name}: the library claims {claim}, the catalog says {want}")
    return mechanism


def switching(first: str, then: str, at_period: int) -> Mechanism:
    """``first`` until period ``at_period``, then ``then`` (a deployment switched to another version);
    the claim is ``first``'s."""
    a, b = build(first), build(then)

    def sample(database: Any, n: int, rng: Any, period: int = 0) -> Any:
        return (a if period < at_period else b).sample(database, n, rng)

    from dpwatch_sdk import Output

    return Mechanism(sample, Output("keyed"), a.claim, f"{first}->{then}@{at_period}", {"first": first, "then": then})
