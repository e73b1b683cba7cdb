"""Sparse events flagged: when n·q is too small for a check's test to have power.

The advice is :func:`app.stats.power.event_power_advice` (method.md §13.7) for the check's n, its
claim's line and its level α/m, at an estimate of the event's probabilities (p, q):

- the check's own counts, once it has run periods: the discounted (a, b, n) every detector state
  keeps (about the last ten periods, add-½ smoothed; ``source: "periods"``);
- before that, what discovery measured for an ``auto`` or re-discovered event (``source: "discovery"``),
  when it recorded the event's probabilities;
- none otherwise (a given event at creation): ``advice`` is null until the first period.
"""

from __future__ import annotations

import math
from typing import Any

from app.stats.claims import ApproxDP, Claim, PureDP
from app.stats.power import detector_advice, event_power_advice
from app.stats.sequential import SupportingLine


def _estimate(check: Any) -> tuple[float, float, str] | None:
    state = check.detector_state or {}
    sums = state.get("sums")
    if sums and float(sums[2]) > 0:
        sa, sb, sn = (float(v) for v in sums)
        return (sa + 0.5) / (sn + 1.0), (sb + 0.5) / (sn + 1.0), "periods"
    found = check.discovery or {}
    for pk, qk in (("p_hat", "q_hat"), ("p", "q")):
        if isinstance(found.get(pk), (int, float)) and isinstance(found.get(qk), (int, float)):
            return float(found[pk]), float(found[qk]), "discovery"
    return None


def _line(claim: Claim, check: Any) -> tuple[SupportingLine, bool] | None:
    """The claim's line on this event (pure ε, (ε, δ)), or the last line the check tested; and
    whether it is a ``lower`` line (testing q against p)."""
    if isinstance(claim, (PureDP, ApproxDP)):
        delta = claim.delta if isinstance(claim, ApproxDP) else 0.0
        return SupportingLine.approximate(float(claim.epsilon), float(delta)), False
    line = (check.claim_state or {}).get("line")
    if not line:
        return None
    try:
        return SupportingLine(float(line["slope"]), float(line["intercept"])), line.get("orientation") == "lower"
    except ValueError:
        return None


def check_power(check: Any, claim: Claim, n: int, level: float | None, *, horizon: int = 200,
                gamma: float = 0.25) -> dict[str, Any] | None:
    """The sparse-event advice of one check (a JSON object), or None without an estimate; with
    ``detector_advice``: which detector finds the reference violation soonest (method.md §13.9)."""
    est = _estimate(check)
    found = _line(claim, check)
    if est is None or found is None or not level or not 0 < level < 1:
        return None
    p, q, source = est
    line, lower = found
    if lower:
        p, q = q, p
    advice = event_power_advice(int(n), min(max(p, 0.0), 1.0), min(max(q, 0.0), 1.0), line, alpha=float(level))
    out = advice.to_dict()
    out = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}
    out.update(source=source, p_estimate=p, q_estimate=q)
    out["detector_advice"] = None
    if advice.gap > 0:
        s = line.slope
        var = advice.violation_p * (1 - advice.violation_p) + s * s * q * (1 - q)
        if var > 0:
            da = detector_advice(int(n), float(advice.gap), float(var), alpha=float(level), horizon=int(horizon),
                                 gamma=float(gamma)).to_dict()
            da["periods"] = {k: (None if v is None or not math.isfinite(v) else v) for k, v in da["periods"].items()}
            out["detector_advice"] = da
    return out


def power_warning(position: int, advice: dict[str, Any] | None) -> str | None:
    """One line for a sparse check: why, and the n that would give the test power."""
    if not advice or not advice.get("sparse"):
        return None
    suggested = advice.get("suggested_n")
    tail = (f"; samples_per_period = {suggested} would give it power" if suggested
            else "; no n helps: choose another event")
    return f"check {position}: the event is too sparse for the test to have power at n = {advice['n']} (" \
           + "; ".join(advice.get("reasons") or []) + ")" + tail


#: The periods a monitor's detection power is stated for ("caught within K periods with probability ≥ 0.9").
POWER_PERIODS = (1, 10, 100)


def check_detection_power(check: Any, claim: Claim, *, n: int, detector: str, level: float | None,
                          threshold: float | None, horizon: int, gamma: float, t: int) -> dict[str, Any]:
    """The check's detection power (app.stats.monitor_power, method.md §13.11): for each K in
    :data:`POWER_PERIODS`, the smallest violation ε ≥ X of this check's event that its detector catches
    within K periods with probability ≥ 0.9, for a violation that starts at the next period, at the
    event's estimated q. Pure-ε claims only; other claims get ``epsilon`` null and the reason."""
    from app.stats.monitor_power import DEFAULT_PROBABILITY, smallest_caught_violation

    out: dict[str, Any] = {"probability": DEFAULT_PROBABILITY, "detector": detector, "n": int(n), "q_estimate": None,
                           "source": None, "within": [], "statement": ""}
    if not isinstance(claim, PureDP):
        out["statement"] = ("Detection power is computed for pure-ε claims only; this check's claim "
                            f"({', '.join(f'{k} {v:g}' for k, v in claim.to_dict().items())}) gets none yet. This does "
                            "not mean that a violation would be missed.")
        return out
    eps = float(claim.epsilon)
    est = _estimate(check)
    if est is None:
        out["statement"] = "No estimate of the event's probability yet (the first period gives one)."
        return out
    _, q, source = est
    out.update(q_estimate=q, source=source)
    state = check.detector_state or {}
    kw: dict[str, Any]
    if detector == "aggregator":
        if threshold is None:
            out["statement"] = "The aggregator's threshold is not computed yet."
            return out
        kw = {"threshold": float(threshold), "horizon": int(horizon), "gamma": float(gamma)}
    else:
        log_thr = state.get("log_threshold")
        if log_thr is None and level:
            log_thr = math.log(1.0 / float(level))
        if log_thr is None:
            out["statement"] = "The detector's threshold is not known yet."
            return out
        kw = {"log_threshold": float(log_thr)}
    start = int(t) + 1
    for k in POWER_PERIODS:
        if detector == "aggregator" and start - 1 + k > int(horizon):
            continue
        res = smallest_caught_violation(detector, n=int(n), q=min(max(q, 0.0), 1.0), epsilon=eps, periods=k,  # type: ignore[arg-type]
                                        start=start if detector == "e-process" else 1, **kw)
        out["within"].append({"periods": k, "epsilon": res.epsilon, "violation_p": res.violation_p})
    caught = [w for w in out["within"] if w["epsilon"] is not None]
    if caught:
        w = next((c for c in caught if c["periods"] == 10), caught[0])
        out["statement"] = (f"A violation of ε ≥ {w['epsilon']:.2f} on this check (claimed {eps:g}) is caught within "
                            f"{w['periods']} period{'s' if w['periods'] != 1 else ''} with probability ≥ 0.9 "
                            f"(event probability q ≈ {q:.3g} on x', n = {n} per period, the {detector}).")
    else:
        out["statement"] = (f"No violation of this event is caught within {max(POWER_PERIODS)} periods with "
                            f"probability ≥ 0.9 at n = {n}: the event is too rare (q ≈ {q:.3g}). This does not clear "
                            "the mechanism.")
    return out
