"""Request and response bodies of /v1/mechanisms."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.urls import check_http_url

OutputKind = Literal["real", "discrete", "vector"]
HttpUrl = Annotated[
    str,
    Field(min_length=1, max_length=2048, description="Absolute http(s) URL; no credentials, no fragment."),
    AfterValidator(check_http_url),
]

_EXAMPLE = {
    "name": "laplace-count",
    "sampling_url": "https://dp.example.org/mechanisms/count/sample",
    "output_kind": "real",
    "dim": None,
    "max_batch": 10000,
    "timeout_seconds": 10,
    "prefer_binary": False,
}


def _check_dim(output_kind: str | None, dim: int | None) -> None:
    if output_kind == "vector" and dim is None:
        raise ValueError("dim is required when output_kind is 'vector' (the length of each output vector)")
    if output_kind in ("real", "discrete") and dim is not None:
        raise ValueError(f"dim must be null unless output_kind is 'vector' (got output_kind '{output_kind}')")


class MechanismCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})

    name: str = Field(min_length=1, max_length=200, description="Unique among this tenant's mechanisms.")
    sampling_url: HttpUrl
    output_kind: OutputKind = Field(
        description="What one output is: `real` (a number), `discrete` (an integer or label), "
        "`vector` (a list of `dim` numbers)."
    )
    dim: int | None = Field(None, ge=1, le=10_000, description="Length of each output vector; only for `vector`.")
    max_batch: int = Field(10_000, ge=1, le=10_000_000, description="Most outputs the endpoint returns per request.")
    timeout_seconds: float = Field(10.0, gt=0, le=600, description="Time limit of one sampling request.")
    prefer_binary: bool = Field(False, description="Ask the endpoint for the binary (NumPy) response format.")
    secret: str | None = Field(
        None,
        description="Optional `whsec_…` signing secret (at least 24 random bytes, base64) to use instead of a "
        "generated one, e.g. when the endpoint was started with its secret already configured. Never shown again.",
        json_schema_extra={"writeOnly": True},
    )

    @field_validator("secret")
    @classmethod
    def _valid_secret(cls, value: str | None) -> str | None:
        if value is not None:
            from app.sampling.protocol import validate_secret

            validate_secret(value)
        return value

    @model_validator(mode="after")
    def _dim_matches_kind(self) -> MechanismCreate:
        _check_dim(self.output_kind, self.dim)
        return self


class MechanismUpdate(BaseModel):
    """Fields to change; omitted fields keep their value."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"timeout_seconds": 20, "max_batch": 5000}]}
    )

    name: str | None = Field(None, min_length=1, max_length=200)
    sampling_url: HttpUrl | None = None
    output_kind: OutputKind | None = None
    dim: int | None = Field(None, ge=1, le=10_000)
    max_batch: int | None = Field(None, ge=1, le=10_000_000)
    timeout_seconds: float | None = Field(None, gt=0, le=600)
    prefer_binary: bool | None = None

    @model_validator(mode="after")
    def _no_nulls(self) -> MechanismUpdate:
        for name in ("name", "sampling_url", "output_kind", "max_batch", "timeout_seconds", "prefer_binary"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null; omit it to keep the current value")
        return self


class ProbeReport(BaseModel):
    """What one call to the endpoint showed."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "ok": False,
                    "reason": "bad_shape",
                    "problems": ["expected 10 outputs, got 9"],
                    "outputs_received": 9,
                    "elapsed_seconds": 0.041,
                    "preview": [0.3, -1.2, 2.5],
                }
            ]
        },
    )

    ok: bool = Field(description="True when the endpoint answered correctly.")
    reason: str | None = Field(None, description="Machine-readable failure reason (the sampling client's).")
    problems: list[str] = Field(description="What is wrong with the answer, in words; empty when ok.")
    outputs_received: int = Field(description="Number of outputs in the answer.")
    elapsed_seconds: float
    preview: list[Any] = Field(description="The first few outputs, to eyeball.")


class ProbeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"database": [1, 0, 1], "n": 10}]})

    database: Any = Field(
        default_factory=list,
        description="The input x to sample the mechanism on (any JSON). Defaults to an empty list.",
    )
    n: int = Field(10, ge=1, le=1000, description="How many outputs to ask for (capped at max_batch).")


class MechanismRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    sampling_url: str
    output_kind: OutputKind
    dim: int | None
    max_batch: int
    timeout_seconds: float
    prefer_binary: bool
    created_at: datetime
    updated_at: datetime


class MechanismCreated(MechanismRead):
    """The created mechanism, with its signing secret: shown this once and never again."""

    secret: str = Field(
        description="Standard Webhooks secret (`whsec_…`) with which dpwatch signs every sampling "
        "request (`webhook-signature`). Store it now: it is not shown again. dpwatch keeps it to sign."
    )
    validation: ProbeReport | None = Field(None, description="Result of `?validate=true`, when asked.")


class MechanismUpdated(MechanismRead):
    validation: ProbeReport | None = Field(None, description="Result of `?validate=true`, when asked.")
