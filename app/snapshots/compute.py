"""One MPL snapshot from arrays: choose t̂ on one part of the data, bound the loss on another.

Seed 003, Algorithm 4 (MPL), applied to a monitor's pairs:

1. for every pair (x, x'), DPL (Algorithm 3) on the *choosing* samples gives ε̂, t̂ and the
   loss curve ℓ̂ over the region C;
2. for every pair, the lower bound LB (eq. 26) at that pair's t̂ on the *bounding* samples,
   which are independent of the choosing ones (other periods of the window, or fresh draws);
3. the pair with the largest ε̂ is MPL's choice, and its LB is the snapshot's headline bound.
   The other pairs' bounds are reported too, each at level α on its own.

Also the empirical privacy profile δ̂(ε) of each pair (seed 001, Theorem 1) on all its samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.stats.empirical import claim_terms, nested_events, outputs_kind, privacy_profile
from app.stats.evidence import snapshot_reading
from app.stats.mpl import (
    KeyedStatistic,
    MPLParams,
    PairSamples,
    dpl,
    dpl_best_coordinate,
    dpl_best_keyed,
    kind_for_output,
    mpl_lower_bound,
    real_rows,
)
from app.stats.shapes import concat_outputs

#: ε grid of the stored privacy profile.
PROFILE_EPSILONS = tuple(round(0.1 * i, 2) for i in range(0, 41))
#: Loss-curve points kept in a stored snapshot (real outputs are thinned to about this many).
MAX_CURVE_POINTS = 400


def split_periods(series: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Alternate periods between the choosing half and the bounding half (independent draws)."""
    if len(series) < 2:
        raise ValueError("a snapshot without fresh samples needs the outputs of at least two periods")
    choose = [a for i, (_, a) in enumerate(series) if i % 2 == 0]
    bound = [a for i, (_, a) in enumerate(series) if i % 2 == 1]
    return concat_outputs(choose), concat_outputs(bound)


def _thin_curve(result: dict[str, Any]) -> dict[str, Any]:
    if "grid" in result and len(result["grid"]) == 1 and len(result["loss"]) > MAX_CURVE_POINTS:
        step = int(np.ceil(len(result["loss"]) / MAX_CURVE_POINTS))
        for key in ("f_x", "f_xp", "loss"):
            result[key] = result[key][::step]
        result["grid"] = [result["grid"][0][::step]]
    return result


def suggested_event(output_kind: str, dpl_result: Any) -> dict[str, Any]:
    """A small event around t̂ (seed 003 §IV: the loss peaks there), as an events-model dict:
    the value itself for discrete outputs, t̂ ± one DPL bandwidth for real outputs."""
    t_hat = dpl_result.t_hat
    if dpl_result.kind == "discrete":
        value = list(t_hat) if isinstance(t_hat, (tuple, list, np.ndarray)) else t_hat
        if isinstance(value, list):
            value = [v.item() if hasattr(v, "item") else v for v in value]
        elif hasattr(value, "item"):
            value = value.item()
        return {"kind": "set", "values": [value]}
    h = max(dpl_result.bandwidth_x or 0.0, dpl_result.bandwidth_xp or 0.0) or 0.1
    if isinstance(t_hat, (tuple, list)) and len(t_hat) > 1:
        return {"kind": "box", "low": [float(v) - h for v in t_hat], "high": [float(v) + h for v in t_hat]}
    t = float(t_hat[0]) if isinstance(t_hat, (tuple, list)) else float(t_hat)
    return {"kind": "interval", "low": t - h, "high": t + h}


def density_orientation(dpl_result: Any) -> bool:
    """True when f_x(t̂) ≥ f_x'(t̂): the event around t̂ is then likelier under x, as a check needs."""
    loss_index = np.unravel_index(int(np.argmax(dpl_result.loss)), dpl_result.loss.shape)
    return bool(dpl_result.f_x[loss_index] >= dpl_result.f_xp[loss_index])


def compute_snapshot(pairs: list[PairSamples], output_kind: str, *, alpha: float, epsilon: float | None,
                     tau: float | None = None) -> dict[str, Any]:
    """The snapshot's result (JSON-ready). Raises ValueError when the data cannot support it."""
    if not pairs:
        raise ValueError("a snapshot needs at least one pair")
    kind = kind_for_output(output_kind)
    rows = []
    for pair in pairs:
        statistic = None
        if output_kind == "keyed":
            pair, statistic = _keyed_pair(pair, alpha, tau)
        n_bound = min(len(pair.bound_x), len(pair.bound_xp))
        params = MPLParams.for_output_kind(
            output_kind, n=max(2, min(len(pair.choose_x), len(pair.choose_xp))), N=max(2, n_bound), alpha=alpha,
            **({"tau": tau} if tau is not None else {}))
        on, pair_kind = None, kind if statistic is None else statistic.estimator
        if output_kind == "vector" and real_rows(pair.choose_x, pair.choose_xp):
            # vectors of reals are not table rows: MPL on the coordinate with the largest ε̂
            on, _ = dpl_best_coordinate(pair.choose_x, pair.choose_xp, params)
            pair = PairSamples(pair.label, *(a[:, on] for a in (pair.choose_x, pair.choose_xp, pair.bound_x,
                                                                 pair.bound_xp)))
            pair_kind = "continuous"
            params = MPLParams(n=params.n, N=params.N, alpha=alpha, **({"tau": tau} if tau is not None else {}))
        chosen = dpl(pair.choose_x, pair.choose_xp, pair_kind, params)
        bound = mpl_lower_bound(pair.bound_x[:n_bound], pair.bound_xp[:n_bound], chosen.t_hat, pair_kind, params)
        profile = privacy_profile(np.concatenate([pair.choose_x, pair.bound_x]),
                                  np.concatenate([pair.choose_xp, pair.bound_xp]), PROFILE_EPSILONS, pair_kind)
        rows.append({
            **pair.label,
            "epsilon_hat": chosen.epsilon_hat,
            "t_hat": chosen.to_dict(include_curve=False)["t_hat"],
            "lower_bound": bound.lower_bound,
            "exceeds_claim": None if epsilon is None else bound.exceeds(epsilon),
            "x_denser_at_t_hat": density_orientation(chosen),
            "suggested_event": statistic.event(chosen) if statistic is not None else
            suggested_event(output_kind, chosen) if on is None else
            {"kind": "projection", "projection": {"kind": "coordinate", "index": on},
             "event": suggested_event("real", chosen)},
            "coordinate": on,
            **({} if statistic is None else {"statistic": statistic.to_dict()}),
            "samples": {"choose": [len(pair.choose_x), len(pair.choose_xp)], "bound": n_bound},
            "params": params.to_dict(),
            "loss_curve": _thin_curve(chosen.to_dict(include_curve=True)),
            "bound": bound.to_dict(),
            "privacy_profile": {"epsilons": list(PROFILE_EPSILONS), "delta": profile.delta.tolist()},
            **_claim_terms(pair, pair_kind, alpha, n_bound),
        })
    best = int(np.argmax([r["epsilon_hat"] for r in rows]))
    head = rows[best]
    lb = head["lower_bound"]
    # Worded so that a bound below the claim never reads as clearing the mechanism.
    statement = snapshot_reading(lb, head["epsilon_hat"], epsilon if epsilon is not None and np.isfinite(epsilon)
                                 else np.inf, alpha=alpha, after_alarm=False)["statement"]
    extra = {}
    if "claim_terms" in head:
        extra = {"claim": head["claim"], "claim_terms": {k: v for k, v in head["claim_terms"].items() if k != "tradeoff"}}
    return {
        **extra,
        "kind": kind,
        "alpha": alpha,
        "claimed_epsilon": epsilon,
        "chosen_pair": best,
        "epsilon_hat": head["epsilon_hat"],
        "t_hat": head["t_hat"],
        "lower_bound": lb,
        "exceeds_claim": None if epsilon is None else bool(lb > epsilon),
        "statement": statement,
        "pairs": rows,
    }


def _keyed_pair(pair: PairSamples, alpha: float, tau: float | None) -> tuple[PairSamples, KeyedStatistic]:
    """Keyed outputs as the statistic MPL works on (docs/mpl.md "Keyed outputs"): the one with the
    largest ε̂ on the choosing samples, applied to all four samples (the bounding ones never
    chose it)."""
    n = max(2, min(len(pair.choose_x), len(pair.choose_xp)))
    params = MPLParams(n=n, N=2, alpha=alpha) if tau is None else MPLParams(n=n, N=2, alpha=alpha, tau=tau)
    statistic, _ = dpl_best_keyed(pair.choose_x, pair.choose_xp, params)
    arrays = (statistic.apply(a) for a in (pair.choose_x, pair.choose_xp, pair.bound_x, pair.bound_xp))
    return PairSamples(pair.label, *arrays), statistic


def _claim_terms(pair: PairSamples, kind: str, alpha: float, n_bound: int) -> dict[str, Any]:
    """The pair's claim in its own terms (method.md §10.4), when its label names a claim."""
    claim = pair.label.get("claim")
    if not claim:
        return {}
    n_choose = min(len(pair.choose_x), len(pair.choose_xp))
    events = nested_events(pair.choose_x[:n_choose], pair.choose_xp[:n_choose], pair.bound_x[:n_bound],
                           pair.bound_xp[:n_bound], outputs_kind(pair.choose_x, kind))
    return {"claim_terms": claim_terms(events, claim, alpha)}

