"""False alarms of the service's detectors on checks with keyed events, at the claim's boundary.

Each cell (app.reference.keyed.KEYED_BOUNDARY_CELLS) is a check (x, x′, E) with a keyed event E on
a keyed reference mechanism whose exact P(E) under x and x′ puts it on the boundary of the
mechanism's claim: the (ε, δ) corner (δ, 0) of partition selection (a key held by one record is
released with probability exactly δ), and p = e^ε·q for a pure-ε histogram's value event. R runs
of T periods draw n keyed outputs per side and period from the mechanism (numpy, as
:class:`~app.stats.keyed.KeyedSamples`), count them in E with :func:`app.stats.events.event_contains`,
and run the detectors a monitor runs on those counts:

``aggregator``   the claim's period statistic (:func:`app.stats.claim_period.claim_z_path`, the
                 runner's z in batch) and the weighted aggregator at its shipped threshold;
``e-process``    the service's design (``SERVICE_DESIGN``) at threshold 1/α;
``e-detector``   the predictable face at c = T/α.

For a pure-ε claim the horizon-free detectors test the claim's line; for other claims each period
tests the line anchored at the past periods' discounted counts (the a-priori line in period 1),
as :func:`app.monitors.detectors.sequential_line` does in the service (tests/test_keyed_far.py
checks the batch paths against the service's step functions). A run is a false alarm when the
detector fires within T periods; rates come with 95% Clopper–Pearson intervals.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.reference.keyed import BoundaryCell
from app.simulation_results import clopper_pearson
from app.stats.aggregator import first_crossing, weighted_statistic_path
from app.stats.claim_period import a_priori_line, anchor_line, claim_z_path
from app.stats.claims import PureDP, parse_claim
from app.stats.events import event_contains
from app.stats.sequential import (
    SERVICE_DESIGN,
    SupportingLine,
    _discounted_past,
    _MixtureBase,
    bet_grid,
    component_parts,
    e_detector_paths,
    e_detector_paths_from_increments,
    e_process_paths_from_increments,
    edetector_threshold,
)
from app.stats.thresholds import threshold_for

__all__ = ["DETECTORS", "false_alarms", "keyed_counts", "log_statistic_paths"]

DETECTORS = ("aggregator", "e-process", "e-detector")
#: Outputs drawn per call to a mechanism.
DRAW_CHUNK = 200_000


def keyed_counts(cell: BoundaryCell, n: int, replications: int, horizon: int, rng: np.random.Generator
                 ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Counts (R, T) in the cell's event of n keyed outputs per run, period and side."""
    out = []
    for database in (cell.x, cell.x_prime):
        counts = np.empty((replications, horizon), dtype=np.int64)
        flat = counts.reshape(-1)
        per = max(1, DRAW_CHUNK // n)
        for lo in range(0, flat.size, per):
            hi = min(flat.size, lo + per)
            outputs = cell.mechanism.sample(database, (hi - lo) * n, rng)
            flat[lo:hi] = event_contains(cell.event, outputs).reshape(hi - lo, n).sum(axis=1)
        out.append(counts)
    return out[0], out[1]


def _anchored_lines(claim: Any, a: NDArray[np.int64], b: NDArray[np.int64], n: int) -> tuple[np.ndarray, ...]:
    """Each period's line (slope, intercept, swap) and the past discounted counts: the anchor at
    the discounted past counts, the a-priori line in period 1 (the service's ``sequential_line``)."""
    r = _MixtureBase.ESTIMATE_DISCOUNT
    sa, sb = _discounted_past(a.astype(float), r), _discounted_past(b.astype(float), r)
    sn = _discounted_past(np.full(a.shape, float(n)), r)
    line = anchor_line(claim, sa, sb, sn)
    prior = a_priori_line(claim)
    s = np.array(np.broadcast_to(line.slope, a.shape), dtype=float)
    d = np.array(np.broadcast_to(line.intercept, a.shape), dtype=float)
    swap = np.array(np.broadcast_to(np.asarray(line.orientation) == "lower", a.shape))
    s[:, 0], d[:, 0], swap[:, 0] = float(prior.slope), float(prior.intercept), str(prior.orientation) == "lower"
    return s, d, swap, sa, sb, sn


def log_statistic_paths(detector: str, a: NDArray[np.int64], b: NDArray[np.int64], n: int,
                        claim: dict[str, Any]) -> NDArray[np.float64]:
    """log W_t (e-process) or log M_t (e-detector) of every run, (R, T), as the service computes them."""
    parsed = parse_claim(claim)
    if isinstance(parsed, PureDP):
        line = SupportingLine.pure(parsed.epsilon)
        if detector == "e-process":
            return SERVICE_DESIGN.paths(a, b, n, line)
        return e_detector_paths(a, b, n, line, faces="auto")
    s, d, swap, sa, sb, sn = _anchored_lines(parsed, a, b, n)
    ca, cb = np.where(swap, b, a).astype(float), np.where(swap, a, b).astype(float)
    pa, pb = np.where(swap, sb, sa), np.where(swap, sa, sb)
    nn = np.full(a.shape, float(n))
    if detector == "e-process":
        design = SERVICE_DESIGN
        inc = component_parts(ca, cb, nn, s, d, pa, pb, sn, design.faces, design.agrapa, design.grid)
        return e_process_paths_from_increments(inc, log_prior=design.log_prior())
    inc = component_parts(ca, cb, nn, s, d, pa, pb, sn, "auto", False, bet_grid())
    return e_detector_paths_from_increments(inc, "sr")


def first_alarms(detector: str, a: NDArray[np.int64], b: NDArray[np.int64], n: int, claim: dict[str, Any], *,
                 alpha: float, gamma: float) -> NDArray[np.int64]:
    """First alarm period of every run (0: none within T)."""
    horizon = a.shape[1]
    if detector == "aggregator":
        z = claim_z_path(a, b, n, parse_claim(claim))
        return first_crossing(weighted_statistic_path(z, horizon, gamma), threshold_for(horizon, gamma, alpha).value)
    log_c = math.log(1 / alpha) if detector == "e-process" else math.log(edetector_threshold(alpha, horizon))
    above = log_statistic_paths(detector, a, b, n, claim) >= log_c
    return np.where(above.any(axis=1), above.argmax(axis=1) + 1, 0)


def false_alarms(cell: BoundaryCell, n: int, replications: int, horizon: int, *,
                 detectors: Sequence[str] = DETECTORS, alpha: float = 0.05, gamma: float = 0.25,
                 seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per detector: false alarms within T, the rate and its 95% Clopper–Pearson interval, on the
    same keyed draws; with the pooled empirical p̂, q̂ beside the cell's exact p, q."""
    rng = np.random.default_rng([seed, n, replications, horizon, zlib.crc32(cell.label.encode())])
    a, b = keyed_counts(cell, n, replications, horizon, rng)
    total = a.size * n
    out: dict[str, dict[str, Any]] = {}
    for name in detectors:
        first = first_alarms(name, a, b, n, cell.claim, alpha=alpha, gamma=gamma)
        k = int(np.count_nonzero(first))
        lo, hi = clopper_pearson(k, replications)
        out[name] = {"alarms": k, "rate": k / replications, "low": lo, "high": hi,
                     "p_hat": float(a.sum()) / total, "q_hat": float(b.sum()) / total}
    return out
