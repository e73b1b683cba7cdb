"""Empirical δ and total risk (method.md §7).

Implements seed 001 (Burchard, Daoud, *Empirical Differential Privacy*):

- Theorem 1: two estimated densities ``f̂_x``, ``f̂_x'`` are empirically (ε, δ)-DP with

      δ̂(ε) = max{ ∫ (f̂_x − e^ε·f̂_x')₊ , ∫ (f̂_x' − e^ε·f̂_x)₊ }

  — :func:`privacy_profile` evaluates this on a grid of ε (the empirical privacy profile) and
  :func:`empirical_delta` at one ε;
- Definition 3: the total risk ``δ* = 1 − Π_i (1 − δ_i)`` over several pairs — :func:`total_risk`.

Density estimates:

- discrete outputs (1-D outcomes, or rows of a 2-D array as outcomes): the relative frequencies
  (the empirical distributions of Definition 2, not floored, so they sum to 1); the integrals are
  sums over the outcomes seen in either sample;
- continuous outputs (``(n,)`` or ``(n, d)``, d ≤ 3): the Gaussian KDE of seed 003 eq. (8) with
  Silverman's bandwidth (:func:`app.stats.kde.silverman_bandwidth`), each **truncated to its own
  sample's range** (the bounding box of the sample) **and renormalised**, as seed 001 §4
  recommends because the extrapolated tails are unstable multiplicatively. The integrals are
  Riemann sums on a common grid over the pooled range with spacing at most ``h/2``. Seed 001
  prefers variable-width kernels; we keep the fixed-bandwidth KDE used by MPL so that both
  analyses see the same density estimates.

For a pure ε-DP mechanism the profile is 0 at the true ε up to sampling error. That error is the
positive part of the density estimates' noise wherever the true ratio sits at ``e^ε``: for the
Laplace mechanism (whose ratio is ``e^ε`` on both tails) about 0.015 at n = 2·10⁴ and ε = 1,
falling like ``(n·h)^{−1/2}``; at 1.5·ε it is below 10⁻³.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from app.stats.kde import as_continuous_samples, kde_on_grid, silverman_bandwidth
from app.stats.mpl import KINDS, discrete_frequencies

__all__ = [
    "DEFAULT_DELTA_GRID_POINTS",
    "PrivacyProfile",
    "empirical_delta",
    "privacy_profile",
    "total_risk",
]

DEFAULT_DELTA_GRID_POINTS = {1: 2001, 2: 201, 3: 61}
"""Fewest grid points per axis over the pooled sample range; more are used when needed to keep
the spacing at most ``h/2`` (the KDE itself is binned at ``h/4``, see :func:`kde_on_grid`)."""


@dataclass(frozen=True, eq=False)
class PrivacyProfile:
    """The empirical privacy profile ``ε ↦ δ̂(ε)`` of seed 001 Theorem 1 for one pair ``(x, x')``.

    ``delta`` is the maximum of the two directions ``delta_x_xp = ∫(f̂_x − e^ε f̂_x')₊`` and
    ``delta_xp_x = ∫(f̂_x' − e^ε f̂_x)₊``, each of shape ``epsilons.shape``.
    """

    kind: str
    epsilons: NDArray[np.float64]
    delta: NDArray[np.float64]
    delta_x_xp: NDArray[np.float64]
    delta_xp_x: NDArray[np.float64]
    n_x: int
    n_xp: int
    bandwidth_x: float | None = None
    bandwidth_xp: float | None = None
    range_x: tuple[tuple[float, float], ...] | None = None
    range_xp: tuple[tuple[float, float], ...] | None = None
    grid_spacing: tuple[float, ...] | None = None
    outcomes_seen: int | None = None

    def epsilon_for_delta(self, delta: float) -> float | None:
        """The smallest ε of the grid with ``δ̂(ε) ≤ delta`` (``None`` if there is none)."""
        if not (isinstance(delta, (int, float, np.floating)) and 0 <= float(delta) <= 1):
            raise ValueError(f"delta must be a number in [0, 1]; got {delta!r}")
        ok = self.delta <= float(delta)
        if not ok.any():
            return None
        return float(np.min(self.epsilons[ok]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "epsilons": self.epsilons.tolist(),
            "delta": self.delta.tolist(),
            "delta_x_xp": self.delta_x_xp.tolist(),
            "delta_xp_x": self.delta_xp_x.tolist(),
            "n_x": self.n_x,
            "n_xp": self.n_xp,
            "bandwidth_x": self.bandwidth_x,
            "bandwidth_xp": self.bandwidth_xp,
            "range_x": None if self.range_x is None else [list(r) for r in self.range_x],
            "range_xp": None if self.range_xp is None else [list(r) for r in self.range_xp],
            "grid_spacing": None if self.grid_spacing is None else list(self.grid_spacing),
            "outcomes_seen": self.outcomes_seen,
        }


def _epsilon_grid(epsilons: ArrayLike) -> NDArray[np.float64]:
    try:
        eps = np.asarray(epsilons, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("epsilons must be numbers") from None
    eps = np.atleast_1d(eps)
    if eps.ndim != 1 or eps.size == 0:
        raise ValueError(f"epsilons must be a non-empty 1-D sequence; got shape {np.shape(epsilons)}")
    if not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise ValueError("epsilons must be finite and non-negative")
    return eps


def _excess(f: NDArray[np.float64], g: NDArray[np.float64], eps: NDArray[np.float64], weight: float) -> NDArray[np.float64]:
    """``Σ (f − e^ε g)₊ · weight`` for every ε, without forming an (m × E) array when large."""
    f = f.reshape(-1)
    g = g.reshape(-1)
    out = np.empty(eps.size)
    c = np.exp(eps)
    chunk = max(1, 4_000_000 // max(f.size, 1))
    for start in range(0, eps.size, chunk):
        cc = c[start : start + chunk]
        out[start : start + chunk] = np.maximum(f[None, :] - cc[:, None] * g[None, :], 0.0).sum(axis=1) * weight
    return np.clip(out, 0.0, 1.0)


def privacy_profile(
    samples_x: ArrayLike,
    samples_xp: ArrayLike,
    epsilons: ArrayLike,
    kind: str,
    *,
    bandwidth: float | None = None,
    grid_points: int | None = None,
) -> PrivacyProfile:
    """The empirical privacy profile ``δ̂(ε)`` of seed 001 Theorem 1 on the grid ``epsilons``.

    ``kind`` is ``"discrete"`` (sums over outcomes of the relative frequencies) or
    ``"continuous"`` (Gaussian KDEs truncated to each sample's range and renormalised, seed 001
    §4). ``bandwidth`` fixes ``h`` for both samples (default: Silverman's rule on each);
    ``grid_points`` is the fewest points per axis (default :data:`DEFAULT_DELTA_GRID_POINTS`).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be 'discrete' or 'continuous'; got {kind!r}")
    eps = _epsilon_grid(epsilons)
    if kind == "discrete":
        outcomes, fx, fy = discrete_frequencies(samples_x, samples_xp)
        a = _excess(fx, fy, eps, 1.0)
        b = _excess(fy, fx, eps, 1.0)
        return PrivacyProfile(
            kind="discrete",
            epsilons=eps,
            delta=np.maximum(a, b),
            delta_x_xp=a,
            delta_xp_x=b,
            n_x=int(np.shape(samples_x)[0]),
            n_xp=int(np.shape(samples_xp)[0]),
            outcomes_seen=int(outcomes.shape[0]),
        )

    x = as_continuous_samples(samples_x, "samples of x")
    y = as_continuous_samples(samples_xp, "samples of x'")
    d = x.shape[1]
    if y.shape[1] != d:
        raise ValueError(f"the two samples have different dimensions: {d} and {y.shape[1]}")
    if bandwidth is not None and not (isinstance(bandwidth, (int, float)) and math.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"bandwidth must be a positive number or None; got {bandwidth!r}")
    h_x = float(bandwidth) if bandwidth is not None else silverman_bandwidth(x)
    h_y = float(bandwidth) if bandwidth is not None else silverman_bandwidth(y)
    min_points = grid_points if grid_points is not None else DEFAULT_DELTA_GRID_POINTS[d]
    if isinstance(min_points, bool) or not isinstance(min_points, int) or min_points < 2:
        raise ValueError(f"grid_points must be an integer ≥ 2; got {grid_points!r}")
    lo = np.minimum(x.min(axis=0), y.min(axis=0))
    hi = np.maximum(x.max(axis=0), y.max(axis=0))
    step_cap = min(h_x, h_y) / 2.0
    axes, steps = [], []
    for j in range(d):
        width = float(hi[j] - lo[j])  # > 0: as_continuous_samples and silverman reject constants
        axis = np.linspace(lo[j], hi[j], max(min_points, math.ceil(width / step_cap) + 1))
        axes.append(axis)
        steps.append(float(axis[1] - axis[0]))
    cell = float(np.prod(steps))

    def truncated(samples: np.ndarray, h: float) -> tuple[NDArray[np.float64], tuple[tuple[float, float], ...]]:
        dens = kde_on_grid(samples, axes, h)
        s_lo, s_hi = samples.min(axis=0), samples.max(axis=0)
        mask = np.ones(dens.shape, dtype=bool)
        for j, axis in enumerate(axes):
            inside = (axis >= s_lo[j]) & (axis <= s_hi[j])
            shape = [1] * d
            shape[j] = axis.size
            mask &= inside.reshape(shape)
        dens = np.where(mask, dens, 0.0)
        mass = dens.sum() * cell
        if mass <= 0:
            raise ValueError("a sample's range holds no grid point; use more grid points")
        return dens / mass, tuple((float(a), float(b)) for a, b in zip(s_lo, s_hi))

    fx, range_x = truncated(x, h_x)
    fy, range_y = truncated(y, h_y)
    a = _excess(fx, fy, eps, cell)
    b = _excess(fy, fx, eps, cell)
    return PrivacyProfile(
        kind="continuous",
        epsilons=eps,
        delta=np.maximum(a, b),
        delta_x_xp=a,
        delta_xp_x=b,
        n_x=int(x.shape[0]),
        n_xp=int(y.shape[0]),
        bandwidth_x=h_x,
        bandwidth_xp=h_y,
        range_x=range_x,
        range_xp=range_y,
        grid_spacing=tuple(steps),
    )


def empirical_delta(samples_x: ArrayLike, samples_xp: ArrayLike, epsilon: float, kind: str, **options: Any) -> float:
    """``δ̂(ε)`` of seed 001 Theorem 1 at one ``epsilon`` (see :func:`privacy_profile`)."""
    return float(privacy_profile(samples_x, samples_xp, [epsilon], kind, **options).delta[0])


def total_risk(deltas: ArrayLike) -> float:
    """Total risk of seed 001 Definition 3: ``δ* = 1 − Π_i (1 − δ_i)``.

    ``deltas`` holds one ``δ_i ∈ [0, 1]`` per individual (here: per pair of neighbouring
    databases) at a common ε. Computed as ``−expm1(Σ log1p(−δ_i))`` to keep precision when the
    δ_i are tiny and many.
    """
    try:
        d = np.asarray(deltas, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError("deltas must be numbers in [0, 1]") from None
    if d.size == 0:
        raise ValueError("deltas must not be empty")
    if not np.all(np.isfinite(d)) or np.any((d < 0) | (d > 1)):
        raise ValueError("every delta must lie in [0, 1]")
    if np.any(d == 1.0):
        return 1.0
    return float(-np.expm1(np.sum(np.log1p(-d))))


# ============================================================================ claim terms (method.md §10.4)


@dataclass(frozen=True, eq=False)
class NestedEvents:
    """Nested events ``E_k = {s(y) ≥ t_k}`` ordered from small to large, with their counts.

    ``s`` is chosen on the *choosing* samples only: for discrete outputs the estimated likelihood
    ratio of the outcome (relative frequencies with ½ added to every count; Neyman–Pearson
    order), for real outputs the projection ``y·w`` on the difference of the two samples' means
    (the most powerful direction for a Gaussian shift). Counts are given on both parts.
    """

    kind: str
    thresholds: NDArray[np.float64]
    choose_a: NDArray[np.float64]
    choose_b: NDArray[np.float64]
    choose_n: int
    bound_a: NDArray[np.float64]
    bound_b: NDArray[np.float64]
    bound_n: int
    direction: NDArray[np.float64] | None = None
    outcomes: NDArray[Any] | None = None
    outcome_scores: NDArray[np.float64] | None = None


def outputs_kind(samples: ArrayLike, kind: str) -> str:
    """``kind``, except that real-valued (non-integer) outputs declared discrete — real vectors
    reported as "vector" — are treated as continuous."""
    arr = np.asarray(samples)
    if kind == "discrete" and np.issubdtype(arr.dtype, np.floating) and not np.all(arr == np.round(arr)):
        return "continuous"
    return kind


def nested_events(choose_x: ArrayLike, choose_xp: ArrayLike, bound_x: ArrayLike, bound_xp: ArrayLike, kind: str,
                  points: int = 200) -> NestedEvents:
    """The events of :class:`NestedEvents` at up to ``points`` thresholds (quantiles of the
    pooled choosing scores). The bounding samples must have equal sizes on both sides."""
    if kind not in KINDS:
        raise ValueError(f"kind must be 'discrete' or 'continuous'; got {kind!r}")
    bx, bxp = np.asarray(bound_x), np.asarray(bound_xp)
    if len(bx) != len(bxp) or len(bx) == 0:
        raise ValueError("the bounding samples must be non-empty and of equal sizes")
    cx, cxp = np.asarray(choose_x), np.asarray(choose_xp)
    if len(cx) != len(cxp) or len(cx) == 0:
        raise ValueError("the choosing samples must be non-empty and of equal sizes")
    direction = outcomes = outcome_scores = None
    if kind == "discrete":
        outcomes, fx, fy = discrete_frequencies(cx, cxp)
        cnt_x = fx * len(cx)
        cnt_y = fy * len(cxp)
        outcome_scores = np.log((cnt_x + 0.5) / (cnt_y + 0.5))

        def score(samples: np.ndarray) -> np.ndarray:
            if samples.ndim == 1:
                idx = np.searchsorted(outcomes, samples)
                idx = np.clip(idx, 0, len(outcomes) - 1)
                seen = outcomes[idx] == samples
            else:
                keyed = {tuple(row): i for i, row in enumerate(np.asarray(outcomes).tolist())}
                found = [keyed.get(tuple(r)) for r in samples.tolist()]
                seen = np.array([f is not None for f in found])
                idx = np.array([f if f is not None else 0 for f in found])
            return np.where(seen, outcome_scores[idx], 0.0)

        thresholds = np.unique(outcome_scores)[::-1]
        if thresholds.size > points:
            thresholds = thresholds[np.linspace(0, thresholds.size - 1, points).round().astype(int)]
    else:
        def as_rows(samples: np.ndarray) -> np.ndarray:
            arr = np.asarray(samples, dtype=np.float64)
            return arr.reshape(len(arr), -1)

        xs, ys = as_rows(cx), as_rows(cxp)
        direction = xs.mean(axis=0) - ys.mean(axis=0)
        if not np.any(direction):
            direction = np.ones(xs.shape[1])

        def score(samples: np.ndarray) -> np.ndarray:
            return as_rows(samples) @ direction

        pooled = np.concatenate([score(cx), score(cxp)])
        thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, points + 2)[1:-1]))[::-1]
    sx, sxp, tx, txp = score(cx), score(cxp), score(bx), score(bxp)

    def counts(s: np.ndarray) -> NDArray[np.float64]:
        ordered = np.sort(s)
        return (len(s) - np.searchsorted(ordered, thresholds, side="left")).astype(np.float64)

    return NestedEvents(kind=kind, thresholds=thresholds, choose_a=counts(sx), choose_b=counts(sxp),
                        choose_n=len(cx), bound_a=counts(tx), bound_b=counts(txp), bound_n=len(bx),
                        direction=direction, outcomes=outcomes, outcome_scores=outcome_scores)


def claim_terms(events: NestedEvents, claim: Any, alpha: float = 0.05, curve_points: int = 100) -> dict[str, Any]:
    """A claim's own terms from nested events (method.md §10.4): each bound is computed on the
    bounding samples at the one event the choosing samples pick for it, at level 1 − α.

    - ``delta_hat`` (δ̂ at the claimed ε: ``max(p̂ − e^ε q̂, (1 − q̂) − e^ε (1 − p̂))`` on the
      bounding samples at the event the choosing samples rank highest) and ``delta_lower_bound``
      (:func:`app.stats.claims.delta_lower_bound`), for claims with an ε; ``epsilon_lower_bound``
      at the claimed δ;
    - ``mu_hat`` (``Φ⁻¹(p̂) − Φ⁻¹(q̂)`` at the event chosen the same way) and ``mu_lower_bound``;
    - ``tradeoff``: the empirical trade-off points (α = q̂, β = 1 − p̂) with the claim's f(α);
    - ``refutes``: whether the Clopper–Pearson box of the event with the largest standardised
      excess over the claim's boundary lies outside its region.
    """
    from scipy import special

    from app.stats.claims import (
        ApproxDP,
        PureDP,
        delta_lower_bound,
        epsilon_lower_bound,
        mu_lower_bound,
        parse_claim,
        refutes,
    )

    claim = parse_claim(claim)
    ca, cb, cn = events.choose_a, events.choose_b, float(events.choose_n)
    ba, bb, bn = events.bound_a, events.bound_b, float(events.bound_n)
    pc, qc, pb, qb = ca / cn, cb / cn, ba / bn, bb / bn

    def pick(values: NDArray[np.float64]) -> int:
        return int(np.argmax(np.where(np.isfinite(values), values, -np.inf)))

    def event_at(k: int) -> dict[str, Any]:
        return {"index": k, "threshold": float(events.thresholds[k]), "p_hat": float(pb[k]), "q_hat": float(qb[k])}

    out: dict[str, Any] = {"claim": claim.to_dict(), "description": claim.describe(), "alpha": alpha,
                           "samples": {"choose": int(cn), "bound": int(bn)},
                           "events": "likelihood ratio" if events.kind == "discrete" else "projection"}
    order = np.argsort(qb, kind="stable")
    keep = order[np.linspace(0, order.size - 1, min(curve_points, order.size)).round().astype(int)]
    out["tradeoff"] = {"alpha": qb[keep].tolist(), "beta": (1 - pb[keep]).tolist(),
                       "f": claim.tradeoff(qb[keep]).tolist()}
    clip = lambda v, n: np.clip(v, 0.5 / n, 1 - 0.5 / n)  # noqa: E731
    mu_c = special.ndtri(clip(pc, cn)) - special.ndtri(clip(qc, cn))
    mu_b = special.ndtri(clip(pb, bn)) - special.ndtri(clip(qb, bn))
    k_mu = pick(mu_c)
    out["mu_hat"] = float(max(mu_b[k_mu], 0.0))
    out["mu_lower_bound"] = float(mu_lower_bound(ba[k_mu], bb[k_mu], bn, alpha))
    out["mu_event"] = event_at(k_mu)
    if isinstance(claim, (PureDP, ApproxDP)):
        eps = claim.epsilon
        delta = claim.delta if isinstance(claim, ApproxDP) else 0.0
        c = math.exp(eps)
        d_c = np.maximum(pc - c * qc, (1 - qc) - c * (1 - pc))
        d_b = np.maximum(pb - c * qb, (1 - qb) - c * (1 - pb))
        k_d = pick(d_c)
        out["delta_hat"] = float(max(d_b[k_d], 0.0))
        out["delta_lower_bound"] = float(delta_lower_bound(ba[k_d], bb[k_d], bn, eps, alpha))
        out["delta_event"] = event_at(k_d)
        with np.errstate(divide="ignore", invalid="ignore"):
            e_c = np.maximum(np.log((pc - delta) / np.maximum(qc, 0.5 / cn)),
                             np.log((1 - delta - qc) / np.maximum(1 - pc, 0.5 / cn)))
        k_e = pick(e_c)
        out["epsilon_lower_bound"] = float(epsilon_lower_bound(ba[k_e], bb[k_e], bn, delta, alpha))
    excess = claim.upper(qc)
    se = np.sqrt((pc * (1 - pc) + qc * (1 - qc)) / cn) + 1.0 / cn
    k_r = pick((pc - excess) / se)
    out["refutes"] = bool(refutes(claim, ba[k_r], bb[k_r], bn, alpha))
    out["refuting_event"] = event_at(k_r)
    conf = f"{100 * (1 - alpha):g}%"
    if out["refutes"]:
        parts = [f"the outputs contradict {claim.describe()} at {conf} confidence"]
    else:
        parts = [f"no violation of {claim.describe()} is established at {conf} confidence by this snapshot"]
    if "delta_lower_bound" in out and out["delta_lower_bound"] > 0:
        parts.append(f"δ({claim.epsilon:g}) ≥ {out['delta_lower_bound']:.3g}")
    if out["mu_lower_bound"] > 0:
        parts.append(f"μ ≥ {out['mu_lower_bound']:.3g}")
    out["statement"] = "; ".join(parts)
    return out
