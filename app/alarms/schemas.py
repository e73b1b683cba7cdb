"""Request and response bodies of /v1/alarms and /v1/webhooks."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.alarms.verdict import Verdict
from app.api.patch import Omittable
from app.api.urls import HttpUrl

EventType = Literal["alarm.firing", "alarm.resolved", "monitor.degraded", "monitor.completed"]

AlarmKind = Literal["privacy", "contract"]

#: What a bound shown with an alarm is valid for (app.stats.evidence.VALIDITY_WORDS).
BoundValidity = Literal["across_runs", "given_alarm", "descriptive"]
_VALIDITY_DOC = ("What the bound is valid for: `across_runs` (an anytime-valid bound: P(it ever exceeds the true "
                 "value) ≤ α over runs, so valid at any stopping time, but not given the alarm: it reads the periods "
                 "that raised the alarm), `given_alarm` (the exact test on fresh outputs drawn after the alarm: its "
                 "level holds also conditionally on the alarm), `descriptive` (a window the data chose: no confidence "
                 "statement).")
_RESTATES_DOC = ("The bound is computed on the data that raised the alarm, so it restates the alarm and is not "
                 "independent evidence (for a pure-ε e-process check it rejects the claim exactly when the detector "
                 "alarms). Only the confirmation on fresh outputs is false here.")


class EvidenceWindow(BaseModel):
    lag: int = Field(description="k, the number of recent periods that attain M_t (eq. 13): the detector's window.")
    from_t: int = Field(description="First period of the window (in the horizon).")
    to_t: int = Field(description="The alarm's period.")


class EvidenceCounts(BaseModel):
    a: int = Field(description="Outputs on x in the event, pooled over the window.")
    b: int = Field(description="Outputs on x' in the event, pooled over the window.")
    n: int = Field(description="Outputs drawn per side over the window.")


class ClaimRead(BaseModel):
    """The claim in its API form: exactly one of `{epsilon}`, `{epsilon, delta}`, `{gdp_mu}`, `{zcdp_rho}`."""

    epsilon: float | None = None
    delta: float | None = None
    gdp_mu: float | None = None
    zcdp_rho: float | None = None


class ExactBound(BaseModel):
    method: Literal["clopper_pearson"] = "clopper_pearson"
    p_lower: float = Field(description="Clopper–Pearson lower bound on p at α/2.")
    q_upper: float = Field(description="Clopper–Pearson upper bound on q at α/2.")
    lower_bound: float | None = Field(
        None, description="The claim's parameter implied by (p_lower, q_upper): ε (ln(p_lower/q_upper), with δ for "
        "(ε, δ) claims), μ for μ-GDP (Φ⁻¹(p_lower) − Φ⁻¹(q_upper)), ρ for ρ-zCDP; null when infinite.")
    epsilon_lower_bound: float | None = Field(
        None, description="`lower_bound` when the parameter is ε; null otherwise or when infinite.")
    exceeds_claim: bool = Field(description="(p_lower, q_upper) lies outside the claim's region.")


class AnytimeBound(BaseModel):
    """The anytime-valid lower confidence bound on the claim's parameter (method.md §11.2)."""

    method: Literal["confidence_sequence"] = "confidence_sequence"
    parameter: Literal["ε", "μ", "ρ"] = "ε"
    lower_bound: float | None = Field(
        None, description="LB_τ: the parameter exceeds it with probability ≥ `confidence` at every period at once, so "
        "also at the alarm, a stopping time (inverting the e-processes over a grid of the parameter). Valid across "
        "runs, not given the alarm; not independent evidence: it reads the periods that raised the alarm (`validity`, "
        "`restates_alarm`); the confirmation on fresh outputs is the bound valid given the alarm. Null: no loss shown.")
    confidence: float
    contradicts_claim: bool = Field(description="The claimed value is outside the confidence sequence (LB_τ ≥ claim).")
    periods: int = Field(description="Periods used: every period of the check in the horizon, up to the alarm.")
    from_t: int
    to_t: int
    grid_step: float | None = Field(None, description="Resolution of the parameter grid (LB is a grid value).")
    validity: BoundValidity = Field("across_runs", description=_VALIDITY_DOC)
    restates_alarm: bool = Field(True, description=_RESTATES_DOC)


class WindowBound(BaseModel):
    """The bound on the detector's own window: descriptive, not a confidence bound (the window and the time were
    chosen on the same data)."""

    method: Literal["score", "clopper_pearson"]
    lower_bound: float | None = None
    exceeds_claim: bool
    descriptive: Literal[True] = True
    validity: BoundValidity = Field("descriptive", description=_VALIDITY_DOC)
    restates_alarm: bool = Field(True, description=_RESTATES_DOC)
    statement: str


class DetectionGuarantee(BaseModel):
    """What the detector's alarm guarantees under the claim."""

    detector: str
    kind: Literal["level", "arl"] = Field(
        description="`level`: the alarm is a level-α test of the claim (aggregator, e-process). `arl`: an "
        "ARL-controlled detection (e-detector), not a refutation at level α.")
    alpha: float
    arl: float | None = Field(None, description="For `arl`: the lower bound c on the mean periods between false alarms.")
    statement: str


class ConfirmationFace(BaseModel):
    """One face of the claim in the confirmation on fresh outputs."""

    lower_bound: float | None = Field(None, description="The face's exact lower bound on the parameter (null: none).")
    confirms: bool = Field(description="This face contradicts the claim.")


class ConfirmationFaces(BaseModel):
    """Both faces of the claim tested on the same fresh counts (one Clopper–Pearson box, level α for both)."""

    event: ConfirmationFace = Field(description="p ≤ e^ε q + δ on the event (p ≤ h(q) for GDP and zCDP).")
    complement: ConfirmationFace = Field(
        description="1 − q ≤ e^ε (1 − p) + δ: the same claim on the event's complement (1 − q ≤ h(1 − p)).")


class Confirmation(BaseModel):
    """The exact test of the claim on fresh outputs drawn after the alarm (valid given the alarm)."""

    model_config = ConfigDict(extra="allow")

    method: Literal["clopper_pearson_fresh"] = "clopper_pearson_fresh"
    counts: EvidenceCounts
    parameter: Literal["ε", "μ", "ρ"] = "ε"
    lower_bound: float | None = Field(
        None, description="The exact lower bound on the parameter from the fresh outputs (the face named in `face`): "
        "valid given the alarm, since the detector never saw these outputs. Null: none.")
    confidence: float
    confirms: bool = Field(description="The fresh outputs contradict the claim at `confidence` (exact, each side α/2), "
                           "on the event's face or its complement's (both on the same Clopper–Pearson box).")
    orientation: Literal["x", "x_prime"] = Field(
        "x", description="The side the test takes as p (the alarm's own orientation, fixed before the fresh outputs).")
    face: Literal["event", "complement"] = Field(
        "event", description="The face of the claim that gives `lower_bound` and `confirms`: the event's "
        "(p ≤ e^ε q + δ) or its complement's (1 − q ≤ e^ε (1 − p) + δ; for GDP and zCDP the symmetric point).")
    faces: ConfirmationFaces | None = Field(
        None, description="Each face's bound and verdict (alarms confirmed before the two-face test have none).")
    validity: BoundValidity = Field("given_alarm", description=_VALIDITY_DOC)
    restates_alarm: bool = Field(False, description=_RESTATES_DOC)
    statement: str | None = None


class CheckEvidence(BaseModel):
    """What raised a privacy alarm: the anytime-valid bound (headline), the detector's guarantee, and its window
    with a descriptive bound."""

    model_config = ConfigDict(extra="allow")

    method: Literal["confidence_sequence", "score", "clopper_pearson"] = Field(
        description="How `lower_bound` is computed: `confidence_sequence` (the anytime-valid bound, valid at the "
        "alarm; the newer alarms, those of ρ-zCDP claims the latest); `score`/`clopper_pearson`: the window bound "
        "(older alarms, for which it is descriptive).")
    window: EvidenceWindow = Field(description="The periods the detector pooled (chosen on the same data).")
    counts: EvidenceCounts
    p_hat: float = Field(description="A/N over the window.")
    q_hat: float = Field(description="B/N over the window.")
    parameter: Literal["ε", "μ", "ρ"] = Field(
        "ε", description="The claim's parameter that `lower_bound` bounds: ε, μ (GDP) or ρ (zCDP).")
    lower_bound: float | None = Field(
        None, description="The headline lower bound on the claim's parameter for this event: `anytime.lower_bound` "
        "(valid across runs at any stopping time, not given the alarm: `validity`) when `method` is "
        "`confidence_sequence`; otherwise the descriptive window "
        "bound (null when no loss is shown).")
    epsilon_lower_bound: float | None = Field(
        None, description="`lower_bound` when the parameter is ε (null for GDP and zCDP claims).")
    orientation: Literal["x", "x_prime"] = Field(
        "x", description="Which side the event is likelier under, in the bound reported.")
    exact: ExactBound = Field(description="The exact Clopper–Pearson bound on the window, each side at α/2 "
                              "(descriptive: the window was chosen on the same data).")
    anytime: AnytimeBound | None = Field(None, description="The headline: valid across runs at any stopping time, "
                                         "not given the alarm, and not independent of it.")
    window_bound: WindowBound | None = Field(None, description="The old window bound, descriptive.")
    detection: DetectionGuarantee | None = None
    confidence: float
    claim: ClaimRead
    claim_description: str | None = None
    exceeds_claim: bool = Field(description="`lower_bound` contradicts the claim (on the alarm's own data: see "
                                "`validity` and `restates_alarm`).")
    validity: BoundValidity = Field(
        "across_runs", description="What `lower_bound` is valid for. " + _VALIDITY_DOC + " Alarms stored before "
        "this field get `across_runs` for `confidence_sequence` and `descriptive` for a window bound.")
    restates_alarm: bool = Field(True, description=_RESTATES_DOC)
    statement: str

    @model_validator(mode="before")
    @classmethod
    def _validity_of_old_alarms(cls, value: Any) -> Any:
        if isinstance(value, dict) and "validity" not in value:
            value = {**value, "validity": "across_runs" if value.get("method") == "confidence_sequence" else "descriptive"}
        return value


class ContractEvidence(BaseModel):
    """What broke the mechanism's output contract, with an offending output."""

    model_config = ConfigDict(extra="allow")

    breach: str = Field(description="What broke: `type`, `length`, `support`, … (the engine's breach kind).")
    detail: str = Field(description="In words.")
    sample: Any = Field(None, description="An offending output, as received.")
    database: Any = Field(None, description="The input it was drawn on.")
    expected_shape: dict[str, Any] | None = Field(None, description="The contract: the mechanism's output shape.")
    observed_shape: dict[str, Any] | None = Field(None, description="The shape detected on this period's outputs.")
    period: int | None = Field(None, description="The period (seq) whose outputs broke it.")


class SnapshotEvidence(BaseModel):
    """The alarm's MPL snapshot (seed 003): a separate estimator of where the loss is."""

    model_config = ConfigDict(extra="allow")

    snapshot_id: uuid.UUID
    role: Literal["separate_estimator"] = "separate_estimator"
    lower_bound: float = Field(description="LB (seed 003 eq. 26) at the snapshot's t̂, on fresh draws.")
    epsilon_hat: float
    t_hat: Any = None
    confidence: float
    verdict: Literal["exceeds_claim", "weaker_estimator", "below_claim", "no_loss_established", "not_comparable"] = Field(
        description="`exceeds_claim`: LB is above the claim too. `weaker_estimator`: LB does not reach the claim; the "
        "snapshot is the weaker estimator there and does not clear the mechanism. `not_comparable`: the claim "
        "((ε, δ), GDP, zCDP) bounds no pure ε, so MPL's pure-loss bound is not compared with it (see `claim_terms`).")
    statement: str


class AlarmEvidence(BaseModel):
    """Why the alarm fired, in the order to read it: what raised it (`check` for a privacy alarm, `contract`
    for a contract alarm), then the MPL snapshot, labelled as a separate estimator."""

    model_config = ConfigDict(extra="allow")

    kind: AlarmKind
    statement: str = Field(description="The evidence in one paragraph, the alarm's own evidence first.")
    check: CheckEvidence | None = None
    contract: ContractEvidence | None = None
    snapshot: SnapshotEvidence | None = Field(
        None, description="Null until the alarm's snapshot is done, or when the monitor keeps no outputs.")
    confirmation: Confirmation | None = Field(
        None, description="The claim tested exactly on fresh outputs drawn after the alarm (the snapshot's "
        "`alarm_snapshot_samples`); null until then, or when the monitor draws none.")

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, value: Any) -> Any:
        # Alarms stored before the evidence had a `check` part held the snapshot's summary only.
        if isinstance(value, dict) and "kind" not in value and "snapshot_id" in value:
            return {"kind": "privacy", "statement": value.get("statement", ""),
                    "snapshot": {"snapshot_id": value["snapshot_id"], "lower_bound": value.get("lower_bound"),
                                 "epsilon_hat": value.get("epsilon_hat"), "t_hat": value.get("t_hat"),
                                 "confidence": value.get("confidence", 0.95),
                                 "verdict": "exceeds_claim" if value.get("exceeds_claim") else "weaker_estimator",
                                 "statement": value.get("statement", "")}}
        return value


class AlarmRead(BaseModel):
    """A check's statistic M_t crossed its threshold (`privacy`), or the outputs broke their contract
    (`contract`)."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "5b0f5d5e-8c1e-4d4f-9a57-6a1f0b1f3a11",
                    "kind": "privacy",
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
                    "evidence": {
                        "kind": "privacy",
                        "statement": "Descriptive: over the last 4 period(s), the window the detector chose on the "
                        "same data (1650 of 40000 outputs on x and 1190 of 40000 on x' in the event), the score bound "
                        "on ε is 0.26; not a confidence bound, since the window and the time were chosen by the data.",
                        "check": {
                            "method": "score",
                            "window": {"lag": 4, "from_t": 14, "to_t": 17},
                            "counts": {"a": 1650, "b": 1190, "n": 40000},
                            "p_hat": 0.04125, "q_hat": 0.02975, "epsilon_lower_bound": 0.26,
                            "exact": {"method": "clopper_pearson", "p_lower": 0.0390, "q_upper": 0.0316,
                                      "epsilon_lower_bound": 0.21, "exceeds_claim": True},
                            "confidence": 0.95,
                            "parameter": "ε", "lower_bound": 0.26, "claim": {"epsilon": 0.1}, "exceeds_claim": True,
                            "statement": "…",
                        },
                        "contract": None,
                        "snapshot": None,
                    },
                }
            ]
        },
    )

    id: uuid.UUID
    kind: AlarmKind = Field(description="`privacy`: a check's detector crossed its threshold. `contract`: a period's "
                            "outputs broke the mechanism's output contract (type, length or support).")
    monitor_id: uuid.UUID = Field(description="The monitor that raised it (kept after the monitor is deleted).")
    monitor_name: str | None = Field(None, description="The monitor's name when the alarm fired or was archived.")
    archived: bool = Field(False, description="True once the monitor was deleted; listed with `?archived=true`.")
    archived_at: datetime | None = Field(None, description="When the monitor was deleted.")
    check_id: uuid.UUID | None = Field(description="The check whose detector fired; null for a contract alarm, and "
                                       "once archived.")
    period_run_id: uuid.UUID | None = Field(description="The period in which it fired; null once archived.")
    horizon_index: int = Field(description="The horizon j in which the alarm fired.")
    t: int = Field(description="The period (1..T) of the horizon in which M_t crossed the threshold.")
    statistic: float | None = Field(description="M_t, the weighted aggregator's statistic (null for `contract`).")
    threshold: float | None = Field(description="q_{1−α_j/m}(T, γ).")
    a: int | None = Field(description="Outputs on x that fell in the event E (this period).")
    b: int | None = Field(description="Outputs on x' that fell in the event E (this period).")
    n: int | None = Field(description="Outputs drawn on each of x and x' (this period).")
    z: float | None = Field(description="The period's z statistic.")
    created_at: datetime
    acknowledged_at: datetime | None
    acknowledged_note: str | None
    resolved_at: datetime | None = Field(description="Set when the monitor is reset after a fix.")
    status: Literal["firing", "resolved"]
    fingerprint: str = Field(description="Stable for a (monitor, check, horizon): Alertmanager-style grouping key.")
    claim: dict[str, float] | None = Field(
        None, description="The claim the alarm contradicts: `{\"epsilon\": e}`, `{\"epsilon\": e, \"delta\": d}`, "
        "`{\"gdp_mu\": m}` or `{\"zcdp_rho\": r}` (null on alarms recorded before claims, and on contract alarms).",
    )
    evidence: AlarmEvidence | None = Field(
        None,
        description="What raised the alarm: for `privacy`, the check's window (the lag k that attains M_t), its "
        "pooled counts, p̂, q̂ and an exact Clopper–Pearson lower bound on ε (`check`); for `contract`, the breach "
        "with an offending output (`contract`). Then the MPL snapshot, a separate estimator of where the loss is "
        "(`snapshot`, filled in when it is done).",
    )
    verdict: Verdict | None = Field(
        None, description="dpwatch's one conclusion, to read first (app/alarms/verdict.py): `refutes` is true when any "
        "valid test at its stated level refutes the claim (a privacy alarm is the detector's refutation), then one "
        "`sentence` with the strongest evidence and its number, then every estimator with its own figure, `refutes` "
        "and a label saying what it can and cannot show.")


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

    url: HttpUrl
    event_types: list[EventType] = Field(
        min_length=1, json_schema_extra={"uniqueItems": True}, description="Events to receive, each once.")

    @field_validator("event_types")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("event_types lists an event more than once")
        return value


class WebhookUpdate(BaseModel):
    """Fields to change. Setting `enabled: true` re-enables a webhook the deliverer disabled."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"enabled": True}]})

    # Fields that may be omitted but not null: `Omittable[T]` is validated as T, so the schema says so
    # too (pydantic does not validate defaults; an explicit null is a 422 that the schema predicts).
    url: Omittable[HttpUrl] = None
    event_types: Omittable[list[EventType]] = Field(None, min_length=1, json_schema_extra={"uniqueItems": True})
    enabled: Omittable[bool] = None

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
