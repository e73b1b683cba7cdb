"""Certification on fresh samples: staged tests during screening, and the audit engine on the
finalists (docs/search.md §3.4).

Only this phase speaks for α, in stages. **Staged tests** (:func:`staged_test`): after a screening
rung, the best few pairs' best events are chosen on the screening outputs (the store), and each is
tested once on fresh outputs drawn after that choice, at level α_s/k (α_s = α·2^−(s+1) for the s-th
stage that tests anything, :func:`stage_alpha`; k = the most pairs a stage tests). A pair is tested
only when its choosing data predict that the test will refute (:func:`held_out_size`), so a stage
that predicts nothing draws nothing and spends no α. The stages' levels sum to less than α/2.

**The final certification** (:func:`certify`), at α/2 when there were stages (α without): the finalists (the best screened pairs and the refined ones) are
fixed before any of its samples is drawn; the audit engine (app.audit.engine.run_engine) then
draws a fresh pilot to choose events and fresh rounds to test them, each test at level α_r/K
(app.stats.heldout.test_claim with the claim's Clopper–Pearson corner), so that over all rounds,
events and finalists the probability of any false certification is at most α (the union bound,
docs/audit.md §4). Screening and refinement outputs are never passed to it.

Since the finalists are a function of the search's own samples only, and every certification
sample is drawn after they are fixed, the guarantee holds conditionally on the finalists and so
unconditionally. The same holds for each staged test given everything drawn before it. By the
union bound over the stages and the final certification, whatever the search did,
P(a correct mechanism is certified as violating) ≤ Σ_s α·2^−(s+1) + α/2 < α.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from app.audit.discovery import candidates_from
from app.audit.engine import (
    PRUNE_AFTER,
    AuditResult,
    AuditSettings,
    Progress,
    run_engine,
)
from app.sampling.protocol import database_key
from app.search.draws import SearchDraws
from app.search.pairs import CandidatePair
from app.stats.candidates import SELECTION_Z, Candidate, ProposalSettings, propose
from app.stats.claims import Claim, claimed_epsilon
from app.stats.events import event_contains
from app.stats.heldout import Counts, test_claim
from app.stats.shapes import OutputShape, concat_outputs, n_outputs, take_outputs

__all__ = ["FINAL_SHARE", "EngineCertification", "StageResult", "StagedTests", "certification_settings", "certify",
           "findings_from", "held_out_size", "stage_alpha", "staged_test"]

#: The final certification's share of α when there are staged tests; the stages share the rest.
FINAL_SHARE = 0.5


def stage_alpha(alpha: float, s: int) -> float:
    """The level of the s-th stage that tests (s = 1, 2, …): α·2^−(s+1), so that
    Σ_{s ≥ 1} α_s = α/2 and, with the final certification at α/2, the total stays below α."""
    if s < 1:
        raise ValueError("stages count from 1")
    return alpha * 2.0 ** -(s + 1)


def held_out_size(claim: Claim, cand: Candidate, n_x: int, n_xp: int, level: float, *, n_min: int,
                  n_max: int) -> int | None:
    """Fresh outputs per database for a staged test of ``cand`` (chosen on n_x and n_xp outputs),
    or None when the test is not predicted to refute within ``n_max``.

    The choosing proportions p̃ = (a + ½)/(n_x + 1), q̃ likewise (as the ranking score,
    app.stats.candidates.ranking_score), are made conservative by the winner's-curse penalty
    (p̃ − 2·se, q̃ + 2·se); the size is twice the smallest n (n_min·2^k) at which those expected
    counts already refute the claim with the held-out test itself (test_claim at ``level``), so
    that the test refutes with a fair chance and not only on a lucky draw. This only decides
    whether and how much to draw; it is computed on the choosing data alone."""
    nx = max(1, n_x // 2) if cand.statistic == "learned score" else max(1, n_x)
    ny = max(1, n_xp // 2) if cand.statistic == "learned score" else max(1, n_xp)
    p = (cand.p_hat * nx + 0.5) / (nx + 1)
    q = (cand.q_hat * ny + 0.5) / (ny + 1)
    p_c = p - SELECTION_Z * math.sqrt(p * (1 - p) / nx)
    q_c = min(1.0, q + SELECTION_Z * math.sqrt(q * (1 - q) / ny))
    if p_c <= 0 or p_c <= q_c:
        return None
    n = n_min
    while n <= n_max:
        counts = Counts(int(math.floor(p_c * n)), n, min(n, int(math.ceil(q_c * n))), n)
        if test_claim(claim, counts, level).refutes:
            return min(2 * n, n_max)
        n *= 2
    return None


@dataclass
class StageResult:
    """One staged test: which rung it followed, its level, its tests and outputs drawn."""

    stage: int
    after: str
    alpha: float
    level_per_test: float
    tests: list[dict[str, Any]] = field(default_factory=list)
    samples: int = 0
    samples_before: int = 0
    refuted: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "after": self.after, "alpha": self.alpha, "level_per_test": self.level_per_test,
                "tests": len(self.tests), "samples": self.samples, "samples_before": self.samples_before,
                "refuted": self.refuted, "seconds": self.seconds,
                "lower_bound": max((t["held_out"]["lower_bound"] for t in self.tests
                                    if t["held_out"]["lower_bound"] is not None), default=None)}


async def staged_test(draws: SearchDraws, pairs: list[CandidatePair], shape: OutputShape, claim: Claim, *,
                      stage: int, alpha: float, after: str, proposal: ProposalSettings, max_pairs: int,
                      max_outputs: int, n_min: int = 500, cap: int = 64_000) -> StageResult | None:
    """The s-th staged test (module docstring) on the best ``max_pairs`` of ``pairs``, within
    ``max_outputs`` fresh outputs; None when no pair is predicted to refute (nothing drawn, no
    level spent: the next stage that tests is still the s-th).

    Events are chosen on ``draws.store`` (outputs drawn before this call); the tests count fresh
    outputs only (``draws.draw``, phase ``certification``), which then join the store as choosing
    data for the later rungs, as the engine's rounds do."""
    started = time.perf_counter()
    alpha_s = stage_alpha(alpha, stage)
    level = alpha_s / max_pairs
    target = claimed_epsilon(claim)

    def choose() -> list[tuple[CandidatePair, Candidate, int]]:
        out = []
        for pair in pairs[:max_pairs]:
            kx, ky = database_key(pair.x), database_key(pair.x_prime)
            if kx not in draws.store or ky not in draws.store:
                continue
            x, y = draws.store[kx], draws.store[ky]
            nx, ny = n_outputs(x), n_outputs(y)
            prop = replace(proposal, n_test=max(n_min, min(nx, ny)), level=level, target=target, learned=True,
                           seed=proposal.seed + 7919 * stage)
            try:
                cands = propose(x, y, shape, prop)
            except (ValueError, FloatingPointError):
                continue
            if not cands:
                continue
            n = held_out_size(claim, cands[0], nx, ny, level, n_min=n_min, n_max=max(n_min, max_outputs // 2))
            if n is not None:
                out.append((pair, cands[0], n))
        return out

    chosen = await asyncio.to_thread(choose)
    # within the stage's outputs: the best predicted first (2n outputs per pair)
    kept, spent = [], 0
    for item in chosen:
        if spent + 2 * item[2] <= max_outputs:
            kept.append(item)
            spent += 2 * item[2]
    if not kept:
        return None
    result = StageResult(stage=stage, after=after, alpha=alpha_s, level_per_test=level, samples_before=draws.total)
    for pair, cand, n in kept:
        before = draws.total
        fresh = await draws.draw([pair.x, pair.x_prime], n, "certification", note=f"stage {stage}")
        result.samples += draws.total - before
        kx, ky = database_key(pair.x), database_key(pair.x_prime)
        if kx not in fresh or ky not in fresh:
            continue
        hx = int(np.count_nonzero(event_contains(cand.event, fresh[kx])))
        hy = int(np.count_nonzero(event_contains(cand.event, fresh[ky])))
        counts = Counts(hx, n, hy, n) if cand.x_first else Counts(hy, n, hx, n)
        res = test_claim(claim, counts, level)
        result.tests.append({"round": 0, "stage": stage, **cand.to_dict(), "held_out": res.to_dict(),
                             "x": pair.x if cand.x_first else pair.x_prime,
                             "x_prime": pair.x_prime if cand.x_first else pair.x})
        result.refuted = result.refuted or res.refutes
        for key, out in fresh.items():  # the tested outputs become choosing data for later rungs
            old = draws.store.get(key)
            merged = out if old is None else concat_outputs([old, out])
            m = n_outputs(merged)
            draws.store[key] = merged if m <= cap else take_outputs(merged, slice(m - cap, m))
        if result.refuted:
            break
    result.seconds = round(time.perf_counter() - started, 3)
    return result


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
    # pruned at PRUNE_AFTER, as counted above (not later, on re-ranked candidates: rescore_late stays off)
    return AuditSettings(alpha=alpha, budget=first * 2**rounds, first_round=first, keep_pairs=keep_pairs, seed=seed,
                         rescore_late=False)


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


@dataclass
class StagedTests:
    """The staged tests as a :class:`~app.search.protocols.PairTester`: each call that tests
    anything is the next stage (its level α·2^−(s+1)); ``stages`` keeps them in order."""

    shape: OutputShape
    claim: Claim
    alpha: float
    proposal: ProposalSettings
    max_pairs: int
    n_min: int = 500
    stages: list[StageResult] = field(default_factory=list)

    async def test(self, draws: SearchDraws, pairs: list[CandidatePair], *, max_outputs: int,
                   after: str) -> StageResult | None:
        st = await staged_test(draws, pairs, self.shape, self.claim, stage=len(self.stages) + 1, alpha=self.alpha,
                               after=after, proposal=self.proposal, max_pairs=self.max_pairs, max_outputs=max_outputs,
                               n_min=self.n_min)
        if st is not None:
            self.stages.append(st)
        return st


@dataclass
class EngineCertification:
    """The final certification as a :class:`~app.search.protocols.PairTester`: the audit engine on
    the finalists at level ``alpha``, its settings sized to ``max_outputs`` (:func:`certification_settings`).
    It always follows refinement; ``after`` is not recorded."""

    shape: OutputShape
    claim: Claim
    alpha: float
    seed: int = 0
    progress: Any = None
    deadline: float | None = None

    async def test(self, draws: SearchDraws, pairs: list[CandidatePair], *, max_outputs: int,
                   after: str = "refinement") -> AuditResult:
        n_dbs = len({k for f in pairs for k in f.key.split("|")})
        settings = certification_settings(max_outputs, n_dbs, self.alpha, seed=self.seed)
        return await certify(draws, pairs, self.shape, self.claim, settings=settings, progress=self.progress,
                             deadline=self.deadline)


def findings_from(result: AuditResult | None, finalists: list[CandidatePair], claim_value: float | None,
                  claim: dict[str, Any], stages: list[StageResult] | None = None,
                  pairs: list[CandidatePair] | None = None) -> list[dict[str, Any]]:
    """The tested events (the staged tests' and the engine's) as findings, best first, each with
    its pair's provenance and a check ready for a monitor (``check``: x, x′, event, claim)."""
    from app.search.pairs import pair_key

    by_key = {p.key: p for p in (pairs or [])} | {p.key: p for p in finalists}
    tested = []
    if result is not None:
        tested += [{**cand, "stage": None} for cand in candidates_from(result, None)]
    for st in stages or []:
        for t in st.tests:
            h = t["held_out"]
            holds_some = 0 < h["a"] + h["b"] < h["n_x"] + h["n_xp"]
            lb = h["lower_bound"]
            tested.append({"x": t["x"], "x_prime": t["x_prime"], "event": t["event"], "describe": t["describe"],
                           "lower_bound": lb, "held_out": h, "round": 0, "stage": st.stage,
                           "informative": bool(lb is not None and lb > 0 and holds_some)})
    out = []
    for cand in tested:
        pair = by_key.get(pair_key(cand["x"], cand["x_prime"]))
        h = cand["held_out"]
        out.append({
            "rank": 0, "x": cand["x"], "x_prime": cand["x_prime"],
            "relation": None if pair is None else pair.relation, "source": None if pair is None else pair.source,
            "note": None if pair is None else pair.note, "event": cand["event"], "describe": cand["describe"],
            "lower_bound": cand["lower_bound"], "exceeds_claim": bool(h.get("refutes")),
            "informative": cand["informative"], "held_out": h, "round": cand["round"], "stage": cand["stage"],
            "check": {"x": cand["x"], "x_prime": cand["x_prime"], "event": cand["event"], "claim": claim},
        })
    # certified findings first (their held-out test refuted the claim at its level)
    out.sort(key=lambda f: (f["exceeds_claim"], f["informative"],
                            f["lower_bound"] if f["lower_bound"] is not None else -math.inf), reverse=True)
    for i, f in enumerate(out, start=1):
        f["rank"] = i
    return out
