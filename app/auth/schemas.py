"""Wire models of the keys API and of secret rotation (webhooks, mechanisms)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.auth.rotation import DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS
from app.sampling.protocol import SECRET_MIN_LENGTH, SECRET_PATTERN, validate_secret

Scope = Literal["read", "admin"]

def _checked_secret(value: str) -> str:
    validate_secret(value)  # its message names the rule, never the secret
    return value


#: Longest secret accepted: the width of the ``secret`` and ``previous_secret`` columns of mechanisms
#: and webhooks (tests/test_hostile_secrets.py checks that they agree). ``whsec_`` + base64 of up to
#: 70 random bytes; dpwatch generates 32 (50 characters).
SECRET_MAX_LENGTH = 100

#: A Standard Webhooks signing secret given by a client (``whsec_`` + base64 of ≥ 16 bytes): the
#: schema states the syntax, the validator gives the message.
SigningSecret = Annotated[str, Field(max_length=SECRET_MAX_LENGTH, json_schema_extra={"pattern": SECRET_PATTERN,
                                                                         "minLength": SECRET_MIN_LENGTH}),
                          AfterValidator(_checked_secret)]

#: Printable text without control characters (no NUL, no newline).
_LABEL_PATTERN = r"^[^\x00-\x1f\x7f]+$"


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, pattern=_LABEL_PATTERN,
                      description="A label to tell keys apart (no control characters).")
    scope: Scope = Field(
        "read",
        description="`read`: GET requests only (every other method answers 403); `admin`: everything, "
        "including creating and revoking keys. Defaults to the least privilege, `read`.",
    )


class ApiKeyRead(BaseModel):
    """A key as listed: never its secret, only the first characters to recognise it."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    scope: Scope
    prefix: str = Field(description="The key's first 8 characters (`dpw_` + 4), to recognise it.")
    created_at: datetime
    last_used_at: datetime | None = Field(description="Last authenticated use, to within a minute.")
    revoked_at: datetime | None = Field(description="When it was revoked; a revoked key gets 401.")


class ApiKeyCreated(ApiKeyRead):
    key: str = Field(description="The API key (`dpw_…`). Shown this once; only its SHA-256 is stored.")


class RotateSecret(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grace_seconds: int = Field(
        DEFAULT_GRACE_SECONDS,
        ge=0,
        le=MAX_GRACE_SECONDS,
        description="How long the old secret keeps signing beside the new one (seconds; default 24 h, "
        "at most 30 days). 0 switches at once.",
    )


class RotateMechanismSecret(RotateSecret):
    secret: SigningSecret | None = Field(
        None,
        description="The new `whsec_…` secret (at least 16 random bytes, base64) to use instead of a generated "
        "one, e.g. one already given to the endpoint. It must differ from the current secret.",
        json_schema_extra={"writeOnly": True},
    )


class SecretRotated(BaseModel):
    id: uuid.UUID = Field(description="The webhook's or mechanism's id.")
    secret: str = Field(description="The new `whsec_…` secret. Shown this once.")
    previous_secret_expires_at: datetime | None = Field(
        description="Until when the old secret signs too (every message carries both signatures); "
        "null when `grace_seconds` was 0."
    )
