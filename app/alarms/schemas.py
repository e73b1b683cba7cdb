"""Request and response bodies of /v1/alarms and /v1/webhooks."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from app.api.urls import check_http_url

EventType = Literal["alarm.firing", "alarm.resolved", "monitor.degraded", "monitor.completed"]
WebhookUrl = Annotated[
    str,
    Field(min_length=1, max_length=2048, description="Absolute http(s) URL; no credentials, no fragment."),
    AfterValidator(check_http_url),
]


class AlarmRead(BaseModel):
    """A check's statistic M_t crossed its threshold."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "5b0f5d5e-8c1e-4d4f-9a57-6a1f0b1f3a11",
                    "monitor_id": "0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1",
                    "check_id": "a3c1d9a4-7b55-4a1e-8f0e-52f1c5e6d7b8",
                    "period_run_id": "e1f3c0a2-4b6d-4e8f-9a0b-1c2d3e4f5a6b",
                    "horizon_index": 1,
                    "t": 17,
                    "statistic": 3.91,
                    "threshold": 3.42,
                    "a": 412,
                    "b": 301,
                    "n": 10000,
                    "z": 4.02,
                    "created_at": "2026-01-01T12:17:00Z",
                    "acknowledged_at": None,
                    "acknowledged_note": None,
                    "resolved_at": None,
                    "status": "firing",
                    "fingerprint": "9f3c2b1a0e4d5c6b",
                    "claim": {"epsilon": 1.0, "delta": 1e-05},
                }
            ]
        },
    )

    id: uuid.UUID
    monitor_id: uuid.UUID
    check_id: uuid.UUID
    period_run_id: uuid.UUID
    horizon_index: int = Field(description="The horizon j in which the alarm fired.")
    t: int = Field(description="The period (1..T) of the horizon in which M_t crossed the threshold.")
    statistic: float = Field(description="M_t, the weighted aggregator's statistic.")
    threshold: float = Field(description="q_{1−α_j/m}(T, γ).")
    a: int = Field(description="Outputs on x that fell in the event E.")
    b: int = Field(description="Outputs on x' that fell in the event E.")
    n: int = Field(description="Outputs drawn on each of x and x'.")
    z: float = Field(description="The period's z statistic.")
    created_at: datetime
    acknowledged_at: datetime | None
    acknowledged_note: str | None
    resolved_at: datetime | None = Field(description="Set when the monitor is reset after a fix.")
    status: Literal["firing", "resolved"]
    fingerprint: str = Field(description="Stable for a (monitor, check, horizon): Alertmanager-style grouping key.")
    claim: dict[str, float] | None = Field(
        None, description="The claim the alarm contradicts: `{\"epsilon\": e}`, `{\"epsilon\": e, \"delta\": d}`, "
        "`{\"gdp_mu\": m}` or `{\"zcdp_rho\": r}` (null on alarms recorded before claims).",
    )
    evidence: dict[str, Any] | None = Field(
        None,
        description="The alarm's MPL snapshot in short (seed 003): `lower_bound` LB, `epsilon_hat`, `t_hat`, "
        "`confidence`, `snapshot_id` and a `statement` such as \"the mechanism is at best 2.1-DP at 95% confidence\". "
        "Null until the snapshot is done, or when the monitor keeps no outputs.",
    )


class AcknowledgeRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"note": "Known: noise scale bug in release 4.2, rolled back."}]},
    )

    note: str | None = Field(None, max_length=2000, description="Why, who, what is being done.")


class WebhookCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"url": "https://hooks.example.org/dpwatch", "event_types": ["alarm.firing", "alarm.resolved"]}
            ]
        },
    )

    url: WebhookUrl
    event_types: list[EventType] = Field(min_length=1, description="Events to receive.")

    @field_validator("event_types")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("event_types lists an event more than once")
        return value


class WebhookUpdate(BaseModel):
    """Fields to change. Setting `enabled: true` re-enables a webhook the deliverer disabled."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"enabled": True}]})

    url: WebhookUrl | None = None
    event_types: list[EventType] | None = Field(None, min_length=1)
    enabled: bool | None = None

    @field_validator("event_types")
    @classmethod
    def _unique(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("event_types lists an event more than once")
        return value


class WebhookRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    url: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None = Field(description="Why the deliverer disabled the webhook, if it did.")
    created_at: datetime


class WebhookCreated(WebhookRead):
    secret: str = Field(
        description="Standard Webhooks secret (`whsec_…`) to verify `webhook-signature`. Shown once; "
        "dpwatch keeps it to sign deliveries."
    )


class AttemptRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    attempted_at: datetime
    status_code: int | None = Field(description="The receiver's HTTP status; null when no response arrived.")
    error: str | None
    duration_ms: float | None
    worker_id: str | None


class DeliveryRead(BaseModel):
    """One outbox message for this webhook and the log of its delivery attempts."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="The `webhook-id` header value (idempotency key for receivers).")
    event_type: str
    status: Literal["pending", "delivered", "failed", "disabled"]
    attempts: int = Field(description="Number of attempts so far.")
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    created_at: datetime
    payload: dict[str, Any] = Field(description="The exact JSON body sent.")
    attempt_log: list[AttemptRead] = Field(description="Every attempt, oldest first.")
