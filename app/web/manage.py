"""Create and change from the dashboard: mechanisms (with their probe), monitors, webhooks (and
re-delivery), API keys and silences.

Each form is read into the API's own request model and handed to the function the JSON route
calls (:mod:`app.web.forms`), so the page shows the API's own validation errors beside each field.
Every form is a CSRF-checked POST (:func:`app.web.pages.checked_form`); every query and every
service call is scoped to the session's tenant; only an ``admin`` key may submit them
(:func:`app.web.permissions.may_change_monitor`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select

from app.api.deps import SessionDep, SettingsDep
from app.api.errors import ProblemError
from app.db import utcnow
from app.models.alarms import EVENT_TYPES, Webhook
from app.models.auth import ApiKey
from app.models.mechanisms import Mechanism
from app.models.monitors import Monitor
from app.web import forms
from app.web.forms import silence_defaults
from app.web.pages import (
    CheckedForm,
    Forbidden,
    WebPrincipal,
    redirect_with,
    render,
    require_change,
)

OUTPUT_KINDS = [("real", "real (one number)"), ("discrete", "discrete (categories)"), ("vector", "vector")]
DEFAULT_EVENT = '{"kind": "auto"}'


def _prober(request: Request) -> Any:
    from app.mechanisms.router import get_prober

    override = request.app.dependency_overrides.get(get_prober, get_prober)
    return override()


def _mechanism_options(session: Any, tenant_id: uuid.UUID) -> list[tuple[str, str]]:
    rows = session.execute(select(Mechanism.id, Mechanism.name).where(Mechanism.tenant_id == tenant_id)
                           .order_by(Mechanism.name)).all()
    return [(str(i), n) for i, n in rows]


def _monitor_options(session: Any, tenant_id: uuid.UUID) -> list[tuple[str, str]]:
    rows = session.execute(select(Monitor.id, Monitor.name).where(Monitor.tenant_id == tenant_id)
                           .order_by(Monitor.name).limit(500)).all()
    return [(str(i), n) for i, n in rows]


def _number(text: str | None) -> Any:
    """A numeric form field as the API would receive it from JSON: a number, or the text itself
    (so that the API's own message, e.g. "Input should be a valid number", is shown)."""
    value = forms.blank_to_none(text)
    if value is None:
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            continue
    return value


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


T = TypeVar("T")


def _attempt(session: Any, call: Callable[[], T]) -> tuple[T | None, ProblemError | None]:
    """Run the API's own service call for a form: its result, or the problem it raised after undoing
    whatever it flushed (the page is rendered with the errors, not an exception raised)."""
    try:
        return call(), None
    except ProblemError as exc:
        session.rollback()
        return None, exc


def build_manage_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    # ------------------------------------------------------------------ mechanisms

    def mechanisms_view(request: Request, principal: Any, session: Any, *, values: dict[str, Any] | None = None,
                        errors: forms.Errors | None = None, created: dict[str, Any] | None = None,
                        status_code: int = 200) -> HTMLResponse:
        rows = list(session.scalars(select(Mechanism).where(Mechanism.tenant_id == principal.tenant_id)
                                    .order_by(Mechanism.created_at.desc()).limit(200)))
        return render(request, "mechanisms.html", {
            "mechanisms": rows, "values": values or {"output_kind": "real", "max_batch": "10000",
                                                     "timeout_seconds": "10", "validate": True},
            "errors": errors or {}, "created": created, "output_kinds": OUTPUT_KINDS,
        }, session=session, status_code=status_code)

    @router.get("/ui/mechanisms")
    def mechanisms_page(request: Request, principal: WebPrincipal, session: SessionDep) -> HTMLResponse:
        return mechanisms_view(request, principal, session)

    @router.post("/ui/mechanisms")
    def create_mechanism(request: Request, principal: WebPrincipal, session: SessionDep, settings: SettingsDep,
                         fields: CheckedForm) -> Response:
        from app.mechanisms.router import create_mechanism as api_create
        from app.mechanisms.schemas import MechanismCreate

        require_change(principal)
        errors: forms.Errors = {}
        probe_database = forms.json_field(fields, "probe_database", errors)
        body = {"name": fields.get("name", "").strip(), "sampling_url": fields.get("sampling_url", "").strip(),
                "output_kind": fields.get("output_kind") or "real", "dim": _number(fields.get("dim")),
                "max_batch": _or(_number(fields.get("max_batch")), 10_000),
                "timeout_seconds": _or(_number(fields.get("timeout_seconds")), 10.0),
                "prefer_binary": fields.get("prefer_binary") == "true"}
        if probe_database is not None:
            body["probe_database"] = probe_database
        validate = fields.get("validate") == "true"
        model, found = forms.parse(MechanismCreate, body)
        errors = {**found, **errors}
        names = {"name", "sampling_url", "output_kind", "dim", "max_batch", "timeout_seconds", "probe_database"}
        if model is not None and not errors:
            created, problem = _attempt(
                session, lambda: api_create(model, principal, session, settings, _prober(request), validate))
            if problem is None:
                return mechanisms_view(request, principal, session, created=created.model_dump(mode="json"),
                                       status_code=201)
            errors = forms.problem_errors(problem)
            if problem.slug == "endpoint-validation-failed":  # the probe's answer, beside the URL
                errors.setdefault(forms.GENERAL, []).append(problem.detail)
        return mechanisms_view(request, principal, session, values=fields,
                               errors=forms.orphaned(errors, names), status_code=422)

    # ------------------------------------------------------------------ monitors

    def monitor_form(request: Request, principal: Any, session: Any, *, values: dict[str, Any] | None = None,
                     errors: forms.Errors | None = None, status_code: int = 200) -> HTMLResponse:
        return render(request, "monitor_new.html", {
            "values": values or {"epsilon": "1", "alpha": "0.05", "gamma": "0.25", "horizon": "100",
                                 "samples_per_period": "1000", "period_seconds": "60", "event": DEFAULT_EVENT,
                                 "mechanism_id": request.query_params.get("mechanism", "")},
            "errors": errors or {}, "mechanisms": _mechanism_options(session, principal.tenant_id),
        }, session=session, status_code=status_code)

    @router.get("/ui/monitors/new")
    def new_monitor_page(request: Request, principal: WebPrincipal, session: SessionDep) -> HTMLResponse:
        return monitor_form(request, principal, session)

    @router.post("/ui/monitors/new")
    def create_monitor(request: Request, principal: WebPrincipal, session: SessionDep, settings: SettingsDep,
                       fields: CheckedForm) -> Response:
        from app.monitors.router import create_monitor as api_create
        from app.monitors.schemas import MonitorCreate

        require_change(principal)
        errors: forms.Errors = {}
        check: dict[str, Any] = {"x": forms.json_field(fields, "x", errors),
                                 "x_prime": forms.json_field(fields, "x_prime", errors),
                                 "event": forms.json_field(fields, "event", errors, default={"kind": "auto"})}
        for name in ("x", "x_prime"):
            if forms.blank_to_none(fields.get(name)) is None:
                errors.setdefault(name, []).append("This field is required.")
        body: dict[str, Any] = {"name": fields.get("name", "").strip(), "mechanism_id": fields.get("mechanism_id"),
                                "checks": [check], "epsilon": _number(fields.get("epsilon"))}
        delta = _number(fields.get("delta"))
        if delta is not None:
            body["claim"] = {"epsilon": body.pop("epsilon"), "delta": delta}
        for name in ("alpha", "gamma", "horizon", "samples_per_period", "period_seconds"):
            value = _number(fields.get(name))
            if value is not None:
                body[name] = value
        cron = forms.blank_to_none(fields.get("cron"))
        if cron:
            body["cron"] = cron
            body.pop("period_seconds", None)
        model, found = forms.parse(MonitorCreate, body)
        mapping = {"checks.0.x": "x", "checks.0.x_prime": "x_prime", "checks.0.event": "event", "checks": "x",
                   "claim.epsilon": "epsilon", "claim.delta": "delta", "claim": "delta"}
        errors = {**forms.rename(found, mapping), **errors}
        names = {"name", "mechanism_id", "x", "x_prime", "event", "epsilon", "delta", "alpha", "gamma", "horizon",
                 "samples_per_period", "period_seconds", "cron"}
        if model is not None and not errors:
            created, problem = _attempt(session, lambda: api_create(model, principal, session, settings, _prober(request),
                                                                     fields.get("validate") == "true"))
            if problem is not None:
                errors = forms.rename(forms.problem_errors(problem), mapping)
            else:
                warnings = "; ".join(getattr(created, "warnings", None) or [])
                return redirect_with(request, f"/ui/monitors/{created.id}",
                                     "Monitor created; it calibrates, then runs a period every "
                                     + (f"{created.period_seconds} s" if created.period_seconds else f"cron {created.cron}")
                                     + "." + (f" Warnings: {warnings}" if warnings else ""))
        return monitor_form(request, principal, session, values=fields, errors=forms.orphaned(errors, names),
                            status_code=422)

    # ------------------------------------------------------------------ webhooks

    def webhooks_view(request: Request, principal: Any, session: Any, *, values: dict[str, Any] | None = None,
                      errors: forms.Errors | None = None, created: dict[str, Any] | None = None,
                      status_code: int = 200) -> HTMLResponse:
        from app.web.pages import webhook_rows

        hooks, stats = webhook_rows(session, principal.tenant_id)
        return render(request, "webhooks.html", {
            "hooks": hooks, "stats": stats, "event_types": EVENT_TYPES,
            "values": values or {"event_types": ["alarm.firing", "alarm.resolved"]},
            "errors": errors or {}, "created": created,
        }, session=session, status_code=status_code)

    @router.get("/ui/webhooks")
    def webhooks_page(request: Request, principal: WebPrincipal, session: SessionDep) -> HTMLResponse:
        return webhooks_view(request, principal, session)

    @router.post("/ui/webhooks")
    def create_webhook(request: Request, principal: WebPrincipal, session: SessionDep, settings: SettingsDep,
                       fields: CheckedForm) -> Response:
        from app.alarms import service
        from app.alarms.schemas import WebhookCreate

        require_change(principal)
        chosen = request.state.form_lists.get("event_types", [])
        model, errors = forms.parse(WebhookCreate, {"url": fields.get("url", "").strip(), "event_types": chosen})
        errors = forms.rename(errors, {"event_types": "event_types"})
        if model is not None:
            hook, problem = _attempt(session, lambda: service.create_webhook(session, principal.tenant_id, model,
                                                                             settings))
            if problem is None:
                return webhooks_view(request, principal, session, status_code=201,
                                     created={"id": str(hook.id), "url": hook.url, "secret": hook.secret})
            errors = forms.problem_errors(problem)
        values = {**fields, "event_types": chosen}
        return webhooks_view(request, principal, session, values=values,
                             errors=forms.orphaned(errors, {"url", "event_types"}), status_code=422)

    @router.post("/ui/webhooks/{webhook_id}/deliveries/{message_id}/redeliver")
    def redeliver(request: Request, webhook_id: uuid.UUID, message_id: str,
                  principal: WebPrincipal, session: SessionDep, fields: CheckedForm) -> Response:
        from app.alarms import service

        del fields
        require_change(principal)
        hook = service.get_webhook(session, principal.tenant_id, webhook_id)
        back = f"/ui/webhooks/{hook.id}"
        try:
            copy = service.redeliver_message(session, hook, str(message_id)[:64])
        except ProblemError as exc:
            return redirect_with(request, back, exc.detail, error=True)
        return redirect_with(request, back, f"Queued again as {copy.id}: the deliverer sends it with the same body.")

    # ------------------------------------------------------------------ keys

    def keys_view(request: Request, principal: Any, session: Any, *, values: dict[str, Any] | None = None,
                  errors: forms.Errors | None = None, created: dict[str, Any] | None = None,
                  status_code: int = 200) -> HTMLResponse:
        keys = list(session.scalars(select(ApiKey).where(ApiKey.tenant_id == principal.tenant_id)
                                    .order_by(ApiKey.created_at.desc()).limit(200)))
        return render(request, "keys.html", {
            "keys": keys, "values": values or {"scope": "read"}, "errors": errors or {}, "created": created,
            "current_key_id": principal.api_key_id,
        }, session=session, status_code=status_code)

    @router.get("/ui/keys")
    def keys_page(request: Request, principal: WebPrincipal, session: SessionDep) -> HTMLResponse:
        return keys_view(request, principal, session)

    @router.post("/ui/keys")
    def create_key(request: Request, principal: WebPrincipal, session: SessionDep, fields: CheckedForm) -> Response:
        from app.auth.schemas import ApiKeyCreate
        from app.auth.service import create_api_key

        require_change(principal)
        model, errors = forms.parse(ApiKeyCreate, {"name": fields.get("name", "").strip(),
                                                   "scope": fields.get("scope") or "read"})
        if model is not None:
            api_key, plaintext = create_api_key(session, principal.tenant_id, model.name, model.scope)
            return keys_view(request, principal, session, status_code=201,
                             created={"name": api_key.name, "scope": api_key.scope, "key": plaintext})
        return keys_view(request, principal, session, values=fields,
                         errors=forms.orphaned(errors, {"name", "scope"}), status_code=422)

    @router.post("/ui/keys/{key_id}/revoke")
    def revoke_key(request: Request, key_id: uuid.UUID, principal: WebPrincipal, session: SessionDep,
                   fields: CheckedForm) -> Response:
        from app.api.errors import NotFoundError
        from app.auth.service import LastAdminKeyError, revoke_api_key

        del fields
        require_change(principal)
        key = session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.tenant_id == principal.tenant_id))
        if key is None:
            raise NotFoundError(f"API key {key_id} not found.")
        try:
            revoke_api_key(session, key.id)
        except LastAdminKeyError as exc:
            return redirect_with(request, "/ui/keys", str(exc).capitalize() + ": create another admin key first.",
                                 error=True)
        if key.id == principal.api_key_id:
            return redirect_with(request, "/ui/login", "You revoked the key this session used; sign in again.")
        return redirect_with(request, "/ui/keys", f"Key “{key.name}” ({key.prefix}…) revoked: it answers 401 now.")

    # ------------------------------------------------------------------ silences

    def silences_view(request: Request, principal: Any, session: Any, *, values: dict[str, Any] | None = None,
                      errors: forms.Errors | None = None, status_code: int = 200) -> HTMLResponse:
        from app.silences.service import list_silences, state_of

        rows, _ = list_silences(session, principal.tenant_id, limit=200, cursor=None)
        now = utcnow()
        monitors = dict(_monitor_options(session, principal.tenant_id))
        # A silence needs a matcher: the form starts on the first monitor, so that its own defaults are
        # a valid silence once a comment is written ("any monitor" stays one choice away).
        preset = {"monitor_id": next(iter(monitors))} if monitors else {}
        return render(request, "silences.html", {
            "silences": [(s, state_of(s, now)) for s in rows],
            "values": values or silence_defaults(**preset),
            "errors": errors or {},
            "monitors": monitors,
            "mechanisms": dict(_mechanism_options(session, principal.tenant_id)),
        }, session=session, status_code=status_code)

    @router.get("/ui/silences")
    def silences_page(request: Request, principal: WebPrincipal, session: SessionDep) -> HTMLResponse:
        return silences_view(request, principal, session)

    @router.post("/ui/silences")
    def create_silence(request: Request, principal: WebPrincipal, session: SessionDep, fields: CheckedForm) -> Response:
        from app.silences.router import key_label
        from app.silences.schemas import SilenceCreate
        from app.silences.service import create_silence as service_create

        require_change(principal)
        body = {"monitor_id": forms.blank_to_none(fields.get("monitor_id")),
                "mechanism_id": forms.blank_to_none(fields.get("mechanism_id")),
                "kind": forms.blank_to_none(fields.get("kind")),
                "starts_at": forms.utc_field(fields.get("starts_at")),
                "ends_at": forms.utc_field(fields.get("ends_at")),
                "comment": fields.get("comment", "")}
        model, errors = forms.parse(SilenceCreate, body)
        if model is not None:
            silence, problem = _attempt(session, lambda: service_create(session, principal.tenant_id, model,
                                                                         key_label(session, principal.api_key_id)))
            if problem is not None:
                errors = forms.problem_errors(problem)
            else:
                back = forms.blank_to_none(fields.get("next"))
                target = back if back and back.startswith("/ui/") and not back.startswith("//") else "/ui/silences"
                return redirect_with(request, target, f"Silence created until {silence.ends_at:%Y-%m-%d %H:%M} UTC: "
                                     "matching alarms are recorded, their webhooks are not sent.")
        names = {"monitor_id", "mechanism_id", "kind", "starts_at", "ends_at", "comment"}
        return silences_view(request, principal, session, values=fields, errors=forms.orphaned(errors, names),
                             status_code=422)

    @router.post("/ui/silences/{silence_id}/expire")
    def expire_silence(request: Request, silence_id: uuid.UUID, principal: WebPrincipal, session: SessionDep,
                       fields: CheckedForm) -> Response:
        from app.silences.service import expire_silence as service_expire
        from app.silences.service import get_silence

        del fields
        require_change(principal)
        service_expire(session, get_silence(session, principal.tenant_id, silence_id))
        return redirect_with(request, "/ui/silences", "Silence expired: matching alarms send their webhooks again.")

    return router


__all__ = ["Forbidden", "build_manage_router", "Webhook"]
