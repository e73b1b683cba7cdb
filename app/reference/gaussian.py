"""Gaussian reference mechanisms with their exact claims, and their typical bugs (method.md §10.6).

Every mechanism adds noise to a query ``f`` of the database and carries the claim a deployment
of it would make (``claim``: ``{"epsilon": e, "delta": d}``, ``{"gdp_mu": m}`` or
``{"zcdp_rho": r}``). σ comes from :mod:`app.stats.accounting` (dp-accounting), never from a
hand-written conversion.

Databases and neighbours (replace-one):

- scalar sums: a list of numbers in [−1, 1]; ``f = Σ x_i`` has ℓ2 sensitivity Δ = 2;
- the discrete Gaussian: a list of integers in {0, 1}; ``f = Σ x_i`` has Δ = 1;
- the vector query: a list of records, each a list of ``dim`` numbers in [0, 1];
  ``f = Σ_i x_i ∈ ℝ^dim`` has ℓ2 sensitivity √dim (one record moves every coordinate by ≤ 1);
- the clipped mean: a list of numbers; ``f = Σ clip(x_i, −C, C) / m`` with Δ = 2C/m.

Correct mechanisms (the claim holds exactly):

``gaussian-analytic``   (ε, δ) with the analytic σ of Balle & Wang (2018): tight at its claim;
``gaussian-classic``    (ε, δ) with the classic σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, A.1);
``gaussian-gdp``        μ-GDP with σ = Δ/μ (Dong, Roth & Su 2022, Thm. 2.7);
``gaussian-zcdp``       ρ-zCDP with σ = Δ/√(2ρ) (Bun & Steinke 2016, Prop. 1.6);
``discrete-gaussian``   ρ-zCDP: the discrete Gaussian N_ℤ(0, σ²) of Canonne, Kamath & Steinke
                        (2020), sampled exactly by OpenDP (``make_gaussian`` on integers), whose
                        privacy map gives the claim (ρ = Δ²/(2σ²), CKS Thm. 4).

Buggy variants (the claim does not hold):

``gaussian-missing-constant``   (ε, δ): the analytic σ computed for Δ = 1, where the query's
                                sensitivity is 2 — a constant factor missing from σ (σ is half);
``gaussian-per-coordinate``     μ-GDP on the ``dim``-dimensional vector query, with σ calibrated
                                to the sensitivity of one coordinate (1) instead of the vector's
                                ℓ2 sensitivity √dim. (The brief's "ℓ1 instead of ℓ2" cannot harm a
                                Gaussian mechanism, since ‖·‖₁ ≥ ‖·‖₂; a per-coordinate, ℓ∞-style
                                sensitivity is the norm mix-up that does.)
``clipped-mean-no-clip``        μ-GDP on a clipped mean with clipping switched off: σ is right for
                                Δ = 2C/m but the outputs move with the unclipped values.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy import special

from app.stats import accounting
from app.stats.claims import Claim, parse_claim
from app.stats.events import Box, Event, Interval

__all__ = [
    "CLAIM_SCENARIOS",
    "ClaimScenario",
    "ClippedMeanNoClip",
    "DiscreteGaussian",
    "GAUSSIAN_MECHANISMS",
    "GaussianAnalytic",
    "GaussianClassic",
    "GaussianGDP",
    "GaussianMissingConstant",
    "GaussianPerCoordinate",
    "GaussianZCDP",
    "get_gaussian_mechanism",
]

DEFAULT_EPSILON = 1.0
DEFAULT_DELTA = 1e-5
DEFAULT_MU = 1.0
DEFAULT_RHO = 0.5
DEFAULT_DIM = 3
DEFAULT_CLIP = 1.0


def _check_sampling_args(n: Any, rng: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")


def _numbers(database: Any, low: float | None, high: float | None, what: str) -> np.ndarray:
    try:
        arr = np.asarray(database, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a list of numbers; got {database!r}") from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be a non-empty list of finite numbers")
    if low is not None and np.any(arr < low) or high is not None and np.any(arr > high):
        raise ValueError(f"{what} entries must lie in [{low:g}, {high:g}]")
    return arr


class _Claimed(ABC):
    """A reference mechanism with the privacy claim it makes (``claim``, the API's JSON form)."""

    @property
    @abstractmethod
    def claim(self) -> dict[str, float]: ...

    def claim_object(self) -> Claim:
        return parse_claim(self.claim)


class _GDPClaimed(_Claimed):
    """A mechanism that claims μ-GDP with its field ``mu``."""

    mu: float

    @property
    def claim(self) -> dict[str, float]:
        return {"gdp_mu": self.mu}


@dataclass(frozen=True)
class _Gaussian(_Claimed):
    """A continuous Gaussian mechanism on a scalar query: ``f(x) + N(0, σ²)``."""

    output_kind: ClassVar[str] = "real"
    name: ClassVar[str] = ""
    #: ℓ2 sensitivity the claim is about (replace-one neighbours, see the module docstring).
    sensitivity: ClassVar[float] = 2.0

    @property
    @abstractmethod
    def sigma(self) -> float: ...

    @property
    def holds(self) -> bool:
        """Whether the mechanism satisfies its claim on every neighbouring pair."""
        return True

    def query(self, database: Any) -> float:
        return float(np.sum(_numbers(database, -1.0, 1.0, "the database")))

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_sampling_args(n, rng)
        return self.query(database) + rng.normal(0.0, self.sigma, size=n)

    def event_probability(self, database: Any, event: Event) -> float:
        """P(M(database) ∈ event) for an interval event (exact: the normal cdf)."""
        if not isinstance(event, Interval):
            raise ValueError("exact probabilities are available for interval events")
        mean = self.query(database)
        hi = 1.0 if event.high is None else float(special.ndtr((event.high - mean) / self.sigma))
        lo = 0.0 if event.low is None else float(special.ndtr((event.low - mean) / self.sigma))
        return hi - lo


@dataclass(frozen=True)
class GaussianAnalytic(_Gaussian):
    """(ε, δ)-DP with the analytic σ of Balle & Wang (2018): exactly tight."""

    epsilon: float = DEFAULT_EPSILON
    delta: float = DEFAULT_DELTA
    name: ClassVar[str] = "gaussian-analytic"

    @property
    def claim(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta}

    @property
    def sigma(self) -> float:
        return accounting.analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)


@dataclass(frozen=True)
class GaussianClassic(GaussianAnalytic):
    """(ε, δ)-DP with the classic σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm. A.1; ε < 1)."""

    name: ClassVar[str] = "gaussian-classic"

    @property
    def sigma(self) -> float:
        return accounting.classic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)


@dataclass(frozen=True)
class GaussianMissingConstant(GaussianAnalytic):
    """Bug: the analytic σ for Δ = 1 where Δ = 2 — the sensitivity factor is missing (σ halved)."""

    name: ClassVar[str] = "gaussian-missing-constant"

    @property
    def sigma(self) -> float:
        return accounting.analytic_gaussian_sigma(self.epsilon, self.delta, 1.0)

    @property
    def holds(self) -> bool:
        return False


@dataclass(frozen=True)
class GaussianGDP(_GDPClaimed, _Gaussian):
    """μ-GDP with σ = Δ/μ (Dong, Roth & Su 2022, Thm. 2.7). ``sigma_factor`` < 1 makes it buggy."""

    mu: float = DEFAULT_MU
    sigma_factor: float = 1.0
    name: ClassVar[str] = "gaussian-gdp"

    @property
    def sigma(self) -> float:
        return self.sigma_factor * self.sensitivity / self.mu

    @property
    def holds(self) -> bool:
        return self.sigma_factor >= 1.0


@dataclass(frozen=True)
class GaussianZCDP(_Gaussian):
    """ρ-zCDP with σ = Δ/√(2ρ) (Bun & Steinke 2016, Prop. 1.6)."""

    rho: float = DEFAULT_RHO
    sigma_factor: float = 1.0
    name: ClassVar[str] = "gaussian-zcdp"

    @property
    def claim(self) -> dict[str, float]:
        return {"zcdp_rho": self.rho}

    @property
    def sigma(self) -> float:
        return self.sigma_factor * self.sensitivity / math.sqrt(2.0 * self.rho)

    @property
    def holds(self) -> bool:
        return self.sigma_factor >= 1.0


@dataclass(frozen=True)
class DiscreteGaussian(_Claimed):
    """The discrete Gaussian mechanism on a count (Canonne, Kamath & Steinke 2020), sampled
    exactly by OpenDP; its claim is OpenDP's privacy map: ρ = Δ²/(2σ²)-zCDP."""

    rho: float = DEFAULT_RHO
    output_kind: ClassVar[str] = "discrete"
    name: ClassVar[str] = "discrete-gaussian"
    sensitivity: ClassVar[float] = 1.0
    holds: ClassVar[bool] = True

    @property
    def sigma(self) -> float:
        return self.sensitivity / math.sqrt(2.0 * self.rho)

    def _measurement(self) -> Any:
        return _opendp_discrete_gaussian(self.sigma)

    @property
    def claim(self) -> dict[str, float]:
        return {"zcdp_rho": float(self._measurement().map(1))}

    def query(self, database: Any) -> int:
        arr = _numbers(database, 0, 1, "the database")
        if np.any(arr != np.round(arr)):
            raise ValueError("the discrete Gaussian's database entries must be 0 or 1")
        return int(arr.sum())

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n exact draws from OpenDP (its own CSPRNG: ``rng`` is not used, so draws are not
        reproducible from a seed)."""
        _check_sampling_args(n, rng)
        value = self.query(database)
        return np.asarray(self._measurement()([value] * n), dtype=np.int64)

    def pmf(self, k: np.ndarray) -> np.ndarray:
        """N_ℤ(0, σ²) at integers k (CKS Def. 1), normalised over |k| ≤ 40σ + 40."""
        support = np.arange(-int(40 * self.sigma) - 40, int(40 * self.sigma) + 41)
        norm = np.exp(-(support.astype(np.float64) ** 2) / (2 * self.sigma**2)).sum()
        return np.exp(-(np.asarray(k, dtype=np.float64) ** 2) / (2 * self.sigma**2)) / norm

    def event_probability(self, database: Any, event: Event) -> float:
        if not isinstance(event, Interval):
            raise ValueError("exact probabilities are available for interval events")
        mean = self.query(database)
        support = np.arange(-int(40 * self.sigma) - 40, int(40 * self.sigma) + 41)
        values = support + mean
        inside = np.ones(values.shape, dtype=bool)
        if event.low is not None:
            inside &= values >= event.low if event.closed_low else values > event.low
        if event.high is not None:
            inside &= values <= event.high if event.closed_high else values < event.high
        return float(self.pmf(support)[inside].sum())


_DG_CACHE: dict[float, Any] = {}


def _opendp_discrete_gaussian(sigma: float) -> Any:
    if sigma not in _DG_CACHE:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        _DG_CACHE[sigma] = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int),
                                             scale=float(sigma))
    return _DG_CACHE[sigma]


@dataclass(frozen=True)
class GaussianPerCoordinate(_GDPClaimed):
    """Bug: μ-GDP claimed on a ``dim``-dimensional sum, with σ = 1/μ (one coordinate's
    sensitivity) instead of √dim/μ (the vector's ℓ2 sensitivity). Outputs are vectors."""

    mu: float = DEFAULT_MU
    dim: int = DEFAULT_DIM
    correct: bool = False
    output_kind: ClassVar[str] = "vector"

    @property
    def name(self) -> str:
        return "gaussian-gdp-vector" if self.correct else "gaussian-per-coordinate"

    @property
    def holds(self) -> bool:
        return self.correct


    @property
    def sigma(self) -> float:
        return self.correct_sigma if self.correct else 1.0 / self.mu  # the bug: the right σ is √dim/μ

    @property
    def correct_sigma(self) -> float:
        return math.sqrt(self.dim) / self.mu

    def query(self, database: Any) -> np.ndarray:
        try:
            arr = np.asarray(database, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("the database must be a list of records, each a list of numbers") from None
        if arr.ndim != 2 or arr.shape[1] != self.dim or arr.shape[0] == 0:
            raise ValueError(f"the database must be a non-empty list of records of {self.dim} numbers each")
        if not np.all(np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
            raise ValueError("record entries must lie in [0, 1]")
        return arr.sum(axis=0)

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_sampling_args(n, rng)
        return self.query(database)[None, :] + rng.normal(0.0, self.sigma, size=(n, self.dim))

    def event_probability(self, database: Any, event: Event) -> float:
        if not isinstance(event, Box):
            raise ValueError("exact probabilities are available for box events")
        mean = self.query(database)
        prob = 1.0
        for j in range(self.dim):
            lo, hi = event.low[j], event.high[j]
            up = 1.0 if hi is None else float(special.ndtr((hi - mean[j]) / self.sigma))
            dn = 0.0 if lo is None else float(special.ndtr((lo - mean[j]) / self.sigma))
            prob *= up - dn
        return prob


@dataclass(frozen=True)
class ClippedMeanNoClip(_GDPClaimed):
    """Bug: a clipped mean claiming μ-GDP, ``(Σ clip(x_i, −C, C) + N(0, σ²))/m`` with σ = 2C/μ,
    whose clipping is switched off (``clip=False``); ``clip=True`` is the correct mechanism."""

    mu: float = DEFAULT_MU
    bound: float = DEFAULT_CLIP
    clip: bool = False
    output_kind: ClassVar[str] = "real"

    @property
    def name(self) -> str:
        return "clipped-mean" if self.clip else "clipped-mean-no-clip"

    @property
    def holds(self) -> bool:
        return self.clip


    @property
    def sigma_sum(self) -> float:
        return 2.0 * self.bound / self.mu

    def query(self, database: Any) -> float:
        arr = _numbers(database, None, None, "the database")
        if self.clip:
            arr = np.clip(arr, -self.bound, self.bound)
        return float(arr.sum())

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_sampling_args(n, rng)
        m = len(_numbers(database, None, None, "the database"))
        return (self.query(database) + rng.normal(0.0, self.sigma_sum, size=n)) / m

    def event_probability(self, database: Any, event: Event) -> float:
        if not isinstance(event, Interval):
            raise ValueError("exact probabilities are available for interval events")
        m = len(_numbers(database, None, None, "the database"))
        mean, sd = self.query(database) / m, self.sigma_sum / m
        hi = 1.0 if event.high is None else float(special.ndtr((event.high - mean) / sd))
        lo = 0.0 if event.low is None else float(special.ndtr((event.low - mean) / sd))
        return hi - lo


GAUSSIAN_MECHANISMS: dict[str, Callable[..., Any]] = {
    "gaussian-analytic": GaussianAnalytic,
    "gaussian-classic": GaussianClassic,
    "gaussian-gdp": GaussianGDP,
    "gaussian-zcdp": GaussianZCDP,
    "gaussian-zcdp-half-sigma": lambda **kw: GaussianZCDP(sigma_factor=0.5, **kw),
    "discrete-gaussian": DiscreteGaussian,
    "gaussian-missing-constant": GaussianMissingConstant,
    "gaussian-gdp-half-sigma": lambda **kw: GaussianGDP(sigma_factor=0.5, **kw),
    "gaussian-gdp-vector": lambda **kw: GaussianPerCoordinate(correct=True, **kw),
    "gaussian-per-coordinate": GaussianPerCoordinate,
    "clipped-mean": lambda **kw: ClippedMeanNoClip(clip=True, **kw),
    "clipped-mean-no-clip": ClippedMeanNoClip,
}
"""Factories by slug, each with its own keyword parameters (ε and δ, μ, ρ, dim, bound)."""


def get_gaussian_mechanism(slug: str, **params: Any) -> Any:
    try:
        factory = GAUSSIAN_MECHANISMS[slug]
    except KeyError:
        raise ValueError(f"unknown Gaussian mechanism {slug!r}; known: {', '.join(sorted(GAUSSIAN_MECHANISMS))}") from None
    try:
        return factory(**params)
    except TypeError as exc:
        raise ValueError(f"invalid parameters for {slug!r}: {exc}") from None


@dataclass(frozen=True)
class ClaimScenario:
    """A deployment under a claim that changes from a correct mechanism to a buggy one, with the
    check that watches it. As in the paper's scenarios (docs/reference_mechanisms.md), the event
    is one where the change shows; before the change the check satisfies the claim (on its
    boundary for (j) and (l), strictly inside for (i) and (k))."""

    key: str
    title: str
    before: str
    after: str
    x: Any
    x_prime: Any
    event: Event
    params: dict[str, Any] = field(default_factory=dict)

    def before_mechanism(self) -> Any:
        return get_gaussian_mechanism(self.before, **self.params)

    def after_mechanism(self) -> Any:
        return get_gaussian_mechanism(self.after, **self.params)

    @property
    def claim(self) -> dict[str, float]:
        return self.before_mechanism().claim

    @property
    def output_kind(self) -> str:
        return self.before_mechanism().output_kind


CLAIM_SCENARIOS: dict[str, ClaimScenario] = {
    s.key: s
    for s in (
        ClaimScenario("i", "(ε, δ) Gaussian: the sensitivity factor goes missing from σ", "gaussian-analytic",
                      "gaussian-missing-constant", [-1.0], [1.0], Interval(high=-3.3),
                      {"epsilon": 1.0, "delta": 1e-3}),
        ClaimScenario("j", "μ-GDP Gaussian: σ halved", "gaussian-gdp", "gaussian-gdp-half-sigma",
                      [-1.0], [1.0], Interval(high=0.0), {"mu": 1.0}),
        ClaimScenario("k", "μ-GDP vector sum: per-coordinate sensitivity instead of ℓ2",
                      "gaussian-gdp-vector", "gaussian-per-coordinate",
                      [[0.0] * DEFAULT_DIM], [[1.0] * DEFAULT_DIM],
                      Box(low=[None] * DEFAULT_DIM, high=[0.5] * DEFAULT_DIM), {"mu": 1.0}),
        ClaimScenario("l", "μ-GDP clipped mean: clipping switched off", "clipped-mean", "clipped-mean-no-clip",
                      [0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 0.0, 5.0], Interval(high=0.0), {"mu": 1.0}),
    )
}
