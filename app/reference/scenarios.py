"""The monitoring paper's eight scenarios (a)–(h) as data (seed 002 §4.1, Table 1; method.md §8).

Each scenario is a deployment change ``before → after`` together with one check ``(x, x', E)``
audited against the claimed ε. The text copy of the paper lost its databases, events and most
parameters; the choices below are ours and docs/reference_mechanisms.md explains each one and
gives ``p = P(A(x) ∈ E)``, ``q = P(A(x') ∈ E)`` and ``D = p − e^ε q`` before and after the change,
computed by ``python -m app.reference.scenario_table``.

What the choices guarantee (checked by the table and by tests/test_reference.py):

1. before the change the check is DP-valid, ``D ≤ 0`` (for (a), (b) exactly on the boundary
   ``D = 0``, so that the false-alarm rate is tested where it is hardest);
2. after a harmful change (a)–(f), ``D > 0`` by a margin a monitor with n ≈ 500 outputs per period
   detects within a few tens of periods;
3. after a benign change (g), (h), still ``D ≤ 0``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from app.reference.mechanisms import (
    DEFAULT_CUTOFF,
    DEFAULT_EPSILON,
    DEFAULT_SCALE_FACTOR,
    DEFAULT_THRESHOLD,
    ReferenceMechanism,
    SwitchingMechanism,
    get_mechanism,
)
from app.stats.events import DiscreteSet, Event, Interval

__all__ = [
    "LAPLACE_X",
    "LAPLACE_X_PRIME",
    "RNM_EXP_X",
    "RNM_EXP_X_PRIME",
    "RNM_VALUE_X",
    "RNM_VALUE_X_PRIME",
    "SCENARIOS",
    "SVT_EVENT",
    "SVT_X",
    "SVT_X_PRIME",
    "Scenario",
]


@dataclass(frozen=True)
class Scenario:
    """One deployment change and the check that audits it.

    ``before``/``after`` are registry slugs (see ``REFERENCE_MECHANISMS``), built with the claimed
    ``epsilon`` and ``before_params``/``after_params`` by :meth:`before_mechanism`,
    :meth:`after_mechanism` and :meth:`switching`. ``x``/``x_prime`` are the
    neighbouring databases in the input format of those mechanisms.
    """

    key: str
    title: str
    before: str
    after: str
    harmful: bool
    x: tuple[float, ...]
    x_prime: tuple[float, ...]
    event: Event
    epsilon: float
    rationale: str
    before_params: Mapping[str, Any] = field(default_factory=dict)
    after_params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only views, so that a frozen scenario cannot be changed through its parameters.
        object.__setattr__(self, "before_params", MappingProxyType(dict(self.before_params)))
        object.__setattr__(self, "after_params", MappingProxyType(dict(self.after_params)))
        object.__setattr__(self, "x", tuple(self.x))
        object.__setattr__(self, "x_prime", tuple(self.x_prime))

    def before_mechanism(self) -> ReferenceMechanism:
        return get_mechanism(self.before, epsilon=self.epsilon, **self.before_params)

    def after_mechanism(self) -> ReferenceMechanism:
        return get_mechanism(self.after, epsilon=self.epsilon, **self.after_params)

    def switching(self, change_period: int) -> SwitchingMechanism:
        """The deployment: ``before`` for periods ``< change_period``, ``after`` from then on."""
        return SwitchingMechanism(self.before_mechanism(), self.after_mechanism(), change_period)

    @property
    def claimed_epsilon(self) -> float:
        return float(self.epsilon)

    @property
    def e_epsilon(self) -> float:
        return math.exp(self.epsilon)


# Laplace: x and x' differ in one entry; sums 0 and 1.
LAPLACE_X: tuple[float, ...] = (0.0,) * 10
LAPLACE_X_PRIME: tuple[float, ...] = (0.0,) * 9 + (1.0,)

# RNM reporting the value: every query one higher on x' ("all above", seed 003 Table I), where
# the value's left tail leaks kε/2.
RNM_VALUE_X: tuple[float, ...] = (0.0,) * 5
RNM_VALUE_X_PRIME: tuple[float, ...] = (1.0,) * 5

# RNM with exponential noise: "one above, rest below" (seed 003 Table I), roles of x and x' swapped.
RNM_EXP_X: tuple[float, ...] = (2.0, 0.0, 0.0, 0.0, 0.0)
RNM_EXP_X_PRIME: tuple[float, ...] = (1.0,) * 5

# SVT: k = 7 queries, T_h = 1. On x' every query sits at the threshold; on x the first six are one
# below and the last one above, so Q(x), the noiseless answer, is (0,0,0,0,0,0,1).
SVT_X: tuple[float, ...] = (0.0,) * 6 + (2.0,)
SVT_X_PRIME: tuple[float, ...] = (1.0,) * 7
SVT_EVENT = DiscreteSet(values=[[0, 0, 0, 0, 0, 0, 1]])

_SVT_CUTOFF_PARAMS = {"threshold": DEFAULT_THRESHOLD, "cutoff": DEFAULT_CUTOFF}
_SVT_NO_CUTOFF_PARAMS = {"threshold": DEFAULT_THRESHOLD}

SCENARIOS: dict[str, Scenario] = {
    s.key: s
    for s in (
        Scenario(
            key="a",
            title="Laplace mechanism: decrease the noise scale",
            before="laplace",
            after="laplace-smaller-scale",
            harmful=True,
            x=LAPLACE_X,
            x_prime=LAPLACE_X_PRIME,
            event=Interval(high=0.0),
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "For C ≤ 0, P(Lap(b) ≤ C)/P(1 + Lap(b) ≤ C) = e^{1/b}: exactly e^ε before (D = 0, on the "
                "boundary) and e^{ε/s} after; C = 0 maximises the per-period signal."
            ),
            after_params={"scale_factor": DEFAULT_SCALE_FACTOR},
        ),
        Scenario(
            key="b",
            title="Laplace mechanism: change the noise type to Gaussian",
            before="laplace",
            after="laplace-gaussian",
            harmful=True,
            x=LAPLACE_X,
            x_prime=LAPLACE_X_PRIME,
            event=Interval(high=-2.0),
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "Gaussian tails are lighter, so the ratio Φ(C/σ)/Φ((C−1)/σ) exceeds e^ε only far in the "
                "left tail; C = −2 maximises √n·D/σ for σ = √2/ε, and the Laplace check stays on the boundary."
            ),
        ),
        Scenario(
            key="c",
            title="Report Noisy Max: report the maximum noisy value",
            before="rnm",
            after="rnm-value",
            harmful=True,
            x=RNM_VALUE_X,
            x_prime=RNM_VALUE_X_PRIME,
            event=Interval(high=0.5),
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "Shifting all five queries by 1 shifts the max, whose left tail has ratio e^{5ε/2}; before the "
                "change E holds the index 0 only, whose probability is 1/5 on both inputs."
            ),
            before_params={"num_queries": 5},
            after_params={"num_queries": 5},
        ),
        Scenario(
            key="d",
            title="SVT 2: change to SVT 4",
            before="svt2",
            after="svt4",
            harmful=True,
            x=SVT_X,
            x_prime=SVT_X_PRIME,
            event=SVT_EVENT,
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "Six ⊥ then one ⊤: shifting ρ by 1 absorbs the ⊥ answers, and the ⊤ query differs by 2 "
                "against SVT 4's small query noise Lap(4/(3ε)), so the ratio reaches about e^{1.6}."
            ),
            before_params=_SVT_CUTOFF_PARAMS,
            after_params=_SVT_CUTOFF_PARAMS,
        ),
        Scenario(
            key="e",
            title="SVT 2: change to SVT 5",
            before="svt2",
            after="svt5",
            harmful=True,
            x=SVT_X,
            x_prime=SVT_X_PRIME,
            event=SVT_EVENT,
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "E = {Q(x)}: without query noise SVT 5 answers x' all-⊤ or all-⊥ (its queries are equal), "
                "so q = 0 while p = P(−1 < ρ ≤ 1) > 0."
            ),
            before_params=_SVT_CUTOFF_PARAMS,
            after_params=_SVT_NO_CUTOFF_PARAMS,
        ),
        Scenario(
            key="f",
            title="SVT 2: change to SVT 6",
            before="svt2",
            after="svt6",
            harmful=True,
            x=SVT_X,
            x_prime=SVT_X_PRIME,
            event=SVT_EVENT,
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "E = {Q(x)}: SVT 6's query noise Lap(2/ε) is not scaled by c_max, so the ⊤ answer of the "
                "query that differs by 2 costs about ε on top of the threshold's ε/2."
            ),
            before_params=_SVT_CUTOFF_PARAMS,
            after_params=_SVT_NO_CUTOFF_PARAMS,
        ),
        Scenario(
            key="g",
            title="Report Noisy Max: change the noise type to exponential (benign)",
            before="rnm",
            after="rnm-exponential",
            harmful=False,
            x=RNM_EXP_X,
            x_prime=RNM_EXP_X_PRIME,
            event=DiscreteSet(values=[0]),
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "Index 0 is the query that drops from 2 to 1 while the others rise: a tight-ish pair for both "
                "noises; exponential noise moves D towards 0 but, being ε-DP, not above it."
            ),
            before_params={"num_queries": 5},
            after_params={"num_queries": 5},
        ),
        Scenario(
            key="h",
            title="SVT 2: change to SVT 1 (benign)",
            before="svt2",
            after="svt1",
            harmful=False,
            x=SVT_X,
            x_prime=SVT_X_PRIME,
            event=SVT_EVENT,
            epsilon=DEFAULT_EPSILON,
            rationale=(
                "The same check as (d): SVT 1 uses a smaller threshold noise Lap(2/ε) and no redraw, "
                "and is ε-DP, so D moves towards 0 but stays negative (c_max = 2 keeps SVT 1 ≠ SVT 2)."
            ),
            before_params=_SVT_CUTOFF_PARAMS,
            after_params=_SVT_CUTOFF_PARAMS,
        ),
    )
}
"""The scenarios by key "a".."h"; (a)–(f) harmful, (g)–(h) benign, as in seed 002 Table 1."""
