"""The API form of a privacy claim (``"claim"`` on a monitor or a check)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.stats.claims import MAX_EPSILON, MAX_MU, MAX_RHO, Claim, parse_claim

CLAIM_DESCRIPTION = (
    "The privacy claim the check is tested against: exactly one of `{\"epsilon\": e}` (pure ε-DP), "
    "`{\"epsilon\": e, \"delta\": d}` ((ε, δ)-DP, δ in (0, 1)), `{\"gdp_mu\": m}` (μ-GDP, μ > 0) or "
    "`{\"zcdp_rho\": r}` (ρ-zCDP, ρ > 0). Other combinations are rejected with 422."
)


class ClaimSpec(BaseModel):
    """A privacy claim. Exactly one of: `epsilon`; `epsilon` and `delta`; `gdp_mu`; `zcdp_rho`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": CLAIM_DESCRIPTION,
            "examples": [{"epsilon": 1.0}, {"epsilon": 1.0, "delta": 1e-5}, {"gdp_mu": 0.5}, {"zcdp_rho": 0.125}],
        },
    )

    epsilon: float | None = Field(None, gt=0, le=MAX_EPSILON, description="ε of ε-DP or (ε, δ)-DP: 0 < ε ≤ 50.")
    delta: float | None = Field(None, gt=0, lt=1, description="δ of (ε, δ)-DP: 0 < δ < 1; needs `epsilon`.")
    gdp_mu: float | None = Field(None, gt=0, le=MAX_MU, description="μ of μ-GDP: 0 < μ ≤ 50; alone.")
    zcdp_rho: float | None = Field(None, gt=0, le=MAX_RHO, description="ρ of ρ-zCDP: 0 < ρ ≤ 100; alone.")

    @model_validator(mode="after")
    def _one_form(self) -> ClaimSpec:
        given = {k for k in ("epsilon", "delta", "gdp_mu", "zcdp_rho") if getattr(self, k) is not None}
        if given not in ({"epsilon"}, {"epsilon", "delta"}, {"gdp_mu"}, {"zcdp_rho"}):
            if given == {"delta"}:
                raise ValueError("delta needs an epsilon: give {\"epsilon\": e, \"delta\": d}")
            raise ValueError(
                "a claim is exactly one of {epsilon}, {epsilon, delta}, {gdp_mu} or {zcdp_rho}; "
                f"got {sorted(given) or 'nothing'}"
            )
        return self

    def to_dict(self) -> dict[str, float]:
        return self.model_dump(exclude_none=True)

    def to_claim(self) -> Claim:
        return parse_claim(self.to_dict())


def describe_claim(data: dict[str, Any] | None) -> str | None:
    return None if data is None else parse_claim(data).describe()
