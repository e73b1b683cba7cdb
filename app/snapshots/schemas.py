"""Snapshot requests and answers."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SnapshotRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"extra_samples": 50000}]})

    extra_samples: int = Field(
        0, ge=0, le=1_000_000,
        description="Fresh outputs to draw per database for the lower bound (seed 003's N). With 0, the kept "
        "outputs of the window are split: alternate periods choose t̂ and bound the loss.",
    )
    alpha: float = Field(0.05, gt=0, lt=1, description="Level of the lower bound: [LB, ∞) covers ε with 1 − α.")


class SnapshotSummary(BaseModel):
    """A snapshot without its curves."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    monitor_id: uuid.UUID
    alarm_id: uuid.UUID | None
    trigger: Literal["schedule", "on_demand", "alarm"]
    status: Literal["pending", "running", "done", "failed"]
    params: dict[str, Any]
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    lower_bound: float | None = Field(None, description="LB of the chosen pair (seed 003 eq. 26).")
    epsilon_hat: float | None = Field(None, description="ε̂ of the chosen pair.")
    statement: str | None = Field(None, description="E.g. 'the mechanism is at best 2.1-DP at 95% confidence'.")


class SnapshotRead(SnapshotSummary):
    """A snapshot with, for each pair: ε̂, t̂, LB, the loss curve ℓ̂ over C and the profile δ̂(ε)."""

    result: dict[str, Any] | None = Field(
        description="`pairs[i]`: `epsilon_hat`, `t_hat`, `lower_bound`, `suggested_event`, `loss_curve` "
        "(`grid` or `outcomes` with `loss`, `f_x`, `f_xp`), `privacy_profile` (`epsilons`, `delta`), `params`, and "
        "`claim_terms`: the check's claim in its own terms (docs/claims.md): `delta_hat` and `delta_lower_bound` at "
        "the claimed ε, `epsilon_lower_bound` at the claimed δ, `mu_hat` and `mu_lower_bound`, the empirical "
        "`tradeoff` curve (`alpha`, `beta`) against the claim's `f`, `refutes` and a `statement`. The top level "
        "repeats the chosen pair's `claim` and `claim_terms` (without the curve)."
    )


class PairIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    x: Any = Field(description="A database, in the mechanism's input format.")
    x_prime: Any = Field(description="A neighbouring database.")


class DiscoverRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [
            {"pairs": [{"x": [0, 0, 0, 0, 0, 0, 2], "x_prime": [1, 1, 1, 1, 1, 1, 1]}], "epsilon": 1.0},
            {"pattern": "table1", "queries": 5, "samples": 20000, "fresh_samples": 50000},
        ]},
    )

    pairs: list[PairIn] | None = Field(None, min_length=1, max_length=20, description="Candidate pairs (x, x').")
    pattern: Literal["table1"] | None = Field(
        None, description="Instead of `pairs`: the eight query-vector patterns of seed 003 Table I (StatDP's), "
        "for mechanisms whose input is the vector of query answers.",
    )
    queries: int = Field(5, ge=2, le=100, description="Length of the query vectors for `pattern`.")
    samples: int = Field(20_000, ge=100, le=200_000, description="Outputs per database with which DPL chooses t̂ (n).")
    fresh_samples: int = Field(50_000, ge=100, le=1_000_000, description="Fresh outputs per database for LB (N).")
    alpha: float = Field(0.05, gt=0, lt=1)
    epsilon: float | None = Field(None, gt=0, description="A claimed ε: candidates whose LB exceeds it are flagged.")
    top: int = Field(10, ge=1, le=20, description="How many candidates to return.")

    @model_validator(mode="after")
    def _one_source(self) -> DiscoverRequest:
        if (self.pairs is None) == (self.pattern is None):
            raise ValueError("give either `pairs` or `pattern`, not both")
        return self


class Candidate(BaseModel):
    rank: int
    x: Any = Field(description="Oriented so that the event is likelier under x, as a check requires.")
    x_prime: Any
    event: dict[str, Any] = Field(description="A small event around t̂: ready to use as a check's `event`.")
    epsilon_hat: float = Field(description="ε̂ = ℓ̂(t̂) (seed 003 eq. 23).")
    t_hat: Any
    lower_bound: float = Field(description="LB at level α (eq. 26), on draws independent of those that chose t̂.")
    exceeds_claim: bool | None
    samples: dict[str, Any]


class DiscoverResponse(BaseModel):
    candidates: list[Candidate]
    kind: str = Field(description="`continuous` (TKDE) or `discrete` (TDDE).")
    alpha: float
    samples: int
    fresh_samples: int
    seconds: float
