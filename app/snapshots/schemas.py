"""Snapshot requests and answers."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.alarms.verdict import Verdict

#: A snapshot's `state` in the jobs' vocabulary (/v1/jobs): its stored `status` renamed.
SNAPSHOT_STATE = {"pending": "queued", "running": "running", "done": "succeeded", "failed": "failed"}


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
    state: Literal["queued", "running", "succeeded", "failed"] = Field(
        description="`queued` → `running` → `succeeded` | `failed`: the same vocabulary as jobs (/v1/jobs). Poll "
        "until it is `succeeded` or `failed`.")
    status: Literal["pending", "running", "done", "failed"] = Field(
        description="Deprecated alias of `state` (`pending` = `queued`, `done` = `succeeded`), kept for older "
        "clients.", json_schema_extra={"deprecated": True})
    params: dict[str, Any]
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    lower_bound: float | None = Field(None, description="LB of the chosen pair (seed 003 eq. 26).")
    epsilon_hat: float | None = Field(None, description="ε̂ of the chosen pair.")
    statement: str | None = Field(
        None, description="E.g. 'MPL snapshot: ε is at least 2.1 at 95% confidence (ε̂ = 2.3). A lower bound says "
        "nothing about how large ε may be.' A bound below a claim never reads as clearing the mechanism.")
    verdict: Verdict | None = Field(
        None, description="The snapshot's one conclusion once it has succeeded (app/alarms/verdict.py): `refutes` is "
        "true when its MPL lower bound exceeds a pure-ε claim or its claim terms refute the claim, then one "
        "`sentence` and every estimator with its own figure, `refutes` and label. Null until it succeeds.")


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
