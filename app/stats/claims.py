"""Privacy claims as regions of one event's pair (p, q) (method.md §10).

A check ``(x, x', E)`` yields ``p = P(M(x) ∈ E)`` and ``q = P(M(x') ∈ E)``. Treat ``E`` as the
rejection region of a test of ``M(x')`` against ``M(x)``: its type-I error is ``q`` and its
type-II error ``1 − p``. A claim is f-DP for a symmetric trade-off function ``f`` (Dong, Roth &
Su, *Gaussian Differential Privacy*, JRSS-B 2022, Def. 2.1–2.3), so every such test obeys
``1 − p ≥ f(q)``, and, swapping the roles of x and x', ``1 − q ≥ f(p)``. Writing
``h = 1 − f`` (concave, increasing), the claim's **allowed region** for one event is

    R = {(p, q) ∈ [0, 1]²:  p ≤ h(q)  and  q ≤ h(p)}                      (convex)

- pure ε (Dwork et al. 2006; Kairouz, Oh & Viswanath 2015, Thm. 2.1):
  ``h(q) = min{e^ε q, 1 − e^−ε (1 − q)}``;
- (ε, δ) (Kairouz, Oh & Viswanath 2015; Dong, Roth & Su eq. (2.3)):
  ``h(q) = min{e^ε q + δ, 1 − e^−ε (1 − δ − q), 1}``, i.e. ``p ≤ e^ε q + δ`` and the
  complementary ``1 − q ≤ e^ε (1 − p) + δ``;
- μ-GDP (Dong, Roth & Su, Def. 2.6: ``G_μ(a) = Φ(Φ⁻¹(1 − a) − μ)``):
  ``h(q) = Φ(Φ⁻¹(q) + μ)``;
- ρ-zCDP (Bun & Steinke 2016): the intersection of the (ε, δ(ε)) regions over a grid of ε, with
  δ(ε) from dp-accounting's RDP accountant (:mod:`app.stats.accounting`). A finite grid keeps
  fewer constraints, so this region contains the exact one: never a false alarm from the grid.

Pure ε, (ε, δ) and zCDP regions are polygons (a lower envelope of lines); GDP's is smooth.

Every consumer asks the same questions of a claim: is (p, q) allowed (:meth:`Claim.allows`),
the boundary value ``h(q)`` (:meth:`Claim.upper`), a supporting line at a boundary point
(:func:`supporting_line`), the restricted maximum-likelihood point on the boundary
(:func:`boundary_mle`), and lower confidence bounds of the claim's parameter from
Clopper–Pearson bounds of (p, q) (:func:`epsilon_lower_bound`, :func:`mu_lower_bound`,
:func:`delta_lower_bound`, :func:`refutes`; the batch recipe of Jagielski et al. 2020 and Nasr
et al. 2023).

This is dpwatch's one claim type: the API edge (``app.claims.schemas.ClaimSpec``, stored JSON)
parses into it with :func:`parse_claim`, and the held-out test (:meth:`Claim.bound`,
:meth:`Claim.refuted_by`), the confidence sequences (:attr:`Claim.value`, :meth:`Claim.with_value`),
the verdict and the pages read it. Conversions are explicit: :meth:`Claim.tradeoff` (the f-DP
curve), :meth:`Claim.delta_at` and :meth:`Claim.to_approx_dp` (the (ε, δ(ε)) the claim implies).
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy.stats import beta as beta_dist

from app.stats import accounting

__all__ = [
    "ApproxDP",
    "BoundaryFit",
    "Claim",
    "GaussianDP",
    "Line",
    "PureDP",
    "ZCDP",
    "boundary_mle",
    "claim_of_record",
    "clopper_pearson",
    "delta_lower_bound",
    "dp_claim",
    "epsilon_lower_bound",
    "line_mle",
    "mu_lower_bound",
    "bernoulli_renyi",
    "parse_claim",
    "refutes",
    "rho_lower_bound",
    "supporting_line",
]

ClaimKind = Literal["epsilon", "epsilon_delta", "gdp", "zcdp"]

#: Largest ε a claim may name (e^ε must stay finite and meaningful).
MAX_EPSILON = 50.0
#: Largest μ and ρ a claim may name (beyond these, no event of a finite sample can refute them).
MAX_MU = 50.0
MAX_RHO = 100.0

_TINY = 1e-300


def _check_number(name: str, value: Any, *, low: float, high: float, low_open: bool = True,
                  high_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number; got {value!r}")
    v = float(value)
    ok_low = v > low if low_open else v >= low
    ok_high = v < high if high_open else v <= high
    if not (math.isfinite(v) and ok_low and ok_high):
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {lb}{low:g}, {high:g}{hb}; got {value!r}")
    return v


# ============================================================================ lines


@dataclass(frozen=True)
class Line:
    """A half-plane ``cp·p + cq·q ≤ c0`` that contains a claim's region (arrays allowed).

    A supporting line of the upper boundary ``p = h(q)`` reads ``p − s·q − d ≤ 0``
    (``cp = 1, cq = −s, c0 = d``); one of the lower boundary ``q = h(p)`` reads
    ``q − s·p − d ≤ 0``. :meth:`payoff` gives ``cp·p + cq·q − c0`` (≤ 0 on the region).
    """

    cp: NDArray[np.float64]
    cq: NDArray[np.float64]
    c0: NDArray[np.float64]

    @classmethod
    def upper(cls, slope: ArrayLike, intercept: ArrayLike) -> Line:
        """``p ≤ slope·q + intercept``."""
        s = np.asarray(slope, dtype=np.float64)
        d = np.asarray(intercept, dtype=np.float64)
        return cls(np.ones_like(s + d), -s + 0.0 * d, d + 0.0 * s)

    @classmethod
    def lower(cls, slope: ArrayLike, intercept: ArrayLike) -> Line:
        """``q ≤ slope·p + intercept``."""
        s = np.asarray(slope, dtype=np.float64)
        d = np.asarray(intercept, dtype=np.float64)
        return cls(-s + 0.0 * d, np.ones_like(s + d), d + 0.0 * s)

    def payoff(self, p: ArrayLike, q: ArrayLike) -> NDArray[np.float64]:
        return self.cp * np.asarray(p, dtype=np.float64) + self.cq * np.asarray(q, dtype=np.float64) - self.c0

    @property
    def orientation(self) -> NDArray[np.str_]:
        """``"upper"`` (x's side likelier: p − s·q ≤ d) or ``"lower"`` (q − s·p ≤ d)."""
        return np.where(self.cp > 0, "upper", "lower")

    @property
    def slope(self) -> NDArray[np.float64]:
        """``s`` of ``p − s·q ≤ d`` (upper) or of ``q − s·p ≤ d`` (lower)."""
        return np.where(self.cp > 0, -self.cq / np.where(self.cp > 0, self.cp, 1.0),
                        -self.cp / np.where(self.cq > 0, self.cq, 1.0))

    @property
    def intercept(self) -> NDArray[np.float64]:
        """``d`` of ``p − s·q ≤ d`` (upper) or of ``q − s·p ≤ d`` (lower)."""
        return np.where(self.cp > 0, self.c0 / np.where(self.cp > 0, self.cp, 1.0),
                        self.c0 / np.where(self.cq > 0, self.cq, 1.0))

    def __getitem__(self, index: Any) -> Line:
        return Line(np.asarray(self.cp[index]), np.asarray(self.cq[index]), np.asarray(self.c0[index]))

    def to_dict(self) -> dict[str, Any]:
        """JSON form of a scalar line: orientation, slope and intercept."""
        return {"orientation": str(self.orientation), "slope": float(self.slope), "intercept": float(self.intercept)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Line:
        if data.get("orientation") == "lower":
            return cls.lower(float(data["slope"]), float(data["intercept"]))
        return cls.upper(float(data["slope"]), float(data["intercept"]))


# ============================================================================ claims


class Claim(ABC):
    """A privacy claim: its region of one event's (p, q), and its description."""

    kind: ClassVar[ClaimKind]

    # -- description ------------------------------------------------------------------------

    @abstractmethod
    def to_dict(self) -> dict[str, float]:
        """The API form: ``{"epsilon": e}``, ``{"epsilon": e, "delta": d}``, ``{"gdp_mu": m}``
        or ``{"zcdp_rho": r}``."""

    @abstractmethod
    def describe(self) -> str:
        """A short human form, e.g. ``(1, 1e-05)-DP`` or ``0.5-GDP``."""

    # -- the region ---------------------------------------------------------------------------

    @abstractmethod
    def upper(self, q: ArrayLike) -> NDArray[np.float64]:
        """``h(q) = 1 − f(q)``: the largest p the claim allows for a given q."""

    def tradeoff(self, alpha: ArrayLike) -> NDArray[np.float64]:
        """The claim's trade-off function ``f(α) = 1 − h(α)`` (Dong, Roth & Su, Def. 2.1)."""
        return 1.0 - self.upper(alpha)

    def allows(self, p: ArrayLike, q: ArrayLike, tol: float = 1e-12) -> NDArray[np.bool_]:
        """Whether (p, q) lies in the region: ``p ≤ h(q)`` and ``q ≤ h(p)``."""
        p = np.asarray(p, dtype=np.float64)
        q = np.asarray(q, dtype=np.float64)
        return (p <= self.upper(q) + tol) & (q <= self.upper(p) + tol)

    def excess(self, p: ArrayLike, q: ArrayLike) -> NDArray[np.float64]:
        """``max(p − h(q), q − h(p))``: > 0 outside the region, ≤ 0 inside."""
        p = np.asarray(p, dtype=np.float64)
        q = np.asarray(q, dtype=np.float64)
        return np.maximum(p - self.upper(q), q - self.upper(p))

    @abstractmethod
    def delta_at(self, epsilon: float) -> float:
        """The δ the claim allows at ``epsilon``: the claim implies (ε, δ_at(ε))-DP."""

    @abstractmethod
    def _upper_segments(self) -> tuple[NDArray[np.float64], ...] | None:
        """Polygon claims: (q_lo, q_hi, slope, intercept) of the upper boundary's segments."""

    # -- the parameter ------------------------------------------------------------------------

    #: The symbol of the parameter the claim names and its lower bounds are about (ε, μ or ρ).
    parameter: ClassVar[str] = "ε"

    @property
    @abstractmethod
    def value(self) -> float:
        """The claimed value of :attr:`parameter` (ε, μ or ρ)."""

    @abstractmethod
    def with_value(self, value: float) -> Claim:
        """The claim of the same family at another value of its parameter (δ kept for (ε, δ))."""

    @property
    def name(self) -> str:
        """The family's name (``kind``)."""
        return self.kind

    def to_approx_dp(self, epsilon: float) -> Claim:
        """The (ε, δ_at(ε))-DP claim this claim implies (pure ε when δ = 0)."""
        delta = self.delta_at(epsilon)
        return ApproxDP(epsilon, delta) if delta > 0 else PureDP(epsilon)

    # -- the held-out test of one event (docs/audit.md §4) ------------------------------------

    @abstractmethod
    def bound(self, p_lo: float, q_hi: float) -> float:
        """The claim's parameter implied at the confidence corner ``(p_lo, q_hi)`` of one event: a
        1 − α lower confidence bound on it when the corner holds with probability ≥ 1 − α."""

    def refuted_by(self, p_lo: float, q_hi: float) -> bool:
        """Whether the corner ``(p_lo, q_hi)`` lies outside the region: ``p_lo > h(q_hi)``
        (method.md §10.1; for (ε, δ) both ``p ≤ e^ε q + δ`` and ``1 − q ≤ e^ε (1 − p) + δ``)."""
        return bool(p_lo > float(self.upper(q_hi)) + 1e-12)

    def __str__(self) -> str:
        return self.describe()


def _epsilon_bound(p_lo: float, q_hi: float, delta: float) -> float:
    """ε implied at the corner at the claimed δ: ``max(ln((p_lo − δ)/q_hi), ln((1 − δ − q_hi)/(1 − p_lo)))``,
    the two faces of the (ε, δ) region (Kairouz, Oh & Viswanath 2015); −inf when neither is positive."""
    e1 = math.log((p_lo - delta) / q_hi) if p_lo > delta and q_hi > 0 else -math.inf
    e2 = math.log((1 - delta - q_hi) / (1 - p_lo)) if 1 - delta - q_hi > 0 and p_lo < 1 else -math.inf
    return max(e1, e2)


#: Rényi orders over which ρ_lb takes its supremum.
RENYI_ORDERS = np.concatenate([np.linspace(1.01, 10.0, 400), np.geomspace(10.0, 2000.0, 200)])


def bernoulli_renyi(p: float, q: float, orders: NDArray[np.float64] = RENYI_ORDERS) -> NDArray[np.float64]:
    """D_α(Bern(p) ‖ Bern(q)) for each order α > 1 (Rényi 1961; log-sum-exp for stability)."""
    p = min(max(p, 0.0), 1.0)
    q = min(max(q, 1e-300), 1.0 - 1e-16)
    a = orders
    terms = []
    if p > 0:
        terms.append(a * math.log(p) + (1 - a) * math.log(q))
    if p < 1:
        terms.append(a * math.log1p(-p) + (1 - a) * math.log1p(-q))
    return np.asarray(special.logsumexp(np.vstack(terms), axis=0) / (a - 1), dtype=np.float64)


def rho_lower_bound(p_lo: float, q_hi: float) -> float:
    """ρ_lb = sup_α D_α(Bern(p_lo) ‖ Bern(q_hi))/α, 0 when p_lo ≤ q_hi: ρ-zCDP bounds the Rényi
    divergence of every post-processing, so of an event's indicator (Bun & Steinke 2016, Def. 1.1
    and Lemma 1.8)."""
    if p_lo <= q_hi:
        return 0.0
    return float(max(np.max(bernoulli_renyi(p_lo, q_hi) / RENYI_ORDERS), 0.0))


class _PolygonClaim(Claim, ABC):
    """A claim whose ``h`` is the lower envelope of lines ``s_i·q + d_i`` (and of p ≤ 1)."""

    @abstractmethod
    def _lines(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Slopes and intercepts of the lines whose minimum is ``h``."""

    @functools.cached_property
    def _envelope(self) -> tuple[NDArray[np.float64], ...]:
        s, d = self._lines()
        return _lower_envelope(np.append(s, 0.0), np.append(d, 1.0))

    def _upper_segments(self) -> tuple[NDArray[np.float64], ...]:
        return self._envelope

    def upper(self, q: ArrayLike) -> NDArray[np.float64]:
        q = np.clip(np.asarray(q, dtype=np.float64), 0.0, 1.0)
        _, _, s, d = self._envelope
        out = np.full(q.shape, np.inf)
        for si, di in zip(s, d):
            out = np.minimum(out, si * q + di)
        return np.clip(out, 0.0, 1.0)

    def delta_at(self, epsilon: float) -> float:
        """``sup_q (h(q) − e^ε q)`` for q ∈ [0, 1]: the hockey-stick bound of the region; it is
        attained at a vertex of the polygon."""
        q_lo, q_hi, _, _ = self._envelope
        qs = np.concatenate([q_lo, q_hi])
        return float(max(0.0, np.max(self.upper(qs) - math.exp(min(epsilon, 700.0)) * qs)))


def _lower_envelope(slopes: NDArray[np.float64], intercepts: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    """Segments of ``min_i (s_i q + d_i)`` on q ∈ [0, 1]: the convex-hull trick.

    Returns arrays ``q_lo, q_hi, s, d`` of the active lines in order of increasing q.
    """
    order = np.lexsort((intercepts, -slopes))  # slope descending, then intercept ascending
    hull: list[tuple[float, float]] = []
    for i in order:
        s, d = float(slopes[i]), float(intercepts[i])
        if hull and math.isclose(hull[-1][0], s, rel_tol=0, abs_tol=1e-15):
            continue  # same slope, larger intercept: never below
        while len(hull) >= 2:
            (s1, d1), (s2, d2) = hull[-2], hull[-1]
            # line 2 is useless if line (s, d) meets line 1 at or before line 2 does
            x12 = (d2 - d1) / (s1 - s2)
            x1n = (d - d1) / (s1 - s)
            if x1n <= x12:
                hull.pop()
            else:
                break
        hull.append((s, d))
    breaks = [0.0]
    for (s1, d1), (s2, d2) in zip(hull, hull[1:]):
        breaks.append((d2 - d1) / (s1 - s2))
    breaks.append(1.0)
    q_lo, q_hi, ss, dd = [], [], [], []
    for k, (s, d) in enumerate(hull):
        lo, hi = max(0.0, breaks[k]), min(1.0, breaks[k + 1])
        if hi > lo:
            q_lo.append(lo)
            q_hi.append(hi)
            ss.append(s)
            dd.append(d)
    return np.array(q_lo), np.array(q_hi), np.array(ss), np.array(dd)


def _dp_lines(epsilon: ArrayLike, delta: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The supporting lines ``p ≤ s·q + d`` of the (ε, δ)-DP region for each pair (ε_i, δ_i):
    ``p ≤ e^ε q + δ`` and its mirror ``1 − q ≤ e^ε (1 − p) + δ``, i.e. slope e^−ε and
    intercept 1 − (1 − δ)e^−ε (Kairouz, Oh & Viswanath 2015). Slopes of the first kind first."""
    c = np.exp(np.atleast_1d(np.asarray(epsilon, dtype=np.float64)))
    d = np.broadcast_to(np.asarray(delta, dtype=np.float64), c.shape)
    return np.concatenate([c, 1.0 / c]), np.concatenate([d, 1.0 - (1.0 - d) / c])


@dataclass(frozen=True)
class PureDP(_PolygonClaim):
    """ε-DP (Dwork, McSherry, Nissim & Smith 2006): ``p ≤ e^ε q`` and ``1 − q ≤ e^ε (1 − p)``."""

    epsilon: float
    kind: ClassVar[ClaimKind] = "epsilon"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_number("epsilon", self.epsilon, low=0.0, high=MAX_EPSILON,
                                                          low_open=False))

    def to_dict(self) -> dict[str, float]:
        return {"epsilon": self.epsilon}

    def describe(self) -> str:
        return f"{self.epsilon:g}-DP"

    def _lines(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return _dp_lines(self.epsilon, 0.0)

    def delta_at(self, epsilon: float) -> float:
        return 0.0 if epsilon >= self.epsilon else super().delta_at(epsilon)

    @property
    def value(self) -> float:
        return self.epsilon

    def with_value(self, value: float) -> PureDP:
        return PureDP(value)

    def bound(self, p_lo: float, q_hi: float) -> float:
        return _epsilon_bound(p_lo, q_hi, 0.0)


@dataclass(frozen=True)
class ApproxDP(_PolygonClaim):
    """(ε, δ)-DP: ``p ≤ e^ε q + δ`` and ``1 − q ≤ e^ε (1 − p) + δ`` (Kairouz, Oh & Viswanath 2015)."""

    epsilon: float
    delta: float
    kind: ClassVar[ClaimKind] = "epsilon_delta"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_number("epsilon", self.epsilon, low=0.0, high=MAX_EPSILON,
                                                          low_open=False))
        object.__setattr__(self, "delta", _check_number("delta", self.delta, low=0.0, high=1.0, high_open=True))

    def to_dict(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta}

    def describe(self) -> str:
        return f"({self.epsilon:g}, {self.delta:g})-DP"

    def _lines(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return _dp_lines(self.epsilon, self.delta)

    def delta_at(self, epsilon: float) -> float:
        return self.delta if epsilon >= self.epsilon else super().delta_at(epsilon)

    @property
    def value(self) -> float:
        return self.epsilon

    def with_value(self, value: float) -> ApproxDP:
        return ApproxDP(value, self.delta)

    def bound(self, p_lo: float, q_hi: float) -> float:
        return _epsilon_bound(p_lo, q_hi, self.delta)


@dataclass(frozen=True)
class ZCDP(_PolygonClaim):
    """ρ-zCDP (Bun & Steinke 2016), through its (ε, δ(ε)) curve from dp-accounting."""

    rho: float
    kind: ClassVar[ClaimKind] = "zcdp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _check_number("rho", self.rho, low=0.0, high=MAX_RHO))

    def to_dict(self) -> dict[str, float]:
        return {"zcdp_rho": self.rho}

    def describe(self) -> str:
        return f"{self.rho:g}-zCDP"

    def _lines(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return _dp_lines(*accounting.zcdp_delta_curve(self.rho))

    def delta_at(self, epsilon: float) -> float:
        return accounting.zcdp_delta(self.rho, epsilon)

    parameter: ClassVar[str] = "ρ"

    @property
    def value(self) -> float:
        return self.rho

    def with_value(self, value: float) -> ZCDP:
        return ZCDP(value)

    def bound(self, p_lo: float, q_hi: float) -> float:
        """ρ_lb of :func:`rho_lower_bound`."""
        return rho_lower_bound(p_lo, q_hi)

    def refuted_by(self, p_lo: float, q_hi: float) -> bool:
        """Outside the (ε, δ(ε)) region, or ρ_lb > ρ: both are implied by the claim, so the test keeps its level."""
        return super().refuted_by(p_lo, q_hi) or rho_lower_bound(p_lo, q_hi) > self.rho


@dataclass(frozen=True)
class GaussianDP(Claim):
    """μ-GDP (Dong, Roth & Su 2022, Def. 2.6): ``p ≤ Φ(Φ⁻¹(q) + μ)`` and the same with p, q swapped."""

    mu: float
    kind: ClassVar[ClaimKind] = "gdp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _check_number("gdp_mu", self.mu, low=0.0, high=MAX_MU))

    def to_dict(self) -> dict[str, float]:
        return {"gdp_mu": self.mu}

    def describe(self) -> str:
        return f"{self.mu:g}-GDP"

    def upper(self, q: ArrayLike) -> NDArray[np.float64]:
        q = np.clip(np.asarray(q, dtype=np.float64), 0.0, 1.0)
        return special.ndtr(special.ndtri(q) + self.mu)

    def delta_at(self, epsilon: float) -> float:
        return accounting.gdp_delta(self.mu, epsilon)

    parameter: ClassVar[str] = "μ"

    @property
    def value(self) -> float:
        return self.mu

    def with_value(self, value: float) -> GaussianDP:
        return GaussianDP(value)

    def bound(self, p_lo: float, q_hi: float) -> float:
        """μ_lb = Φ⁻¹(p_lo) − Φ⁻¹(q_hi) (method.md §10.4), floored at 0."""
        if p_lo <= 0 or q_hi >= 1:
            return 0.0
        return float(max(special.ndtri(p_lo) - special.ndtri(q_hi), 0.0))

    def _upper_segments(self) -> None:
        return None


def dp_claim(epsilon: float, delta: float = 0.0) -> PureDP | ApproxDP:
    """ε-DP when δ = 0, else (ε, δ)-DP (:class:`PureDP`, :class:`ApproxDP`)."""
    return ApproxDP(epsilon, delta) if delta else PureDP(epsilon)


#: The fields of a claim's API form.
CLAIM_FIELDS = ("epsilon", "delta", "gdp_mu", "zcdp_rho")


def claim_of_record(data: Any) -> Claim | None:
    """The claim in a stored record (a mapping that may carry other keys, such as ``describe``, or
    None values), or None when it holds no readable claim. For reading stored JSON; input from a
    user goes through :func:`parse_claim`, whose errors name the field."""
    if isinstance(data, Claim):
        return data
    if not isinstance(data, Mapping):
        return None
    fields = {k: data[k] for k in CLAIM_FIELDS if data.get(k) is not None}
    if not fields:
        return None
    try:
        return parse_claim(fields)
    except ValueError:
        return None


def claimed_epsilon(claim: Claim | None) -> float | None:
    """The ε of a claim stated in ε (pure ε or (ε, δ)); None for μ-GDP, ρ-zCDP or no claim."""
    return claim.epsilon if isinstance(claim, PureDP | ApproxDP) else None


def claimed_delta(claim: Claim | None) -> float:
    """The δ of an (ε, δ) claim; 0 for every other claim (and for none)."""
    return float(claim.delta) if isinstance(claim, ApproxDP) else 0.0


def parse_claim(data: Any) -> Claim:
    """A claim from its API form (a mapping) or a :class:`Claim`; raises ``ValueError`` with the reason.

    Exactly one of: ``{"epsilon": e}``, ``{"epsilon": e, "delta": d}``, ``{"gdp_mu": m}``,
    ``{"zcdp_rho": r}`` (``"delta": 0`` means pure ε).
    """
    if isinstance(data, Claim):
        return data
    if not isinstance(data, Mapping):
        raise ValueError(f"a claim must be an object such as {{\"epsilon\": 1}}; got {data!r}")
    keys = set(data)
    unknown = keys - {"epsilon", "delta", "gdp_mu", "zcdp_rho"}
    if unknown:
        raise ValueError(f"unknown claim field(s) {sorted(unknown)}; use epsilon (+ delta), gdp_mu or zcdp_rho")
    if keys == {"epsilon"}:
        return PureDP(data["epsilon"])
    if keys == {"epsilon", "delta"}:
        if isinstance(data["delta"], (int, float)) and not isinstance(data["delta"], bool) and data["delta"] == 0:
            return PureDP(data["epsilon"])
        return ApproxDP(data["epsilon"], data["delta"])
    if keys == {"gdp_mu"}:
        return GaussianDP(data["gdp_mu"])
    if keys == {"zcdp_rho"}:
        return ZCDP(data["zcdp_rho"])
    if keys == {"delta"}:
        raise ValueError("delta needs an epsilon: give {\"epsilon\": e, \"delta\": d}")
    raise ValueError(
        f"a claim is exactly one of {{epsilon}}, {{epsilon, delta}}, {{gdp_mu}} or {{zcdp_rho}}; got fields {sorted(keys)}"
    )


# ============================================================================ restricted MLEs

_BISECTION_STEPS = 48


def _loglik(a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64], p: NDArray[np.float64],
            q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Binomial log-likelihood of counts (a, b) out of n at (p, q), with 0·log 0 = 0."""

    def term(k: NDArray[np.float64], x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.where(k > 0, k * np.log(np.maximum(x, _TINY)), 0.0)

    return term(a, p) + term(n - a, 1.0 - p) + term(b, q) + term(n - b, 1.0 - q)


def _segment_mle(a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64], s: NDArray[np.float64],
                 d: NDArray[np.float64], lo: NDArray[np.float64], hi: NDArray[np.float64]) -> NDArray[np.float64]:
    """argmax over q ∈ [lo, hi] of the likelihood on the line p = d + s·q (vectorised bisection).

    Along a line the log-likelihood ``a ln(d+sq) + (n−a) ln(1−d−sq) + b ln q + (n−b) ln(1−q)`` is
    concave (a sum of logs of affine functions), so its derivative decreases and bisection on
    its sign finds the maximiser, or the end of the segment it is pushed against.
    """
    lo = np.array(lo, dtype=np.float64, copy=True)
    hi = np.array(hi, dtype=np.float64, copy=True)

    def deriv(q: NDArray[np.float64]) -> NDArray[np.float64]:
        p = d + s * q
        with np.errstate(divide="ignore", invalid="ignore"):
            g = (np.where(a > 0, a * s / p, 0.0) - np.where(n - a > 0, (n - a) * s / (1.0 - p), 0.0)
                 + np.where(b > 0, b / q, 0.0) - np.where(n - b > 0, (n - b) / (1.0 - q), 0.0))
        return np.nan_to_num(g, nan=0.0, posinf=1e300, neginf=-1e300)

    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        up = deriv(mid) > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def line_mle(a: ArrayLike, b: ArrayLike, n: ArrayLike, line: Line) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The maximum-likelihood (p̃, q̃) of counts (a, b) out of n *on* the line ``payoff = 0``.

    This is the restricted MLE of a score test of the linear null ``cp·p + cq·q ≤ c0``
    (Farrington & Manning 1990 for d = 0, where it is the closed form of :mod:`app.stats.period`).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    upper = line.cp > 0
    s = np.broadcast_to(line.slope, np.broadcast(a, b, n, line.cp).shape)
    d = np.broadcast_to(line.intercept, s.shape)
    # Orient every line as "first = d + s·second" with (first, second) = (p, q) or (q, p).
    k1 = np.where(upper, a, b)
    k2 = np.where(upper, b, a)
    # Feasible range of the second coordinate: 0 ≤ d + s·t ≤ 1 and 0 ≤ t ≤ 1 (s > 0).
    safe_s = np.where(s > 0, s, 1.0)
    lo = np.where(s > 0, np.clip(-d / safe_s, 0.0, 1.0), 0.0)
    hi = np.where(s > 0, np.clip((1.0 - d) / safe_s, 0.0, 1.0), 1.0)
    t = _segment_mle(k1, k2, n + 0.0 * k1, s, d, lo, hi)
    first = np.clip(d + s * t, 0.0, 1.0)
    p = np.where(upper, first, t)
    q = np.where(upper, t, first)
    return p, q


@dataclass(frozen=True)
class BoundaryFit:
    """The restricted MLE on a claim's boundary and the supporting line there (arrays)."""

    p: NDArray[np.float64]
    q: NDArray[np.float64]
    line: Line
    loglik: NDArray[np.float64]
    outside: NDArray[np.bool_]


def _gdp_branch_mle(a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64],
                    mu: float) -> NDArray[np.float64]:
    """argmax over t of the likelihood at (p, q) = (Φ(t + μ), Φ(t)) (vectorised bisection).

    ``log Φ`` and ``log(1 − Φ)`` are concave, so the log-likelihood is concave in t.
    """

    def mills(x: NDArray[np.float64]) -> NDArray[np.float64]:  # φ(x)/Φ(x) = √(2/π)/erfcx(−x/√2), stable
        return math.sqrt(2.0 / math.pi) / special.erfcx(-x / math.sqrt(2.0))

    def deriv(t: NDArray[np.float64]) -> NDArray[np.float64]:
        u = t + mu
        return a * mills(u) - (n - a) * mills(-u) + b * mills(t) - (n - b) * mills(-t)

    # The maximiser lies between those of the two concave terms: t_q = Φ⁻¹(q̂), t_p = Φ⁻¹(p̂) − μ.
    with np.errstate(divide="ignore"):
        t_q = special.ndtri(b / n)
        t_p = special.ndtri(a / n) - mu
    lo = np.clip(np.minimum(t_q, t_p), -40.0, 40.0)
    hi = np.clip(np.maximum(t_q, t_p), -40.0, 40.0)
    lo, hi = np.broadcast_arrays(lo - 1e-9, hi + 1e-9)
    lo, hi = lo.copy(), hi.copy()
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        up = deriv(mid) > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def _polygon_branch_mle(a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64],
                        segments: tuple[NDArray[np.float64], ...]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """argmax of the likelihood on the upper boundary of a polygon claim.

    The best vertex is found first; the maximiser lies on one of the two segments next to it
    (the likelihood is concave along each segment), each solved by :func:`_segment_mle`.
    Returns q̃ and the index of its segment.
    """
    q_lo, q_hi, s, d = segments
    k = len(s)
    shape = np.broadcast(a, b, n).shape
    vq = np.append(q_lo, q_hi[-1])  # k + 1 vertices
    vp = np.clip(np.append(s * q_lo + d, s[-1] * q_hi[-1] + d[-1]), 0.0, 1.0)
    ll = _loglik(a[..., None], b[..., None], n[..., None], vp, vq)
    best = np.argmax(ll, axis=-1)
    best_q = np.full(shape, np.nan)
    best_seg = np.zeros(shape, dtype=np.int64)
    best_ll = np.full(shape, -np.inf)
    for offset in (-1, 0):  # segment before and after the best vertex
        seg = np.clip(best + offset, 0, k - 1)
        qq = _segment_mle(a, b, n, s[seg], d[seg], q_lo[seg], q_hi[seg])
        pp = np.clip(d[seg] + s[seg] * qq, 0.0, 1.0)
        lq = _loglik(a, b, n, pp, qq)
        better = lq > best_ll
        best_q = np.where(better, qq, best_q)
        best_seg = np.where(better, seg, best_seg)
        best_ll = np.where(better, lq, best_ll)
    return best_q, best_seg


def _upper_fit(claim: Claim, a: NDArray[np.float64], b: NDArray[np.float64], n: NDArray[np.float64]
               ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Restricted MLE on the upper branch p = h(q): (p̃, q̃, slope, intercept) of the supporting line."""
    if isinstance(claim, GaussianDP):
        t = _gdp_branch_mle(a, b, n, claim.mu)
        q = special.ndtr(t)
        p = special.ndtr(t + claim.mu)
        slope = np.exp(-claim.mu * t - 0.5 * claim.mu**2)  # dp/dq = φ(t + μ)/φ(t)
        return p, q, slope, p - slope * q
    segments = claim._upper_segments()
    assert segments is not None
    q_lo, q_hi, s, d = segments
    q, seg = _polygon_branch_mle(a, b, n, segments)
    p = np.clip(d[seg] + s[seg] * q, 0.0, 1.0)
    slope = s[seg].astype(np.float64)
    # At a vertex the supporting lines have slopes between the two segments'. Outside the
    # region, the KKT condition makes the likelihood's gradient normal to the chosen line.
    at_start = (q <= q_lo[seg] + 1e-12) & (seg > 0)
    at_end = (q >= q_hi[seg] - 1e-12) & (seg < len(s) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        gp = np.where(a > 0, a / np.maximum(p, _TINY), 0.0) - np.where(n - a > 0, (n - a) / np.maximum(1 - p, _TINY), 0.0)
        gq = np.where(b > 0, b / np.maximum(q, _TINY), 0.0) - np.where(n - b > 0, (n - b) / np.maximum(1 - q, _TINY), 0.0)
        grad_slope = np.where(gp > 0, -gq / gp, np.nan)
    prev_s = s[np.clip(seg - 1, 0, len(s) - 1)]
    next_s = s[np.clip(seg + 1, 0, len(s) - 1)]
    lo_start, hi_start = slope, prev_s
    lo_end, hi_end = next_s, slope
    pick_start = np.where(np.isnan(grad_slope), 0.5 * (lo_start + hi_start), np.clip(grad_slope, lo_start, hi_start))
    pick_end = np.where(np.isnan(grad_slope), 0.5 * (lo_end + hi_end), np.clip(grad_slope, lo_end, hi_end))
    slope = np.where(at_start, pick_start, np.where(at_end, pick_end, slope))
    return p, q, slope, p - slope * q


def boundary_mle(claim: Claim, a: ArrayLike, b: ArrayLike, n: ArrayLike) -> BoundaryFit:
    """The maximum-likelihood point of counts (a, b) out of n on the boundary of the claim's
    region, and the supporting line of the region there (vectorised).

    Both branches are fitted — ``p = h(q)`` (the event likelier under x) and ``q = h(p)`` (likelier
    under x') — and the likelier fit is kept. For counts outside the region this is the
    restricted MLE of the whole null (the likelihood is concave and the region convex, so the
    null's maximiser lies on the boundary); the supporting line is the tangent there, or at a
    vertex the one normal to the likelihood's gradient (the KKT condition).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    a, b, n = np.broadcast_arrays(a, b, n)
    pu, qu, su, du = _upper_fit(claim, a, b, n)
    ql, pl, sl, dl = _upper_fit(claim, b, a, n)  # the lower branch is the mirror image
    llu = _loglik(a, b, n, pu, qu)
    lll = _loglik(a, b, n, pl, ql)
    use_upper = llu >= lll
    line = Line(
        cp=np.where(use_upper, 1.0, -sl),
        cq=np.where(use_upper, -su, 1.0),
        c0=np.where(use_upper, du, dl),
    )
    p = np.where(use_upper, pu, pl)
    q = np.where(use_upper, qu, ql)
    outside = claim.excess(a / np.maximum(n, 1), b / np.maximum(n, 1)) > 0
    return BoundaryFit(p=p, q=q, line=line, loglik=np.where(use_upper, llu, lll), outside=outside)


def supporting_line(claim: Claim, p: ArrayLike, q: ArrayLike, orientation: str = "auto") -> Line:
    """A supporting line of the claim's region at the boundary point nearest to (p, q).

    ``orientation``: ``"upper"`` takes the point ``(h(q), q)`` on the branch where the event is
    likelier under x, ``"lower"`` the point ``(p, h(p))``, ``"auto"`` the branch with the larger
    excess ``p − h(q)`` vs ``q − h(p)``. The line is the tangent there (the mean of the two
    slopes at a vertex). It is what a bet on the linear payoff ``p − s·q − d`` needs.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if orientation not in ("auto", "upper", "lower"):
        raise ValueError(f"orientation must be 'auto', 'upper' or 'lower'; got {orientation!r}")
    up = (p - claim.upper(q) >= q - claim.upper(p)) if orientation == "auto" else np.full(np.broadcast(p, q).shape, orientation == "upper")
    t = np.where(up, q, p)  # the free coordinate of the boundary point
    s, d = _tangent(claim, t)
    return Line(cp=np.where(up, 1.0, -s), cq=np.where(up, -s, 1.0), c0=d)


def _tangent(claim: Claim, t: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Slope and intercept of the tangent to ``h`` at t (mean of one-sided slopes at a vertex)."""
    t = np.clip(t, 0.0, 1.0)
    if isinstance(claim, GaussianDP):
        z = special.ndtri(np.clip(t, 1e-300, 1 - 1e-16))
        s = np.exp(-claim.mu * z - 0.5 * claim.mu**2)
        return s, claim.upper(t) - s * t
    segments = claim._upper_segments()
    assert segments is not None
    q_lo, q_hi, s_all, _ = segments
    right = np.clip(np.searchsorted(q_hi, t, side="right"), 0, len(s_all) - 1)
    left = np.clip(np.searchsorted(q_lo, t, side="left") - 1, 0, len(s_all) - 1)
    s = 0.5 * (s_all[left] + s_all[right])
    return s, claim.upper(t) - s * t


# ============================================================================ confidence bounds


def clopper_pearson(k: ArrayLike, n: ArrayLike, alpha: float, side: Literal["lower", "upper"]) -> NDArray[np.float64]:
    """One-sided Clopper–Pearson (1934) bound at level 1 − α for a binomial proportion:
    lower ``B⁻¹(α; k, n − k + 1)`` (0 when k = 0), upper ``B⁻¹(1 − α; k + 1, n − k)`` (1 when k = n)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha!r}")
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if np.any((k < 0) | (k > n)) or np.any(n < 1):
        raise ValueError("counts must lie in [0, n] with n >= 1")
    with np.errstate(invalid="ignore"):
        if side == "lower":
            return np.where(k > 0, beta_dist.ppf(alpha, np.maximum(k, 1e-300), n - k + 1), 0.0)
        if side == "upper":
            return np.where(k < n, beta_dist.ppf(1 - alpha, k + 1, np.maximum(n - k, 1e-300)), 1.0)
    raise ValueError(f"side must be 'lower' or 'upper'; got {side!r}")


def _pq_bounds(a: ArrayLike, b: ArrayLike, n: ArrayLike, alpha: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """p⁻ and q⁺, each at level α/2, so that both hold together with probability ≥ 1 − α."""
    return clopper_pearson(a, n, alpha / 2, "lower"), clopper_pearson(b, n, alpha / 2, "upper")


def epsilon_lower_bound(a: ArrayLike, b: ArrayLike, n: ArrayLike, delta: float = 0.0,
                        alpha: float = 0.05) -> NDArray[np.float64]:
    """ε_lb at a given δ from one event: ``max(log((p⁻ − δ)/q⁺), log((1 − δ − q⁺)/(1 − p⁻)), 0)``.

    Jagielski, Ullman & Oprea (2020), §3; Nasr et al. (2023) eq. (1): with the event as a test,
    type-I error ``q`` and type-II error ``1 − p``, bounded by Clopper–Pearson at α/2 each.
    """
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1); got {delta!r}")
    p_lo, q_hi = _pq_bounds(a, b, n, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.where(p_lo - delta > 0, np.log(np.maximum(p_lo - delta, _TINY) / q_hi), 0.0)
        e2 = np.where(1 - delta - q_hi > 0, np.log(np.maximum(1 - delta - q_hi, _TINY) / np.maximum(1 - p_lo, _TINY)), 0.0)
    return np.maximum(np.maximum(e1, e2), 0.0)


def mu_lower_bound(a: ArrayLike, b: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> NDArray[np.float64]:
    """μ_lb = Φ⁻¹(p⁻) − Φ⁻¹(q⁺) = Φ⁻¹(1 − a⁺) − Φ⁻¹(b⁺) (Nasr et al. 2023, §2; Dong, Roth & Su
    Def. 2.6 solved for μ), floored at 0."""
    p_lo, q_hi = _pq_bounds(a, b, n, alpha)
    return np.maximum(special.ndtri(p_lo) - special.ndtri(q_hi), 0.0)


def delta_lower_bound(a: ArrayLike, b: ArrayLike, n: ArrayLike, epsilon: float,
                      alpha: float = 0.05) -> NDArray[np.float64]:
    """δ_lb at a given ε: ``max(p⁻ − e^ε q⁺, (1 − q⁺) − e^ε (1 − p⁻), 0)`` (the (ε, δ) region's
    two constraints at the least favourable corner of the confidence box)."""
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0; got {epsilon!r}")
    p_lo, q_hi = _pq_bounds(a, b, n, alpha)
    c = math.exp(epsilon)
    return np.maximum(np.maximum(p_lo - c * q_hi, (1 - q_hi) - c * (1 - p_lo)), 0.0)


def refutes(claim: Claim, a: ArrayLike, b: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> NDArray[np.bool_]:
    """Whether the counts refute the claim at level α: the corner (p⁻, q⁺) of the confidence box
    lies outside the region (``p⁻ > h(q⁺)``). The region is increasing in q and decreasing in p
    on this branch, so the whole box is then outside."""
    p_lo, q_hi = _pq_bounds(a, b, n, alpha)
    return p_lo > claim.upper(q_hi) + 1e-12
