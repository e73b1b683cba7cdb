"""Reference mechanisms with known privacy levels (method.md §8; seed 002 §4.1).

Each mechanism is a frozen dataclass with

- ``name``: its registry slug (``"laplace"``, ``"svt4"``, ...);
- ``claimed_epsilon``: the ε the deployment claims (the constructor's ``epsilon``);
- ``true_epsilon``: the smallest ε for which it is ε-DP: a float, ``math.inf`` when it is not
  ε-DP for any ε, or ``None`` when unknown;
- ``output_kind``: ``"real"`` (shape ``(n,)`` floats), ``"discrete"`` (shape ``(n,)`` ints) or
  ``"vector"`` (shape ``(n, k)``);
- ``sample(database, n, rng)``: ``n`` independent outputs on one database, vectorised with numpy.

Databases:

- Laplace family: a sequence of numbers in ``[0, 1]``; the query is their sum (sensitivity 1).
  Neighbours differ in one entry.
- Report Noisy Max and SVT: *query-vector inputs*, as in seed 003 §V and its Table I. The
  database is given directly as the vector of query answers ``q_1..q_k``; neighbouring
  databases are vectors with ``|q_i − q'_i| ≤ 1`` for every ``i`` (sensitivity-1 queries).

SVT outputs (Lyu, Su, Li 2017 numbering): a row of length ``k`` with ``1`` for ⊤
(``q_i + ν_i ≥ T_h + ρ``), ``0`` for ⊥, and ``-1`` for queries that were not answered because the
cutoff ``c_max`` had been reached. Rows are ``int8``.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "ABORTED",
    "DEFAULT_CUTOFF",
    "DEFAULT_EPSILON",
    "DEFAULT_SCALE_FACTOR",
    "DEFAULT_THRESHOLD",
    "REFERENCE_MECHANISMS",
    "SVT1",
    "SVT2",
    "SVT4",
    "SVT5",
    "SVT6",
    "Laplace",
    "LaplaceGaussian",
    "LaplaceSmallerScale",
    "OutputKind",
    "RNMExponential",
    "RNMReportValue",
    "ReferenceMechanism",
    "ReportNoisyMax",
    "SwitchingMechanism",
    "get_mechanism",
]

OutputKind = Literal["real", "discrete", "vector"]

DEFAULT_EPSILON = 1.0
"""Default claimed ε of every reference mechanism."""
DEFAULT_SCALE_FACTOR = 0.9
"""Default ``s`` of :class:`LaplaceSmallerScale`: noise ``Lap(0.9/ε)``, true ε = ε/0.9 ≈ 1.11ε."""
DEFAULT_THRESHOLD = 1.0
"""Default SVT threshold ``T_h`` (the value seed 003 §V takes from StatDP)."""
DEFAULT_CUTOFF = 2
"""Default SVT cutoff ``c_max``. With ``c_max = 1`` SVT 1 and SVT 2 have the same distribution,
which would make the benign change (h) SVT 2 → SVT 1 a no-op; 2 is the smallest cutoff that
keeps them apart."""
ABORTED = -1
"""Marks an SVT query that was not answered because the cutoff had been reached."""


@runtime_checkable
class ReferenceMechanism(Protocol):
    """What every reference mechanism offers (the SwitchingMechanism adds a ``period``)."""

    @property
    def name(self) -> str: ...

    @property
    def claimed_epsilon(self) -> float: ...

    @property
    def true_epsilon(self) -> float | None: ...

    @property
    def output_kind(self) -> str: ...

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray: ...


# --------------------------------------------------------------------------------------------
# input validation


def _check_epsilon(epsilon: Any) -> None:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ValueError(f"epsilon must be a positive finite number; got {epsilon!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number; got {epsilon!r}")


def _check_sampling_args(n: Any, rng: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)); got {type(rng).__name__}")


def _as_real_vector(database: Any, what: str) -> np.ndarray:
    try:
        arr = np.asarray(database, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a 1-D sequence of numbers; got {database!r}") from None
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of numbers; got an array of shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must contain finite numbers only")
    return arr


def _unit_cube_database(database: Any) -> np.ndarray:
    """A Laplace-family database: numbers in [0, 1], so that the sum has sensitivity 1."""
    arr = _as_real_vector(database, "the database")
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError("the database entries must lie in [0, 1] (the sum then has sensitivity 1)")
    return arr


def _query_vector(database: Any, num_queries: int | None = None) -> np.ndarray:
    """A query-vector input ``q_1..q_k`` (seed 003, Table I)."""
    arr = _as_real_vector(database, "the query vector")
    if arr.size == 0:
        raise ValueError("the query vector must hold at least one query answer")
    if num_queries is not None and arr.size != num_queries:
        raise ValueError(f"this mechanism answers {num_queries} queries; got a query vector of length {arr.size}")
    return arr


def _check_num_queries(num_queries: Any) -> None:
    if num_queries is None:
        return
    if isinstance(num_queries, bool) or not isinstance(num_queries, numbers.Integral) or num_queries < 1:
        raise ValueError(f"num_queries must be a positive integer or None; got {num_queries!r}")


# --------------------------------------------------------------------------------------------
# Laplace family: A(x) = Σ x_i + noise, x_i ∈ [0, 1] (seed 002, eq. 17)


@dataclass(frozen=True)
class _EpsilonMechanism:
    """What every reference mechanism shares: a validated claimed ε, which is also its true ε
    unless a subclass (a broken variant) says otherwise."""

    epsilon: float = DEFAULT_EPSILON

    def __post_init__(self) -> None:
        _check_epsilon(self.epsilon)

    @property
    def claimed_epsilon(self) -> float:
        return float(self.epsilon)

    @property
    def true_epsilon(self) -> float | None:
        return float(self.epsilon)


@dataclass(frozen=True)
class _NoisySum(_EpsilonMechanism, ABC):
    """``Σx_i + noise`` on a database of numbers in [0, 1] (sensitivity 1)."""

    @abstractmethod
    def _noise(self, n: int, rng: np.random.Generator) -> np.ndarray: ...

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_sampling_args(n, rng)
        total = float(np.sum(_unit_cube_database(database)))
        return total + self._noise(n, rng)


@dataclass(frozen=True)
class Laplace(_NoisySum):
    """The Laplace mechanism ``Σx_i + Lap(1/ε)``; ε-DP."""

    name: ClassVar[str] = "laplace"
    output_kind: ClassVar[OutputKind] = "real"

    @property
    def noise_scale(self) -> float:
        return 1.0 / self.epsilon

    def _noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.laplace(0.0, self.noise_scale, size=n)


@dataclass(frozen=True)
class LaplaceSmallerScale(_NoisySum):
    """Harmful change (a): ``Σx_i + Lap(s/ε)`` with ``0 < s < 1``; true ε = ε/s."""

    scale_factor: float = DEFAULT_SCALE_FACTOR

    name: ClassVar[str] = "laplace-smaller-scale"
    output_kind: ClassVar[OutputKind] = "real"

    def __post_init__(self) -> None:
        super().__post_init__()
        s = self.scale_factor
        if isinstance(s, bool) or not isinstance(s, numbers.Real) or not (0 < s < 1):
            raise ValueError(f"scale_factor must lie in (0, 1) (a smaller noise scale); got {s!r}")

    @property
    def true_epsilon(self) -> float | None:
        return float(self.epsilon) / float(self.scale_factor)

    @property
    def noise_scale(self) -> float:
        return self.scale_factor / self.epsilon

    def _noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.laplace(0.0, self.noise_scale, size=n)


@dataclass(frozen=True)
class LaplaceGaussian(_NoisySum):
    """Harmful change (b): Gaussian noise with the variance of ``Lap(1/ε)``: σ = √2/ε.

    Not ε'-DP for any finite ε' (the likelihood ratio of two shifted Gaussians is unbounded);
    only (ε, δ)-DP, so ``true_epsilon`` is ``inf``.
    """

    name: ClassVar[str] = "laplace-gaussian"
    output_kind: ClassVar[OutputKind] = "real"

    @property
    def true_epsilon(self) -> float | None:
        return math.inf

    @property
    def noise_sd(self) -> float:
        return math.sqrt(2.0) / self.epsilon

    def _noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, self.noise_sd, size=n)


# --------------------------------------------------------------------------------------------
# Report Noisy Max on query-vector inputs


@dataclass(frozen=True)
class ReportNoisyMax(_EpsilonMechanism):
    """``argmax_i (q_i + Lap(2/ε))``, the 0-based index; ε-DP for sensitivity-1 queries.

    ``num_queries``, when given, fixes ``k`` and is checked against every query vector.
    """

    num_queries: int | None = None

    name: ClassVar[str] = "rnm"
    output_kind: ClassVar[OutputKind] = "discrete"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_num_queries(self.num_queries)

    @property
    def noise_scale(self) -> float:
        return 2.0 / self.epsilon

    def _noisy(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_sampling_args(n, rng)
        q = _query_vector(database, self.num_queries)
        return q + rng.laplace(0.0, self.noise_scale, size=(n, q.size))

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.argmax(self._noisy(database, n, rng), axis=1).astype(np.int64)


@dataclass(frozen=True)
class RNMReportValue(ReportNoisyMax):
    """Harmful change (c): reports the noisy maximum *value* ``max_i (q_i + Lap(2/ε))``.

    True ε = kε/2 for ``k`` queries. Upper bound: the maximum is post-processing of the whole
    noisy vector, which is (kε/2)-DP when every query may move by 1. Lower bound: for
    ``q' = q + 1`` (all queries up by one) and ``C ≤ min_i q_i``,
    ``P(max ≤ C | q) / P(max ≤ C | q') = Π_i e^{(ε/2)} = e^{kε/2}`` exactly, since the Laplace cdf
    is ``½e^{εt/2}`` for ``t ≤ 0``. So it exceeds ε for ``k ≥ 3`` (k = 2 gives ε, k = 1 gives ε/2).
    ``true_epsilon`` is ``None`` unless ``num_queries`` fixes ``k``.
    """

    name: ClassVar[str] = "rnm-value"
    output_kind: ClassVar[OutputKind] = "real"

    @property
    def true_epsilon(self) -> float | None:
        if self.num_queries is None:
            return None
        return self.num_queries * float(self.epsilon) / 2.0

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.max(self._noisy(database, n, rng), axis=1)


@dataclass(frozen=True)
class RNMExponential(ReportNoisyMax):
    """Benign change (g): ``argmax_i (q_i + Exp(scale 2/ε))``; still ε-DP.

    Report Noisy Max with exponential noise is the permute-and-flip mechanism (McKenna and
    Sheldon 2020; Ding et al. 2021), which is ε-DP at this scale for sensitivity-1 queries.
    """

    name: ClassVar[str] = "rnm-exponential"

    def _noisy(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_sampling_args(n, rng)
        q = _query_vector(database, self.num_queries)
        return q + rng.exponential(self.noise_scale, size=(n, q.size))


# --------------------------------------------------------------------------------------------
# Sparse Vector Technique (Lyu, Su, Li 2017), query-vector inputs, Δ = 1


def _check_threshold(threshold: Any) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number; got {threshold!r}")


def _check_cutoff(cutoff: Any) -> None:
    if isinstance(cutoff, bool) or not isinstance(cutoff, numbers.Integral) or cutoff < 1:
        raise ValueError(f"cutoff (c_max) must be a positive integer; got {cutoff!r}")


def _sparse_vector(
    q: np.ndarray,
    n: int,
    rng: np.random.Generator,
    *,
    threshold: float,
    rho_scale: float,
    nu_scale: float | None,
    cutoff: int | None,
    redraw: bool,
) -> np.ndarray:
    """``n`` independent SVT runs on the query vector ``q``; vectorised over runs, loops over queries.

    Query ``i`` answers ⊤ when ``q_i + ν_i ≥ T_h + ρ``. With a cutoff, a run stops after its
    ``cutoff``-th ⊤ and its remaining answers are ``ABORTED``. With ``redraw``, ρ is redrawn
    (same scale) after every ⊤, as in SVT 2.
    """
    k = q.size
    out = np.full((n, k), ABORTED, dtype=np.int8)
    rho = rng.laplace(0.0, rho_scale, size=n)
    active = np.ones(n, dtype=bool)
    tops = np.zeros(n, dtype=np.int64)
    for i in range(k):
        noisy = q[i] if nu_scale is None else q[i] + rng.laplace(0.0, nu_scale, size=n)
        top = noisy >= threshold + rho
        if cutoff is None:
            out[:, i] = top
            continue
        top &= active
        out[active, i] = top[active]
        tops += top
        if redraw:
            hit = np.flatnonzero(top)
            rho[hit] = rng.laplace(0.0, rho_scale, size=hit.size)
        active &= tops < cutoff
        if not active.any():
            break  # every run reached its cutoff: the remaining answers stay ABORTED
    return out


@dataclass(frozen=True)
class _SparseVectorBase(_EpsilonMechanism, ABC):
    """Shared parameters and sampling; each variant sets its noise scales, cutoff and redraw."""

    threshold: float = DEFAULT_THRESHOLD

    output_kind: ClassVar[OutputKind] = "vector"
    _redraw: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_threshold(self.threshold)

    @property
    def cutoff_value(self) -> int | None:
        """``c_max``, or ``None`` for the variants without a cutoff."""
        return None

    @property
    @abstractmethod
    def rho_scale(self) -> float:
        """Scale of the threshold noise ρ."""

    @property
    @abstractmethod
    def nu_scale(self) -> float | None:
        """Scale of the query noise ν_i, or ``None`` for no query noise."""

    def sample(self, database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_sampling_args(n, rng)
        q = _query_vector(database)
        return _sparse_vector(
            q,
            int(n),
            rng,
            threshold=float(self.threshold),
            rho_scale=self.rho_scale,
            nu_scale=self.nu_scale,
            cutoff=self.cutoff_value,
            redraw=self._redraw,
        )


@dataclass(frozen=True)
class _SparseVectorWithCutoff(_SparseVectorBase):
    cutoff: int = DEFAULT_CUTOFF

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_cutoff(self.cutoff)

    @property
    def cutoff_value(self) -> int | None:
        return int(self.cutoff)


@dataclass(frozen=True)
class SVT1(_SparseVectorWithCutoff):
    """SVT 1 (Lyu-Su-Li Alg. 1): ρ = Lap(2/ε), ν_i = Lap(4c_max/ε), no redraw; ε-DP."""

    name: ClassVar[str] = "svt1"

    @property
    def rho_scale(self) -> float:
        return 2.0 / self.epsilon

    @property
    def nu_scale(self) -> float | None:
        return 4.0 * self.cutoff / self.epsilon


@dataclass(frozen=True)
class SVT2(_SparseVectorWithCutoff):
    """SVT 2 (Dwork-Roth; Lyu-Su-Li Alg. 2): ρ = Lap(2c_max/ε), ν_i = Lap(4c_max/ε), ρ redrawn
    after every ⊤; ε-DP."""

    name: ClassVar[str] = "svt2"
    _redraw: ClassVar[bool] = True

    @property
    def rho_scale(self) -> float:
        return 2.0 * self.cutoff / self.epsilon

    @property
    def nu_scale(self) -> float | None:
        return 4.0 * self.cutoff / self.epsilon


@dataclass(frozen=True)
class SVT4(_SparseVectorWithCutoff):
    """SVT 4 (Lee-Clifton; Lyu-Su-Li Alg. 4): ρ = Lap(4/ε), ν_i = Lap(4/(3ε)), no redraw;
    ((1 + 6c_max)/4)·ε-DP."""

    name: ClassVar[str] = "svt4"

    @property
    def rho_scale(self) -> float:
        return 4.0 / self.epsilon

    @property
    def nu_scale(self) -> float | None:
        return 4.0 / (3.0 * self.epsilon)

    @property
    def true_epsilon(self) -> float | None:
        return (1.0 + 6.0 * self.cutoff) * float(self.epsilon) / 4.0


@dataclass(frozen=True)
class SVT5(_SparseVectorBase):
    """SVT 5 (Stoddard et al.; Lyu-Su-Li Alg. 5): ρ = Lap(2/ε), no query noise, no cutoff; ∞-DP."""

    name: ClassVar[str] = "svt5"

    @property
    def rho_scale(self) -> float:
        return 2.0 / self.epsilon

    @property
    def nu_scale(self) -> float | None:
        return None

    @property
    def true_epsilon(self) -> float | None:
        return math.inf


@dataclass(frozen=True)
class SVT6(_SparseVectorBase):
    """SVT 6 (Chen et al.; Lyu-Su-Li Alg. 6): ρ = Lap(2/ε), ν_i = Lap(2/ε), no cutoff; ∞-DP."""

    name: ClassVar[str] = "svt6"

    @property
    def rho_scale(self) -> float:
        return 2.0 / self.epsilon

    @property
    def nu_scale(self) -> float | None:
        return 2.0 / self.epsilon

    @property
    def true_epsilon(self) -> float | None:
        return math.inf


# --------------------------------------------------------------------------------------------
# a deployment change


@dataclass(frozen=True)
class SwitchingMechanism:
    """A deployment that runs ``before`` for ``period < change_period`` and ``after`` from then on.

    Both must claim the same ε (the deployment's claim does not change with the code).
    ``true_epsilon`` is the worst over the whole horizon; ``output_kind`` is the common kind, or
    ``"mixed"`` when the change alters it (RNM → RNM reporting the value: indices → reals); use
    :meth:`output_kind_at` and :meth:`true_epsilon_at` for one period.
    """

    before: ReferenceMechanism
    after: ReferenceMechanism
    change_period: int

    def __post_init__(self) -> None:
        for role, mech in (("before", self.before), ("after", self.after)):
            if not isinstance(mech, ReferenceMechanism):
                raise ValueError(f"{role} must be a reference mechanism; got {mech!r}")
        if isinstance(self.change_period, bool) or not isinstance(self.change_period, numbers.Integral):
            raise ValueError(f"change_period must be an integer; got {self.change_period!r}")
        if not math.isclose(self.before.claimed_epsilon, self.after.claimed_epsilon, rel_tol=1e-12):
            raise ValueError(
                "before and after must claim the same epsilon; got "
                f"{self.before.claimed_epsilon} and {self.after.claimed_epsilon}"
            )

    @property
    def name(self) -> str:
        return f"{self.before.name}->{self.after.name}@{self.change_period}"

    @property
    def claimed_epsilon(self) -> float:
        return self.before.claimed_epsilon

    @property
    def true_epsilon(self) -> float | None:
        values = (self.before.true_epsilon, self.after.true_epsilon)
        if any(v is not None and math.isinf(v) for v in values):
            return math.inf
        if any(v is None for v in values):
            return None
        return max(values)  # type: ignore[type-var]

    @property
    def output_kind(self) -> str:
        if self.before.output_kind == self.after.output_kind:
            return self.before.output_kind
        return "mixed"

    def mechanism_at(self, period: int) -> ReferenceMechanism:
        if isinstance(period, bool) or not isinstance(period, numbers.Integral):
            raise ValueError(f"period must be an integer; got {period!r}")
        return self.before if period < self.change_period else self.after

    def output_kind_at(self, period: int) -> str:
        return self.mechanism_at(period).output_kind

    def true_epsilon_at(self, period: int) -> float | None:
        return self.mechanism_at(period).true_epsilon

    def sample(self, database: Any, n: int, rng: np.random.Generator, period: int) -> np.ndarray:
        return self.mechanism_at(period).sample(database, n, rng)


# --------------------------------------------------------------------------------------------
# registry

REFERENCE_MECHANISMS: dict[str, Callable[..., ReferenceMechanism]] = {
    cls.name: cls
    for cls in (
        Laplace,
        LaplaceSmallerScale,
        LaplaceGaussian,
        ReportNoisyMax,
        RNMReportValue,
        RNMExponential,
        SVT1,
        SVT2,
        SVT4,
        SVT5,
        SVT6,
    )
}
"""Factories by slug; each takes ``epsilon`` and its own keyword parameters."""


def get_mechanism(slug: str, epsilon: float = DEFAULT_EPSILON, **params: Any) -> ReferenceMechanism:
    """Build the reference mechanism ``slug`` claiming ``epsilon``, e.g.
    ``get_mechanism("svt4", epsilon=0.5, cutoff=1, threshold=2.0)``."""
    try:
        factory = REFERENCE_MECHANISMS[slug]
    except KeyError:
        known = ", ".join(sorted(REFERENCE_MECHANISMS))
        raise ValueError(f"unknown reference mechanism {slug!r}; known: {known}") from None
    try:
        return factory(epsilon=epsilon, **params)
    except TypeError as exc:
        raise ValueError(f"invalid parameters for {slug!r}: {exc}") from None
