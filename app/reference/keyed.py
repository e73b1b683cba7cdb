"""Keyed reference mechanisms: a group-by count released with partition selection, a pure-ε
histogram over a public key set, and a histogram whose key set is taken from the private data;
with the exact probabilities of their keyed events (docs/audit.md §8, docs/protocol.md §3.2).

A database is a JSON list of group keys, one record each (``["a", "a", "b"]``; integer keys
are read as their decimal string); a neighbour adds or removes one record, so one key's count
changes by one. Each mechanism draws n outputs at once in numpy and returns them as
:class:`~app.stats.keyed.KeyedSamples` (:meth:`KeyedMechanism.sample`), the form the service's
endpoint helper serves and the detectors' simulations count in.

- :class:`PartitionCounts` — Laplace(1/ε) noise on each key's count, a key released when its
  noisy count exceeds τ = 1 + ln(1/(2δ))/ε (Korolova et al., WWW 2009; Wilson et al., PETS
  2020, "Differentially private SQL with bounded user contribution", §3): (ε, δ)-DP. A key
  held by one record is released with probability exactly δ, so the event "that key released"
  sits on the claim's boundary, at the corner (p, q) = (δ, 0).
- :class:`LaplaceHistogram` — every key of a declared universe, Laplace(1/ε) noise on its count
  (records of other keys are dropped): ε-DP. ``value(a) ≥ t`` with t at or above both counts has
  p = e^ε·q exactly: the boundary of the pure claim.
- :class:`LeakyHistogram` — the bug: Laplace(1/ε) on every key *present in the data*, no
  threshold, claimed as the histogram's ε. A key held by one record is released with
  probability 1 under x and never under x′: ε = ∞ however small δ is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.stats.events import Event, Interval, KeyReleased, KeyValue
from app.stats.keyed import KeyedSamples, keyed_from_dense
from app.stats.shapes import OutputShape

__all__ = ["KEYED_BOUNDARY_CELLS", "BoundaryCell", "KeyedMechanism", "LaplaceHistogram", "LeakyHistogram",
           "PartitionCounts", "group_counts", "laplace_above"]


def group_counts(database: Any) -> dict[str, int]:
    """Records per key of a database (a list of keys; integers are read as their decimal string)."""
    if not isinstance(database, list):
        raise ValueError("a keyed reference database is a JSON list of group keys, e.g. [\"a\", \"a\", \"b\"]")
    counts: dict[str, int] = {}
    for record in database:
        if isinstance(record, bool) or not isinstance(record, (str, int)):
            raise ValueError(f"a record is a group key (a string or an integer), got {record!r}")
        key = str(record)
        counts[key] = counts.get(key, 0) + 1
    return counts


def laplace_above(u: float, scale: float) -> float:
    """P(L > u) for L ~ Laplace(0, scale)."""
    return 0.5 * math.exp(-u / scale) if u >= 0 else 1.0 - 0.5 * math.exp(u / scale)


@dataclass(frozen=True)
class KeyedMechanism:
    """Laplace(1/ε) counts per key; subclasses say which keys are candidates and the threshold."""

    epsilon: float = 1.0
    name: str = "keyed"

    @property
    def scale(self) -> float:
        return 1.0 / self.epsilon

    @property
    def threshold(self) -> float:
        return -math.inf

    @property
    def claim(self) -> dict[str, float]:
        return {"epsilon": self.epsilon}

    @property
    def shape(self) -> OutputShape:
        return OutputShape(container="keyed")

    def candidates(self, counts: dict[str, int]) -> dict[str, int]:
        return counts

    def sample(self, database: Any, n: int, rng: np.random.Generator, period: int | None = None) -> KeyedSamples:
        """n outputs on ``database`` (each an independent run of the mechanism)."""
        counts = self.candidates(group_counts(database))
        keys = list(counts)
        if not keys:
            return KeyedSamples.empty(n)
        noisy = np.asarray([counts[k] for k in keys], dtype=np.float64)[None, :] + rng.laplace(
            0.0, self.scale, size=(n, len(keys)))
        return keyed_from_dense(keys, noisy > self.threshold, noisy)

    __call__ = sample

    # exact probabilities of one key's output (count c, or absent from the data: c = None)
    def p_released(self, count: int | None) -> float:
        if count is None:
            return 0.0
        return laplace_above(self.threshold - count, self.scale) if math.isfinite(self.threshold) else 1.0

    def p_value_at_least(self, count: int | None, t: float) -> float:
        """P(the key is released with a value ≥ t)."""
        if count is None:
            return 0.0
        return laplace_above(max(t, self.threshold) - count, self.scale)


@dataclass(frozen=True)
class PartitionCounts(KeyedMechanism):
    """Laplace counts released above τ = 1 + ln(1/(2δ))/ε (module docstring): (ε, δ)-DP."""

    delta: float = 1e-3
    name: str = "partition-counts"

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and 0 < self.delta < 0.5):
            raise ValueError("partition selection needs ε > 0 and 0 < δ < 1/2")

    @property
    def threshold(self) -> float:
        return 1.0 + math.log(1.0 / (2.0 * self.delta)) / self.epsilon

    @property
    def claim(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True)
class LaplaceHistogram(KeyedMechanism):
    """Every key of ``keys`` with a Laplace count (module docstring): ε-DP."""

    keys: tuple[str, ...] = ("a", "b", "c")
    name: str = "laplace-histogram"

    @property
    def shape(self) -> OutputShape:
        return OutputShape(container="keyed", keys=list(self.keys))

    def candidates(self, counts: dict[str, int]) -> dict[str, int]:
        return {k: counts.get(k, 0) for k in self.keys}

    def p_released(self, count: int | None) -> float:
        return 1.0

    def p_value_at_least(self, count: int | None, t: float) -> float:
        return laplace_above(t - (count or 0), self.scale)


@dataclass(frozen=True)
class LeakyHistogram(KeyedMechanism):
    """The bug: the keys of the data, each with a Laplace count and no threshold."""

    name: str = "leaky-histogram"


@dataclass(frozen=True)
class BoundaryCell:
    """A check on the boundary of the mechanism's claim: (x, x′, event) with exact p and q."""

    label: str
    mechanism: KeyedMechanism
    x: list[Any]
    x_prime: list[Any]
    event: Event
    p: float
    q: float
    notes: str = ""
    claim: dict[str, float] = field(default_factory=dict)

    def counts(self, side: Sequence[Any]) -> dict[str, int]:
        return group_counts(list(side))


def _partition_cell(delta: float, epsilon: float = 1.0) -> BoundaryCell:
    mech = PartitionCounts(epsilon=epsilon, delta=delta)
    x, xp = ["a"] * 20 + ["b"] * 3 + ["z"], ["a"] * 20 + ["b"] * 3
    return BoundaryCell(f"partition δ={delta:g}: 'z' released", mech, x, xp, KeyReleased(key="z"),
                        mech.p_released(1), 0.0, "the corner (δ, 0)", mech.claim)


def _histogram_cell(p: float, epsilon: float = 1.0) -> BoundaryCell:
    mech = LaplaceHistogram(epsilon=epsilon, keys=("a", "b", "c"))
    x, xp = ["a"] * 10 + ["b"] * 4, ["a"] * 9 + ["b"] * 4
    t = 10 + math.log(0.5 / p) / epsilon  # P(10 + L ≥ t) = p
    event = KeyValue(key="a", event=Interval(low=t))
    return BoundaryCell(f"histogram ε={epsilon:g}: value('a') ≥ {t:.3g}", mech, x, xp, event,
                        mech.p_value_at_least(10, t), mech.p_value_at_least(9, t), "p = e^ε·q", mech.claim)


#: The cells of the keyed false-alarm study (bench/keyed_far.py, tests/test_keyed_far.py).
KEYED_BOUNDARY_CELLS: tuple[BoundaryCell, ...] = (
    _partition_cell(0.01),
    _partition_cell(0.1),
    _histogram_cell(0.5),
    _histogram_cell(0.01),
)
