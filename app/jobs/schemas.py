"""Request and response bodies of /v1/jobs and of the routes that start jobs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

JobKind = Literal["discovery", "audit", "rediscovery", "search"]
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
    "failure_reason": None,
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
    kind: JobKind = Field(description="`discovery` (candidate checks), `audit` (a one-shot audit of a claim), "
                          "`rediscovery` (a monitor looking for a better event; started by the monitor) or `search` "
                          "(inputs that break a claim: a mechanism's search, a monitor's search every K periods, or a "
                          "finding turned into a check).")
    state: JobState = Field(description="`queued` → `running` → `succeeded` | `failed` | `cancelled`.")
    mechanism_id: uuid.UUID | None
    monitor_id: uuid.UUID | None = Field(None, description="For `rediscovery` and a monitor's `search`: the monitor "
                                         "it serves.")
    params: dict[str, Any] = Field(description="What was asked (the request body, with defaults filled in).")
    progress: JobProgress
    result: DiscoveryResult | AuditResult | RediscoveryResult | SearchResultModel | dict[str, Any] | None = Field(
        None,
        union_mode="left_to_right",
        description="Set when `succeeded`. `discovery`: a `DiscoveryResult` (`candidates` ranked, each a check "
        "`x`, `x_prime`, `event` with `epsilon_hat`, `lower_bound`…). `audit`: an `AuditResult` (`epsilon_hat`, "
        "`lower_bound`, `refutes_claim`, `samples_used`, `seconds`…). `rediscovery`: a `RediscoveryResult` "
        "(`adopted`, the new check, the candidates and the level spent). `search`: a `SearchResultModel` (`certified`, "
        "`finding`, `findings`, `failing_inputs`, `samples`, …; a monitor's search adds `adopted`, `check_id`, "
        "`level`).",
    )
    error: str | None = Field(None, description="Why the job failed, when `failed`.")
    failure_reason: Literal["memory limit", "time limit", "cancelled", "crashed", "error"] | None = Field(
        None, description="Why the job ended without a result: `memory limit` or `time limit` (its process went over "
        "the job limits; not retried), `cancelled`, `crashed` (its process or worker died `max_attempts` times), "
        "`error` (the job itself failed: bad input, an unusable endpoint; see `error`). Null while it runs and when "
        "it succeeded.")
    cancel_requested: bool = Field(description="A cancel was asked; a running job stops at its next step.")
    attempts: int = Field(description="How many times a worker started the job (a worker that dies is retried).")
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class PairIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    x: Any = Field(description="A database, in the mechanism's input format.")
    x_prime: Any = Field(description="A neighbouring database.")


_ONE_SOURCE = [
    {"required": ["pairs"], "properties": {"pairs": {"type": "array"}}},
    {"required": ["pattern"], "properties": {"pattern": {"type": "string"}}},
]


class _EngineRequest(BaseModel):
    """What discovery and audits share: the pairs, the level, the budget, the region. Exactly one of
    `pairs` and `pattern` is given (stated as a `oneOf` in the schema)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": _ONE_SOURCE})

    pairs: list[PairIn] | None = Field(None, min_length=1, max_length=20, description="Candidate pairs (x, x').")
    pattern: Literal["table1"] | None = Field(
        None, description="Instead of `pairs`: the query-vector patterns of seed 003 Table I (StatDP's), for "
        "mechanisms whose input is the vector of query answers.")
    queries: int = Field(5, ge=2, le=100, description="Length of the query vectors for `pattern`.")
    alpha: float = Field(0.05, gt=0, lt=1, description="Level of the held-out tests (union bound over rounds).")
    first_round: int = Field(2_000, ge=100, le=1_000_000,
                             description="Pilot outputs per database; round r draws first_round·2^(r−1).")
    region: tuple[float, float] | None = Field(
        None, description="The region C of real outputs as [low, high] (default: chosen from the samples).")
    learned: bool = Field(True, description="Also propose learned events (DP-Sniper's classifier threshold sets).")

    @model_validator(mode="after")
    def _one_source(self) -> _EngineRequest:
        if (self.pairs is None) == (self.pattern is None):
            raise ValueError("give either `pairs` or `pattern`, not both")
        if self.region is not None and not self.region[0] < self.region[1]:
            raise ValueError("region must be [low, high] with low < high")
        return self


class DiscoverRequest(_EngineRequest):
    """Find the checks worth watching: the engine's held-out candidate events, ranked."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": _ONE_SOURCE, "examples": [
            {"pairs": [{"x": [0, 0, 0, 0, 0, 0, 2], "x_prime": [1, 1, 1, 1, 1, 1, 1]}], "epsilon": 1.0},
            {"pattern": "table1", "queries": 5, "budget": 64000},
        ]},
    )

    epsilon: float | None = Field(
        None, gt=0, le=50, description="A claimed ε: the search stops once a candidate refutes it, and candidates "
        "whose bound exceeds it are flagged.")
    budget: int = Field(256_000, ge=400, le=10_000_000, description="Outputs per database at most.")
    top: int = Field(10, ge=1, le=50, description="How many candidates to return.")


class AuditRequest(_EngineRequest):
    """A one-shot audit of a claimed ε (or (ε, δ)) on candidate pairs: the engine samples in rounds until the
    claim is refuted at level α or the budget is spent (docs/audit.md)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": _ONE_SOURCE, "examples": [
            {"pairs": [{"x": [0, 0, 0, 0, 0], "x_prime": [1, 1, 1, 1, 1]}], "epsilon": 1.0},
            {"pattern": "table1", "queries": 5, "epsilon": 0.5, "alpha": 0.05, "budget": 1024000},
        ]},
    )

    epsilon: float = Field(gt=0, le=50, description="The claimed ε to test.")
    delta: float = Field(0.0, ge=0, lt=1, description="The claimed δ of an (ε, δ) claim.")
    budget: int = Field(4_096_000, ge=400, le=50_000_000, description="Outputs per database at most.")


class AuditResult(BaseModel):
    """What an audit job found: the engine's report (docs/audit.md), JSON."""

    model_config = ConfigDict(extra="allow")

    verdict: Literal["refuted", "not refuted"]
    refuted: bool = Field(description="A held-out lower bound exceeded the claim at level α.")
    lower_bound: float | None = Field(description="LB: the largest held-out lower bound on ε (1 − α).")
    epsilon_hat: float | None = Field(description="MPL's point estimate ε̂ (seed 003).")
    claimed_epsilon: float | None
    alpha: float
    samples_used: int = Field(description="Outputs drawn, all databases.")
    seconds: float


class DiscoveryResult(BaseModel):
    """What a discovery job found: candidate checks, best first."""

    model_config = ConfigDict(extra="allow")

    candidates: list[dict[str, Any]] = Field(
        description="Each a check (`x`, `x_prime`, `event`) with its held-out `lower_bound`, `informative` (bound "
        "above 0 and the event holds some, not all, outputs: only those are worth watching), `exceeds_claim`, "
        "`rank`.")
    samples_used: int
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


from app.search.schemas import SearchResultModel  # noqa: E402  (the search room's result, in the union above)

JobRead.model_rebuild()
