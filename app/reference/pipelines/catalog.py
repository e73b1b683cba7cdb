"""The catalog of library pipelines: what each entry is, the claim it makes, its true verdict from
our own analysis, and the pair of tables that shows it. Importable without any DP library (the
pipelines themselves are built in ``build.py``, in the library's own venv).

Tables are JSON lists of row objects ``{"user": id, "city": key, "spend": value}``; a neighbour
adds or removes one user with all their rows (``add_remove_unit``). The claims are about users.

True verdicts (``true_epsilon`` is the smallest ε the release satisfies for the claim's δ over the
declared domain, where rows per user are unbounded because the libraries promise to bound them):

- bounds not enforced / rows counted as units: one user with k rows moves a count by k, so the
  privacy loss is kε for every k: ε = ∞ over the domain (10ε at the pair given, k = 10);
- a key set from the data published as public, a SmartNoise query without ``censor_dims``: a user
  who alone holds key ``z`` makes ``z`` appear with probability 1 against 0: ε = ∞;
- partition selection claimed as pure ε: the lone user's key is released with probability about
  δ against 0, so no finite ε holds with δ = 0 (the (ε, δ) claim the library computed does hold);
- deterministic suppression of cells with fewer than 10 users, a release suppressed below 10
  users in all: the cell (or the whole output) is there with probability 1 against 0 at the
  crossing: ε = ∞;
- clipping after the noise: a raw (unclamped) sum noised for the clamp's sensitivity, then
  clipped to [0, high × rows]: one user spending 1000 pins the output at the upper clip with
  probability ≈ 1 where the neighbour reaches it with probability e^(−10): ε = ∞ over the domain;
- the correct entries use the library as documented; their claim is the library's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CATALOG", "Entry", "entry", "pairs_of"]

Row = dict[str, Any]


def _users(first: int, count: int, city: str, spend: float = 5.0) -> list[Row]:
    return [{"user": first + i, "city": city, "spend": spend} for i in range(count)]


#: 20 users in "a", 10 in "b", one row each
BASE: list[Row] = _users(0, 20, "a") + _users(20, 10, "b")
#: a user with 10 rows in "a" (x) against the base (x′)
HEAVY = (BASE + [{"user": 99, "city": "a", "spend": 5.0}] * 10, BASE)
#: a user who alone holds the key "z" (x) against the base (x′)
NEW_KEY = (BASE + [{"user": 99, "city": "z", "spend": 5.0}], BASE)
#: the cell "c" with 10 users (x) against 9 (x′)
CELL_10 = (BASE + _users(40, 10, "c"), BASE + _users(40, 9, "c"))
#: 10 users in all (x) against 9 (x′)
SIZE_10 = (_users(0, 10, "a"), _users(0, 9, "a"))
#: a user spending 1000 in "a" (x) against the base (x′)
BIG_SPEND = (BASE + [{"user": 99, "city": "a", "spend": 1000.0}], BASE)

PAIRS = {"heavy": HEAVY, "new_key": NEW_KEY, "cell_10": CELL_10, "size_10": SIZE_10, "big_spend": BIG_SPEND}


@dataclass(frozen=True)
class Entry:
    """One pipeline: ``library`` (the venv it runs in), the ``mistake`` (None when correct),
    ``claim`` ({"epsilon": …, "delta": …}: what the team states; ``claim_from_library`` says
    whether the library's own accounting reports exactly that), the ``pair`` that shows the
    verdict, the ``true_epsilon`` (math.inf for no finite ε at the claim's δ) and ``why``."""

    name: str
    library: str
    description: str
    claim: dict[str, float]
    verdict: str  # "correct" | "violates"
    true_epsilon: float
    pair: str
    why: str
    mistake: str | None = None
    claim_from_library: bool = True
    audit_budget: int = 16_000
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def violates(self) -> bool:
        return self.verdict == "violates"


_INF = math.inf

CATALOG: tuple[Entry, ...] = (
    # ------------------------------------------------------------------ PipelineDP
    Entry("pipelinedp-count-selection", "pipelinedp", "count per city, PipelineDP's partition selection, "
          "1 group and 1 row per user", {"epsilon": 1.0, "delta": 1e-5}, "correct", 1.0, "new_key",
          "the library's truncated-geometric selection releases a lone user's key with probability ≤ δ"),
    Entry("pipelinedp-sum-public", "pipelinedp", "sum of spend clamped to [0, 10] per public city",
          {"epsilon": 1.0}, "correct", 1.0, "big_spend", "clamped before the noise: sensitivity 10, Laplace(10/ε)"),
    Entry("pipelinedp-bounds-already-enforced", "pipelinedp", "count per public city with "
          "contribution_bounds_already_enforced=True on raw data", {"epsilon": 1.0}, "violates", _INF, "heavy",
          "no bounding happens: a user with k rows moves the count by k (10ε at the pair)",
          mistake="contribution bounds not enforced"),
    Entry("pipelinedp-rows-as-units", "pipelinedp", "count per public city with the row index as privacy id",
          {"epsilon": 1.0}, "violates", _INF, "heavy",
          "each row is bounded, not each user: k rows of one user move the count by k",
          mistake="rows counted where the claim is about people"),
    Entry("pipelinedp-keys-from-data", "pipelinedp", "count per city, the cities present in the data passed "
          "as public_partitions", {"epsilon": 1.0}, "violates", _INF, "new_key",
          "the key z is published whenever its one user is in the data", mistake="key set from the data claimed public"),
    Entry("pipelinedp-selection-claimed-pure", "pipelinedp", "count with partition selection (δ = 5e-3 in the "
          "accountant), stated as ε = 1", {"epsilon": 1.0}, "violates", _INF, "new_key",
          "the lone user's key is released with probability ≈ δ_selection and never without them",
          mistake="partition selection claimed as pure ε", claim_from_library=False),
    Entry("pipelinedp-threshold-at-size", "pipelinedp", "count per public city, nothing released below 10 users",
          {"epsilon": 1.0}, "violates", _INF, "size_10", "10 users: released always; 9 users: never",
          mistake="a threshold at one size"),
    # ------------------------------------------------------------------ python-dp
    Entry("pydp-count-selection", "pydp", "count per city, python-dp's truncated-geometric partition selection, "
          "contributions bounded as documented", {"epsilon": 1.0, "delta": 1e-5}, "correct", 1.0, "new_key",
          "ε/2 on the selection, ε/2 on the count (l0 = 1, linf = 1), δ on the selection"),
    Entry("pydp-bounds-not-enforced", "pydp", "count per public city with l0/linf sensitivities declared but "
          "contributions not bounded", {"epsilon": 1.0}, "violates", _INF, "heavy",
          "python-dp trusts linf_sensitivity=1; a user with k rows moves the count by k",
          mistake="contribution bounds not enforced"),
    Entry("pydp-suppress-small-cells", "pydp", "count per public city, cells with fewer than 10 users dropped "
          "on their true count", {"epsilon": 1.0}, "violates", _INF, "cell_10",
          "the cell c is present with 10 users and never with 9", mistake="deterministic suppression of small cells"),
    Entry("pydp-clip-after-noise", "pydp", "sum of raw spend + LaplaceMechanism(sensitivity 10), then clipped to "
          "[0, 10 × rows]", {"epsilon": 1.0}, "violates", _INF, "big_spend",
          "the user spending 1000 pins the output at the upper clip; without them it is reached w.p. e^-10",
          mistake="clipping after the noise"),
    # ------------------------------------------------------------------ OpenDP Context (polars)
    Entry("opendp-count-selection", "opendp", "Context over polars, count per city with OpenDP's key selection, "
          "1 row per user", {"epsilon": 1.0, "delta": 6.078962034861135e-07}, "correct", 1.0, "new_key",
          "the library's noisy threshold; claim from the privacy map", audit_budget=2_000),
    Entry("opendp-rows-as-units", "opendp", "Context with unit_of(contributions=1) and no identifier, count per "
          "public city", {"epsilon": 1.0}, "violates", _INF, "heavy",
          "the unit is a row: a user's k rows move the count by k", mistake="rows counted where the claim is about people",
          audit_budget=2_000),
    Entry("opendp-keys-from-data", "opendp", "Context count with .with_keys(the cities in the data)",
          {"epsilon": 1.0}, "violates", _INF, "new_key", "the key z is published whenever its one user is present",
          mistake="key set from the data claimed public", audit_budget=2_000),
    # ------------------------------------------------------------------ SmartNoise SQL
    Entry("smartnoise-count-users", "smartnoise", "SELECT city, COUNT(DISTINCT user) GROUP BY city, max_ids 1, "
          "censor_dims on", {"epsilon": 1.0, "delta": 0.001499499999999987}, "correct", 1.0, "new_key",
          "SmartNoise's τ threshold on the noisy user count; claim from get_privacy_cost", audit_budget=8_000),
    Entry("smartnoise-row-privacy", "smartnoise", "COUNT(*) by city with row_privacy: true in the metadata",
          {"epsilon": 1.0, "delta": 0.001499499999999987}, "violates", _INF, "heavy",
          "SmartNoise bounds rows, not users: a user's 10 rows move the count by 10",
          mistake="rows counted where the claim is about people", audit_budget=8_000),
    Entry("smartnoise-no-censor", "smartnoise", "COUNT(DISTINCT user) by city with censor_dims: false",
          {"epsilon": 1.0, "delta": 0.001499499999999987}, "violates", _INF, "new_key",
          "every key in the data is released (the odometer still counts δ): z appears with its user",
          mistake="key set from the data claimed public", audit_budget=8_000),
    # ------------------------------------------------------------------ Tumult Analytics (Spark)
    Entry("tumult-count-public", "tumult", "Session with AddRowsWithID('user'), MaxGroupsPerID 1, "
          "MaxRowsPerGroupPerID 1, count per public KeySet", {"epsilon": 1.0}, "correct", 1.0, "heavy",
          "Tumult truncates each user to one row in one group", audit_budget=300),
    Entry("tumult-count-one-row", "tumult", "Session with protected_change=AddOneRow(), count per public KeySet",
          {"epsilon": 1.0}, "violates", _INF, "heavy", "the protected change is a row: a user's 10 rows move the count by 10",
          mistake="rows counted where the claim is about people", audit_budget=300),
)

_BY_NAME = {e.name: e for e in CATALOG}


def entry(name: str) -> Entry:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no pipeline {name!r}; known: {sorted(_BY_NAME)}") from None


def pairs_of(e: Entry) -> list[dict[str, Any]]:
    """The entry's pair as ``dpwatch audit --pairs`` takes it."""
    x, x_prime = PAIRS[e.pair]
    return [{"x": x, "x_prime": x_prime}]
