"""A mechanism as the SDK sees it: a sampler, what one output is, and the privacy claim it makes.

A sampler is ``f(database, n, rng)`` returning ``n`` independent outputs on ``database``;
:func:`one_at_a_time` turns a sampler that draws a single output (most DP libraries) into one.
"""

from __future__ import annotations

import inspect
import math
import os
import random
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass, field

from .protocol import Output

__all__ = ["Claim", "Mechanism", "RngFactory", "one_at_a_time"]

Sampler = Callable[..., typing.Any]


@dataclass(frozen=True)
class Claim:
    """A privacy claim in dpwatch's terms (docs/claims.md): ε-DP, (ε, δ)-DP, μ-GDP or ρ-zCDP."""

    epsilon: float | None = None
    delta: float | None = None
    gdp_mu: float | None = None
    zcdp_rho: float | None = None

    def __post_init__(self) -> None:
        given = {k for k in ("epsilon", "delta", "gdp_mu", "zcdp_rho") if getattr(self, k) is not None}
        if given not in ({"epsilon"}, {"epsilon", "delta"}, {"gdp_mu"}, {"zcdp_rho"}):
            raise ValueError("a claim is exactly one of: epsilon; epsilon and delta; gdp_mu; zcdp_rho "
                             f"(got {sorted(given) or 'nothing'})")
        for name in given:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if self.delta is not None and self.delta >= 1:
            raise ValueError(f"delta must be < 1, got {self.delta!r}")

    @classmethod
    def of(cls, epsilon: float | None = None, delta: float | None = None, mu: float | None = None,
           rho: float | None = None) -> "Claim":
        """From ``dpwatch audit``'s options: ``--epsilon [--delta]``, ``--mu`` or ``--rho``."""
        return cls(epsilon=epsilon, delta=delta or None, gdp_mu=mu, zcdp_rho=rho)

    def to_api(self) -> dict[str, float]:
        """The API's ``claim`` object (a monitor's or a check's)."""
        return {k: float(v) for k, v in (("epsilon", self.epsilon), ("delta", self.delta),
                                         ("gdp_mu", self.gdp_mu), ("zcdp_rho", self.zcdp_rho)) if v is not None}

    def cli_args(self) -> list[str]:
        """The claim as ``dpwatch audit``/``search`` options."""
        if self.gdp_mu is not None:
            return ["--mu", repr(float(self.gdp_mu))]
        if self.zcdp_rho is not None:
            return ["--rho", repr(float(self.zcdp_rho))]
        args = ["--epsilon", repr(float(self.epsilon))]  # type: ignore[arg-type]
        if self.delta is not None:
            args += ["--delta", repr(float(self.delta))]
        return args

    def describe(self) -> str:
        if self.gdp_mu is not None:
            return f"{self.gdp_mu:g}-GDP"
        if self.zcdp_rho is not None:
            return f"{self.zcdp_rho:g}-zCDP"
        if self.delta is not None:
            return f"({self.epsilon:g}, {self.delta:g})-DP"
        return f"{self.epsilon:g}-DP"


class RngFactory:
    """A fresh generator per request: numpy's ``Generator`` when numpy is installed, else
    ``random.Random``; seeded from OS entropy, or reproducibly from ``seed`` (tests)."""

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seed
        self._lock = threading.Lock()
        self._count = 0
        try:
            import numpy
        except ImportError:  # numpy is optional
            self._np = None
            return
        self._np = numpy
        self._seq = None if seed is None else numpy.random.SeedSequence(seed)

    def __call__(self) -> typing.Any:
        if self._np is not None:
            if self._seq is None:
                return self._np.random.default_rng()
            with self._lock:
                (child,) = self._seq.spawn(1)
            return self._np.random.default_rng(child)
        if self._seed is None:
            return random.Random(os.urandom(32))
        with self._lock:
            self._count += 1
            return random.Random(f"{self._seed}-{self._count}")


def _positional_arity(f: Callable[..., typing.Any]) -> int | None:
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)


def takes_period(f: Callable[..., typing.Any]) -> bool:
    try:
        return "period" in inspect.signature(f).parameters
    except (TypeError, ValueError):
        return False


def one_at_a_time(draw: Callable[..., typing.Any], prepare: Callable[[typing.Any], typing.Any] | None = None) -> Sampler:
    """A sampler ``f(database, n, rng)`` that calls ``draw`` ``n`` times: ``draw(x)`` or
    ``draw(x, rng)``, where ``x = prepare(database)`` is computed once per request."""
    with_rng = _positional_arity(draw) == 2

    def sample(database: typing.Any, n: int, rng: typing.Any) -> list[typing.Any]:
        x = prepare(database) if prepare is not None else database
        if with_rng:
            return [draw(x, rng) for _ in range(n)]
        return [draw(x) for _ in range(n)]

    sample.__name__ = getattr(draw, "__name__", "sample")
    return sample


@dataclass
class Mechanism:
    """A sampler with its output and, when known, the claim it makes.

    ``sample(database, n, rng)`` returns ``n`` independent outputs (a list or a numpy array; it may
    also take ``period=``). Adapters (``dpwatch_sdk.adapters``) build these from real libraries and
    fill ``claim`` from the library's own accounting.
    """

    sample: Sampler
    output: Output = field(default_factory=Output)
    claim: Claim | None = None
    name: str | None = None
    details: dict[str, typing.Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.sample):
            raise TypeError("sample must be callable: f(database, n, rng)")
        self.output = Output.of(self.output)
        if self.name is None:
            self.name = getattr(self.sample, "__name__", None) or "mechanism"

    # Serving: the endpoint, as an ASGI app, a WSGI app or a server of its own.
    def endpoint(self, *, secret: str | typing.Sequence[str] | None, **options: typing.Any) -> "Endpoint":
        from .endpoint import Endpoint

        return Endpoint(self, secret=secret, **options)

    def asgi(self, *, secret: str | typing.Sequence[str] | None, **options: typing.Any) -> typing.Any:
        """An ASGI app (FastAPI/Starlette: ``app.mount("/dp", mechanism.asgi(secret=...))``)."""
        return self.endpoint(secret=secret, **options).asgi

    def wsgi(self, *, secret: str | typing.Sequence[str] | None, **options: typing.Any) -> typing.Any:
        """A WSGI app (Flask, Django; or ``endpoint.wsgi_middleware`` to add it under a path)."""
        return self.endpoint(secret=secret, **options).wsgi

    def serve(self, *, secret: str | typing.Sequence[str] | None, host: str = "127.0.0.1", port: int = 8080,
              **options: typing.Any) -> None:
        """Serve the endpoint until interrupted (a threaded HTTP server from the standard library)."""
        self.endpoint(secret=secret, **options).serve(host=host, port=port)

    def registration(self, sampling_url: str, *, name: str | None = None, secret: str | None = None,
                     **fields: typing.Any) -> dict[str, typing.Any]:
        """The body of ``POST /v1/mechanisms`` for this mechanism served at ``sampling_url``."""
        body: dict[str, typing.Any] = {"name": name or self.name, "sampling_url": sampling_url,
                                       "output_kind": self.output.output_kind, "output_shape": self.output.shape()}
        if self.output.kind == "vector":
            if self.output.length is None:
                raise ValueError("registering a vector mechanism needs its length: Output('vector', length=d)")
            body["dim"] = self.output.length
        if self.output.kind == "list":
            raise ValueError("a list output needs its max_length to be registered; pass output_shape and dim")
        if secret is not None:
            body["secret"] = secret
        body.update(fields)
        return body


if typing.TYPE_CHECKING:
    from .endpoint import Endpoint
