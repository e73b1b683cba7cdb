"""The interfaces of the search's families (docs/search.md §3.1), as DP-Auditorium names them
(Kong et al., *DP-Auditorium*, 2024: ``DatasetGenerator``, ``PropertyTester``).

- :class:`PairGenerator`: a family of candidate pairs of neighbouring databases that costs no
  samples (StatDP's patterns, edge cases, Halton neighbours, the size ladder, the table unit moves;
  app/search/generators.py keeps them by name in ``GENERATORS``);
- :class:`SizeFamily`: databases of one kind at every size k, and their neighbours across k → k + 1
  (app/search/sizes.py ``RecordSizeFamily``, app/search/tables.py ``TableSizeFamily``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from app.search.domain import InputDomain
from app.search.pairs import CandidatePair

__all__ = ["PairGenerator", "SizeFamily"]


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
