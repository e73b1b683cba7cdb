"""``GET /v1/quotas``: the tenant's quotas and usage."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.quotas import service
from app.quotas.schemas import QuotaLimits, QuotaRead, QuotaUsage

router = APIRouter(prefix="/quotas", tags=["quotas"])


@router.get(
    "",
    response_model=QuotaRead,
    summary="Get this tenant's quotas and usage",
    description="Monitors, jobs running and queued, outputs drawn per day and raw-output bytes kept, each with "
    "its limit (0: none). Over a limit, creating a monitor or a job answers 429 (`quota-exceeded`, with "
    "`Retry-After`), or 422 (`quota-exceeds-limit`) when the request alone is over it.",
    responses=problem_responses(401, 422),
)
def get_quotas(principal: CurrentPrincipal, session: SessionDep, settings: SettingsDep) -> QuotaRead:
    limits = service.quotas_of(session, principal.tenant_id, settings)
    return QuotaRead(limits=QuotaLimits(**limits.as_dict()),
                     usage=QuotaUsage(**service.usage(session, principal.tenant_id)))
