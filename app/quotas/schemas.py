"""The quotas as the API shows them."""

from __future__ import annotations

from pydantic import BaseModel, Field


class QuotaLimits(BaseModel):
    max_monitors: int = Field(description="Monitors (0: no limit).")
    max_concurrent_jobs: int = Field(description="Jobs running at once across all workers; more wait queued.")
    max_queued_jobs: int = Field(description="Jobs queued or running; a new job over it is a 429.")
    max_outputs_per_day: int = Field(description="Outputs per day: the monitors' periods a day × n × databases, plus "
                                     "the budgets of the last 24 hours' jobs.")
    max_stored_output_bytes: int = Field(description="Raw-output bytes the monitors keep (outputs_window × n × "
                                         "databases × bytes per output).")


class QuotaUsage(BaseModel):
    monitors: int
    running_jobs: int
    queued_jobs: int = Field(description="Queued or running.")
    outputs_per_day: int = Field(description="As counted against `max_outputs_per_day`.")
    stored_output_bytes_committed: int = Field(description="As counted against `max_stored_output_bytes`.")
    stored_output_bytes_measured: int = Field(description="The raw-output bytes stored now.")


class QuotaRead(BaseModel):
    """This tenant's quotas (defaults, or its own) and its usage of each."""

    limits: QuotaLimits
    usage: QuotaUsage
