"""Silences in the API (pydantic v2)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

SilenceState = Literal["pending", "active", "expired"]


class SilenceCreate(BaseModel):
    """Matchers, a time window and a comment. At least one matcher; every matcher set must match."""

    model_config = ConfigDict(extra="forbid")

    monitor_id: uuid.UUID | None = Field(None, description="Matches the alarms of this monitor (one of this tenant's).")
    mechanism_id: uuid.UUID | None = Field(
        None, description="Matches the alarms of every monitor of this mechanism (one of this tenant's).")
    kind: Literal["privacy", "contract"] | None = Field(None, description="Matches only this kind of alarm.")
    starts_at: AwareDatetime | None = Field(None, description="When the silence starts (default: now).")
    ends_at: AwareDatetime = Field(description="When it ends: in the future, after `starts_at`, at most 90 days later "
                                   "(years 2000 to 2200).")
    comment: str = Field(min_length=1, max_length=2000, description="Why: a change, a maintenance window, a ticket.")

    @field_validator("starts_at", "ends_at")
    @classmethod
    def _plausible(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        try:
            utc = value.astimezone(UTC)
        except (OverflowError, ValueError) as exc:
            raise ValueError("The time is out of range.") from exc
        if not 2000 <= utc.year <= 2200:
            raise ValueError("The time must lie between the years 2000 and 2200.")
        return utc

    @model_validator(mode="after")
    def _matchers_and_window(self) -> SilenceCreate:
        if self.monitor_id is None and self.mechanism_id is None and self.kind is None:
            raise ValueError("Give at least one matcher: monitor_id, mechanism_id or kind.")
        return self


class SilenceRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    monitor_id: uuid.UUID | None
    mechanism_id: uuid.UUID | None
    kind: Literal["privacy", "contract"] | None
    starts_at: datetime
    ends_at: datetime
    comment: str
    created_by: str
    created_at: datetime
    state: SilenceState = Field(description="`pending` before `starts_at`, `active` until `ends_at`, then `expired`.")
