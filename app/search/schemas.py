"""Request and result bodies of the search jobs (``POST /v1/mechanisms/{id}/searches``) and of
``POST /v1/monitors/{id}/checks/from-search`` (docs/search.md §2, §5)."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.claims.schemas import ClaimSpec
from app.search.domain import InputDomain

__all__ = ["AdoptFindingRequest", "SearchRequest", "SearchResultModel"]

DEFAULT_JOB_BUDGET = 8_000_000


class SearchRequest(BaseModel):
    """Search the mechanism's input domain for a pair of neighbouring databases and an event that break
    the claim; only a certification on fresh samples reports a violation."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"claim": {"epsilon": 1.0}},
        {"claim": {"gdp_mu": 1.0}, "budget": 2_000_000, "time_limit_seconds": 120,
         "domain": {"records": {"type": "real", "low": -1, "high": 3}, "size": {"min": 1, "max": 10},
                    "neighbours": ["replace_one"]}},
    ]})

    claim: ClaimSpec = Field(description="The claim to break: `{\"epsilon\": e}`, `{\"epsilon\": e, \"delta\": d}`, "
                             "`{\"gdp_mu\": m}` or `{\"zcdp_rho\": r}`.")
    domain: InputDomain | None = Field(None, description="The input domain to search; default: the mechanism's "
                                       "`input_domain` (422 when it has none).")
    alpha: float = Field(0.05, gt=0, lt=1, description="Level of the certification: a claim that holds is certified "
                         "as broken with probability at most α, whatever the search did.")
    budget: int = Field(DEFAULT_JOB_BUDGET, ge=20_000, le=200_000_000,
                        description="Outputs drawn in all: screening, refinement and certification, every database.")
    time_limit_seconds: float | None = Field(None, gt=0, le=86_400, description="Stop after this long (half for "
                                             "searching, the rest for certifying); the job then reports what it has.")
    candidates: int = Field(300, ge=1, le=5_000, description="Candidate pairs the generators propose at most.")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="Seed of the generators and the optimiser.")
    full_report: bool = Field(False, description="Do not stop at the first certification: screen, refine and certify "
                              "to the end of the budget and report every finding (as `dpwatch search --full-report`). "
                              "The level stays α over all the stages (docs/search.md §3.4).")


class SearchResultModel(BaseModel):
    """What a search found (docs/search.md §2). `certified` is true only when a held-out test on fresh samples
    refuted the claim; otherwise nothing was found within the budget, which does not show that the claim holds."""

    model_config = ConfigDict(extra="allow")

    certified: bool = Field(description="A violation was certified on fresh samples (level α).")
    verdict: str = Field(description="`violation certified` or `no violation certified`.")
    statement: str = Field(description="The result in words.")
    claim: str
    finding: dict[str, Any] | None = Field(description="The certified pair (`x`, `x_prime`, `relation`, `source`), its "
                                           "`event`, its `lower_bound` on the claim's parameter and its held-out counts.")
    findings: list[dict[str, Any]] = Field(description="Every tested finding, certified first; each has `check`, "
                                           "ready for a monitor.")
    failing_inputs: list[dict[str, Any]] = Field(description="Databases the endpoint failed on (reason, status, "
                                                 "detail): findings too.")
    samples: dict[str, int] = Field(description="Outputs drawn per phase: `screening`, `refinement`, "
                                    "`certification`, `total`.")
    seconds: dict[str, float]
    candidates: dict[str, Any] = Field(description="How many candidate pairs were generated (by source) and scored.")
    stopped: str


class AdoptFindingRequest(BaseModel):
    """Turn a finished search's finding into a check of this monitor (one call)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"job_id": "4f1c2b7e-9a0d-4c3b-8e6f-2d1a0b9c8e7f", "finding": 1}]})

    job_id: uuid.UUID = Field(description="A `search` job of this monitor's mechanism that has succeeded.")
    finding: int = Field(1, ge=1, le=50, description="Which informative finding (1: the best).")
