"""Request and response bodies of /v1/mechanisms."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.patch import Omittable
from app.api.urls import HttpUrl
from app.auth.schemas import SigningSecret
from app.search.domain import DOMAIN_DESCRIPTION, InputDomain
from app.stats.shapes import OutputShape

OutputKind = Literal["real", "discrete", "vector", "keyed"]
_EXAMPLE = {
    "name": "laplace-count",
    "sampling_url": "https://dp.example.org/mechanisms/count/sample",
    "output_kind": "real",
    "dim": None,
    "max_batch": 10000,
    "timeout_seconds": 10,
    "prefer_binary": False,
}


def _check_shape(shape: OutputShape, output_kind: str, dim: int | None) -> None:
    numeric_scalar = shape.container == "scalar" and shape.values in ("real", "integer")
    if shape.output_kind != output_kind and not (output_kind == "real" and numeric_scalar):
        raise ValueError(f"output_shape ({shape.describe()}) is read as output_kind '{shape.output_kind}', "
                         f"not '{output_kind}'")
    expected = shape.length if shape.container == "vector" else shape.max_length
    if shape.container == "list" and shape.max_length is None:
        raise ValueError("a list output_shape needs max_length (the longest answer), given as dim too")
    if shape.container in ("vector", "list") and dim != expected:
        what = "length" if shape.container == "vector" else "max_length"
        raise ValueError(f"dim ({dim}) must equal the output_shape's {what} ({expected})")


def _check_dim(output_kind: str | None, dim: int | None) -> None:
    if output_kind == "vector" and dim is None:
        raise ValueError("dim is required when output_kind is 'vector' (the length of each output vector)")
    if output_kind in ("real", "discrete", "keyed") and dim is not None:
        raise ValueError(f"dim must be null unless output_kind is 'vector' (got output_kind '{output_kind}')")


class MechanismCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})

    name: str = Field(min_length=1, max_length=200, description="Unique among this tenant's mechanisms.")
    sampling_url: HttpUrl
    output_kind: OutputKind = Field(
        description="What one output is: `real` (a number), `discrete` (an integer or label), "
        "`vector` (a list of `dim` numbers; `null` entries allowed unless `output_shape` says otherwise), "
        "`keyed` (a JSON object from string keys to numbers, a key left out being a key not released: a group-by "
        "with partition selection; docs/protocol.md §3.2). A keyed mechanism's `output_shape` may declare its key "
        "universe (`keys`) and `max_keys`; without one, the keys are open."
    )
    dim: int | None = Field(None, ge=1, le=10_000, description="Length of each output vector; only for `vector`.")
    max_batch: int = Field(10_000, ge=1, le=10_000_000, description="Most outputs the endpoint returns per request.")
    timeout_seconds: float = Field(10.0, gt=0, le=600, description="Time limit of one sampling request.")
    prefer_binary: bool = Field(False, description="Ask the endpoint for the binary (NumPy) response format.")
    secret: SigningSecret | None = Field(
        None,
        description="Optional `whsec_…` signing secret (at least 16 random bytes, base64) to use instead of a "
        "generated one, e.g. when the endpoint was started with its secret already configured. Never shown again.",
        json_schema_extra={"writeOnly": True},
    )
    output_shape: OutputShape | None = Field(
        None,
        description="The output contract (a real/integer/label scalar, a real on a lattice, a vector of `length`, a "
        "list, keyed outputs with a declared or open key universe, with or without `null`s). Optional: without it, "
        "the shape is detected from the first period's outputs (keyed outputs: with open keys). Periods whose "
        "outputs break it raise a `contract` alarm (a key outside the declared `keys`, too many keys, a value of "
        "the wrong type, an output that is not an object). It must agree with `output_kind`/`dim` (a list gives "
        "its `max_length` as `dim`; a keyed shape goes with `output_kind: keyed` and no `dim`).",
    )
    probe_database: Any = Field(
        None,
        description="An input (any JSON the mechanism accepts) for validation probes: `?validate=true` samples the "
        "mechanism on it. Without it, probes use the databases of the mechanism's monitors; dpwatch never guesses "
        "an input.",
    )
    input_domain: InputDomain | None = Field(
        None, description=DOMAIN_DESCRIPTION + " Optional: needed to search the mechanism for inputs that break its "
        "claim (`POST /v1/mechanisms/{id}/searches`, a monitor's `search_every`).")

    @model_validator(mode="after")
    def _dim_matches_kind(self) -> MechanismCreate:
        _check_dim(self.output_kind, self.dim)
        if self.output_shape is not None:
            _check_shape(self.output_shape, self.output_kind, self.dim)
        return self


class MechanismUpdate(BaseModel):
    """Fields to change; omitted fields keep their value."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"timeout_seconds": 20, "max_batch": 5000}]}
    )

    # Fields that may be omitted but not null: `Omittable[T]` is validated as T, so the schema says so
    # too (pydantic does not validate defaults; an explicit null is a 422 that the schema predicts).
    name: Omittable[str] = Field(None, min_length=1, max_length=200)
    sampling_url: Omittable[HttpUrl] = None
    output_kind: Omittable[OutputKind] = None
    dim: int | None = Field(None, ge=1, le=10_000)
    max_batch: Omittable[int] = Field(None, ge=1, le=10_000_000)
    timeout_seconds: Omittable[float] = Field(None, gt=0, le=600)
    prefer_binary: Omittable[bool] = None
    output_shape: OutputShape | None = Field(
        None, description="A new output contract; `null` forgets it, and the next period detects it again.")
    probe_database: Any = Field(None, description="A new input for validation probes (`null` forgets it).")
    input_domain: InputDomain | None = Field(None, description="A new input domain (`null` forgets it).")

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
    database: Any = Field(None, description="The input the probe sampled the mechanism on.")


class ProbeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"database": [1, 0, 1], "n": 10}]})

    database: Any = Field(
        None,
        description="The input x to sample the mechanism on (any JSON). Default: the mechanism's `probe_database`, "
        "else the databases of its monitors' checks; with none of these, 422 (no input is guessed).",
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
    output_shape: dict[str, Any] | None = Field(
        None, description="The output contract (an `OutputShape`), or null until the first period detects it.")
    output_shape_source: Literal["declared", "detected"] | None = None
    probe_database: Any = Field(None, description="The input validation probes use.")
    input_domain: dict[str, Any] | None = Field(
        None, description="The databases the claim covers (an `InputDomain`, docs/search.md), or null.")
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
