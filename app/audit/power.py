"""What a run that found nothing would have caught, per pair and event family (docs/audit.md §9).

For every (pair, event family) an audit or a search tested on fresh outputs, the test with the
most outputs (its n per side and its level) gives, at event probabilities q = 0.3, 0.1, 0.01,
10⁻³, 10⁻⁴ on the rarer side, the smallest violation in the claim's own terms (ε at the claimed
δ, μ or ρ) that this one test would have refuted with probability ≥ 0.9 (eq. POW,
app.stats.heldout_power). The other tests of the run only add to that power, so the statement is
conservative. It is conditional on the event: it holds had one of the events the run tested on
that pair been the violation. It says nothing about events the run did not test, about pairs it
did not try, or about smaller violations.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from app.stats.claims import MAX_EPSILON, MAX_MU, MAX_RHO, Claim
from app.stats.heldout_power import POWER_LEVEL, POWER_MASSES, smallest_detected

__all__ = ["claim_family", "power_rows", "power_sentence"]

#: (pair, family) groups for which the power is computed at most (the ones with the most outputs).
MAX_GROUPS = 8


def claim_family(claim: Any) -> tuple[Callable[[float, float], bool], Callable[[float, float], float], float, str]:
    """(refuted_by, boundary(θ, q), θ0, parameter) for a held-out claim: ``boundary`` is the
    largest p the claim of the same family at parameter θ allows when the rarer side has q."""
    if isinstance(claim, Claim):
        def boundary(th: float, q: float) -> float:
            return float(claim.with_value(max(th, 1e-9)).upper(q))

        return claim.refuted_by, boundary, claim.value, claim.parameter
    raise ValueError(f"no power statement for the claim {claim!r}")


def _pair_key(x: Any, xp: Any) -> str:
    a, b = json.dumps(x, sort_keys=True), json.dumps(xp, sort_keys=True)
    return "|".join(sorted((a, b)))


def power_rows(tests: list[dict[str, Any]], claim: Any, *, masses: tuple[float, ...] = POWER_MASSES,
               max_groups: int = MAX_GROUPS) -> list[dict[str, Any]]:
    """One row per (pair, event family) tested: n per side, level, and the smallest violation
    detected with probability ≥ 0.9 at each mass (module docstring), the most outputs first."""
    refuted_by, boundary, theta0, symbol = claim_family(claim)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for t in tests:
        h = t.get("held_out") or {}
        if not h.get("n_x") or not h.get("n_xp"):
            continue
        family = str(t.get("family") or t.get("statistic") or "event")
        key = (_pair_key(t["x"], t["x_prime"]), family)
        n = min(h["n_x"], h["n_xp"])
        old = groups.get(key)
        if old is None or (n, h["alpha"]) > (old["n"], old["level"]):
            groups[key] = {"x": t["x"], "x_prime": t["x_prime"], "family": family, "n": n, "level": h["alpha"]}
    if symbol == "ρ":  # the zCDP test's Rényi bound is slow to evaluate: fewer groups
        max_groups = min(max_groups, 3)
    rows = sorted(groups.values(), key=lambda g: (g["n"], g["level"]), reverse=True)[:max_groups]
    cache: dict[tuple[int, float], list[dict[str, Any]]] = {}
    out = []
    for g in rows:
        ck = (g["n"], g["level"])
        if ck not in cache:
            found = []
            for q in masses:
                top = (math.log(1.0 / q) + 0.05 if symbol == "ε" else 64 * theta0)
                top = min(top, {"ε": MAX_EPSILON, "μ": MAX_MU, "ρ": MAX_RHO}[symbol])
                d = smallest_detected(refuted_by, boundary, theta0, q, g["n"], g["n"], g["level"], theta_max=top)
                found.append(d.to_dict())
            cache[ck] = found
        out.append({"x": g["x"], "x_prime": g["x_prime"], "family": g["family"], "n_per_side": g["n"],
                    "level": g["level"], "parameter": symbol, "claimed": theta0, "detected": cache[ck]})
    return out


def power_sentence(rows: list[dict[str, Any]], *, untested_pairs: int = 0) -> str:
    """The power in one paragraph, phrased so that it never reads as clearing the mechanism."""
    if not rows:
        return ("Power: no event was tested on fresh outputs, so this run rules out nothing; "
                "it says nothing about the claim.")
    symbol = rows[0]["parameter"]
    best_theta, best_q, best_row = math.inf, None, None
    for r in rows:
        for d in r["detected"]:
            if d["theta"] is not None and d["theta"] < best_theta:
                best_theta, best_q, best_row = d["theta"], d["q"], r
    pairs = len({_pair_key(r["x"], r["x_prime"]) for r in rows})
    families = len({r["family"] for r in rows})
    if best_row is None:
        return (f"Power: on the {pairs} pair(s) and {families} event famil{'y' if families == 1 else 'ies'} tested, no "
                f"violation at the event probabilities {', '.join(f'{q:g}' for q in POWER_MASSES)} would have been "
                f"caught with probability ≥ {POWER_LEVEL:g}: this run rules out nothing.")
    by_q = []
    for d in best_row["detected"]:
        by_q.append(f"{symbol} ≥ {d['theta']:.3g} at q = {d['q']:g}" if d["theta"] is not None
                    else f"none at q = {d['q']:g}")
    text = (f"Power: had one of the events this run tested been a violation, it would have been caught with "
            f"probability ≥ {POWER_LEVEL:g} from {symbol} ≥ {best_theta:.3g} (an event of probability {best_q:g} on "
            f"the neighbour where it is rarer; {', '.join(by_q)}; {best_row['n_per_side']:,} fresh outputs per side at "
            f"level {best_row['level']:.2e}), on {pairs} pair(s) and {families} event "
            f"famil{'y' if families == 1 else 'ies'}. This says nothing about other pairs, other events, or smaller "
            f"violations, and does not show that the claim holds.")
    if untested_pairs:
        text += f" {untested_pairs} more pair(s) were screened but never tested on fresh outputs: no power there."
    return text
