"""/v1/alarms and /v1/webhooks."""

from __future__ import annotations

import uuid
from typing import Annotated

import structlog
from fastapi import APIRouter, Body, Path, Query, Response, status

from app.alarms import service
from app.alarms.schemas import (
    AcknowledgeRequest,
    AlarmKind,
    AlarmRead,
    AttemptRead,
    DeliveryRead,
    WebhookCreate,
    WebhookCreated,
    WebhookRead,
    WebhookUpdate,
)
from app.api.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.pagination import CursorQuery, LimitQuery, MessageCursorQuery, Page
from app.auth.rotation import rotate_secret
from app.auth.schemas import RotateSecret, SecretRotated
from app.auth.service import generate_signing_secret

log = structlog.get_logger("dpwatch.webhooks")

alarms_router = APIRouter(prefix="/alarms", tags=["alarms"])
webhooks_router = APIRouter(prefix="/webhooks", tags=["webhooks"])


@alarms_router.get(
    "",
    response_model=Page[AlarmRead],
    summary="List alarms",
    description="This tenant's alarms, newest first. Deleting a monitor archives its alarms rather than deleting "
    "them: they keep the monitor's id and name and are listed with `?archived=true`.",
    responses=problem_responses(401, 422),
)
def list_alarms(
    principal: CurrentPrincipal,
    session: SessionDep,
    monitor_id: Annotated[uuid.UUID | None, Query(description="Only alarms of this monitor.")] = None,
    acknowledged: Annotated[
        bool | None, Query(description="true: only acknowledged; false: only unacknowledged.")
    ] = None,
    resolved: Annotated[bool | None, Query(description="true: only resolved; false: only firing.")] = None,
    kind: Annotated[AlarmKind | None, Query(description="Only `privacy` or only `contract` alarms.")] = None,
    archived: Annotated[bool, Query(description="false (default): alarms of existing monitors; true: only the "
                                    "archived alarms of deleted monitors.")] = False,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[AlarmRead]:
    alarms, next_cursor = service.list_alarms(
        session,
        principal.tenant_id,
        monitor_id=monitor_id,
        acknowledged=acknowledged,
        resolved=resolved,
        kind=kind,
        archived=archived,
        limit=limit,
        cursor=cursor,
    )
    return Page[AlarmRead](items=[service.to_alarm_read(a) for a in alarms], next_cursor=next_cursor)


@alarms_router.get(
    "/{alarm_id}",
    response_model=AlarmRead,
    summary="Get an alarm",
    responses=problem_responses(401, 404, 422),
)
def get_alarm(alarm_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> AlarmRead:
    return service.to_alarm_read(service.get_alarm(session, principal.tenant_id, alarm_id))


@alarms_router.post(
    "/{alarm_id}/acknowledge",
    response_model=AlarmRead,
    summary="Acknowledge an alarm",
    description="Record that someone has seen the alarm, with an optional note. Acknowledging does "
    "not resolve it: resetting the monitor does. 409 if already acknowledged.",
    responses=problem_responses(401, 404, 409, 422),
)
def acknowledge_alarm(
    alarm_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: SessionDep,
    body: Annotated[AcknowledgeRequest | None, Body()] = None,
) -> AlarmRead:
    alarm = service.get_alarm(session, principal.tenant_id, alarm_id)
    service.acknowledge_alarm(session, alarm, body.note if body else None)
    return service.to_alarm_read(alarm)


@webhooks_router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WebhookCreated,
    summary="Create a webhook",
    description="Subscribe a URL to events. Deliveries follow Standard Webhooks: headers "
    "`webhook-id`, `webhook-timestamp`, `webhook-signature`, signed with the `secret` returned "
    'here once. Bodies are `{"type", "timestamp", "data"}`; for alarms, `data` has the '
    "shape of an Alertmanager alert (status, labels, annotations, startsAt, endsAt, fingerprint, "
    "generatorURL).",
    responses=problem_responses(401, 422),
)
def create_webhook(
    body: WebhookCreate, principal: CurrentPrincipal, session: SessionDep, settings: SettingsDep
) -> WebhookCreated:
    webhook = service.create_webhook(session, principal.tenant_id, body, settings)
    return WebhookCreated.model_validate({**WebhookRead.model_validate(webhook).model_dump(), "secret": webhook.secret})


@webhooks_router.get(
    "",
    response_model=Page[WebhookRead],
    summary="List webhooks",
    responses=problem_responses(401, 422),
)
def list_webhooks(
    principal: CurrentPrincipal, session: SessionDep, limit: LimitQuery = 50, cursor: CursorQuery = None
) -> Page[WebhookRead]:
    webhooks, next_cursor = service.list_webhooks(session, principal.tenant_id, limit=limit, cursor=cursor)
    return Page[WebhookRead](items=[WebhookRead.model_validate(w) for w in webhooks], next_cursor=next_cursor)


@webhooks_router.get(
    "/{webhook_id}",
    response_model=WebhookRead,
    summary="Get a webhook",
    description="The webhook's subscription. The secret is never returned again.",
    responses=problem_responses(401, 404, 422),
)
def get_webhook(webhook_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> WebhookRead:
    return WebhookRead.model_validate(service.get_webhook(session, principal.tenant_id, webhook_id))


@webhooks_router.patch(
    "/{webhook_id}",
    response_model=WebhookRead,
    summary="Update a webhook",
    description="Change the URL or the events, or re-enable a webhook (`enabled: true`) that the deliverer disabled.",
    responses=problem_responses(401, 404, 422),
)
def update_webhook(
    webhook_id: uuid.UUID, body: WebhookUpdate, principal: CurrentPrincipal, session: SessionDep, settings: SettingsDep
) -> WebhookRead:
    webhook = service.get_webhook(session, principal.tenant_id, webhook_id)
    return WebhookRead.model_validate(service.update_webhook(session, webhook, body, settings))


@webhooks_router.delete(
    "/{webhook_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a webhook",
    description="Delete the webhook and its delivery log; pending messages are dropped.",
    responses=problem_responses(401, 404, 422),
)
def delete_webhook(webhook_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> Response:
    service.delete_webhook(session, service.get_webhook(session, principal.tenant_id, webhook_id))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _delivery(message: object, attempts: list[object]) -> DeliveryRead:
    data = {name: getattr(message, name) for name in DeliveryRead.model_fields if name != "attempt_log"}
    return DeliveryRead.model_validate({**data, "attempt_log": [AttemptRead.model_validate(a) for a in attempts]})


@webhooks_router.post(
    "/{webhook_id}/test",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeliveryRead,
    summary="Send a test message",
    description="Queue a message of type `webhook.test` to this webhook only, whatever events it "
    "subscribes to; its delivery appears under `/deliveries`. 409 if the webhook is disabled.",
    responses=problem_responses(401, 404, 409, 422),
)
def test_webhook(webhook_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> DeliveryRead:
    webhook = service.get_webhook(session, principal.tenant_id, webhook_id)
    return _delivery(service.enqueue_test_message(session, webhook), [])


@webhooks_router.get(
    "/{webhook_id}/deliveries",
    response_model=Page[DeliveryRead],
    summary="List a webhook's deliveries",
    description="Messages for this webhook, newest first, with their status, last status code, "
    "number of attempts and the log of every attempt.",
    responses=problem_responses(401, 404, 422),
)
def list_deliveries(
    webhook_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: MessageCursorQuery = None,
) -> Page[DeliveryRead]:
    webhook = service.get_webhook(session, principal.tenant_id, webhook_id)
    rows, next_cursor = service.list_deliveries(session, webhook, limit=limit, cursor=cursor)
    return Page[DeliveryRead](items=[_delivery(m, a) for m, a in rows], next_cursor=next_cursor)


@webhooks_router.post(
    "/{webhook_id}/deliveries/{message_id}/redeliver",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeliveryRead,
    summary="Re-deliver a message",
    description="Queue a delivered, failed or pending message of this webhook again, with the same body, as a new "
    "message (a new `webhook-id`); it appears under `/deliveries`. 404 if the message is not this webhook's, 409 if "
    "the webhook is disabled.",
    responses=problem_responses(401, 403, 404, 409, 422),
)
def redeliver(webhook_id: uuid.UUID, message_id: Annotated[str, Path(max_length=64)], principal: CurrentPrincipal,
              session: SessionDep) -> DeliveryRead:
    webhook = service.get_webhook(session, principal.tenant_id, webhook_id)
    return _delivery(service.redeliver_message(session, webhook, message_id), [])


@webhooks_router.post(
    "/{webhook_id}/rotate-secret",
    response_model=SecretRotated,
    summary="Rotate a webhook's secret",
    description="A new `whsec_` secret, shown in this answer only. For `grace_seconds` (default 24 h) "
    "every delivery carries two signatures in `webhook-signature`, `v1,<new> v1,<old>` (Standard "
    "Webhooks allows a space-separated list), so a receiver verifying with either secret accepts it; "
    "switch the receiver to the new secret within that time. Rotating again during a grace period "
    "drops the older secret at once: only the last two are ever live. The body may be omitted.",
    responses=problem_responses(401, 403, 404, 422),
)
def rotate_webhook_secret(
    webhook_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: SessionDep,
    body: Annotated[RotateSecret | None, Body()] = None,
) -> SecretRotated:
    webhook = service.get_webhook(session, principal.tenant_id, webhook_id)
    new_secret = generate_signing_secret()
    expires = rotate_secret(webhook, new_secret, (body or RotateSecret()).grace_seconds)
    session.flush()
    log.info("webhook.secret_rotated", webhook_id=str(webhook.id), previous_valid_until=expires and expires.isoformat())
    return SecretRotated(id=webhook.id, secret=new_secret, previous_secret_expires_at=expires)
