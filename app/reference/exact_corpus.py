"""Exact privacy losses of corpus mechanisms on given neighbouring pairs (numerical quadrature).

For a pair (x, x′) the loss is ``sup_o |ln P(o|x) − ln P(o|x′)|`` over outputs o (densities for
real outputs). This is what an auditor testing that pair can at most establish, and it bounds the
mechanism's true ε from below. Computed by one-dimensional quadrature over the threshold noise ρ
(Lyu, Su & Li 2017, the proofs of §3: given ρ the answers are independent):

- SVT with cutoff c = 1 (Alg. 1, 2, 4): the output is the position j of the first ⊤ or none;
  ``P(j) = ∫ f_ρ(r) Π_{i<j} F_ν(T + r − q_i) · (1 − F_ν(T + r − q_j)) dr``;
- SVT without cutoff (Alg. 6): each of the 2^k ⊤/⊥ patterns, the same integral with one factor
  per query;
- SVT 3 (c = 1): the density of "first ⊤ at j with value v" is
  ``f_ν(v − q_j) ∫_{−∞}^{v−T} f_ρ(r) Π_{i<j} F_ν(T + r − q_i) dr``, maximised over a grid of v;
- Report Noisy Max, the index: ``P(i) = ∫ f(t − q_i) Π_{j≠i} F(t − q_j) dt``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np

__all__ = ["pair_loss_rnm_index", "pair_loss_svt3", "pair_loss_svt_cutoff1", "pair_loss_svt_nocutoff"]


def _lap_cdf(z: np.ndarray, b: float) -> np.ndarray:
    return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0) / b), 1 - 0.5 * np.exp(-np.maximum(z, 0) / b))


def _lap_pdf(z: np.ndarray, b: float) -> np.ndarray:
    return np.exp(-np.abs(z) / b) / (2 * b)


def _log_lap_cdf(z: np.ndarray, b: float) -> np.ndarray:
    return np.where(z < 0, math.log(0.5) + np.minimum(z, 0) / b, np.log1p(-0.5 * np.exp(-np.maximum(z, 0) / b)))


def _log_lap_sf(z: np.ndarray, b: float) -> np.ndarray:
    return _log_lap_cdf(-z, b)


def _grid(scale: float, points: int = 40001, width: float = 80.0) -> tuple[np.ndarray, float]:
    r = np.linspace(-width * scale, width * scale, points)
    return r, float(r[1] - r[0])


def _logsumexp(a: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    return (m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))).squeeze(axis)


def _svt_cutoff1_logp(q: np.ndarray, rho_b: float, nu_b: float, threshold: float) -> np.ndarray:
    """log P(first ⊤ at j) for j = 0..k−1, then log P(no ⊤), by quadrature over ρ."""
    r, dr = _grid(rho_b)
    log_f = -np.abs(r) / rho_b - math.log(2 * rho_b) + math.log(dr)
    z = threshold + r[None, :] - q[:, None]  # (k, grid)
    below = _log_lap_cdf(z, nu_b)
    above = _log_lap_sf(z, nu_b)
    prefix = np.concatenate([np.zeros((1, r.size)), np.cumsum(below, axis=0)], axis=0)  # Σ_{i<j}
    terms = [log_f + prefix[j] + above[j] for j in range(q.size)] + [log_f + prefix[q.size]]
    return np.array([_logsumexp(t) for t in terms])


def pair_loss_svt_cutoff1(pairs: Sequence[tuple[Any, Any]], epsilon: float, rho_b: float, nu_b: float,
                          threshold: float) -> float:
    """The largest loss over ``pairs`` of SVT with c = 1 (Alg. 1, 2, 4 with their noise scales)."""
    worst = 0.0
    for x, xp in pairs:
        a = _svt_cutoff1_logp(np.asarray(x, float), rho_b, nu_b, threshold)
        b = _svt_cutoff1_logp(np.asarray(xp, float), rho_b, nu_b, threshold)
        worst = max(worst, float(np.max(np.abs(a - b))))
    return worst


def pair_loss_svt_nocutoff(pairs: Sequence[tuple[Any, Any]], rho_b: float, nu_b: float, threshold: float) -> float:
    """The largest loss over ``pairs`` and all 2^k ⊤/⊥ patterns of SVT 6 (no cutoff)."""
    worst = 0.0
    r, dr = _grid(rho_b, points=8001, width=60.0)
    log_f = -np.abs(r) / rho_b - math.log(2 * rho_b) + math.log(dr)
    for x, xp in pairs:
        logs = []
        for q in (np.asarray(x, float), np.asarray(xp, float)):
            z = threshold + r[None, :] - q[:, None]
            below, above = _log_lap_cdf(z, nu_b), _log_lap_sf(z, nu_b)
            k = q.size
            pats = np.array(list(product((0, 1), repeat=k)), dtype=bool)  # (2^k, k)
            out = np.empty(pats.shape[0])
            for start in range(0, pats.shape[0], 128):
                p = pats[start:start + 128]
                total = log_f[None, :] + np.where(p[:, :, None], above[None], below[None]).sum(axis=1)
                out[start:start + 128] = _logsumexp(total, axis=1)
            logs.append(out)
        worst = max(worst, float(np.max(np.abs(logs[0] - logs[1]))))
    return worst


def pair_loss_svt3(pairs: Sequence[tuple[Any, Any]], rho_b: float, nu_b: float, threshold: float,
                   values: np.ndarray | None = None) -> float:
    """The largest loss over ``pairs`` of SVT 3 with c = 1: over "no ⊤" and over (j, v) on a grid."""
    v = np.linspace(-40 * nu_b, 40 * nu_b, 1601) if values is None else values
    r, dr = _grid(rho_b, points=20001, width=60.0)
    log_f = -np.abs(r) / rho_b - math.log(2 * rho_b) + math.log(dr)
    worst = 0.0
    for x, xp in pairs:
        dens = []
        for q in (np.asarray(x, float), np.asarray(xp, float)):
            z = threshold + r[None, :] - q[:, None]
            prefix = np.concatenate([np.zeros((1, r.size)), np.cumsum(_log_lap_cdf(z, nu_b), axis=0)], axis=0)
            rows = []
            for j in range(q.size):
                integrand = np.exp(log_f + prefix[j])
                cum = np.cumsum(integrand)  # ∫_{−∞}^{r} …
                upto = np.interp(v - threshold, r, cum, left=0.0, right=cum[-1])
                with np.errstate(divide="ignore"):
                    rows.append(np.log(_lap_pdf(v - q[j], nu_b)) + np.log(upto))
            none = _logsumexp(log_f + prefix[q.size])
            dens.append((np.array(rows), none))
        (da, na), (db, nb) = dens
        finite = np.isfinite(da) & np.isfinite(db)
        worst = max(worst, float(np.max(np.abs(da[finite] - db[finite]))), abs(na - nb))
    return worst


def pair_loss_rnm_index(pairs: Sequence[tuple[Any, Any]], scale: float, noise: str) -> float:
    """The largest loss over ``pairs`` of Report Noisy Max returning the index."""
    t, dt = _grid(scale, points=40001, width=60.0)
    worst = 0.0
    for x, xp in pairs:
        probs = []
        for q in (np.asarray(x, float), np.asarray(xp, float)):
            out = []
            for i in range(q.size):
                if noise == "laplace":
                    dens = _lap_pdf(t - q[i], scale)
                    cdfs = [_lap_cdf(t - q[j], scale) for j in range(q.size) if j != i]
                else:
                    z = t - q[i]
                    dens = np.where(z >= 0, np.exp(-np.maximum(z, 0) / scale) / scale, 0.0)
                    cdfs = [np.where(t - q[j] >= 0, 1 - np.exp(-np.maximum(t - q[j], 0) / scale), 0.0)
                            for j in range(q.size) if j != i]
                out.append(float(np.sum(dens * np.prod(cdfs, axis=0)) * dt))
            probs.append(np.array(out))
        worst = max(worst, float(np.max(np.abs(np.log(probs[0]) - np.log(probs[1])))))
    return worst
