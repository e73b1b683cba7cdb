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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from fastapi import APIRouter, FastAPI

from app.reference.corpus import CORPUS_EPSILON, corpus
from app.reference.mechanisms import REFERENCE_MECHANISMS, get_mechanism
from app.reference.scenarios import SCENARIOS, Scenario
from app.sampling.endpoint import make_endpoint_router
from app.sampling.protocol import OutputKind
from app.stats.shapes import OutputShape

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


def reference_router(secret: str | Sequence[str] | None, *, epsilon: float = 1.0,
                     change_period: int = DEFAULT_CHANGE_PERIOD, seed: int | None = None,
                     corpus_epsilon: float = CORPUS_EPSILON) -> APIRouter:
    """Every reference endpoint on one router; mount it with ``prefix="/reference"``. Several
    secrets: a request signed with any of them is accepted (a secret being rotated)."""
    return make_endpoint_router(reference_routes(epsilon, change_period, corpus_epsilon), secret=secret, seed=seed)


def reference_app(secret: str | Sequence[str] | None, *, epsilon: float = 1.0, change_period: int = DEFAULT_CHANGE_PERIOD,
                  seed: int | None = None, corpus_epsilon: float = CORPUS_EPSILON) -> FastAPI:
    app = FastAPI(title="dpwatch reference mechanisms", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(reference_router(secret, epsilon=epsilon, change_period=change_period, seed=seed,
                                        corpus_epsilon=corpus_epsilon), prefix="/reference")
    return app
