"""The monitor's privacy claim, as the dashboard shows and draws it: the one place to change when
claims beyond pure ε arrive.

- :func:`monitor_claim` reads the claim of a monitor (today ``{"epsilon": ε}``), and
  :func:`check_claim` the claim of one check (its own, once checks carry one);
- :func:`format_claim` is the only formatter of a claim on every page (the ``claim`` filter);
- :func:`claim_boundary` gives the largest p̂ the claim allows for a q̂, drawn against p̂;
- :func:`claim_epsilon` is the ε drawn on a snapshot's loss curve and δ̂(ε) profile.

A claim is a dict with one of the shapes ``{"epsilon": e}``, ``{"epsilon": e, "delta": d}``,
``{"gdp_mu": m}`` or ``{"zcdp_rho": r}``. Every claim has a boundary for one event, the upper
edge ``h(q)`` of its region (:meth:`app.stats.claims.Claim.upper`): ``min(1, e^ε q + δ, …)`` for
(ε, δ), ``Φ(Φ⁻¹(q) + μ)`` for μ-GDP, and the envelope of the (ε, δ(ε)) lines for ρ-zCDP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.stats.claims import parse_claim

Claim = Mapping[str, float]


def monitor_claim(monitor: Any) -> dict[str, float]:
    """The claim a monitor checks. A monitor (or a check) with a ``claim`` attribute gives it;
    otherwise the claim is pure ε-DP with the monitor's ``epsilon``."""
    claim = getattr(monitor, "claim", None)
    if isinstance(claim, Mapping) and claim:
        return {str(k): float(v) for k, v in claim.items() if v is not None}
    epsilon = getattr(monitor, "epsilon", None)
    return {} if epsilon is None else {"epsilon": float(epsilon)}


def check_claim(monitor: Any, check: Any) -> dict[str, float]:
    """The claim one check tests: the check's own ``claim`` when checks carry one, else the monitor's."""
    own = getattr(check, "claim", None)
    if isinstance(own, Mapping) and own:
        return {str(k): float(v) for k, v in own.items() if v is not None}
    return monitor_claim(monitor)


def _num(value: float) -> str:
    return f"{value:.3g}" if value >= 1e-3 else f"{value:.1e}"


def format_claim(claim: Claim) -> str:
    """``ε = 1``, ``(ε = 1, δ = 1e-06)``, ``μ = 0.5 (GDP)``, ``ρ = 0.1 (zCDP)``."""
    if "gdp_mu" in claim:
        return f"μ = {_num(claim['gdp_mu'])} (GDP)"
    if "zcdp_rho" in claim:
        return f"ρ = {_num(claim['zcdp_rho'])} (zCDP)"
    if "epsilon" in claim:
        if claim.get("delta"):
            return f"(ε = {_num(claim['epsilon'])}, δ = {_num(claim['delta'])})"
        return f"ε = {_num(claim['epsilon'])}"
    return "unknown claim"


def claim_epsilon(claim: Claim) -> float | None:
    """The ε of an (ε, δ) claim, drawn as a line on loss curves; None for GDP and zCDP claims."""
    value = claim.get("epsilon")
    return None if value is None else float(value)


def claim_boundary(claim: Claim, q_hat: Sequence[float | None]) -> list[float | None] | None:
    """For each q̂, the largest p = P(M(x) ∈ E) the claim allows: h(q̂), the upper edge of the claim's
    region (app/stats/claims.py). None when the claim cannot be read."""
    try:
        parsed = parse_claim(dict(claim))
    except ValueError:
        return None
    qs = np.array([np.nan if q is None else float(q) for q in q_hat], dtype=np.float64)
    upper = parsed.upper(np.nan_to_num(qs, nan=0.0))
    return [None if q is None else float(u) for q, u in zip(q_hat, upper)]
