"""Discovery with the audit engine: ranked candidate checks ``(x, x′, event)`` (docs/audit.md §5).

The engine runs on the candidate pairs (rounds, fresh held-out samples, the union bound); every
event it tested becomes a candidate check, oriented so that the event is likelier under the
check's ``x`` (a check tests ``p − e^ε q > 0``), with

- ``lower_bound``: its held-out lower bound on ε (at the level the engine tested it, so that all
  candidates' bounds hold simultaneously with probability ≥ 1 − α);
- ``epsilon_hat``: MPL's point estimate on the best pair (the same for all candidates);
- ``samples``: outputs the engine drew in all;
- ``informative``: ``False`` when the bound is ≤ 0 or the event held no test output on either
  side, or every one: a monitor must never adopt such a candidate.

The draws are the engine's own requests; a monitor's detector never sees them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from app.audit.engine import AuditResult, AuditSettings, Progress, Sampler, run_engine
from app.stats.claims import PureDP
from app.stats.shapes import OutputShape

__all__ = ["DEFAULT_DISCOVERY_BUDGET", "candidates_from", "discover_checks"]

DEFAULT_DISCOVERY_BUDGET = 256_000
"""Outputs per database of a discovery run (2 000·2⁷: seven rounds)."""


def candidates_from(result: AuditResult, epsilon: float | None) -> list[dict[str, Any]]:
    """The engine's tested events as ranked candidate checks (module docstring)."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for test in sorted(result.tests, key=lambda t: (t["held_out"]["lower_bound"] is not None,
                                                    t["held_out"]["lower_bound"] or -math.inf), reverse=True):
        key = json.dumps([test["event"], test["x"], test["x_prime"]], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        h = test["held_out"]
        lb = h["lower_bound"]
        holds_some = (h["a"] + h["b"]) > 0 and (h["a"] + h["b"]) < (h["n_x"] + h["n_xp"])
        informative = bool(lb is not None and lb > 0 and holds_some)
        out.append({
            "x": test["x"], "x_prime": test["x_prime"], "event": test["event"], "describe": test["describe"],
            "lower_bound": lb, "epsilon_hat": result.epsilon_hat, "held_out": h, "round": test["round"],
            "statistic": test["statistic"], "family": test["family"], "informative": informative,
            "reason": None if informative else ("its held-out lower bound is not above 0" if holds_some
                                                 else "it held no held-out output, or every one"),
            "exceeds_claim": None if epsilon is None or lb is None else bool(lb > epsilon),
            "samples": result.samples_used,
        })
    out.sort(key=lambda c: (c["informative"], c["lower_bound"] if c["lower_bound"] is not None else -math.inf),
             reverse=True)
    for i, c in enumerate(out, start=1):
        c["rank"] = i
    return out


async def discover_checks(sampler: Sampler, pairs: Sequence[tuple[Any, Any]], shape: OutputShape, *,
                          epsilon: float | None = None, settings: AuditSettings | None = None,
                          progress: Callable[[Progress], Any] | None = None, cancel: Any = None) -> dict[str, Any]:
    """Run the engine for discovery and return ``{"candidates": [...], ...}`` (module docstring).

    With ``epsilon`` the run stops as soon as a candidate's bound exceeds it (that event refutes
    the claim, which is what a monitor should watch); without, it spends its budget."""
    settings = settings or AuditSettings(budget=DEFAULT_DISCOVERY_BUDGET)
    claim = None if epsilon is None else PureDP(epsilon)
    result = await run_engine(sampler, pairs, shape, claim, settings, progress=progress, cancel=cancel)
    candidates = candidates_from(result, epsilon)
    return {"candidates": candidates, "alpha": settings.alpha, "samples_used": result.samples_used,
            "seconds": result.seconds, "epsilon_hat": result.epsilon_hat, "lower_bound": result.lower_bound,
            "refuted": result.refuted if epsilon is not None else None, "shape": shape.model_dump(mode="json"),
            "informative": any(c["informative"] for c in candidates), "rounds": result.rounds}
