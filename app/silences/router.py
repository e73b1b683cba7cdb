"""/v1/silences: on-call silences (Alertmanager's model). Writes need an ``admin`` key."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Query, status

from app.api.deps import CurrentPrincipal, SessionDep
from app.api.errors import problem_responses
from app.api.pagination import CursorQuery, LimitQuery, Page
from app.models.auth import ApiKey
from app.silences import service
from app.silences.schemas import SilenceCreate, SilenceRead

router = APIRouter(prefix="/silences", tags=["silences"])


def key_label(session: SessionDep, api_key_id: uuid.UUID) -> str:
    """Who made a silence: the API key's name and prefix."""
    key = session.get(ApiKey, api_key_id)
    return "unknown key" if key is None else f"{key.name} ({key.prefix}…)"


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=SilenceRead,
    summary="Create a silence",
    description="Mute the webhooks of the alarms that match every matcher given (`monitor_id`, `mechanism_id`, "
    "`kind`; at least one) from `starts_at` (default now) to `ends_at` (at most 90 days later). Matching alarms "
    "are still recorded and shown; only their `alarm.firing` and `alarm.resolved` messages are not sent. "
    "422 when no matcher is given, when `ends_at` is not after `starts_at` or is past, or when the monitor or "
    "mechanism is not this tenant's.",
    responses=problem_responses(401, 403, 422),
)
def create_silence(body: SilenceCreate, principal: CurrentPrincipal, session: SessionDep) -> SilenceRead:
    silence = service.create_silence(session, principal.tenant_id, body, key_label(session, principal.api_key_id))
    return service.to_read(silence)


@router.get(
    "",
    response_model=Page[SilenceRead],
    summary="List silences",
    description="This tenant's silences, newest first; `?state=` keeps the pending, active or expired ones.",
    responses=problem_responses(401, 422),
)
def list_silences(
    principal: CurrentPrincipal,
    session: SessionDep,
    state: Annotated[Literal["pending", "active", "expired"] | None, Query(description="Only this state.")] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[SilenceRead]:
    rows, next_cursor = service.list_silences(session, principal.tenant_id, state=state, limit=limit, cursor=cursor)
    return Page[SilenceRead](items=[service.to_read(s) for s in rows], next_cursor=next_cursor)


@router.get(
    "/{silence_id}",
    response_model=SilenceRead,
    summary="Get a silence",
    responses=problem_responses(401, 404, 422),
)
def get_silence(silence_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> SilenceRead:
    return service.to_read(service.get_silence(session, principal.tenant_id, silence_id))


@router.delete(
    "/{silence_id}",
    response_model=SilenceRead,
    summary="Expire a silence",
    description="End the silence now (it stays listed, `expired`). Expiring an expired silence changes nothing.",
    responses=problem_responses(401, 403, 404, 422),
)
def expire_silence(silence_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> SilenceRead:
    silence = service.get_silence(session, principal.tenant_id, silence_id)
    return service.to_read(service.expire_silence(session, silence))
