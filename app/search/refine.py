"""Refinement: a derivative-free optimiser moves a screened pair's coordinates (docs/search.md §3.3).

DP-Finder (Bichsel et al., CCS 2018, §3) maximises an estimate of the privacy violation
ε̂(x, x′, Φ) over the pair and the event together, by differentiating a surrogate of the program.
dpwatch sees the mechanism only through samples, so the pair's continuous (and discrete)
coordinates are moved by a black-box optimiser instead, Optuna's TPE sampler (Akiba et al.,
KDD 2019; Bergstra et al., NeurIPS 2011), in the ask-and-tell loop, started from the screened
pair (``enqueue_trial``). The objective is DP-Finder's, made conservative: for each proposed
pair, fresh outputs are drawn and the best candidate event's predicted lower bound on ε is taken
(app.stats.candidates.ranking_score without a target: ℓ̂ − 2·se − z·se_test, DP-Sniper's
criterion).

:class:`PairTemplate` maps a point θ of a box to a pair that is neighbouring by construction
(the relation of the screened pair is kept: one record removed, one replaced, or the answers
moved within the sensitivity) and inside the domain; every built pair is checked again with
:meth:`InputDomain.relation`.

The best trial's objective is a maximum over noisy trials (a winner's curse), so it only chooses
which pair goes on to certification, which draws fresh samples (app.search.certify).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from app.sampling.protocol import database_key
from app.search.domain import (
    CategoryRecords,
    InputDomain,
    IntegerRecords,
    VectorRecords,
)
from app.search.draws import SearchDraws
from app.search.pairs import CandidatePair, RecordSpace
from app.search.screening import pair_score
from app.stats.candidates import ProposalSettings
from app.stats.shapes import OutputShape

__all__ = ["PairTemplate", "RefineSettings", "refine_pair", "template_for"]

#: Coordinates a template moves at most; beyond, only the changed record's are moved.
MAX_PARAMETERS = 32
#: The objective of a pair with no candidate event (Optuna needs a finite number).
NO_EVENT = -100.0


@dataclass(frozen=True)
class RefineSettings:
    trials: int = 24
    samples_per_trial: int = 4_000  # outputs per database and trial
    seed: int = 0


@dataclass
class Parameter:
    name: str
    kind: str  # float | int | category
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    initial: Any = None


@dataclass
class PairTemplate:
    """Builds a neighbouring pair from parameter values (module docstring)."""

    domain: InputDomain
    pair: CandidatePair
    parameters: list[Parameter]
    build_fn: Callable[[dict[str, Any]], tuple[list[Any], list[Any]]] = field(repr=False)

    def initial(self) -> dict[str, Any]:
        """The screened pair's coordinates, brought inside their boxes (an extreme record such as
        ±1.8·10³⁰⁸ starts at the box's edge, ±10³⁰⁰)."""
        out = {}
        for p in self.parameters:
            v = p.initial
            if p.kind in ("float", "int"):
                v = min(max(v, p.low), p.high)
            out[p.name] = v
        return out

    def build(self, values: dict[str, Any]) -> CandidatePair | None:
        try:
            x, xp = self.build_fn(values)
        except (ValueError, IndexError, OverflowError):
            return None
        rel = self.domain.relation(x, xp)
        if rel is None or rel == "identical":
            return None
        return CandidatePair(x, xp, rel, "refined", f"refined from {self.pair.source}: {self.pair.note}")

    def distributions(self) -> dict[str, Any]:
        import optuna

        out: dict[str, Any] = {}
        for p in self.parameters:
            if p.kind == "float":
                out[p.name] = optuna.distributions.FloatDistribution(p.low, p.high)
            elif p.kind == "int":
                out[p.name] = optuna.distributions.IntDistribution(int(p.low), int(p.high))
            else:
                out[p.name] = optuna.distributions.CategoricalDistribution(p.choices)
        return out


def _coordinate_box(space: RecordSpace, j: int, value: float) -> tuple[float, float]:
    """The box a coordinate moves in: its bounds, or around its value where a side is open."""
    lo, hi = space.lows[j], space.highs[j]
    reach = max(1.0, 2.0 * abs(float(value)))
    a = float(lo) if lo is not None else float(value) - reach
    b = float(hi) if hi is not None else float(value) + reach
    if not (math.isfinite(a) and math.isfinite(b)) or b - a > 1e300:
        a, b = max(a, -1e300), min(b, 1e300)
    return a, b


def _record_parameters(space: RecordSpace, prefix: str, record: Any) -> list[Parameter]:
    spec = space.spec
    if isinstance(spec, CategoryRecords):
        return [Parameter(prefix, "category", choices=tuple(spec.values), initial=record)]
    coords = record if isinstance(spec, VectorRecords) else [record]
    params = []
    for j, v in enumerate(coords):
        a, b = _coordinate_box(space, j, v)
        if a == b:
            continue
        kind = "int" if isinstance(spec, IntegerRecords) else "float"
        if kind == "int":
            a, b = math.ceil(a), math.floor(b)
        params.append(Parameter(f"{prefix}.{j}", kind, a, b, initial=v))
    return params


def _record_from(space: RecordSpace, prefix: str, record: Any, values: dict[str, Any]) -> Any:
    spec = space.spec
    if isinstance(spec, CategoryRecords):
        return values.get(prefix, record)
    coords = list(record) if isinstance(spec, VectorRecords) else [record]
    out = [space._clip(float(values[f"{prefix}.{j}"]), j) if f"{prefix}.{j}" in values else c
           for j, c in enumerate(coords)]
    return out if isinstance(spec, VectorRecords) else out[0]


def template_for(domain: InputDomain, pair: CandidatePair) -> PairTemplate | None:
    """The template of a screened pair, or None (an identical pair, nothing to move; a table:
    tables are not refined)."""
    if domain.is_table:
        return None
    space = RecordSpace(domain)
    x, xp = list(pair.x), list(pair.x_prime)
    if domain.is_vector:
        s = float(domain.vector_sensitivity)
        k = len(x)
        params = []
        for i, v in enumerate(x):
            a, b = _coordinate_box(space, 0, v)
            if a < b:
                params.append(Parameter(f"q{i}", "int" if space.integer else "float", a, b, initial=v))
        for i, (a, b) in enumerate(zip(x, xp)):
            params.append(Parameter(f"d{i}", "int" if space.integer else "float", -s, s, initial=b - a))
        linf = "linf" in domain.neighbours

        def build(values: dict[str, Any]) -> tuple[list[Any], list[Any]]:
            from app.search.generators import _fit_vector

            q = [space._clip(float(values.get(f"q{i}", x[i])), 0) for i in range(k)]
            d = [float(values[f"d{i}"]) for i in range(k)]
            if not linf:
                total = sum(abs(v) for v in d)
                if total > s:
                    d = [v * s / total for v in d]
            return q, _fit_vector(domain, space, q, [a + b for a, b in zip(q, d)])

        return PairTemplate(domain, pair, params[: 2 * MAX_PARAMETERS], build)
    if pair.relation == "add_remove":
        big, small = (x, xp) if len(x) > len(xp) else (xp, x)
        removed = _removed_index(big, small)
        if removed is None:
            return None
        movable = range(len(big)) if len(big) * space.width <= MAX_PARAMETERS else [removed]
        params = [p for i in movable for p in _record_parameters(space, f"r{i}", big[i])]

        def build(values: dict[str, Any]) -> tuple[list[Any], list[Any]]:
            new = [_record_from(space, f"r{i}", rec, values) for i, rec in enumerate(big)]
            return new, new[:removed] + new[removed + 1:]

        return PairTemplate(domain, pair, params, build) if params else None
    if pair.relation == "replace_one":
        i = next((j for j, (a, b) in enumerate(zip(x, xp)) if json.dumps(a) != json.dumps(b)), None)
        if i is None:
            return None
        movable = range(len(x)) if (len(x) + 1) * space.width <= MAX_PARAMETERS else [i]
        params = [p for j in movable for p in _record_parameters(space, f"r{j}", x[j])]
        params += _record_parameters(space, "new", xp[i])

        def build(values: dict[str, Any]) -> tuple[list[Any], list[Any]]:
            new = [_record_from(space, f"r{j}", rec, values) for j, rec in enumerate(x)]
            return new, new[:i] + [_record_from(space, "new", xp[i], values)] + new[i + 1:]

        return PairTemplate(domain, pair, params, build) if params else None
    return None


def _removed_index(big: list[Any], small: list[Any]) -> int | None:
    """The index of ``big`` whose removal leaves ``small`` (in order), else None."""
    for i in range(len(big)):
        if json.dumps(big[:i] + big[i + 1:]) == json.dumps(small):
            return i
    return None


@dataclass
class Refinement:
    start: CandidatePair
    best: CandidatePair | None
    start_value: float | None
    best_value: float | None
    trials: int
    improved: bool
    seconds: float
    samples: int

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start.to_dict(), "best": None if self.best is None else self.best.to_dict(),
                "start_objective": self.start_value, "best_objective": self.best_value, "trials": self.trials,
                "improved": self.improved, "seconds": self.seconds, "samples": self.samples}


async def refine_pair(draws: SearchDraws, domain: InputDomain, pair: CandidatePair, shape: OutputShape,
                      proposal: ProposalSettings, settings: RefineSettings, *, budget: int,
                      deadline: float | None = None) -> Refinement | None:
    """Optuna's TPE over the pair's template, within ``budget`` outputs (module docstring)."""
    import optuna

    template = template_for(domain, pair)
    if template is None:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=settings.seed, n_startup_trials=max(4, settings.trials // 3))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(template.initial(), skip_if_exists=True)
    dists = template.distributions()
    # DP-Finder's objective: the (conservative) estimate of ε; no classifier per trial (it costs a
    # fit per proposed pair, and screening already tried it on the pairs that reached its last rungs)
    prop = replace(proposal, target=None, learned=False)
    started, spent0 = time.perf_counter(), draws.used["refinement"]
    best: tuple[float, CandidatePair] | None = None
    start_value = None
    done = 0
    for t in range(settings.trials):
        draws.check_cancelled()
        if deadline is not None and time.monotonic() >= deadline:
            break
        if draws.used["refinement"] - spent0 + 2 * settings.samples_per_trial > budget:
            break
        trial = study.ask(dists)
        candidate = template.build(trial.params) if t else pair
        if candidate is None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        fresh = await draws.draw([candidate.x, candidate.x_prime], settings.samples_per_trial, "refinement",
                                 note="refinement")
        kx, ky = database_key(candidate.x), database_key(candidate.x_prime)
        if kx not in fresh or ky not in fresh:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        import asyncio

        value, _ = await asyncio.to_thread(pair_score, fresh[kx], fresh[ky], shape, prop)
        value = float(value) if math.isfinite(value) else NO_EVENT
        study.tell(trial, value)
        done += 1
        if t == 0:
            start_value = value
        if best is None or value > best[0]:
            best = (value, candidate)
    improved = best is not None and start_value is not None and best[0] > start_value and best[1].key != pair.key
    return Refinement(start=pair, best=best[1] if improved else None, start_value=start_value,
                      best_value=None if best is None else best[0], trials=done, improved=improved,
                      seconds=round(time.perf_counter() - started, 3), samples=draws.used["refinement"] - spent0)
