"""``/v1/keys``: the calling tenant's API keys. Writes need an ``admin`` key (app/api/deps.py)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from sqlalchemy import select

from app.api.deps import CurrentPrincipal, SessionDep
from app.api.errors import ConflictError, NotFoundError, problem_responses
from app.api.pagination import CursorQuery, LimitQuery, Page, SortKey, paginate
from app.auth import service
from app.auth.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead
from app.models.auth import ApiKey

router = APIRouter(prefix="/keys", tags=["keys"])


def _get_key(session: SessionDep, tenant_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey:
    key = session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.tenant_id == tenant_id))
    if key is None:
        raise NotFoundError(f"API key {key_id} not found.")
    return key


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyCreated,
    summary="Create an API key",
    description="A new key for the calling tenant. The key itself is in this answer only; dpwatch "
    "stores its SHA-256. Needs an `admin` key.",
    responses=problem_responses(401, 403, 422),
)
def create_key(body: ApiKeyCreate, principal: CurrentPrincipal, session: SessionDep) -> ApiKeyCreated:
    api_key, plaintext = service.create_api_key(session, principal.tenant_id, body.name, body.scope)
    return ApiKeyCreated.model_validate({**ApiKeyRead.model_validate(api_key).model_dump(), "key": plaintext})


@router.get(
    "",
    response_model=Page[ApiKeyRead],
    summary="List API keys",
    description="The tenant's keys, newest first, without their secrets (the `prefix` tells them apart). "
    "`?revoked=false` lists the active ones only, `?revoked=true` the revoked ones.",
    responses=problem_responses(401, 422),
)
def list_keys(
    principal: CurrentPrincipal,
    session: SessionDep,
    revoked: Annotated[bool | None, Query(description="Filter on whether the key is revoked.")] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[ApiKeyRead]:
    stmt = select(ApiKey).where(ApiKey.tenant_id == principal.tenant_id)
    if revoked is not None:
        stmt = stmt.where(ApiKey.revoked_at.is_not(None) if revoked else ApiKey.revoked_at.is_(None))
    rows, next_cursor = paginate(
        session, stmt, [SortKey(ApiKey.created_at, "datetime"), SortKey(ApiKey.id, "uuid")], limit, cursor
    )
    return Page[ApiKeyRead](items=[ApiKeyRead.model_validate(k) for k in rows], next_cursor=next_cursor)


@router.get(
    "/{key_id}",
    response_model=ApiKeyRead,
    summary="Get an API key",
    responses=problem_responses(401, 404, 422),
)
def get_key(key_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> ApiKeyRead:
    return ApiKeyRead.model_validate(_get_key(session, principal.tenant_id, key_id))


@router.delete(
    "/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Revoke an API key",
    description="The key answers 401 from then on: at once on the API process that revoked it, and within "
    "`DPWATCH_KEY_CACHE_SECONDS` (5 s by default) on other API processes, which cache active keys. It stays "
    "listed with `revoked_at`. Revoking a "
    "revoked key is a no-op (204). A key may revoke itself. 409 when it is the tenant's last "
    "active `admin` key: create another admin key first, so that the tenant can always manage its keys.",
    responses=problem_responses(401, 403, 404, 409, 422),
)
def revoke_key(key_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> Response:
    api_key = _get_key(session, principal.tenant_id, key_id)
    try:
        service.revoke_api_key(session, api_key.id)
    except service.LastAdminKeyError as exc:
        raise ConflictError(str(exc).capitalize() + ".", slug="last-admin-key") from exc
    return Response(status_code=status.HTTP_204_NO_CONTENT)
