"""A check's claim in the service: which claim applies, and one period's test under it.

- :func:`effective_claim`: the check's own ``claim``, else the monitor's default ``claim``, else
  ``{"epsilon": monitor.epsilon}`` (monitors created before claims existed).
- :func:`claim_period_step`: the period statistic of method.md §10.3 for one check. Pure-ε claims
  keep seed 002's statistic (and its ``wald`` option). Other claims test the supporting line
  anchored on the previous periods' counts (the a-priori line of ``claim_period.a_priori_line``
  in the first period), which the check keeps in ``claim_state``:
  ``{"recent": [[a, b, n], …], "line": {…}}`` (the last :data:`ANCHOR_PERIODS` periods).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from app.stats.claim_period import ANCHOR_PERIODS, a_priori_line, anchor_line, line_statistic, pooled_anchor
from app.stats.claims import Claim, PureDP, parse_claim
from app.stats.period import period_statistic


def effective_claim(check_claim: dict[str, Any] | None, monitor_claim: dict[str, Any] | None,
                    monitor_epsilon: float | None) -> dict[str, Any]:
    if check_claim:
        return dict(check_claim)
    if monitor_claim:
        return dict(monitor_claim)
    if monitor_epsilon is None:
        raise ValueError("the check has no claim and its monitor neither a claim nor an epsilon")
    return {"epsilon": float(monitor_epsilon)}


@dataclass(frozen=True)
class ClaimStep:
    p_hat: float
    q_hat: float
    d_hat: float
    sigma_hat: float
    z: float
    line: dict[str, Any]
    state: dict[str, Any] | None


def claim_period_step(claim: Claim | dict[str, Any], a: int, b: int, n: int, state: dict[str, Any] | None, *,
                      variance: str = "score", kappa: float = 1e-6) -> ClaimStep:
    """One period of one check under ``claim`` (method.md §10.3), and the check's next claim state."""
    claim = parse_claim(claim)
    if isinstance(claim, PureDP):
        stat = period_statistic(a, b, n, claim.epsilon, variance=variance, kappa=kappa)  # type: ignore[arg-type]
        line = {"orientation": "upper", "slope": float(np.exp(claim.epsilon)), "intercept": 0.0}
        return ClaimStep(float(stat.p_hat), float(stat.q_hat), float(stat.d_hat), float(stat.sigma_hat),
                         float(stat.z), line, state)
    if variance != "score":
        raise ValueError(f"the {variance!r} variance applies to pure-ε claims only; {claim.describe()} uses the score variance")
    recent = list((state or {}).get("recent") or [])
    anchor = pooled_anchor(recent)
    line = anchor_line(claim, *anchor) if anchor is not None else a_priori_line(claim)
    stat = line_statistic(a, b, n, line, kappa=kappa)
    recent = (recent + [[int(a), int(b), int(n)]])[-ANCHOR_PERIODS:]
    line_dict = line.to_dict()
    return ClaimStep(float(stat.p_hat), float(stat.q_hat), float(stat.d_hat), float(stat.sigma_hat), float(stat.z),
                     line_dict, {"recent": recent, "line": line_dict})
