"""Exact event probabilities ``P(A(x) ∈ E)`` for the reference mechanisms, by formula or 1-D quadrature.

They cross-check the Monte-Carlo table of :mod:`app.reference.scenario_table` and the samplers in
the tests. Supported:

- Laplace family (sum + Laplace or Gaussian noise): intervals and unions of intervals
  (a continuous output puts probability 0 on a finite set);
- Report Noisy Max, Laplace or exponential noise: any event, evaluated on the indices ``0..k−1``:
  ``P(argmax = i) = ∫ f(t − q_i) Π_{j≠i} F(t − q_j) dt``;
- RNM reporting the value: intervals and unions, from ``P(max ≤ t) = Π_j F(t − q_j)``;
- SVT 1/2/4/5/6: sets of answer tuples. Given ρ the answers are independent, so
  ``P(o) = ∫ f_ρ(r) Π_i P(answer_i = o_i | r) dr``; SVT 2 redraws ρ after each ⊤, which splits
  the product into independent segments, one integral each. SVT 5 has no query noise, so
  ``P(o)`` is the Laplace probability of an interval of ρ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import integrate, special

from app.reference.mechanisms import (
    ABORTED,
    SVT2,
    Laplace,
    LaplaceGaussian,
    LaplaceSmallerScale,
    ReportNoisyMax,
    RNMExponential,
    RNMReportValue,
    _query_vector,
    _SparseVectorBase,
    _unit_cube_database,
)
from app.stats.events import DiscreteSet, Event, Interval, IntervalUnion, parse_event

__all__ = ["exact_probability", "svt_output_probability"]

_TAIL = 60.0  # integrate over ±60 noise scales around the kinks: the tails beyond are < e^-60


def _laplace_cdf(t: Any, scale: float) -> Any:
    t = np.asarray(t, dtype=np.float64)
    return np.where(t < 0, 0.5 * np.exp(np.minimum(t, 0.0) / scale), 1.0 - 0.5 * np.exp(-np.maximum(t, 0.0) / scale))


def _laplace_pdf(t: Any, scale: float) -> Any:
    return np.exp(-np.abs(t) / scale) / (2.0 * scale)


def _exponential_cdf(t: Any, scale: float) -> Any:
    t = np.asarray(t, dtype=np.float64)
    return np.where(t < 0, 0.0, -np.expm1(-np.maximum(t, 0.0) / scale))


def _exponential_pdf(t: Any, scale: float) -> Any:
    t = np.asarray(t, dtype=np.float64)
    return np.where(t < 0, 0.0, np.exp(-np.maximum(t, 0.0) / scale) / scale)


def _merged_intervals(event: Event) -> list[tuple[float, float]]:
    """The event as disjoint ``(low, high)`` pairs; endpoints' closedness is irrelevant for
    continuous outputs."""
    if isinstance(event, Interval):
        intervals = [event]
    elif isinstance(event, IntervalUnion):
        intervals = list(event.intervals)
    else:
        raise ValueError(f"no exact formula for a {type(event).__name__} event on real outputs")
    pairs = sorted(
        (-math.inf if i.low is None else i.low, math.inf if i.high is None else i.high) for i in intervals
    )
    merged: list[tuple[float, float]] = []
    for low, high in pairs:
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _interval_probability(cdf: Callable[[float], float], event: Event) -> float:
    total = 0.0
    for low, high in _merged_intervals(event):
        total += (1.0 if math.isinf(high) else float(cdf(high))) - (0.0 if math.isinf(low) else float(cdf(low)))
    return total


def _quad(func: Callable[[float], float], points: list[float], spread: float) -> float:
    points = sorted(set(points))
    low, high = points[0] - _TAIL * spread, points[-1] + _TAIL * spread
    inner = [p for p in points if low < p < high]
    value, _ = integrate.quad(func, low, high, points=inner or None, limit=500, epsabs=1e-13, epsrel=1e-11)
    return float(value)


def _rnm_index_probability(mech: ReportNoisyMax, q: np.ndarray, i: int) -> float:
    b = mech.noise_scale
    if isinstance(mech, RNMExponential):
        pdf, cdf = _exponential_pdf, _exponential_cdf
    else:
        pdf, cdf = _laplace_pdf, _laplace_cdf
    others = np.delete(q, i)

    def integrand(t: float) -> float:
        return float(pdf(t - q[i], b) * np.prod(cdf(t - others, b)))

    return _quad(integrand, list(q), b)


def svt_output_probability(mech: _SparseVectorBase, database: Any, output: Any) -> float:
    """``P(A(q) = output)`` for one SVT answer tuple (with ``-1`` for aborted queries)."""
    q = _query_vector(database)
    o = np.asarray(output, dtype=np.int64)
    if o.shape != q.shape:
        raise ValueError(f"the output has length {o.size}; the query vector has length {q.size}")
    if np.any((o != 0) & (o != 1) & (o != ABORTED)):
        return 0.0
    cutoff = mech.cutoff_value
    # The only tuples with positive probability: answers until the cutoff-th ⊤, then ABORTED.
    answered = q.size
    if cutoff is not None:
        tops = np.cumsum(o == 1)
        reached = np.flatnonzero(tops >= cutoff)
        answered = int(reached[0]) + 1 if reached.size else q.size
    if np.any(o[:answered] == ABORTED) or np.any(o[answered:] != ABORTED):
        return 0.0
    threshold = float(mech.threshold)
    b_rho, b_nu = mech.rho_scale, mech.nu_scale
    # Segments of queries that share one ρ: SVT 2 draws a fresh ρ after every ⊤.
    segments: list[list[int]] = [[]]
    for i in range(answered):
        segments[-1].append(i)
        if isinstance(mech, SVT2) and o[i] == 1 and i < answered - 1:
            segments.append([])
    total = 1.0
    for seg in segments:
        if b_nu is None:
            # No query noise: ⊤ iff ρ ≤ q_i − T, so o pins ρ to (max_⊥(q_i − T), min_⊤(q_i − T)].
            below = [q[i] - threshold for i in seg if o[i] == 0]
            above = [q[i] - threshold for i in seg if o[i] == 1]
            lo = max(below) if below else -math.inf
            hi = min(above) if above else math.inf
            prob = 0.0 if lo >= hi else float(_laplace_cdf(hi, b_rho)) - float(_laplace_cdf(lo, b_rho))
        else:
            tops = np.array([o[i] == 1 for i in seg])
            shifts = threshold - q[seg]

            def integrand(r: float, shifts: np.ndarray = shifts, tops: np.ndarray = tops) -> float:
                below = _laplace_cdf(shifts + r, b_nu)  # P(q_i + ν_i < T + r)
                return float(_laplace_pdf(r, b_rho) * np.prod(np.where(tops, 1.0 - below, below)))

            prob = _quad(integrand, [0.0, *(-shifts).tolist()], max(b_rho, b_nu))
        total *= prob
    return total


def exact_probability(mechanism: Any, database: Any, event: Event | dict) -> float:
    """``P(A(database) ∈ event)`` for a reference mechanism, or ``ValueError`` if not covered."""
    event = parse_event(event)
    real_output = isinstance(mechanism, (Laplace, LaplaceSmallerScale, LaplaceGaussian, RNMReportValue))
    if real_output and isinstance(event, DiscreteSet):
        if event.value_kind != "numbers":
            raise ValueError(f"a set of {event.value_kind} does not apply to real outputs")
        return 0.0  # a continuous output hits a finite set with probability 0
    if isinstance(mechanism, (Laplace, LaplaceSmallerScale, LaplaceGaussian)):
        total = float(np.sum(_unit_cube_database(database)))
        if isinstance(mechanism, LaplaceGaussian):
            sd = mechanism.noise_sd
            return _interval_probability(lambda t: special.ndtr((t - total) / sd), event)
        scale = mechanism.noise_scale
        return _interval_probability(lambda t: _laplace_cdf(t - total, scale), event)
    if isinstance(mechanism, RNMReportValue):
        q = _query_vector(database, mechanism.num_queries)
        b = mechanism.noise_scale
        return _interval_probability(lambda t: float(np.prod(_laplace_cdf(t - q, b))), event)
    if isinstance(mechanism, ReportNoisyMax):
        q = _query_vector(database, mechanism.num_queries)
        members = np.flatnonzero(event.contains(np.arange(q.size)))
        return float(sum(_rnm_index_probability(mechanism, q, int(i)) for i in members))
    if isinstance(mechanism, _SparseVectorBase):
        if not (isinstance(event, DiscreteSet) and event.value_kind == "tuples"):
            raise ValueError("exact SVT probabilities need a set of answer tuples")
        outputs = {tuple(v) for v in event.values}  # a repeated value is one outcome
        return float(sum(svt_output_probability(mechanism, database, o) for o in outputs))
    raise ValueError(f"no exact formula for {type(mechanism).__name__}")
