"""Certification: the finalists on fresh samples, with the audit engine (docs/search.md §3.4).

Only this phase speaks for α. The finalists (the best screened pairs and the refined ones) are
fixed before any of its samples is drawn; the audit engine (app.audit.engine.run_engine) then
draws a fresh pilot to choose events and fresh rounds to test them, each test at level α_r/K
(app.stats.heldout.test_claim with the claim's Clopper–Pearson corner), so that over all rounds,
events and finalists the probability of any false certification is at most α (the union bound,
docs/audit.md §4). Screening and refinement outputs are never passed to it.

Since the finalists are a function of the search's own samples only, and every certification
sample is drawn after they are fixed, the guarantee holds conditionally on the finalists and so
unconditionally: whatever the search did, P(a correct mechanism is certified as violating) ≤ α.
"""

from __future__ import annotations

import math
from typing import Any

from app.audit.discovery import candidates_from
from app.audit.engine import PRUNE_AFTER, AuditResult, AuditSettings, Progress, run_engine
from app.search.draws import SearchDraws
from app.search.generators import CandidatePair
from app.stats.heldout import Claim
from app.stats.shapes import OutputShape

__all__ = ["certification_settings", "certify", "findings_from"]


def certification_settings(budget: int, n_databases: int, alpha: float, *, keep_pairs: int = 3,
                           first_round: int | None = None, seed: int = 0) -> AuditSettings:
    """Engine settings that spend about ``budget`` outputs in all over ``n_databases`` databases.

    The engine's budget is per database: every database gets the pilot and the rounds until
    :data:`PRUNE_AFTER` choosing outputs, then only the ``keep_pairs`` best pairs' databases go
    on. The per-database budget is chosen so that this total fits."""
    first = first_round or max(100, min(2_000, budget // (16 * max(1, n_databases))))
    early = min(PRUNE_AFTER * 2, budget // max(1, n_databases))  # outputs each database draws before pruning
    late_dbs = min(n_databases, 2 * keep_pairs)
    per_db = int(max(2 * first, (budget - (n_databases - late_dbs) * early) / max(1, late_dbs)))
    rounds = max(1, int(math.floor(math.log2(per_db / first))))
    return AuditSettings(alpha=alpha, budget=first * 2**rounds, first_round=first, keep_pairs=keep_pairs, seed=seed)


async def certify(draws: SearchDraws, finalists: list[CandidatePair], shape: OutputShape, claim: Claim, *,
                  settings: AuditSettings, progress: Any = None, deadline: float | None = None) -> AuditResult:
    """The audit engine on the finalists, on fresh samples only (module docstring)."""
    if not finalists:
        raise ValueError("no finalist to certify")

    async def on_progress(p: Progress) -> None:
        if progress is not None:
            out = progress(f"certification round {p.round}/{p.rounds}")
            if hasattr(out, "__await__"):
                await out

    return await run_engine(draws.engine_sampler(), [(p.x, p.x_prime) for p in finalists], shape, claim, settings,
                            progress=on_progress, cancel=draws.cancel, deadline=deadline)


def findings_from(result: AuditResult, finalists: list[CandidatePair], claim_value: float | None,
                  claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The engine's tested events as findings, best first, each with its pair's provenance and a
    check ready for a monitor (``check``: x, x′, event, claim)."""
    by_key = {p.key: p for p in finalists}
    from app.search.generators import pair_key

    out = []
    for cand in candidates_from(result, None):
        pair = by_key.get(pair_key(cand["x"], cand["x_prime"]))
        lb = cand["lower_bound"]
        h = cand["held_out"]
        out.append({
            "rank": cand["rank"], "x": cand["x"], "x_prime": cand["x_prime"],
            "relation": None if pair is None else pair.relation, "source": None if pair is None else pair.source,
            "note": None if pair is None else pair.note, "event": cand["event"], "describe": cand["describe"],
            "lower_bound": lb, "exceeds_claim": bool(h.get("refutes")), "informative": cand["informative"],
            "held_out": h, "round": cand["round"],
            "check": {"x": cand["x"], "x_prime": cand["x_prime"], "event": cand["event"], "claim": claim},
        })
    # certified findings first (their held-out test refuted the claim at its level)
    out.sort(key=lambda f: (f["exceeds_claim"], f["informative"],
                            f["lower_bound"] if f["lower_bound"] is not None else -math.inf), reverse=True)
    for i, f in enumerate(out, start=1):
        f["rank"] = i
    return out
