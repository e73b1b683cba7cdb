"""``assert_dp`` and ``check_dp``: the in-process DP test (no server, no environment variable)."""

from __future__ import annotations

import json
import math
import os
import secrets
import sys
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..endpoint import Mechanism
from ..mechanism import Claim
from ..protocol import Output, OutputError
from ._claims import ClaimModel
from ._coupled import CoupledReport, coupled_check
from ._errors import DPViolation, DpwatchError
from ._sequential import PowerStatement, SequentialOutcome, generator, run_sequential

__all__ = ["DEFAULT_ALPHA", "DEFAULT_BUDGET", "DEFAULT_TIME_LIMIT", "DpTestResult", "assert_dp", "check_dp",
           "configure"]

#: The default chance that a mechanism satisfying its claim fails the test. The test spends it
#: (it fails a mechanism exactly at its claim at close to this rate, docs/sdk.md §4.6), so it is
#: set to 10⁻⁵: a suite of 100 DP tests then fails by chance in at most 0.1% of CI runs (100 × 10⁻⁵,
#: a union bound), ten times better than the 10⁻⁴ asked of a CI test. The price is small: the
#: evidence needed grows with log(1/α) only.
DEFAULT_ALPHA = 1e-5
#: Outputs drawn per database (per pair) when nothing fails earlier: about 0.3 s for a vectorised
#: numpy sampler on this project's machine, and ε-DP violations of ×1.07 on an event of
#: probability 0.1 are caught with probability ≥ 0.9 (the power each run states).
DEFAULT_BUDGET = 200_000
#: Seconds a test may take: a slow sampler gets a smaller budget (said in the result, and pinned
#: in the command that reproduces it).
DEFAULT_TIME_LIMIT = 60.0

SEED_VARIABLE = "DPWATCH_SEED"
BUDGET_VARIABLE = "DPWATCH_BUDGET"


@dataclass
class _Configured:
    seed: int | None = None
    budget: int | None = None
    time_limit: float | None = None


_configured = _Configured()


def configure(*, seed: int | None = None, budget: int | None = None, time_limit: float | None = None) -> None:
    """Session-wide settings (the pytest plugin's ``--dpwatch-seed``, ``--dpwatch-budget`` and
    ``--dpwatch-time-limit``): a seed for every ``assert_dp`` that gives none; a budget that pins the
    outputs per database (and switches the time limit off); the time limit."""
    _configured.seed = seed
    _configured.budget = budget
    _configured.time_limit = time_limit


@dataclass
class DpTestResult:
    """One in-process DP test. ``violated``: the claim was refuted (the statistical test at level
    ``alpha``, or coupled mode with certainty). Otherwise no evidence against it was found, which
    does not show that the mechanism satisfies it: ``power`` says what the run would have caught."""

    name: str
    claim: Claim
    violated: bool
    alpha: float
    seed: int
    reproduce: str
    report: str
    seconds: float
    pairs: list[tuple[typing.Any, typing.Any]]
    sequential: SequentialOutcome | None
    coupled: CoupledReport | None
    notes: list[str] = field(default_factory=list)

    @property
    def power(self) -> PowerStatement | None:
        return self.sequential.power if self.sequential is not None else None

    @property
    def outputs_per_database(self) -> int:
        return self.sequential.drawn if self.sequential is not None else 0


def _pairs(pairs: typing.Any) -> list[tuple[typing.Any, typing.Any]]:
    if isinstance(pairs, (str, os.PathLike)):
        text = str(pairs)
        pairs = json.loads(text if text.lstrip().startswith(("[", "{")) else Path(text).read_text())
    if isinstance(pairs, dict):
        pairs = [pairs]
    items: list[tuple[typing.Any, typing.Any]] = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, dict) and {"x", "x_prime"} <= set(pair):
            items.append((pair["x"], pair["x_prime"]))
        elif isinstance(pair, (list, tuple)) and len(pair) == 2:
            items.append((pair[0], pair[1]))
        else:
            raise ValueError(f"pair {i}: give (x, x_prime) or {{'x': …, 'x_prime': …}}, got {pair!r}")
    if not items:
        raise ValueError("pairs must hold at least one pair of neighbouring databases")
    return items


def _claim(epsilon: float | None, delta: float | None, mu: float | None, rho: float | None,
           claim: Claim | None, fallback: Claim | None) -> Claim:
    if claim is not None:
        if any(v is not None for v in (epsilon, delta, mu, rho)):
            raise ValueError("give claim= or epsilon=/delta=/mu=/rho=, not both")
        return claim
    if sum(v is not None for v in (epsilon, mu, rho)) > 1:
        raise ValueError("give one claim: epsilon= [delta=], mu= or rho=")
    if any(v is not None for v in (epsilon, mu, rho)):
        return Claim.of(epsilon, delta, mu, rho)
    if delta is not None:
        raise ValueError("delta goes with epsilon")
    if fallback is None:
        raise ValueError("give the claim to test: epsilon= [delta=], mu= or rho= (or an adapter's mechanism, "
                         "which carries its own)")
    return fallback


def _int_env(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"${name} must be an integer, got {text!r}") from None


def _test_id() -> str | None:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" (", 1)[0] if current else None


def _reproduce(seed: int, pinned_budget: int | None) -> str:
    test = _test_id()
    budget = f" {BUDGET_VARIABLE}={pinned_budget}" if pinned_budget is not None else ""
    if test is not None:
        return f"{SEED_VARIABLE}={seed}{budget} python -m pytest '{test}'"
    extra = f", budget={pinned_budget}" if pinned_budget is not None else ""
    return f"assert_dp(…, seed={seed}{extra})"


def _own_randomness(sample: Callable[..., typing.Any], database: typing.Any, seed: int) -> bool:
    """Whether two runs with identically seeded generators give different outputs."""
    first = sample(database, 16, generator(seed, 3, 0))
    second = sample(database, 16, generator(seed, 3, 0))
    try:
        return not np.array_equal(np.asarray(first, dtype=object), np.asarray(second, dtype=object))
    except (ValueError, TypeError):
        return repr(first) != repr(second)


def _fmt_e(log_value: float) -> str:
    if log_value > 700:
        return f"e^{log_value:.0f}"
    return f"{math.exp(log_value):.3g}"


def _power_line(claim: ClaimModel, power: PowerStatement) -> str:
    symbol = claim.symbol
    at = f" at δ = {claim.delta:g}" if claim.kind == "approx" else ""
    found = [p for p in power.points if p.theta is not None]
    if not found:
        return (f"power: no violation up to {symbol} = {64 * claim.theta:g}{at} on one event would be caught with "
                f"probability ≥ {power.level:g} within this budget")
    best = min(found, key=lambda p: p.theta)  # type: ignore[arg-type, return-value]
    others = ", ".join(f"{symbol} ≥ {p.theta:.3g} at {p.q:g}" if p.theta is not None else f"none at {p.q:g}"
                       for p in power.points if p is not best)
    return (f"power: this run would have failed, with probability ≥ {power.level:g}, on a violation to "
            f"{symbol} ≥ {best.theta:.3g}{at} on an event of probability {best.q:g} under the neighbour where it is "
            f"rarer ({others}; smaller events are not covered)")


def _pair_text(pairs: list[tuple[typing.Any, typing.Any]], i: int) -> str:
    def short(value: typing.Any) -> str:
        text = json.dumps(value, default=str)
        return text if len(text) <= 80 else text[:77] + "…"

    return f"pair {i + 1}: x = {short(pairs[i][0])}, x′ = {short(pairs[i][1])}"


def _event_lines(pairs: list[tuple[typing.Any, typing.Any]], pair: int, x_first: bool, event: str, first_in: int,
                 second_in: int, n: int, where: str, tail: str) -> list[str]:
    """The pair and the event of a failure, with its counts on the batch it was tested on."""
    first, second = ("x", "x′") if x_first else ("x′", "x")
    p_hat, q_hat = first_in / n, second_in / n
    ratio = (f"; ln(p̂/q̂) = {math.log(p_hat / q_hat):.3g}, a point estimate" if p_hat > 0 and q_hat > 0 else "")
    return ["  " + _pair_text(pairs, pair),
            f"  event: E = {{o : {event}}}, likelier on {first}: {where} {first_in:,} of {n:,} outputs on {first} and "
            f"{second_in:,} of {n:,} on {second} fell in E (p̂ = {p_hat:.3g}, q̂ = {q_hat:.3g}{ratio}){tail}"]


def _report(name: str, claim: ClaimModel, alpha: float, seed: int, pairs: list[tuple[typing.Any, typing.Any]],
            outcome: SequentialOutcome | None, coupled: CoupledReport | None, violated: bool, reproduce: str,
            notes: list[str]) -> str:
    lines: list[str] = []
    violation = coupled.violation if coupled is not None else None
    if violation is not None:
        lines.append(f"assert_dp: {name} violates {claim.describe()} with certainty (coupled mode; seed {seed})")
        lines.append("  " + _pair_text(pairs, violation.pair))
        lines.append(f"  coupled: {violation.summary}")
        if violation.control_flow:
            lines.append(f"  coupled: {violation.control_flow}")
    elif outcome is not None:
        plural = "es" if outcome.batches_run != 1 else ""
        batches = f"{outcome.batches_run} batch{plural} after a {outcome.plan.pilot:,}-output pilot"
        if violated:
            lines.append(f"assert_dp: {name} fails {claim.describe()} (α = {alpha:g}, seed {seed})")
        else:
            lines.append(f"assert_dp: {name} passes {claim.describe()}: no evidence against it (α = {alpha:g}, "
                         f"seed {seed})")
        by_final = outcome.rejected_by == "final"
        crossed = outcome.rejected_by == "sequential"
        alpha_seq = math.exp(-outcome.log_threshold)
        lines.append(f"  evidence: e-value {_fmt_e(outcome.log_evalue)} {'≥' if crossed else '<'} 1/α_seq = "
                     f"{1 / alpha_seq:g} (α_seq = {alpha_seq:g}, the sequential part) after {outcome.drawn:,} outputs "
                     f"per database ({batches}, {outcome.seconds:.1f} s)")
        if outcome.final:
            level = alpha - alpha_seq
            lines.append(f"  final test (the last batch, {outcome.final[0].n:,} outputs per database, one event per "
                         f"orientation chosen before it): smallest p-value × {len(outcome.final)} = "
                         f"{outcome.final_p_adjusted:.3g} {'≤' if by_final else '>'} α − α_seq = {level:g}")
        best = outcome.best
        if by_final:
            top = min(outcome.final, key=lambda r: r.p_value)
            lines += _event_lines(pairs, top.pair, top.x_first, top.event, top.first_in, top.second_in, top.n,
                                  "in the last batch", f"; tested against p ≤ {top.line[0]:.4g}·q + {top.line[1]:.3g}, "
                                  f"p-value {top.p_value:.3g}")
        elif violated and best is not None:
            lines += _event_lines(pairs, best.pair, best.x_first, best.event, best.first_in, best.second_in, best.n,
                                  "in its last batch", "")
        lines.append("  " + _power_line(claim, outcome.power))
        if coupled is not None:
            for finding in coupled.findings:
                prefix = f"  coupled (pair {finding.pair + 1}): " if len(pairs) > 1 else "  coupled: "
                lines.append(prefix + finding.summary)
                if finding.control_flow:
                    lines.append(prefix + finding.control_flow)
        if not violated:
            lines.append("  a pass is not a proof: it rules out the violations stated under power, not smaller or "
                         "rarer ones")
    for note in notes:
        lines.append(f"  note: {note}")
    lines.append(f"  reproduce: {reproduce}")
    return "\n".join(lines)


def check_dp(f: Mechanism | Callable[..., typing.Any], *, epsilon: float | None = None, delta: float | None = None,
             mu: float | None = None, rho: float | None = None, claim: Claim | None = None, pairs: typing.Any = None,
             output: Output | str | tuple[str, int] | None = None, alpha: float = DEFAULT_ALPHA,
             budget: int | None = None, seed: int | None = None, time_limit: float | None = DEFAULT_TIME_LIMIT,
             coupled: bool = True, progress: bool = False) -> DpTestResult:
    """Run the DP test and return its result without failing; see :func:`assert_dp`."""
    mechanism = f if isinstance(f, Mechanism) else Mechanism(f, Output.of(output or "real"))
    spec = Output.of(output) if output is not None else mechanism.output
    the_claim = _claim(epsilon, delta, mu, rho, claim, mechanism.claim)
    model = ClaimModel.of(the_claim)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if pairs is None:
        raise ValueError("give pairs=[(x, x_prime), …]: neighbouring databases the claim covers")
    the_pairs = _pairs(pairs)
    pinned = _int_env(BUDGET_VARIABLE) or _configured.budget
    the_budget = pinned or budget or DEFAULT_BUDGET
    if the_budget < 1_000:
        raise ValueError(f"budget must be at least 1,000 outputs per database, got {the_budget}")
    limit = None if pinned else (_configured.time_limit if _configured.time_limit is not None else time_limit)
    the_seed = seed if seed is not None else (_configured.seed if _configured.seed is not None
                                              else _int_env(SEED_VARIABLE))
    if the_seed is None:
        the_seed = secrets.randbelow(2**32)
    name = str(mechanism.name or getattr(mechanism.sample, "__name__", None) or "the mechanism")
    sample = mechanism.sample
    started = time.monotonic()
    notes: list[str] = []
    try:
        if _own_randomness(sample, the_pairs[0][0], the_seed):
            notes.append("the sampler's outputs differ under identically seeded generators: its randomness is its "
                         "own, so the seed reproduces dpwatch's choices (batches, events, bets), not the outputs")
        coupled_report = coupled_check(sample, spec, model, the_pairs, the_seed) if coupled else None
        outcome = None
        if coupled_report is None or coupled_report.violation is None:
            say = (lambda line: print(f"assert_dp({name}): {line}", file=sys.stderr)) if progress else None
            remaining = None if limit is None else max(1.0, limit - (time.monotonic() - started))
            outcome = run_sequential(sample, spec, model, the_pairs, alpha=alpha, budget=the_budget, seed=the_seed,
                                     time_limit=remaining, progress=say)
    except OutputError as exc:
        raise DpwatchError(f"{name} did not return valid outputs ({spec.kind}): {exc}") from None
    violated = (coupled_report is not None and coupled_report.violation is not None) or (
        outcome is not None and outcome.rejected)
    cut_to = None
    if outcome is not None and outcome.budget_cut:
        notes.append(outcome.budget_cut)
        cut_to = outcome.plan.total
    reproduce = _reproduce(the_seed, cut_to or (pinned if pinned else None))
    report = _report(name, model, alpha, the_seed, the_pairs, outcome, coupled_report, violated, reproduce, notes)
    return DpTestResult(name, the_claim, violated, alpha, the_seed, reproduce, report, time.monotonic() - started,
                        the_pairs, outcome, coupled_report, notes)


def assert_dp(f: Mechanism | Callable[..., typing.Any], *, epsilon: float | None = None, delta: float | None = None,
              mu: float | None = None, rho: float | None = None, claim: Claim | None = None, pairs: typing.Any = None,
              domain: typing.Any = None, **options: typing.Any) -> typing.Any:
    """Fail the test (:class:`DPViolation`, an ``AssertionError``) when the outputs of ``f`` refute
    its claim; return the :class:`DpTestResult` otherwise (and print its one-paragraph report).

    ``f``: a sampler ``f(database, n, rng)`` returning ``n`` outputs (with ``output=``, default
    real), or an adapter's :class:`~dpwatch_sdk.Mechanism`, whose claim is used when none is given.
    The claim: ``epsilon`` [``delta``], ``mu`` (μ-GDP) or ``rho`` (ρ-zCDP). ``pairs``: neighbouring
    databases ``[(x, x′), …]``.

    Options: ``alpha`` (:data:`DEFAULT_ALPHA`, the chance that a mechanism satisfying its claim
    fails), ``budget`` (outputs per database, :data:`DEFAULT_BUDGET`), ``seed`` (else
    ``$DPWATCH_SEED``, else random; always printed), ``time_limit`` (seconds, :data:`DEFAULT_TIME_LIMIT`),
    ``coupled`` (run coupled mode first; True), ``progress`` (batch lines on stderr), ``output``.

    ``domain=``, an input domain instead of pairs, runs ``dpwatch search`` of a dpwatch installation
    (:mod:`dpwatch_sdk.testing._cli_audit`) and returns its result.
    """
    if domain is not None:
        if pairs is not None:
            raise ValueError("give pairs= (neighbouring databases) or domain= (an input domain), not both")
        from ._cli_audit import default_auditor

        options.setdefault("alpha", DEFAULT_ALPHA)
        return default_auditor().assert_dp(f, epsilon=epsilon, delta=delta, mu=mu, rho=rho, claim=claim,
                                           domain=domain, **options)
    result = check_dp(f, epsilon=epsilon, delta=delta, mu=mu, rho=rho, claim=claim, pairs=pairs, **options)
    print(result.report)
    if result.violated:
        raise DPViolation(result.report, result)
    return result
