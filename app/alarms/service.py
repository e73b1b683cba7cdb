"""Alarms, webhooks and the outbox. Never commits: callers own the transaction, so an event and
its webhook messages are stored together or not at all.

Functions for the engine (period runner, deliverer):

- :func:`fire_alarm` records an alarm and enqueues ``alarm.firing``;
- :func:`resolve_open_alarms` resolves a monitor's open alarms and enqueues ``alarm.resolved``;
- :func:`monitor_event_data` builds the data of ``monitor.degraded`` / ``monitor.completed``;
- :func:`enqueue_event` inserts one outbox row per enabled webhook subscribed to the event.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.alarms.schemas import AlarmRead, WebhookCreate, WebhookUpdate
from app.alarms.verdict import alarm_verdict
from app.api.errors import ConflictError, InvalidInputError, NotFoundError
from app.api.pagination import SortKey, paginate
from app.api.urls import destination_problem
from app.auth.service import generate_signing_secret
from app.db import utcnow
from app.models.alarms import (
    EVENT_TYPES,
    TEST_EVENT_TYPE,
    Alarm,
    Webhook,
    WebhookAttempt,
    WebhookMessage,
)
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.settings import Settings
from app.stats.claims import PureDP, parse_claim
from app.stats.evidence import VALIDITY_WORDS

ALERT_NAME = "DifferentialPrivacyViolation"
log = structlog.get_logger("dpwatch.alarms")


# ---------------------------------------------------------------------------------------- outbox


def envelope(event_type: str, data: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The Standard Webhooks body: ``{"type", "timestamp", "data"}``."""
    return {"type": event_type, "timestamp": now.isoformat().replace("+00:00", "Z"), "data": data}


def enqueue_event(
    session: Session,
    tenant_id: uuid.UUID,
    event_type: str,
    payload: dict[str, Any],
    *,
    now: datetime | None = None,
) -> list[WebhookMessage]:
    """Insert one pending ``webhook_messages`` row per enabled webhook of the tenant subscribed to
    ``event_type``. ``payload`` is the event's ``data``; the stored body is its envelope."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}; expected one of {EVENT_TYPES}")
    now = now or utcnow()
    webhooks = session.scalars(
        select(Webhook).where(Webhook.tenant_id == tenant_id, Webhook.enabled.is_(True)).order_by(Webhook.created_at)
    ).all()
    body = envelope(event_type, payload, now)
    messages = [
        WebhookMessage(
            tenant_id=tenant_id,
            webhook_id=webhook.id,
            event_type=event_type,
            payload=body,
            created_at=now,
            status="pending",
            attempts=0,
            next_attempt_at=now,
        )
        for webhook in webhooks
        if event_type in webhook.event_types
    ]
    session.add_all(messages)
    session.flush()
    return messages


# ---------------------------------------------------------------------------------------- alarms


def alarm_fingerprint(monitor_id: uuid.UUID, check_id: uuid.UUID, horizon_index: int) -> str:
    """Stable key of an alarm's group (Alertmanager's ``fingerprint``): one per check and horizon."""
    return hashlib.sha256(f"{monitor_id}:{check_id}:{horizon_index}".encode()).hexdigest()[:16]


def contract_fingerprint(monitor_id: uuid.UUID, breach: str) -> str:
    """One contract alarm per monitor and breach kind (type, length, support) until it is resolved."""
    return hashlib.sha256(f"{monitor_id}:contract:{breach}".encode()).hexdigest()[:16]


def alarm_status(alarm: Alarm) -> str:
    return "resolved" if alarm.resolved_at is not None else "firing"


def to_alarm_read(alarm: Alarm) -> AlarmRead:
    data = {c: getattr(alarm, c) for c in AlarmRead.model_fields if c not in ("status", "archived", "verdict")}
    data["monitor_id"] = alarm.monitor_id or alarm.origin_monitor_id
    return AlarmRead.model_validate({**data, "status": alarm_status(alarm), "archived": alarm.archived_at is not None,
                                     "verdict": alarm_verdict(alarm)})


def archive_monitor_alarms(session: Session, monitor: Monitor, *, now: datetime | None = None) -> int:
    """Before a monitor is deleted: mark its alarms archived, keeping its id and name on them (the
    foreign keys to the monitor, its checks and periods become null when those rows go)."""
    result = session.execute(
        update(Alarm)
        .where(Alarm.monitor_id == monitor.id)
        .values(archived_at=now or utcnow(), origin_monitor_id=monitor.id, monitor_name=monitor.name)
    )
    return int(result.rowcount or 0)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _claim_of(monitor: Monitor, check: Check) -> dict[str, Any]:
    from app.claims.service import effective_claim

    return effective_claim(check.claim, monitor.claim, monitor.epsilon)




CONTRACT_ALERT_NAME = "OutputContractBreach"


def _evidence_statement(alarm: Alarm) -> str | None:
    evidence = alarm.evidence or {}
    return evidence.get("statement") if isinstance(evidence, dict) else None


def _headline_bound(alarm: Alarm) -> str | None:
    """The check's headline lower bound in words, with what it is valid for (the payload's annotation
    ``headline_bound``): the webhook's number never reads as independent evidence."""
    evidence = alarm.evidence if isinstance(alarm.evidence, dict) else {}
    check = evidence.get("check") if isinstance(evidence.get("check"), dict) else {}
    lb = check.get("lower_bound")
    if not isinstance(lb, (int, float)):
        return None
    validity = check.get("validity") or ("across_runs" if check.get("method") == "confidence_sequence"
                                         else "descriptive")
    conf = check.get("confidence")
    level = f" at {100 * conf:g}% confidence" if isinstance(conf, (int, float)) and validity != "descriptive" else ""
    text = f"{check.get('parameter') or 'ε'} > {lb:.3g}{level} ({VALIDITY_WORDS.get(validity, validity)})"
    confirmation = evidence.get("confirmation") if isinstance(evidence.get("confirmation"), dict) else None
    if confirmation is None:
        return text + "; the confirmation on fresh outputs, valid given the alarm, follows"
    return text + ("; confirmed" if confirmation.get("confirms") else "; not confirmed") + " on fresh outputs"


def _crossed(monitor: Monitor) -> str:
    """What crossed its threshold, in the alarm's description, by the monitor's detector."""
    if monitor.detector == "e-process":
        return f"The e-process reached 1/α at level {monitor.horizon_alpha:g} (valid at every period)"
    if monitor.detector == "e-detector":
        return "The e-detector crossed its threshold (an ARL-controlled detection)"
    return f"The weighted statistic crossed the level-{monitor.horizon_alpha:g} threshold"


def alarm_event_data(alarm: Alarm, monitor: Monitor, check: Check | None, settings: Settings) -> dict[str, Any]:
    """The data of ``alarm.firing`` / ``alarm.resolved``, shaped like an Alertmanager alert.

    ``evidence`` carries what raised the alarm first (the check's window and its bound on the
    claim's parameter, or the contract breach), then the MPL snapshot labelled as a separate
    estimator."""
    status = alarm_status(alarm)
    labels = {
        "alertname": ALERT_NAME if alarm.kind == "privacy" else CONTRACT_ALERT_NAME,
        "kind": alarm.kind,
        "monitor_id": str(monitor.id),
        "monitor": monitor.name,
        "mechanism_id": str(monitor.mechanism_id),
        "horizon_index": str(alarm.horizon_index),
    }
    statement = _evidence_statement(alarm)
    claim: dict[str, Any] | None = None
    if alarm.kind == "contract":
        contract = (alarm.evidence or {}).get("contract") or {}
        summary = (f"Monitor {monitor.name!r}: the mechanism's outputs broke their contract "
                   f"({contract.get('breach', 'breach')}) in period {alarm.t} of horizon {alarm.horizon_index}")
        description = statement or contract.get("detail") or summary
    else:
        assert check is not None
        claim = alarm.claim or _claim_of(monitor, check)
        parsed = parse_claim(claim)
        claimed = parsed.describe()
        what = (f"exceeds its claimed epsilon={parsed.epsilon:g}" if isinstance(parsed, PureDP)
                else f"contradicts its claim {claimed}")
        labels["check_id"] = str(check.id)
        labels["check_position"] = str(check.position)
        labels["claim"] = claimed
        summary = (
            f"Monitor {monitor.name!r}: check {check.position} {what} "
            f"(M_t={alarm.statistic:.3f} > threshold {alarm.threshold:.3f} "
            f"at period {alarm.t} of horizon {alarm.horizon_index})"
        )
        description = (
            f"In period {alarm.t}, {alarm.a} of {alarm.n} outputs on x and {alarm.b} of {alarm.n} on x' fell in "
            f"the check's event (z={alarm.z:.3f}). {_crossed(monitor)}, so the mechanism is unlikely to satisfy "
            f"{'epsilon=' + format(parsed.epsilon, 'g') + '-DP' if isinstance(parsed, PureDP) else claimed} on this pair."
        )
        if statement:
            description += " " + statement
    read = to_alarm_read(alarm)
    verdict = read.verdict
    annotations = {"summary": summary, "description": description}
    if verdict is not None:  # the one conclusion (app/alarms/verdict.py)
        annotations = {"verdict": verdict.sentence, **annotations}
    headline = _headline_bound(alarm) if alarm.kind == "privacy" else None
    if headline is not None:
        annotations["headline_bound"] = headline
        if alarm.kind != "contract":
            # route on it: "true" when the fresh outputs drawn after the alarm contradict the claim
            labels["confirmed"] = {True: "true", False: "false"}.get(verdict.confirmed, "none")
    return {
        "status": status,
        "labels": labels,
        "annotations": annotations,
        "startsAt": _iso(alarm.created_at),
        "endsAt": _iso(alarm.resolved_at),
        "fingerprint": alarm.fingerprint,
        # The alarm's page in the dashboard (a person follows it; the JSON is /v1/alarms/{id}).
        "generatorURL": f"{settings.public_url.rstrip('/')}/ui/alarms/{alarm.id}",
        "alarm": read.model_dump(mode="json"),
        "verdict": None if verdict is None else verdict.model_dump(mode="json"),
        "evidence": alarm.evidence,
        "claim": claim,
    }


def fire_alarm(
    session: Session,
    monitor: Monitor,
    check: Check,
    period_run: PeriodRun,
    period_check: PeriodCheck,
    settings: Settings,
    *,
    now: datetime | None = None,
    notify: bool = True,
    evidence: dict[str, Any] | None = None,
) -> Alarm:
    """Record the privacy alarm of ``check`` in ``period_run`` (with the ``evidence`` that raised it,
    app.stats.evidence) and enqueue its ``alarm.firing`` messages.

    With ``notify=False`` the messages are left to the caller: the engine sends them once the
    alarm's MPL snapshot is done, so that they carry its evidence too (:func:`notify_alarm`)."""
    now = now or utcnow()
    if period_run.t is None:
        raise ValueError("a failed period (t is None) cannot raise an alarm")
    alarm = Alarm(
        tenant_id=monitor.tenant_id,
        monitor_id=monitor.id,
        origin_monitor_id=monitor.id,
        monitor_name=monitor.name,
        kind="privacy",
        check_id=check.id,
        period_run_id=period_run.id,
        horizon_index=period_run.horizon_index,
        t=period_run.t,
        statistic=period_check.statistic,
        threshold=period_check.threshold,
        a=period_check.a,
        b=period_check.b,
        n=period_check.n,
        z=period_check.z,
        created_at=now,
        fingerprint=alarm_fingerprint(monitor.id, check.id, period_run.horizon_index),
        claim=period_check.claim or _claim_of(monitor, check),
        evidence=evidence,
    )
    session.add(alarm)
    session.flush()
    if notify:
        notify_alarm(session, alarm, monitor, check, settings, now=now)
    return alarm


def fire_contract_alarm(session: Session, monitor: Monitor, period_run: PeriodRun, contract: dict[str, Any],
                        settings: Settings, *, now: datetime | None = None) -> Alarm:
    """Record a contract alarm (the outputs broke the mechanism's output contract) with the breach
    and an offending output, and enqueue its ``alarm.firing`` messages at once."""
    now = now or utcnow()
    statement = (f"The mechanism's outputs broke their contract ({contract.get('breach')}): "
                 f"{contract.get('detail')}")
    alarm = Alarm(
        tenant_id=monitor.tenant_id, monitor_id=monitor.id, origin_monitor_id=monitor.id, monitor_name=monitor.name,
        kind="contract", check_id=None,
        period_run_id=period_run.id, horizon_index=period_run.horizon_index, t=period_run.t or monitor.t,
        created_at=now,
        fingerprint=contract_fingerprint(monitor.id, str(contract.get("breach"))),
        evidence={"kind": "contract", "statement": statement, "check": None, "contract": contract,
                  "snapshot": None},
    )
    session.add(alarm)
    session.flush()
    notify_alarm(session, alarm, monitor, None, settings, now=now)
    return alarm


def silenced(session: Session, alarm: Alarm, monitor: Monitor) -> bool:
    """Whether a silence (app/silences) matched ``alarm`` when it fired: its webhooks are not sent."""
    from app.silences.service import matching_silence

    found = matching_silence(session, alarm.tenant_id, monitor_id=monitor.id, mechanism_id=monitor.mechanism_id,
                             kind=alarm.kind, at=alarm.created_at)
    if found is not None:
        log.info("alarm.silenced", alarm_id=str(alarm.id), silence_id=str(found.id), monitor_id=str(monitor.id))
    return found is not None


def notify_alarm(session: Session, alarm: Alarm, monitor: Monitor, check: Check | None, settings: Settings, *,
                 now: datetime | None = None) -> list[WebhookMessage]:
    """Enqueue the ``alarm.firing`` messages of ``alarm`` (with its evidence, when it has some),
    unless a silence matched it when it fired: then none (the alarm itself stays recorded)."""
    if silenced(session, alarm, monitor):
        return []
    return enqueue_event(session, monitor.tenant_id, "alarm.firing", alarm_event_data(alarm, monitor, check, settings),
                         now=now)


def resolve_open_alarms(
    session: Session, monitor: Monitor, settings: Settings, *, now: datetime | None = None
) -> list[Alarm]:
    """Mark every open alarm of ``monitor`` resolved and enqueue one ``alarm.resolved`` per alarm."""
    now = now or utcnow()
    alarms = session.scalars(
        select(Alarm).where(Alarm.monitor_id == monitor.id, Alarm.resolved_at.is_(None)).order_by(Alarm.created_at)
    ).all()
    if not alarms:
        return []
    checks = {c.id: c for c in session.scalars(select(Check).where(Check.monitor_id == monitor.id))}
    for alarm in alarms:
        alarm.resolved_at = now
    session.flush()
    for alarm in alarms:
        if silenced(session, alarm, monitor):  # its firing was not sent: nor is its resolution
            continue
        enqueue_event(
            session,
            monitor.tenant_id,
            "alarm.resolved",
            alarm_event_data(alarm, monitor, checks.get(alarm.check_id) if alarm.check_id else None, settings),
            now=now,
        )
    return list(alarms)


def monitor_event_data(monitor: Monitor, settings: Settings, **details: Any) -> dict[str, Any]:
    """The data of ``monitor.degraded`` and ``monitor.completed``; ``details`` adds context
    (e.g. ``failure_reason=…`` for degraded, ``max_statistic=…`` for completed)."""
    return {
        "monitor_id": str(monitor.id),
        "monitor": monitor.name,
        "mechanism_id": str(monitor.mechanism_id),
        "state": monitor.state,
        "horizon_index": monitor.horizon_index,
        "t": monitor.t,
        "horizon": monitor.horizon,
        "consecutive_failures": monitor.consecutive_failures,
        "generatorURL": f"{settings.public_url.rstrip('/')}/ui/monitors/{monitor.id}",
        **details,
    }


def get_alarm(session: Session, tenant_id: uuid.UUID, alarm_id: uuid.UUID) -> Alarm:
    alarm = session.scalar(select(Alarm).where(Alarm.id == alarm_id, Alarm.tenant_id == tenant_id))
    if alarm is None:
        raise NotFoundError(f"Alarm {alarm_id} not found.")
    return alarm


def list_alarms(
    session: Session,
    tenant_id: uuid.UUID,
    *,
    monitor_id: uuid.UUID | None = None,
    acknowledged: bool | None = None,
    resolved: bool | None = None,
    kind: str | None = None,
    archived: bool = False,
    limit: int,
    cursor: str | None,
    created_after: datetime | None = None,
) -> tuple[list[Alarm], str | None]:
    stmt = select(Alarm).where(Alarm.tenant_id == tenant_id)
    if created_after is not None:
        stmt = stmt.where(Alarm.created_at >= created_after)
    stmt = stmt.where(Alarm.archived_at.is_not(None) if archived else Alarm.archived_at.is_(None))
    if kind is not None:
        stmt = stmt.where(Alarm.kind == kind)
    if monitor_id is not None:
        stmt = stmt.where(or_(Alarm.monitor_id == monitor_id, Alarm.origin_monitor_id == monitor_id))
    if acknowledged is not None:
        stmt = stmt.where(Alarm.acknowledged_at.is_not(None) if acknowledged else Alarm.acknowledged_at.is_(None))
    if resolved is not None:
        stmt = stmt.where(Alarm.resolved_at.is_not(None) if resolved else Alarm.resolved_at.is_(None))
    return paginate(session, stmt, [SortKey(Alarm.created_at, "datetime"), SortKey(Alarm.id, "uuid")], limit, cursor)


def acknowledge_alarm(session: Session, alarm: Alarm, note: str | None, *, now: datetime | None = None) -> Alarm:
    if alarm.acknowledged_at is not None:
        raise ConflictError(f"Alarm {alarm.id} was already acknowledged at {_iso(alarm.acknowledged_at)}.")
    alarm.acknowledged_at = now or utcnow()
    alarm.acknowledged_note = note
    session.flush()
    return alarm


# -------------------------------------------------------------------------------------- webhooks


def _check_destination(url: str, settings: Settings) -> None:
    problem = destination_problem(url, settings)
    if problem is not None:
        raise InvalidInputError(f"url: {problem}.", field=["body", "url"], error_type="url_not_allowed")


def create_webhook(session: Session, tenant_id: uuid.UUID, data: WebhookCreate, settings: Settings) -> Webhook:
    _check_destination(data.url, settings)
    webhook = Webhook(
        tenant_id=tenant_id,
        url=data.url,
        event_types=list(data.event_types),
        secret=generate_signing_secret(),
        enabled=True,
    )
    session.add(webhook)
    session.flush()
    return webhook


def get_webhook(session: Session, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> Webhook:
    webhook = session.scalar(select(Webhook).where(Webhook.id == webhook_id, Webhook.tenant_id == tenant_id))
    if webhook is None:
        raise NotFoundError(f"Webhook {webhook_id} not found.")
    return webhook


def list_webhooks(
    session: Session, tenant_id: uuid.UUID, *, limit: int, cursor: str | None
) -> tuple[list[Webhook], str | None]:
    stmt = select(Webhook).where(Webhook.tenant_id == tenant_id)
    return paginate(
        session, stmt, [SortKey(Webhook.created_at, "datetime"), SortKey(Webhook.id, "uuid")], limit, cursor
    )


def update_webhook(session: Session, webhook: Webhook, data: WebhookUpdate, settings: Settings) -> Webhook:
    changes = data.model_dump(exclude_unset=True)
    for name in ("url", "event_types", "enabled"):
        if name in changes and changes[name] is None:
            raise InvalidInputError(f"{name} cannot be null; omit it to keep the current value.", field=["body", name])
    if "url" in changes:
        _check_destination(changes["url"], settings)
        webhook.url = changes["url"]
    if "event_types" in changes:
        webhook.event_types = list(changes["event_types"])
    if "enabled" in changes:
        webhook.enabled = changes["enabled"]
        if webhook.enabled:
            webhook.disabled_reason = None
    session.flush()
    return webhook


def delete_webhook(session: Session, webhook: Webhook) -> None:
    """Delete the webhook with its messages and their attempt log (FK cascade)."""
    session.delete(webhook)
    session.flush()


def enqueue_test_message(session: Session, webhook: Webhook, *, now: datetime | None = None) -> WebhookMessage:
    """A ``webhook.test`` message to this one webhook, whatever it subscribes to."""
    if not webhook.enabled:
        raise ConflictError(
            f"Webhook {webhook.id} is disabled ({webhook.disabled_reason or 'by request'}); enable it first."
        )
    now = now or utcnow()
    message = WebhookMessage(
        tenant_id=webhook.tenant_id,
        webhook_id=webhook.id,
        event_type=TEST_EVENT_TYPE,
        payload=envelope(
            TEST_EVENT_TYPE,
            {"webhook_id": str(webhook.id), "message": "Test message from dpwatch; no action needed."},
            now,
        ),
        created_at=now,
        status="pending",
        attempts=0,
        next_attempt_at=now,
    )
    session.add(message)
    session.flush()
    return message


def redeliver_message(session: Session, webhook: Webhook, message_id: str, *,
                      now: datetime | None = None) -> WebhookMessage:
    """Queue a message of ``webhook`` again: a new message (its own ``webhook-id``, so receivers that
    deduplicate see a new delivery) with the same body, sent by the deliverer like any other.
    409 if the webhook is disabled."""
    original = session.scalar(select(WebhookMessage).where(WebhookMessage.id == message_id,
                                                           WebhookMessage.webhook_id == webhook.id))
    if original is None:
        raise NotFoundError(f"Delivery {message_id} of webhook {webhook.id} not found.")
    if not webhook.enabled:
        raise ConflictError(
            f"Webhook {webhook.id} is disabled ({webhook.disabled_reason or 'by request'}); enable it first."
        )
    now = now or utcnow()
    message = WebhookMessage(tenant_id=webhook.tenant_id, webhook_id=webhook.id, event_type=original.event_type,
                             payload=original.payload, created_at=now, status="pending", attempts=0,
                             next_attempt_at=now)
    session.add(message)
    session.flush()
    return message


def list_deliveries(
    session: Session, webhook: Webhook, *, limit: int, cursor: str | None
) -> tuple[list[tuple[WebhookMessage, list[WebhookAttempt]]], str | None]:
    """The webhook's messages, newest first, each with its attempts (oldest first)."""
    stmt = select(WebhookMessage).where(WebhookMessage.webhook_id == webhook.id)
    messages, next_cursor = paginate(
        session,
        stmt,
        [SortKey(WebhookMessage.created_at, "datetime"), SortKey(WebhookMessage.id, "str")],
        limit,
        cursor,
    )
    attempts: dict[str, list[WebhookAttempt]] = {m.id: [] for m in messages}
    if messages:
        rows = session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.message_id.in_(list(attempts)))
            .order_by(WebhookAttempt.attempted_at, WebhookAttempt.id)
        )
        for attempt in rows:
            attempts[attempt.message_id].append(attempt)
    return [(m, attempts[m.id]) for m in messages], next_cursor
