"""Monte-Carlo table of p, q and D = p − e^ε q for the scenarios (a)–(h), before and after the change.

    python -m app.reference.scenario_table                 # 2·10^6 draws per cell, seed 20250101
    python -m app.reference.scenario_table --draws 200000  # quicker, less precise

For every scenario and phase (the ``before`` and the ``after`` mechanism) it draws ``draws``
outputs on ``x`` and on ``x'``, and reports ``p̂``, ``q̂``, ``D̂ = p̂ − e^ε q̂`` with its standard
error ``√((p̂(1−p̂) + e^{2ε} q̂(1−q̂))/draws)``. Next to them: the exact ``p``, ``q``, ``D`` from
:mod:`app.reference.exact` (formula or quadrature), and ``z₅₀₀ = √500 · D / √(p(1−p) + e^{2ε} q(1−q))``
from the exact values: roughly the mean per-period statistic ``z_t`` of method.md §1 at
``n = 500`` (its sign says on which side of the boundary the check is, its size how fast a
monitor sees it). Draws are made in chunks, so
memory stays bounded; each cell has its own seed, derived from ``--seed``, the scenario and the
cell, so results do not depend on the order in which cells are computed.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.reference.exact import exact_probability
from app.reference.mechanisms import ReferenceMechanism
from app.reference.scenarios import SCENARIOS, Scenario
from app.stats.events import Event, count_in

__all__ = [
    "CheckEstimate",
    "estimate_check",
    "estimate_probability",
    "exact_check",
    "format_table",
    "main",
    "scenario_rows",
]

DEFAULT_DRAWS = 2_000_000
DEFAULT_SEED = 20250101
DEFAULT_CHUNK = 250_000
REFERENCE_N = 500
_PHASES = ("before", "after")


@dataclass(frozen=True)
class CheckEstimate:
    """Monte-Carlo estimates for one check ``(x, x', E)`` on one mechanism."""

    p: float
    q: float
    e_epsilon: float
    draws: int

    @property
    def d(self) -> float:
        d = self.p - self.e_epsilon * self.q
        # Exact boundary cases (Laplace, C ≤ 0) come out as ±1e-17; print them as 0.
        return 0.0 if abs(d) < 1e-12 else d

    @property
    def sd(self) -> float:
        """Standard deviation of one draw of ``1{X∈E} − e^ε·1{Y∈E}``."""
        c = self.e_epsilon
        return math.sqrt(self.p * (1 - self.p) + c * c * self.q * (1 - self.q))

    @property
    def se(self) -> float:
        return self.sd / math.sqrt(self.draws)

    def z_at(self, n: int) -> float:
        """Mean per-period statistic √n·D/σ at ``n`` outputs per period (0 when σ = 0)."""
        return 0.0 if self.sd == 0 else math.sqrt(n) * self.d / self.sd


def estimate_probability(
    mechanism: ReferenceMechanism,
    database: Sequence[float],
    event: Event,
    draws: int,
    rng: np.random.Generator,
    chunk: int = DEFAULT_CHUNK,
) -> float:
    """``P(A(database) ∈ event)`` estimated from ``draws`` outputs, drawn ``chunk`` at a time."""
    if draws < 1 or chunk < 1:
        raise ValueError("draws and chunk must be positive")
    hits = 0
    remaining = draws
    while remaining > 0:
        size = min(chunk, remaining)
        hits += count_in(event, mechanism.sample(database, size, rng))
        remaining -= size
    return hits / draws


def _cell_rng(seed: int, key: str, phase: str, side: str) -> np.random.Generator:
    return np.random.default_rng([seed, ord(key), _PHASES.index(phase), 0 if side == "x" else 1])


def estimate_check(
    scenario: Scenario, phase: str, draws: int, seed: int = DEFAULT_SEED, chunk: int = DEFAULT_CHUNK
) -> CheckEstimate:
    """p̂, q̂ for ``scenario``'s check on its ``phase`` ("before" or "after") mechanism."""
    if phase not in _PHASES:
        raise ValueError(f"phase must be 'before' or 'after'; got {phase!r}")
    mechanism = scenario.before_mechanism() if phase == "before" else scenario.after_mechanism()
    p = estimate_probability(mechanism, scenario.x, scenario.event, draws, _cell_rng(seed, scenario.key, phase, "x"), chunk)
    q = estimate_probability(
        mechanism, scenario.x_prime, scenario.event, draws, _cell_rng(seed, scenario.key, phase, "x'"), chunk
    )
    return CheckEstimate(p=p, q=q, e_epsilon=scenario.e_epsilon, draws=draws)


def exact_check(scenario: Scenario, phase: str) -> CheckEstimate:
    """p, q for ``scenario``'s check on its ``phase`` mechanism by formula/quadrature (app.reference.exact)."""
    mechanism = scenario.before_mechanism() if phase == "before" else scenario.after_mechanism()
    p = exact_probability(mechanism, scenario.x, scenario.event)
    q = exact_probability(mechanism, scenario.x_prime, scenario.event)
    return CheckEstimate(p=p, q=q, e_epsilon=scenario.e_epsilon, draws=1)


def scenario_rows(draws: int = DEFAULT_DRAWS, seed: int = DEFAULT_SEED, chunk: int = DEFAULT_CHUNK) -> list[dict]:
    rows = []
    for scenario in SCENARIOS.values():
        for phase in _PHASES:
            mech = scenario.before_mechanism() if phase == "before" else scenario.after_mechanism()
            rows.append(
                {
                    "scenario": scenario,
                    "phase": phase,
                    "mechanism": mech,
                    "estimate": estimate_check(scenario, phase, draws, seed, chunk),
                    "exact": exact_check(scenario, phase),
                }
            )
    return rows


def _fmt_eps(value: float | None) -> str:
    if value is None:
        return "?"
    if math.isinf(value):
        return "∞"
    return f"{value:.3g}"


def format_table(rows: list[dict]) -> str:
    lines = [
        "| scenario | phase | mechanism | true ε | E | p̂ | q̂ | D̂ = p̂ − e^ε q̂ | se(D̂) | exact p | exact q "
        "| exact D | z₅₀₀ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        s: Scenario = row["scenario"]
        est: CheckEstimate = row["estimate"]
        ex: CheckEstimate = row["exact"]
        mech = row["mechanism"]
        label = f"({s.key}) {'harmful' if s.harmful else 'benign'}"
        lines.append(
            f"| {label} | {row['phase']} | {mech.name} | {_fmt_eps(mech.true_epsilon)} | `{s.event.describe()}` "
            f"| {est.p:.5f} | {est.q:.5f} | {est.d:+.5f} | {est.se:.5f} "
            f"| {ex.p:.5f} | {ex.q:.5f} | {ex.d:+.5f} | {ex.z_at(REFERENCE_N):+.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=DEFAULT_DRAWS, help="outputs per database and phase")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, help="outputs drawn at a time")
    args = parser.parse_args(argv)
    if args.draws < 1 or args.chunk < 1:
        parser.error("--draws and --chunk must be positive")
    rows = scenario_rows(args.draws, args.seed, args.chunk)
    print(f"draws = {args.draws} per database and phase, seed = {args.seed}, ε = claimed ε of each scenario\n")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
