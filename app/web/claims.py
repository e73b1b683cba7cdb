"""The monitor's privacy claim, as the dashboard shows and draws it.

The claim is dpwatch's one claim type, :class:`app.stats.claims.Claim` (ε, (ε, δ), μ-GDP or
ρ-zCDP). Stored JSON (a monitor's, a check's or an alarm's ``claim``) is parsed once, here, at the
page's edge (:func:`app.stats.claims.claim_of_record`); everything below reads the claim's type.

- :func:`monitor_claim` reads the claim of a monitor (``{"epsilon": ε}`` for monitors made before
  claims), and :func:`check_claim` the claim of one check (its own, else the monitor's);
- :func:`format_claim` is the only formatter of a claim on every page (the ``claim`` filter);
- :func:`claim_boundary` gives the largest p̂ the claim allows for a q̂, drawn against p̂: the
  upper edge ``h(q)`` of its region (:meth:`app.stats.claims.Claim.upper`);
- :func:`claim_epsilon` is the ε drawn on a snapshot's loss curve and δ̂(ε) profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.stats.claims import ZCDP, ApproxDP, Claim, GaussianDP, PureDP, claim_of_record


def as_claim(data: Any) -> Claim | None:
    """A claim from stored JSON (or a :class:`Claim`); None when there is none or it cannot be read
    (:func:`app.stats.claims.claim_of_record`)."""
    return claim_of_record(data)


def monitor_claim(monitor: Any) -> Claim | None:
    """The claim a monitor checks. A monitor (or a check) with a ``claim`` attribute gives it;
    otherwise the claim is pure ε-DP with the monitor's ``epsilon``."""
    own = as_claim(getattr(monitor, "claim", None))
    if own is not None:
        return own
    epsilon = getattr(monitor, "epsilon", None)
    return None if epsilon is None else PureDP(float(epsilon))


def check_claim(monitor: Any, check: Any) -> Claim | None:
    """The claim one check tests: the check's own ``claim`` when it carries one, else the monitor's."""
    own = as_claim(getattr(check, "claim", None))
    return own if own is not None else monitor_claim(monitor)


def _num(value: float) -> str:
    return f"{value:.3g}" if value >= 1e-3 else f"{value:.1e}"


def format_claim(claim: Claim | Mapping[str, Any] | None) -> str:
    """``ε = 1``, ``(ε = 1, δ = 1e-06)``, ``μ = 0.5 (GDP)``, ``ρ = 0.1 (zCDP)``."""
    parsed = as_claim(claim)
    if isinstance(parsed, GaussianDP):
        return f"μ = {_num(parsed.mu)} (GDP)"
    if isinstance(parsed, ZCDP):
        return f"ρ = {_num(parsed.rho)} (zCDP)"
    if isinstance(parsed, ApproxDP):
        return f"(ε = {_num(parsed.epsilon)}, δ = {_num(parsed.delta)})"
    if isinstance(parsed, PureDP):
        return f"ε = {_num(parsed.epsilon)}"
    return "unknown claim"


def claim_epsilon(claim: Claim | None) -> float | None:
    """The ε of an ε or (ε, δ) claim, drawn as a line on loss curves; None for GDP and zCDP claims."""
    return float(claim.epsilon) if isinstance(claim, (PureDP, ApproxDP)) else None


def claim_delta(claim: Claim | None) -> float | None:
    """The δ of an (ε, δ) claim; None for any other."""
    return float(claim.delta) if isinstance(claim, ApproxDP) else None


def claim_boundary(claim: Claim | None, q_hat: Sequence[float | None]) -> list[float | None] | None:
    """For each q̂, the largest p = P(M(x) ∈ E) the claim allows: h(q̂), the upper edge of the claim's
    region (app/stats/claims.py). None when there is no claim."""
    if claim is None:
        return None
    qs = np.array([np.nan if q is None else float(q) for q in q_hat], dtype=np.float64)
    upper = claim.upper(np.nan_to_num(qs, nan=0.0))
    return [None if q is None else float(u) for q, u in zip(q_hat, upper, strict=True)]
