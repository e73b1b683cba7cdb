"""Severity: sharpen the bound on a certified pair with what the budget leaves (docs/search.md §3.5).

A certification says that the claim is broken; its bound is the first one that cleared the
claim, often barely above it. Once a pair is certified, :func:`sharpen` spends at most
``share × budget`` further outputs (and stops drawing at the deadline) on that pair alone:

1. **choose** on choosing outputs of the pair (what the search stored for it plus a fresh choosing
   draw): atoms, tails at a ladder of depths and the engine's families re-chosen for the fresh
   sample size (app.stats.severity, app.stats.candidates.propose), plus the certified event
   itself; the ``events`` best by predicted bound are fixed before any test output is drawn;
2. **test** every fixed event once on ``n`` fresh outputs per side, drawn after the choice, each
   at level α/K (K = the number of events fixed), by the held-out test (app.stats.heldout.test_claim).

By the union bound over the K events, the largest of their bounds is a 1 − α lower confidence
bound on the claim's parameter, a statement of its own next to the certification's (which keeps
its own level). Because the certified event is among the K, the sharpened bound is the
certified event's bound on a larger fresh sample at worst. When the tested event's count on x′ is
0, the report says so ("x′ never produced this output in N draws"): the bound is then limited by
N (Q_upper = 1 − (α/2K)^{1/N}, app.stats.severity.never_seen_upper), and the loss may be unbounded.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.sampling.protocol import database_key
from app.sampling.timing import DeadlineReached
from app.search.draws import SearchDraws
from app.stats.candidates import ProposalSettings, propose
from app.stats.claims import Claim, claimed_delta
from app.stats.events import event_contains, parse_event
from app.stats.heldout import Counts, test_claim
from app.stats.severity import (
    SeverityCandidate,
    never_seen_upper,
    predicted_bound,
    severity_candidates,
)
from app.stats.shapes import OutputShape, concat_outputs, n_outputs

__all__ = ["SeveritySettings", "sharpen"]


@dataclass(frozen=True)
class SeveritySettings:
    share: float = 0.5  # of the search's budget, at most (and never more than what is left)
    events: int = 6  # events tested (the certified one included): each at α/events
    choosing: int = 200_000  # fresh choosing outputs per side at most
    chunk: int = 250_000  # outputs per side per sampler call while testing
    min_outputs: int = 4_000  # below this many outputs left, no sharpening

    def __post_init__(self) -> None:
        if not 0 < self.share <= 1:
            raise ValueError("severity share must lie in (0, 1]")
        if self.events < 1 or self.choosing < 100 or self.chunk < 100:
            raise ValueError("events >= 1, choosing >= 100 and chunk >= 100")


def _key(event: Any) -> str:
    return json.dumps(event.model_dump(mode="json"), sort_keys=True)


def _family_root(family: str) -> str:
    return family.split(" (")[0]


def _choose(cx: Any, cy: Any, shape: OutputShape, claim: Claim, certified: Any, n: int, level: float,
            k: int, delta: float, seed: int) -> list[SeverityCandidate]:
    """The certified event and the k − 1 best others by predicted bound (at most two per family)."""
    cands: list[SeverityCandidate] = []
    if shape.container == "scalar":
        cands += severity_candidates(cx, cy, claim, n, level)
    try:
        prop = propose(cx, cy, shape, ProposalSettings(n_test=n, level=level, delta=delta, target=None,
                                                       learned=True, seed=seed))
    except (ValueError, FloatingPointError):
        prop = []
    nx, ny = n_outputs(cx), n_outputs(cy)
    for c in prop[:40]:
        ma, mb = (nx, ny) if c.x_first else (ny, nx)
        p = max(0.0, c.p_hat - 2 * math.sqrt(max(c.p_hat * (1 - c.p_hat), 1e-12) / ma))
        q = min(1.0, c.q_hat + 2 * math.sqrt(max(c.q_hat * (1 - c.q_hat), 1e-12) / mb))
        cands.append(SeverityCandidate(c.event, c.x_first, p, q, predicted_bound(claim, p, q, n, level),
                                       f"{c.family} on {c.statistic}"))
    cands.sort(key=lambda c: c.predicted, reverse=True)
    chosen = [certified]
    seen = {_key(certified.event)}
    per_family: dict[str, int] = {}
    for c in cands:
        if len(chosen) >= k:
            break
        root = _family_root(c.family)
        if _key(c.event) in seen or per_family.get(root, 0) >= 2 or not math.isfinite(c.predicted):
            continue
        chosen.append(c)
        seen.add(_key(c.event))
        per_family[root] = per_family.get(root, 0) + 1
    return chosen


async def sharpen(draws: SearchDraws, finding: dict[str, Any], shape: OutputShape, claim: Claim, *, outputs: int,
                  alpha: float, settings: SeveritySettings | None = None, deadline: float | None = None,
                  seed: int = 0, progress: Any = None) -> dict[str, Any] | None:
    """Sharpen the bound on the certified ``finding``'s pair (module docstring) within ``outputs``
    outputs in all; None when too few are left. ``finding`` is oriented (x the likelier side of
    its event), as the search reports it."""
    s = settings or SeveritySettings()
    if outputs < s.min_outputs or (deadline is not None and time.monotonic() >= deadline):
        return None
    started = time.monotonic()
    draws.used.setdefault("severity", 0)
    x, xp = finding["x"], finding["x_prime"]
    kx, ky = database_key(x), database_key(xp)
    m = int(min(s.choosing, max(1_000, outputs // 10)))
    n = int((outputs - 2 * m) // 2)
    k = s.events
    level = alpha / k
    delta = claimed_delta(claim)

    async def say(message: str) -> None:
        if progress is not None:
            out = progress(message)
            if hasattr(out, "__await__"):
                await out

    await say(f"severity: choosing events on {m:,} fresh outputs per side of the certified pair")
    try:
        fresh = await draws.draw([x, xp], m, "severity", note="severity choosing")
    except DeadlineReached:
        return None
    if kx not in fresh or ky not in fresh:
        return None
    cx = fresh[kx] if kx not in draws.store else concat_outputs([draws.store[kx], fresh[kx]])
    cy = fresh[ky] if ky not in draws.store else concat_outputs([draws.store[ky], fresh[ky]])
    certified_event = parse_event(finding["event"])
    certified = SeverityCandidate(certified_event, True, float("nan"), float("nan"), float("nan"), "certified event")
    chosen = await asyncio.to_thread(_choose, cx, cy, shape, claim, certified, n, level, k, delta, seed)
    del cx, cy, fresh
    # fixed before any test output is drawn; the test counts fresh outputs only
    hits = [[0, 0] for _ in chosen]
    drawn = 0
    stopped = "done"
    while drawn < n:
        if deadline is not None and time.monotonic() >= deadline:
            stopped = "time limit"
            break
        size = min(s.chunk, n - drawn)
        try:
            out = await draws.draw([x, xp], size, "severity", note="severity test")
        except DeadlineReached:  # stopping by the clock does not depend on the outputs: the counts stay valid
            stopped = "time limit"
            break
        if kx not in out or ky not in out:
            stopped = "the endpoint failed"
            break
        for j, c in enumerate(chosen):
            hits[j][0] += int(np.count_nonzero(event_contains(c.event, out[kx])))
            hits[j][1] += int(np.count_nonzero(event_contains(c.event, out[ky])))
        drawn += size
        await say(f"severity: {drawn:,}/{n:,} fresh outputs per side")
    if drawn == 0:
        return None
    tests = []
    for c, (hx, hy) in zip(chosen, hits, strict=True):
        counts = Counts(hx, drawn, hy, drawn) if c.x_first else Counts(hy, drawn, hx, drawn)
        res = test_claim(claim, counts, level)
        tests.append({**c.to_dict(), "held_out": res.to_dict(),
                      "x": x if c.x_first else xp, "x_prime": xp if c.x_first else x})
    tests.sort(key=lambda t: t["held_out"]["lower_bound"] if t["held_out"]["lower_bound"] is not None else -math.inf,
               reverse=True)
    best = tests[0]
    h = best["held_out"]
    never = h["b"] == 0 and h["a"] > 0
    return {
        "lower_bound": h["lower_bound"], "alpha": alpha, "level_per_event": level, "events": k, "tested": len(chosen),
        "n_per_side": drawn, "choosing_per_side": m, "event": best["event"], "describe": best["describe"],
        "family": best["family"], "x": best["x"], "x_prime": best["x_prime"], "held_out": h,
        "never_seen": never, "q_upper_never_seen": never_seen_upper(drawn, level / 2) if never else None,
        "tests": tests, "samples": draws.used["severity"], "seconds": round(time.monotonic() - started, 3),
        "stopped": stopped,
    }


def severity_statement(sev: dict[str, Any], parameter: str, claimed: float | None) -> str:
    """One paragraph a user can act on."""
    conf = f"{100 * (1 - sev['alpha']):g}%"
    h = sev["held_out"]
    lb = sev["lower_bound"]
    lb_text = "n/a" if lb is None else f"{lb:.4g}"
    ratio = "" if lb is None or not claimed else f" ({lb / claimed:.3g} × the claim)"
    text = (f"Severity: on {sev['n_per_side']:,} further fresh outputs per side of the certified pair, "
            f"the event {sev['describe']} held {h['a']:,}/{h['n_x']:,} against {h['b']:,}/{h['n_xp']:,}: "
            f"{parameter} ≥ {lb_text}{ratio} at {conf} confidence ({sev['events']} events chosen on other outputs, "
            f"each tested once at α/{sev['events']}).")
    if sev["never_seen"]:
        text += (f" x′ never produced this output in {h['n_xp']:,} draws (Q_upper = {sev['q_upper_never_seen']:.3g}"
                 f", exact Clopper–Pearson): the bound is limited by the number of draws, not by the mechanism, "
                 f"and the loss may be unbounded in truth; more draws raise it.")
    return text
