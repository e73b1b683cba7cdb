"""Request and response bodies of /v1/jobs and of the routes that start jobs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.snapshots.schemas import PairIn

JobKind = Literal["discovery", "audit", "rediscovery"]
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]

_JOB_EXAMPLE = {
    "id": "4f1c2b7e-9a0d-4c3b-8e6f-2d1a0b9c8e7f",
    "kind": "discovery",
    "state": "running",
    "mechanism_id": "7d3b9c1e-2f4a-4b6c-8d0e-1f2a3b4c5d6e",
    "monitor_id": None,
    "params": {"pairs": [{"x": [0], "x_prime": [1]}], "samples": 20000, "fresh_samples": 50000, "alpha": 0.05},
    "progress": {"fraction": 0.5, "message": "drew 70000 outputs on database 1/2"},
    "result": None,
    "error": None,
    "cancel_requested": False,
    "attempts": 1,
    "created_at": "2026-01-01T12:00:00Z",
    "updated_at": "2026-01-01T12:00:03Z",
    "started_at": "2026-01-01T12:00:01Z",
    "finished_at": None,
}


class JobProgress(BaseModel):
    fraction: float = Field(ge=0, le=1, description="How much of the job is done, 0 to 1 (updated while it runs).")
    message: str | None = Field(None, description="What the job is doing now, in words.")


class JobRead(BaseModel):
    """A job: what was asked, where it stands, and what came of it (kept after it ends)."""

    model_config = ConfigDict(json_schema_extra={"examples": [_JOB_EXAMPLE]})

    id: uuid.UUID
    kind: JobKind = Field(description="`discovery` (candidate checks), `audit` (a one-shot audit of a claim) "
                          "or `rediscovery` (a monitor looking for a better event; started by the monitor).")
    state: JobState = Field(description="`queued` → `running` → `succeeded` | `failed` | `cancelled`.")
    mechanism_id: uuid.UUID | None
    monitor_id: uuid.UUID | None = Field(None, description="For `rediscovery`: the monitor it serves.")
    params: dict[str, Any] = Field(description="What was asked (the request body, with defaults filled in).")
    progress: JobProgress
    result: dict[str, Any] | None = Field(
        None,
        description="Set when `succeeded`. `discovery`: a `DiscoverResponse` (`candidates` ranked, each a check "
        "`x`, `x_prime`, `event` with `epsilon_hat`, `lower_bound`…). `audit`: an `AuditResult` (`epsilon_hat`, "
        "`lower_bound`, `refutes_claim`, `samples_used`, `seconds`…). `rediscovery`: a `RediscoveryResult` "
        "(`adopted`, the new check, the candidates and the level spent).",
    )
    error: str | None = Field(None, description="Why the job failed, when `failed`.")
    cancel_requested: bool = Field(description="A cancel was asked; a running job stops at its next step.")
    attempts: int = Field(description="How many times a worker started the job (a worker that dies is retried).")
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class AuditRequest(BaseModel):
    """A one-shot audit of a claimed ε on candidate pairs (run as a job)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [
            {"pairs": [{"x": [0, 0, 0, 0, 0], "x_prime": [1, 1, 1, 1, 1]}], "epsilon": 1.0},
            {"pattern": "table1", "queries": 5, "epsilon": 0.5, "alpha": 0.05},
        ]},
    )

    pairs: list[PairIn] | None = Field(None, min_length=1, max_length=20, description="Candidate pairs (x, x').")
    pattern: Literal["table1"] | None = Field(
        None, description="Instead of `pairs`: the query-vector patterns of seed 003 Table I (StatDP's).")
    queries: int = Field(5, ge=2, le=100, description="Length of the query vectors for `pattern`.")
    epsilon: float = Field(gt=0, le=50, description="The claimed ε to test.")
    alpha: float = Field(0.05, gt=0, lt=1, description="Level: the claim is refuted when the bound LB exceeds it.")
    samples: int | None = Field(None, ge=100, le=2_000_000,
                                description="n per database to choose the event (default: by output kind).")
    fresh_samples: int | None = Field(None, ge=100, le=5_000_000,
                                      description="N fresh per database to bound the loss (default: by output kind).")
    tau: float | None = Field(None, gt=0, lt=1, description="Density floor τ of MPL (default: by output kind).")

    @model_validator(mode="after")
    def _one_source(self) -> AuditRequest:
        if (self.pairs is None) == (self.pattern is None):
            raise ValueError("give either `pairs` or `pattern`, not both")
        return self


class AuditResult(BaseModel):
    """What an audit job found (the engine's report, JSON)."""

    model_config = ConfigDict(extra="allow")

    epsilon_hat: float = Field(description="MPL's point estimate ε̂ (seed 003 eq. 23).")
    lower_bound: float = Field(description="A lower confidence bound LB on ε at level α.")
    claimed_epsilon: float | None
    refutes_claim: bool | None = Field(description="LB > the claimed ε.")
    alpha: float
    seconds: float


class RediscoveryResult(BaseModel):
    """What a monitor's re-discovery found, and whether it added a check."""

    model_config = ConfigDict(extra="allow")

    adopted: bool = Field(description="Whether a new check was added to the monitor.")
    reason: str = Field(description="Why it was, or was not, adopted.")
    check_id: uuid.UUID | None = Field(None, description="The check added.")
    level: float | None = Field(None, description="The new check's false-alarm level α_j·2^−(r+1).")
    threshold: float | None = Field(None, description="Its threshold for the remaining periods of the horizon.")
    candidates: list[dict[str, Any]] = Field(default_factory=list)
