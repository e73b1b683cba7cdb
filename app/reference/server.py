"""The reference mechanisms served as sampling endpoints (docs/protocol.md).

Routes (all ``POST``):

- ``/reference/<slug>`` for every mechanism of ``REFERENCE_MECHANISMS`` at ε = ``epsilon``;
- ``/reference/scenarios/<key>`` for the paper's scenarios (a)–(h): the ``before`` mechanism
  until the monitor's period ``change_period`` (from the request's ``period`` field), then the
  ``after`` one, which models a deployment change at a known period;
- ``/reference/corpus/<slug>`` for every mechanism of the testers' corpus
  (app.reference.corpus) in its output shape, at ε = ``corpus_epsilon`` (0.1, the published
  evaluations' setting);
- ``/reference/search/<slug>`` for the search's corpus (app.reference.search_corpus): mechanisms
  whose bugs show only on some inputs of their declared domain, and their correct counterparts;
- ``/reference/tables/<slug>`` for the tabular corpus (app.reference.table_corpus): pipelines over
  tables of people's rows (threshold rules at t = 10), correct and misconfigured;
- ``/reference/keyed/<name>`` for the keyed mechanisms (app.reference.keyed) at ε = ``epsilon``:
  ``partition-counts`` (δ = 10⁻³), ``laplace-histogram`` (keys a–d) and ``leaky-histogram`` (the
  keys of the data, no threshold: ε = ∞).

Used by ``dpwatch serve-reference``, mounted under ``/reference`` by ``dpwatch demo``, and by the
end-to-end tests.

Every route is a :class:`dpwatch_sdk.Endpoint`: the SDK owns the endpoint's side of the protocol
(signature, limits, request validation, negotiation, encoding). :func:`endpoint_router` and
:func:`endpoint_app` serve any ``f(database, n, rng)`` the same way, its output declared as an
``output_kind``, an :class:`~app.stats.shapes.OutputShape` or an SDK :class:`~dpwatch_sdk.Output`
(:func:`sdk_output` translates); a sampler may return the service's canonical forms
(:class:`ListSamples`, :class:`KeyedSamples`), which are handed to the SDK as plain rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from dpwatch_sdk import Endpoint, Output
from dpwatch_sdk.mechanism import takes_period
from dpwatch_sdk.protocol import encode_answer
from fastapi import APIRouter, FastAPI

from app.reference.corpus import CORPUS_EPSILON, corpus
from app.reference.mechanisms import REFERENCE_MECHANISMS, get_mechanism
from app.reference.scenarios import SCENARIOS, Scenario
from app.sampling.protocol import OUTPUT_KINDS, OutputKind
from app.stats.keyed import KeyedSamples
from app.stats.shapes import ListSamples, OutputShape

#: How a route's outputs are declared: an output kind, a shape, or the SDK's Output.
OutputSpec = OutputKind | OutputShape | Output
Routes = Mapping[str, tuple[Callable[..., Any], OutputSpec]]

#: The period at which the scenario endpoints switch, unless told otherwise.
DEFAULT_CHANGE_PERIOD = 20


def scenario_output_kind(scenario: Scenario) -> OutputKind:
    """The endpoint's output kind: (c) switches from an index to a value, so it is served as reals."""
    kinds = {scenario.before_mechanism().output_kind, scenario.after_mechanism().output_kind}
    if kinds == {"vector"}:
        return "vector"
    if kinds == {"discrete"}:
        return "discrete"
    return "real"


def scenario_dim(scenario: Scenario) -> int | None:
    """Vector length of a scenario's outputs (SVT answers: one entry per query)."""
    return len(scenario.x) if scenario_output_kind(scenario) == "vector" else None


def _scenario_function(scenario: Scenario, change_period: int) -> Any:
    switching = scenario.switching(change_period)
    kind = scenario_output_kind(scenario)

    def sample(database: Any, n: int, rng: np.random.Generator, period: int = 0) -> np.ndarray:
        out = switching.sample(database, n, rng, period=period)
        return out.astype(np.float64) if kind == "real" else out

    return sample


def _mechanism_function(slug: str, epsilon: float) -> tuple[Any, OutputKind]:
    mech = get_mechanism(slug, epsilon=epsilon)
    return mech.sample, mech.output_kind


def reference_routes(epsilon: float = 1.0, change_period: int = DEFAULT_CHANGE_PERIOD,
                     corpus_epsilon: float = CORPUS_EPSILON) -> dict[str, tuple[Any, Any]]:
    routes: dict[str, tuple[Any, Any]] = {}
    for slug in REFERENCE_MECHANISMS:
        routes[f"/{slug}"] = _mechanism_function(slug, epsilon)
    for key, scenario in SCENARIOS.items():
        routes[f"/scenarios/{key}"] = (_scenario_function(scenario, change_period), scenario_output_kind(scenario))
    for slug, mech in corpus(corpus_epsilon).items():
        routes[f"/corpus/{slug}"] = (mech.sample, mech.shape)
    routes.update(gaussian_routes(change_period))
    from app.reference.search_corpus import search_corpus

    for slug, entry in search_corpus().items():
        routes[f"/search/{slug}"] = (entry.sample, entry.shape)
    from app.reference.table_corpus import table_corpus

    for slug, tentry in table_corpus().items():
        routes[f"/tables/{slug}"] = (tentry.sample, tentry.shape)
    from app.reference.keyed import LaplaceHistogram, LeakyHistogram, PartitionCounts

    for keyed in (PartitionCounts(epsilon=epsilon, delta=1e-3),
                  LaplaceHistogram(epsilon=epsilon, keys=("a", "b", "c", "d")), LeakyHistogram(epsilon=epsilon)):
        routes[f"/keyed/{keyed.name}"] = (keyed.sample, OutputShape(container="keyed"))
    return routes


def gaussian_routes(change_period: int = DEFAULT_CHANGE_PERIOD) -> dict[str, tuple[Any, OutputKind]]:
    """``/gaussian/<slug>`` for the claims' reference mechanisms (app/reference/gaussian.py, default
    parameters) and ``/scenarios/<key>`` for the claim scenarios (i)–(l)."""
    from app.reference.gaussian import CLAIM_SCENARIOS, GAUSSIAN_MECHANISMS, get_gaussian_mechanism

    routes: dict[str, tuple[Any, OutputKind]] = {}
    for slug in GAUSSIAN_MECHANISMS:
        mech = get_gaussian_mechanism(slug)
        routes[f"/gaussian/{slug}"] = (mech.sample, mech.output_kind)
    for key, scenario in CLAIM_SCENARIOS.items():
        before, after = scenario.before_mechanism(), scenario.after_mechanism()

        def sample(database: Any, n: int, rng: np.random.Generator, period: int = 0, _b=before, _a=after) -> np.ndarray:
            return (_b if period < change_period else _a).sample(database, n, rng)

        routes[f"/scenarios/{key}"] = (sample, scenario.output_kind)
    return routes


# --------------------------------------------------------------------------- serving through the SDK


def sdk_output(spec: OutputSpec) -> Output:
    """The SDK's :class:`~dpwatch_sdk.Output` for an output kind or an :class:`OutputShape`.

    An output kind reads as :meth:`OutputShape.from_output_kind` does, but for ``vector``, whose
    entries are numbers (declare a nullable shape for nulls); keyed entries may be null. The SDK
    checks what it encodes (count, types, finiteness, integrality, a vector's length, nulls, keys
    and ``max_keys``); a shape's ``bounds``, ``labels``, ``lattice`` and ``max_length`` are
    the service's to check on the answers it reads (docs/protocol.md §3.1), not the endpoint's."""
    if isinstance(spec, Output):
        return spec
    if isinstance(spec, str):
        if spec not in OUTPUT_KINDS:
            raise ValueError(f"output_kind must be one of {OUTPUT_KINDS} or an OutputShape, got {spec!r}")
        if spec == "vector":  # of any length, every entry a number (a declared shape may say more)
            return Output("vector")
        spec = OutputShape.from_output_kind(spec)
    if spec.container == "keyed":
        return Output("keyed", nullable=spec.nullable, keys=None if spec.keys is None else tuple(spec.keys),
                      max_keys=spec.max_keys, values="integer" if spec.values == "integer" else "real")
    if spec.container in ("vector", "list"):
        return Output(spec.container, length=spec.length, nullable=spec.nullable)
    return Output(spec.values, nullable=spec.nullable)


def _plain(outputs: Any) -> Any:
    """The service's canonical outputs as rows the SDK encodes: a :class:`KeyedSamples` as dicts, a
    :class:`ListSamples` as lists cut at their lengths (NaN, a null entry, as it is); anything else
    as it is."""
    if isinstance(outputs, KeyedSamples):
        return outputs.tolist()
    if isinstance(outputs, ListSamples):
        return [outputs.values[i, : int(outputs.lengths[i])].tolist() for i in range(len(outputs))]
    return outputs


def sdk_answer(outputs: Any, output: OutputSpec, *, binary: bool = False) -> tuple[bytes, str, dict[str, str]]:
    """The answer body, media type and extra headers the SDK endpoint sends for ``outputs`` (the
    service's canonical outputs, or what a sampler returns) of ``output``, in binary when asked
    and the output allows it: what the sampling client reads (tests and benches of the parser)."""
    return encode_answer(_plain(outputs), len(outputs), sdk_output(output), binary)


def _sampler(f: Callable[..., Any]) -> Callable[..., Any]:
    if not callable(f):
        raise TypeError(f"the mechanism {f!r} is not callable")
    with_period = takes_period(f)

    def sample(database: Any, n: int, rng: np.random.Generator, period: int = 0) -> Any:
        return _plain(f(database, n, rng, period=period) if with_period else f(database, n, rng))

    sample.__name__ = getattr(f, "__name__", "sample")
    return sample


def endpoint_router(routes: Routes, *, secret: str | Sequence[str] | None, seed: int | None = None,
                    **options: Any) -> APIRouter:
    """One ``POST`` route per ``path -> (f, output)``, each a :class:`dpwatch_sdk.Endpoint` (``options``:
    its ``max_n``, ``max_body_bytes``, ``max_concurrency``, …). Several secrets: a request signed with
    any of them is accepted (a secret being rotated); None switches the check off (local demos only).
    ``seed`` makes every route's generators reproducible, each route drawing its own stream."""
    seeds: list[int | None] = [None] * len(routes)
    if seed is not None:
        seeds = [int(child.generate_state(1)[0]) for child in np.random.SeedSequence(seed).spawn(len(routes))]
    router = APIRouter()
    for (path, (f, output)), route_seed in zip(routes.items(), seeds, strict=True):
        if not path.startswith("/"):
            raise ValueError(f"route paths must start with '/', got {path!r}")
        endpoint = Endpoint(_sampler(f), secret=secret, output=sdk_output(output), seed=route_seed, **options)
        router.add_route(path, endpoint.asgi, methods=["POST"], include_in_schema=False)
    return router


def endpoint_app(routes: Routes, *, secret: str | Sequence[str] | None, seed: int | None = None,
                 **options: Any) -> FastAPI:
    """A FastAPI app serving :func:`endpoint_router`'s routes (``{"/": (f, "real")}`` for one)."""
    app = FastAPI(title="dpwatch sampling endpoints", openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(endpoint_router(routes, secret=secret, seed=seed, **options))
    return app


# --------------------------------------------------------------------------- the reference mechanisms


def reference_router(secret: str | Sequence[str] | None, *, epsilon: float = 1.0,
                     change_period: int = DEFAULT_CHANGE_PERIOD, seed: int | None = None,
                     corpus_epsilon: float = CORPUS_EPSILON) -> APIRouter:
    """Every reference endpoint on one router; mount it with ``prefix="/reference"``. Several
    secrets: a request signed with any of them is accepted (a secret being rotated)."""
    return endpoint_router(reference_routes(epsilon, change_period, corpus_epsilon), secret=secret, seed=seed)


def reference_app(secret: str | Sequence[str] | None, *, epsilon: float = 1.0, change_period: int = DEFAULT_CHANGE_PERIOD,
                  seed: int | None = None, corpus_epsilon: float = CORPUS_EPSILON) -> FastAPI:
    app = FastAPI(title="dpwatch reference mechanisms", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(reference_router(secret, epsilon=epsilon, change_period=change_period, seed=seed,
                                        corpus_epsilon=corpus_epsilon), prefix="/reference")
    return app
