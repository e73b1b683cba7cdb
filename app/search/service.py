"""The search over HTTP: a sampling endpoint, its input domain and a claim (docs/search.md §2).

``search_endpoint`` is what ``dpwatch search`` calls (and, with the service's own sampler, the
search jobs): it opens a sampling client (the safe HTTP client of app.sampling: address checks,
signatures, byte and time caps, strict validation against the output shape) and runs
:func:`app.search.run.run_search` through it. ``read_domain`` reads a domain file or inline JSON;
``make_claim`` turns ``{"epsilon": …}``, ``{"epsilon": …, "delta": …}``, ``{"gdp_mu": …}`` or
``{"zcdp_rho": …}`` into the held-out test's claim.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.safe_http import SafeHttpConfig
from app.search.domain import InputDomain
from app.search.run import SearchProgress, SearchResult, SearchSettings, run_search
from app.stats.claims import Claim

__all__ = ["endpoint_search_sampler", "make_claim", "read_domain", "search_endpoint", "validation_message"]

#: Attempts per batch: one retry of a 5xx or a timeout; an input that fails twice is a finding.
SEARCH_ATTEMPTS = 2


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as one line per problem, with its location."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-", "tagged-union")))
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def read_domain(source: str | Path | dict[str, Any]) -> InputDomain:
    """A domain from a dict, a JSON file or inline JSON; ``ValueError`` with the reasons."""
    if isinstance(source, dict):
        data: Any = source
    else:
        text = str(source)
        try:
            raw = text if text.lstrip().startswith("{") else Path(text).read_text()
        except OSError as exc:
            raise ValueError(f"cannot read the domain from {source}: {exc}") from exc
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the domain is not JSON: {exc}") from exc
    try:
        return InputDomain.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"invalid domain: {validation_message(exc)}") from None


def make_claim(spec: dict[str, Any]) -> Claim:
    """The held-out test's claim for an API claim (``app.claims.schemas.ClaimSpec`` form)."""
    from app.stats.claims import parse_claim

    return parse_claim({k: v for k, v in spec.items() if v is not None})


def endpoint_search_sampler(client: SamplingClient, endpoint: MechanismEndpoint, *, label: str,
                            period: int = 0) -> Callable[[Any, int], Any]:
    """A sampler over ``client``; every request carries ``period`` (a monitor's search sends its
    current period, so that an endpoint versioned by period answers as deployed now)."""
    counter = {"i": 0}

    async def sample(database: Any, n: int) -> Any:
        counter["i"] += 1
        return await client.sample(endpoint, database, n, monitor_id=label, period=period,
                                   request_id_prefix=f"{label}-{counter['i']}")

    return sample


def search_client_config(deadline_seconds: float = 600.0) -> SamplingClientConfig:
    return SamplingClientConfig(deadline_seconds=deadline_seconds, max_attempts=SEARCH_ATTEMPTS)


async def search_endpoint(endpoint: MechanismEndpoint, domain: InputDomain, claim: Claim, settings: SearchSettings,
                          *, http_config: SafeHttpConfig, progress: Callable[[SearchProgress], Any] | None = None,
                          cancel: Any = None, label: str = "search", measured: Any = None) -> SearchResult:
    """Search an HTTP endpoint whose ``shape`` is set (declare or probe it first)."""
    if endpoint.shape is None:
        raise ValueError("the endpoint needs a shape (declared, or from a probe)")
    deadline_seconds = 600.0 if settings.time_limit is None else max(5.0, min(600.0, settings.time_limit))
    async with SamplingClient(config=search_client_config(deadline_seconds), http_config=http_config) as client:
        sampler = endpoint_search_sampler(client, endpoint, label=label)
        return await run_search(sampler, domain, claim, endpoint.shape, settings, progress=progress, cancel=cancel,
                                measured=measured)
