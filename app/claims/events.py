"""Claim-aware candidate events.

For (ε, δ) and μ-GDP claims the informative events are tails, where a pure-ε likelihood ratio
has no power. Given the *choosing* samples of a pair, :func:`claim_candidate` orders outputs by
an estimated likelihood ratio (discrete) or a projection on the mean difference (real, one
coordinate for vectors) — :func:`app.stats.empirical.nested_events` — and picks the nested event
``{s ≥ t}`` whose choosing-data Clopper–Pearson corner (simultaneous over the candidates) implies
the largest value of the claim's parameter (μ, ε at the claimed δ, or ρ;
:meth:`app.stats.claims.Claim.bound`) when one exceeds the claim, and otherwise the most
precise event (the narrowest gap between its plug-in value and its bound). It is scored on the
*bounding* samples (independent draws), with the claim's period statistic at that event and its
Clopper–Pearson test (:func:`app.stats.claims.refutes`). The chosen event is returned in the
events model's JSON form, ready to be a check's ``event``. A monitor that adopts it samples
afresh, so its detector never tests the samples that chose the event.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.stats.claim_period import anchor_line, line_statistic
from app.stats.claims import clopper_pearson, parse_claim, refutes
from app.stats.empirical import NestedEvents, nested_events, outputs_kind
from app.stats.keyed import KeyedSamples
from app.stats.mpl import PairSamples, kind_for_output


def _event_json(events: NestedEvents, k: int, coordinate: int | None, dim: int | None) -> dict[str, Any]:
    t = float(events.thresholds[k])
    if events.kind == "discrete":
        chosen = np.asarray(events.outcomes)[np.asarray(events.outcome_scores) >= t]
        return {"kind": "set", "values": [v if not isinstance(v, np.generic) else v.item()
                                          for v in (chosen.tolist())]}
    w = float(np.asarray(events.direction)[0])
    cut = t / w
    bound = {"low": cut} if w > 0 else {"high": cut}
    if coordinate is None:
        return {"kind": "interval", **bound}
    low: list[float | None] = [None] * int(dim or 0)
    high: list[float | None] = [None] * int(dim or 0)
    (low if w > 0 else high)[coordinate] = cut
    return {"kind": "box", "low": low, "high": high}


def _as_arrays(values: tuple[Any, ...]) -> tuple[tuple[np.ndarray, ...], bool]:
    """The four samples as arrays; keyed outputs become the label of their released key set (the
    outcome where partition selection spends its δ), with True to say so."""
    if isinstance(values[0], KeyedSamples):
        return tuple(v.key_set_labels() for v in values), True
    return tuple(np.asarray(v) for v in values), False


def claim_candidate(pair: PairSamples, output_kind: str, claim: Any, alpha: float = 0.05) -> dict[str, Any]:
    """The pair's best event for ``claim``, scored on the bounding samples. Keyed outputs are read
    as their set of released keys, and the event is a ``key_sets`` event."""
    claim = parse_claim(claim)
    (cx, cxp, bx, bxp), keyed = _as_arrays((pair.choose_x, pair.choose_xp, pair.bound_x, pair.bound_xp))
    kind = "discrete" if keyed else outputs_kind(cx, kind_for_output(output_kind))
    nb = min(len(bx), len(bxp))
    nc = min(len(cx), len(cxp))
    coordinate = dim = None
    if kind == "continuous" and cx.ndim == 2:
        dim = cx.shape[1]
        if dim == 1:
            cx, cxp, bx, bxp = cx[:, 0], cxp[:, 0], bx[:, 0], bxp[:, 0]
            dim = None
        else:  # events must be boxes: use the coordinate whose means differ most
            coordinate = int(np.argmax(np.abs(cx.mean(axis=0) - cxp.mean(axis=0))))
            cx, cxp, bx, bxp = cx[:, coordinate], cxp[:, coordinate], bx[:, coordinate], bxp[:, coordinate]
    events = nested_events(cx[:nc], cxp[:nc], bx[:nb], bxp[:nb], kind)
    # Rank events on the choosing data with bounds simultaneous over the K candidate events
    # (Bonferroni): if some event's bound on the claim's parameter (μ_lb, ε_lb at the claimed δ,
    # ρ_lb) exceeds the claim, take the largest; otherwise — a mechanism that may well satisfy
    # its claim — take, among the informative events (plug-in value at least half the largest),
    # the most precise one, the narrowest gap between the plug-in value and its bound: the
    # middle of the trade-off curve rather than a noisy tail.
    level = alpha / (2 * len(events.thresholds))
    p_lo = clopper_pearson(events.choose_a, nc, level, "lower")
    q_hi = clopper_pearson(events.choose_b, nc, level, "upper")
    lbs = np.array([claim.bound(float(pl), float(qh)) for pl, qh in zip(p_lo, q_hi)])
    plug = np.array([claim.bound(float(a_) / nc, max(float(b_), 0.5) / nc)
                     for a_, b_ in zip(events.choose_a, events.choose_b)])
    lbs = np.where(np.isfinite(lbs), lbs, -np.inf)
    if np.max(lbs) > claim.value:
        k = int(np.argmax(lbs))
    else:
        seen = ((events.choose_a > 0) & (events.choose_b > 0) & (events.choose_a < nc) & (events.choose_b < nc)
                & np.isfinite(plug) & np.isfinite(lbs))
        # informative events only: a plug-in value at least half the largest one
        top = np.max(np.where(seen, plug, -np.inf))
        width = np.where(seen & (plug >= 0.5 * top), plug - lbs, np.inf)
        k = int(np.argmin(width)) if np.isfinite(np.min(width)) else int(np.argmax(lbs))
    a, b = events.bound_a[k], events.bound_b[k]
    line = anchor_line(claim, events.choose_a[k], events.choose_b[k], nc)
    z = float(line_statistic(a, b, nb, line).z)
    return {
        **{k_: v for k_, v in pair.label.items() if k_ in ("x", "x_prime")},
        "event": _keyed_event(_event_json(events, k, coordinate, dim)) if keyed else _event_json(events, k, coordinate,
                                                                                                  dim),
        "claim": claim.to_dict(),
        "p_hat": float(a / nb), "q_hat": float(b / nb),
        "z": z,
        "refutes": bool(refutes(claim, a, b, nb, alpha)) or bool(refutes(claim, b, a, nb, alpha)),
        "samples": {"choose": int(nc), "bound": int(nb)},
    }


def _keyed_event(event: dict[str, Any]) -> dict[str, Any]:
    """A set of key-set labels as the ``key_sets`` event it stands for."""
    import json

    return {"kind": "key_sets", "sets": [json.loads(v) for v in event["values"]]}


def rank_claim_candidates(pairs: list[PairSamples], output_kind: str, claim: Any,
                          alpha: float = 0.05) -> list[dict[str, Any]]:
    """:func:`claim_candidate` for every pair, best (largest z on the bounding samples) first."""
    out = [claim_candidate(p, output_kind, claim, alpha) for p in pairs]
    out.sort(key=lambda c: c["z"], reverse=True)
    for i, c in enumerate(out, start=1):
        c["rank"] = i
    return out


async def discover_for_claim(client: Any, endpoint: Any, shape: Any, pairs: list[tuple[Any, Any]], claim: Any, *,
                             budget: int, alpha: float = 0.05, label: str = "discovery", period: int = 0,
                             progress: Any = None) -> dict[str, Any]:
    """Discovery for a monitor's ``auto`` event under a claim other than pure ε: ``budget`` fresh
    outputs per database, half to choose each pair's claim-aware event and half to score it
    (:func:`rank_claim_candidates`). These draws are never reused by the monitor's detector."""
    import asyncio
    import json

    keys: dict[str, Any] = {}
    for x, xp in pairs:
        for db in (x, xp):
            keys.setdefault(json.dumps(db, sort_keys=True), db)
    total = max(4, int(budget))
    half = total // 2
    drawn: dict[str, Any] = {}
    for i, (key, db) in enumerate(keys.items()):
        out = await client.sample(endpoint, db, total, monitor_id=label, period=period,
                                  request_id_prefix=f"{label}-{i}")
        drawn[key] = out if isinstance(out, KeyedSamples) else np.asarray(out)
        if progress:
            progress(f"drew {total} outputs on database {i + 1}/{len(keys)}")
    samples = []
    for x, xp in pairs:
        ax, axp = drawn[json.dumps(x, sort_keys=True)], drawn[json.dumps(xp, sort_keys=True)]
        samples.append(PairSamples({"x": x, "x_prime": xp}, ax[:half], axp[:half], ax[half:], axp[half:]))
    output_kind = shape.output_kind if hasattr(shape, "output_kind") else str(shape)
    candidates = await asyncio.to_thread(rank_claim_candidates, samples, output_kind, claim, alpha)
    return {"candidates": candidates, "alpha": alpha, "samples": half, "fresh_samples": total - half,
            "kind": kind_for_output(output_kind)}
