"""The interfaces of the search's families (docs/search.md §3.1), as DP-Auditorium names them
(Kong et al., *DP-Auditorium*, 2024: ``DatasetGenerator``, ``PropertyTester``).

- :class:`PairGenerator`: a family of candidate pairs of neighbouring databases that costs no
  samples (StatDP's patterns, edge cases, Halton neighbours, the size ladder, the table unit moves;
  app/search/generators.py keeps them by name in ``GENERATORS``);
- :class:`SizeFamily`: databases of one kind at every size k, and their neighbours across k → k + 1
  (app/search/sizes.py ``RecordSizeFamily``, app/search/tables.py ``TableSizeFamily``);
- :class:`PairTester`: a test of the claim on given pairs, on fresh outputs only, at a level fixed
  before they are drawn: the part that speaks for α (DP-Auditorium's ``PropertyTester``).
  app/search/certify.py has two: ``StagedTests`` (the staged tests after screening rungs) and
  ``EngineCertification`` (the audit engine on the finalists); app/search/run.py calls both through
  it. Screening and refinement rank and move pairs without a level, and severity sharpens the
  bound of a pair already certified, so they are not testers.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

from app.search.domain import InputDomain
from app.search.draws import SearchDraws
from app.search.pairs import CandidatePair

__all__ = ["PairGenerator", "PairTester", "SizeFamily", "TestOutcome"]


@runtime_checkable
class PairGenerator(Protocol):
    """Proposes neighbouring pairs from the declared input domain, never looking at outputs."""

    #: the family's name (``CandidatePair.source`` of what it proposes, mostly)
    name: str

    def pairs(self, domain: InputDomain, seed: int = 0, validate: bool = True) -> list[CandidatePair]:
        """The family's pairs on ``domain`` in its own order, each once. With ``validate`` (the default)
        every pair is neighbouring under the domain (:meth:`InputDomain.relation`); ``validate=False``
        may return pairs the caller still has to check (``valid_pairs``)."""
        ...


@runtime_checkable
class SizeFamily(Protocol):
    """Databases of one kind at every size, for the size ladder and the size bisection."""

    name: str

    def base(self, k: int) -> list[Any]:
        """The family's database of size k."""
        ...

    def pairs(self, k: int) -> list[CandidatePair]:
        """Its neighbouring pairs across sizes k and k + 1 (not yet checked against the domain)."""
        ...


class TestOutcome(Protocol):
    """What a tester's run says: whether it refuted the claim, and each test it made."""

    @property
    def refuted(self) -> bool: ...

    @property
    def tests(self) -> list[dict[str, Any]]: ...


OutcomeT = TypeVar("OutcomeT", bound=TestOutcome, covariant=True)


class PairTester(Protocol[OutcomeT]):
    """Tests the claim on ``pairs`` (fixed before the call) on outputs drawn after it, within
    ``max_outputs``; its level is its own and fixed in advance, so that the search's levels add up
    to at most α. None when it tested nothing (no output drawn, no level spent)."""

    async def test(self, draws: SearchDraws, pairs: list[CandidatePair], *, max_outputs: int,
                   after: str) -> OutcomeT | None:
        """``after``: the search step the test follows, for its report."""
        ...
