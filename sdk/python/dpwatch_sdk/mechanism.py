"""What the SDK knows of a mechanism besides serving it: the privacy claim it makes, and its
sampler's generators. (The :class:`~dpwatch_sdk.Mechanism` itself, a sampler with its output and
claim, is in ``endpoint.py``, beside what serves it.)

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
from dataclasses import dataclass

__all__ = ["Claim", "RngFactory", "one_at_a_time", "takes_period"]

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
           rho: float | None = None) -> Claim:
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


