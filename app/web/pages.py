"""The dashboard's pages (``/ui/...``) and the JSON its charts load (``/ui/data/...``).

Pages are server-rendered with Jinja2 and are not part of the JSON API (``include_in_schema=False``).
A page needs a signed-in session (:mod:`app.web.session`); without one it redirects to the
sign-in form, and the chart data answers 401. Every query is scoped to the session's tenant, as
in the API: another tenant's monitor, alarm, snapshot or webhook is a 404. Forms that change
something are POSTs with a CSRF token, allowed only when :func:`app.web.permissions.may_change_monitor`
says so, and answer with a redirect (post/redirect/get) and a one-time message.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from sqlalchemy import func, select

from app.api.deps import SessionDep, SettingsDep, key_use_recorder
from app.api.errors import ConflictError
from app.auth.service import Principal, authenticate, end_web_session, open_web_session
from app.db import utcnow
from app.models.alarms import Webhook, WebhookMessage
from app.models.auth import Tenant
from app.models.mechanisms import Mechanism
from app.models.monitors import MONITOR_STATES, Check, Monitor
from app.web import data
from app.web.claims import format_claim, monitor_claim
from app.web.forms import silence_defaults
from app.web.permissions import may_change_monitor
from app.web.session import (
    CSRF_FIELD,
    CsrfError,
    SessionSigner,
    principal_of,
    safe_next,
)
from app.web.svg import sparkline
from app.web.verdict import alarm_verdict, snapshot_verdict

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
MAX_FORM_BYTES = 16 * 1024
STATE_ICONS = {"calibrating": "◔", "active": "●", "alarm": "▲", "completed": "✓", "paused": "❚❚", "degraded": "!"}

# Content-Security-Policy of the dashboard's pages: everything from this origin, no inline script.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class SignInRequired(Exception):
    """A dashboard request without a valid session."""

    def __init__(self, next_url: str, *, data_request: bool) -> None:
        super().__init__("sign in first")
        self.next_url = next_url
        self.data_request = data_request


class Forbidden(Exception):
    """A form the session may not submit (CSRF failure, or a key that may not change monitors)."""


# ------------------------------------------------------------------------------------ helpers


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}".replace(",", " ")
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value != 0 and (abs(value) < 10 ** -(digits) or abs(value) >= 10**6):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}".rstrip("0").rstrip(".") or "0"
    return str(value)


def _when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _due(value: datetime | None) -> str:
    """When something scheduled happens next: "in 12 s", or "due now" once its time has come."""
    if value is None:
        return "not scheduled"
    if value <= utcnow():
        return "due now"
    return _ago(value)


def _ago(value: datetime | None) -> str:
    if value is None:
        return "never"
    seconds = (utcnow() - value).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            text = f"{seconds / size:.0f} {unit}"
            break
    else:
        text = f"{seconds:.0f} s"
    return f"in {text}" if future else f"{text} ago"


def _pretty(value: Any) -> str:
    """JSON on one line when it is short, indented otherwise."""
    flat = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    if len(flat) <= 100:
        return flat
    return json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False, default=str)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _compact(value: Any) -> str:
    """One line, numbers to 4 significant digits, cut at 120 characters (summaries)."""
    text = json.dumps(_rounded(value), ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= 120 else text[:117] + "…"


def _math_text(text: str) -> str:
    """ASCII mathematics as a person reads it: −∞, ∞ and the minus sign."""
    text = re.sub(r"-inf\b", "−∞", text)
    text = re.sub(r"(?<![\w.])inf\b", "∞", text)
    return re.sub(r"(?<![\w.)\]])-(?=\d)", "−", text)


def event_math(event: Any) -> str:
    """An event as mathematics, by the event model's own ``describe()`` (so that every kind renders,
    new ones included): ``(−∞, 0.5]``, ``{1, 2}``, ``max(o) ∈ [2, ∞)``; the JSON only when the event
    is not one the model reads."""
    from app.stats.events import parse_event

    if event is None:
        return "—"
    if isinstance(event, dict) and event.get("kind") == "auto":
        return "chosen by dpwatch from the outputs (auto; not discovered yet)"
    try:
        return _math_text(parse_event(event).describe())
    except (ValueError, TypeError):
        return _compact(event)


def _since(value: datetime | None, reference: datetime | None) -> str:
    """How long before ``reference`` (not before now): "12 min before"."""
    if value is None or reference is None:
        return "—"
    seconds = abs((reference - value).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _shape_text(shape: Any) -> str:
    """An output shape (app/stats/shapes.py) in words: "scalar of real", "vector of integer, length 3"."""
    if not isinstance(shape, dict):
        return "—" if shape is None else str(shape)
    parts = [f"{shape.get('container', 'scalar')} of {shape.get('values', 'real')}"]
    if shape.get("length") is not None:
        parts.append(f"length {shape['length']}")
    if shape.get("max_length") is not None:
        parts.append(f"at most {shape['max_length']} long")
    if shape.get("labels"):
        labels = [str(v) for v in shape["labels"]]
        parts.append("labels {" + ", ".join(labels[:8]) + (", …" if len(labels) > 8 else "") + "}")
    if shape.get("bounds"):
        low, high = shape["bounds"]
        parts.append(f"values in [{_num(low)}, {_num(high)}]")
    if shape.get("lattice"):
        parts.append(f"on the lattice {_compact(shape['lattice'])}")
    if shape.get("nullable"):
        parts.append("may be null")
    known = {"container", "values", "length", "max_length", "labels", "bounds", "lattice", "nullable"}
    rest = {k: v for k, v in shape.items() if k not in known}
    if rest:
        parts.append(_compact(rest))
    return ", ".join(parts)


def _state_badge(state: str) -> Markup:
    icon = STATE_ICONS.get(state, "?")
    return Markup(f'<span class="badge state-{state}"><span aria-hidden="true">{icon}</span> {state}</span>')


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    env = templates.env
    env.filters["num"] = _num
    env.filters["when"] = _when
    env.filters["ago"] = _ago
    env.filters["due"] = _due
    env.filters["pretty"] = _pretty
    env.filters["compact"] = _compact
    env.filters["event"] = event_math
    env.filters["claim"] = format_claim
    env.tests["datetime"] = lambda value: isinstance(value, datetime)
    env.globals["state_badge"] = _state_badge
    env.globals["monitor_claim"] = monitor_claim
    env.globals["sparkline"] = sparkline
    env.globals["states"] = MONITOR_STATES
    env.globals["shape_text"] = _shape_text
    env.filters["since"] = _since
    return templates


def signer_of(request: Request) -> SessionSigner:
    signer: SessionSigner = request.app.state.web_signer  # set by app.web.install_dashboard
    return signer


def redirect_with(request: Request, url: str, message: str | None = None, *, error: bool = False) -> RedirectResponse:
    response = RedirectResponse(url, status_code=303)
    if message:
        signer_of(request).set_flash(response, message, error=error)
    return response


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of an ``application/x-www-form-urlencoded`` body (the dashboard's forms)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise Forbidden("The form is too large.")
    try:
        parsed = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True, max_num_fields=30)
    except ValueError as exc:  # more fields than any of the dashboard's forms has
        raise Forbidden("The form has too many fields.") from exc
    request.state.form_lists = parsed  # fields given several times (checkboxes: a webhook's events)
    return {k: v[0] for k, v in parsed.items()}


# ------------------------------------------------------------------------------------ auth


def _request_target(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def web_principal(request: Request, session: SessionDep) -> Principal:
    principal = principal_of(session, signer_of(request).read_session(request))
    if principal is None:
        raise SignInRequired(_request_target(request), data_request=request.url.path.startswith("/ui/data/"))
    request.state.principal = principal
    return principal


WebPrincipal = Annotated[Principal, Depends(web_principal)]


async def checked_form(request: Request) -> dict[str, str]:
    """The form of a state-changing request, after its CSRF token is checked."""
    fields = await form_fields(request)
    try:
        signer_of(request).check_csrf(request, fields.get(CSRF_FIELD))
    except CsrfError as exc:
        raise Forbidden(str(exc)) from exc
    return fields


CheckedForm = Annotated[dict[str, str], Depends(checked_form)]


def require_change(principal: Principal) -> None:
    if not may_change_monitor(principal):
        raise Forbidden("This API key may read but not change monitors.")


# ------------------------------------------------------------------------------------ rendering


def render(request: Request, name: str, context: dict[str, Any], *, status_code: int = 200,
           session: Any = None) -> HTMLResponse:
    templates: Jinja2Templates = request.app.state.web_templates
    principal: Principal | None = getattr(request.state, "principal", None)
    tenant_name = None
    if principal is not None and session is not None:
        tenant_name = session.scalar(select(Tenant.name).where(Tenant.id == principal.tenant_id))
    response = HTMLResponse("")  # collects the cookies the CSRF token and the flash message set
    token = signer_of(request).csrf_token(request, response)
    flash = signer_of(request).take_flash(request, response)
    body = templates.get_template(name).render({
        "request": request,
        "principal": principal,
        "tenant_name": tenant_name,
        "can_change": principal is not None and may_change_monitor(principal),
        "csrf_field": CSRF_FIELD,
        "csrf_token": token,
        "flash": flash,
        "path": request.url.path,
        **context,
    })
    out = HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)
    for key, value in response.headers.items():
        if key.lower() == "set-cookie":
            out.headers.append("set-cookie", value)
    return out


def error_page(request: Request, status_code: int, message: str) -> HTMLResponse:
    return render(request, "error.html", {"status_code": status_code, "message": message}, status_code=status_code)


def _secure_cookie_over_http(request: Request) -> bool:
    """True when the session cookie will be ``Secure`` but this page came over plain http from a
    host that browsers do not treat as secure: the browser would drop the cookie."""
    host = (request.url.hostname or "").lower()
    behind_tls_proxy = request.headers.get("x-forwarded-proto", "").lower() == "https"  # only for this hint
    return (signer_of(request).secure and request.url.scheme == "http" and not behind_tls_proxy
            and host not in ("localhost", "127.0.0.1", "::1"))


# ------------------------------------------------------------------------------------ routes


def build_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/monitors", status_code=307)

    @router.get("/ui")
    @router.get("/ui/")
    def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/monitors", status_code=307)

    # ---------------------------------------------------------------- sign-in

    @router.get("/ui/login")
    def login_page(request: Request, session: SessionDep, next: str | None = None) -> Response:  # noqa: A002
        if principal_of(session, signer_of(request).read_session(request)) is not None:
            return RedirectResponse(safe_next(next), status_code=303)
        return render(request, "login.html", {"next": safe_next(next), "error": None,
                                              "insecure": _secure_cookie_over_http(request)})

    @router.post("/ui/login")
    def login(request: Request, session: SessionDep, fields: CheckedForm) -> Response:
        key = fields.get("api_key", "").strip()
        target = safe_next(fields.get("next"))
        principal = authenticate(session, key) if key else None
        if principal is None:
            error = "This API key is unknown or has been revoked."
            return render(request, "login.html", {"next": target, "error": error,
                                                  "insecure": _secure_cookie_over_http(request)}, status_code=401)
        response = RedirectResponse(target, status_code=303)
        if principal.use_due:  # in a transaction of its own (app.auth.key_use), before this one writes
            key_use_recorder(request).record(request.app.state.session_factory, principal.api_key_id)
        session_id = open_web_session(session, principal.api_key_id, signer_of(request).max_age)
        signer_of(request).start_session(response, principal.api_key_id, principal.tenant_id, session_id)
        return response

    @router.post("/ui/logout")
    def logout(request: Request, session: SessionDep, fields: CheckedForm) -> Response:
        del fields
        current = signer_of(request).read_session(request)
        if current is not None:  # the cookie stops working everywhere, not just in this browser
            end_web_session(session, current.session_id)
        response = RedirectResponse("/ui/login", status_code=303)
        signer_of(request).end_session(response)
        return response

    # ---------------------------------------------------------------- monitors

    @router.get("/ui/monitors")
    def monitors_page(
        request: Request,
        principal: WebPrincipal,
        session: SessionDep,
        state: Annotated[str | None, Query(max_length=16)] = None,
        mechanism: Annotated[str | None, Query(max_length=64)] = None,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 200,
    ) -> HTMLResponse:
        state = state if state in MONITOR_STATES else None
        mechanism_id = None
        if mechanism:
            try:
                mechanism_id = uuid.UUID(mechanism)
            except ValueError:
                mechanism_id = None
        rows, next_cursor = data.list_monitor_rows(session, principal.tenant_id, state=state,
                                                   mechanism_id=mechanism_id, limit=limit, cursor=cursor)
        counts = dict(session.execute(select(Monitor.state, func.count()).where(
            Monitor.tenant_id == principal.tenant_id).group_by(Monitor.state)).all())
        filters = {"state": state or "", "mechanism": str(mechanism_id) if mechanism_id else ""}
        next_url = None
        if next_cursor:
            next_url = "/ui/monitors?" + urlencode({**{k: v for k, v in filters.items() if v}, "cursor": next_cursor})
        return render(request, "monitors.html", {
            "rows": rows, "filters": filters, "counts": counts, "total": sum(counts.values()),
            "mechanisms": data.tenant_mechanisms(session, principal.tenant_id), "next_url": next_url,
        }, session=session)

    def _monitor(session: Any, principal: Principal, monitor_id: uuid.UUID, *, for_update: bool = False) -> Monitor:
        from app.monitors.service import get_monitor

        return get_monitor(session, principal.tenant_id, monitor_id, for_update=for_update)

    @router.get("/ui/monitors/{monitor_id}")
    def monitor_page(request: Request, monitor_id: uuid.UUID, principal: WebPrincipal, session: SessionDep,
                     horizon: Annotated[int | None, Query(ge=1)] = None,
                     range: Annotated[str | None, Query(max_length=8)] = None) -> HTMLResponse:  # noqa: A002
        from app.monitors.service import get_checks, monitor_status

        monitor = _monitor(session, principal, monitor_id)
        checks = get_checks(session, monitor.id)
        status = monitor_status(session, monitor)
        mechanism = session.get(Mechanism, monitor.mechanism_id)
        horizons = data.horizons_of(session, monitor)
        shown = horizon if horizon in horizons else monitor.horizon_index
        alarms = data.monitor_alarms(session, monitor)
        config = {name: getattr(monitor, name) for name in (
            "epsilon", "alpha", "gamma", "horizon", "samples_per_period", "period_seconds", "cron", "variance",
            "kappa", "symmetric", "renew", "outputs_window", "snapshot_every", "alarm_snapshot_samples",
            "horizon_index", "horizon_alpha", "threshold", "threshold_std_error", "threshold_source",
            "created_at", "updated_at")}
        return render(request, "monitor.html", {
            "monitor": monitor, "checks": checks, "status": status, "mechanism": mechanism,
            "claim": monitor_claim(monitor), "horizons": horizons, "shown_horizon": shown,
            "alarms": alarms, "chart_range": range if range in RANGES else "", "config_labels": CONFIG_LABELS,
            "open_alarms": [(a, alarm_verdict(a)) for a in alarms if a.resolved_at is None],
            "periods": data.recent_periods(session, monitor), "snapshots": data.monitor_snapshots(session, monitor),
            "config": config, "check_positions": {c.id: c.position for c in checks},
            "rendered_at": f"{utcnow().timestamp():.3f}",
        }, session=session)

    @router.get("/ui/data/monitors/{monitor_id}/checks/{check_id}/series")
    def check_series(monitor_id: uuid.UUID, check_id: uuid.UUID, principal: WebPrincipal, session: SessionDep,
                     horizon: Annotated[int | None, Query(ge=1)] = None,
                     buckets: Annotated[int, Query(ge=10, le=data.MAX_BUCKETS)] = data.DEFAULT_BUCKETS,
                     range: Annotated[str | None, Query(max_length=8)] = None,  # noqa: A002
                     until: Annotated[float | None, Query(ge=0, le=1e11, description="Unix seconds: only the periods "
                                                          "finished by then (the page's render time).")] = None,
                     ) -> JSONResponse:
        monitor = _monitor(session, principal, monitor_id)
        check = data.get_check(session, monitor, check_id)
        since = utcnow() - RANGES[range] if range in RANGES else None
        cutoff = None if until is None else datetime.fromtimestamp(until, tz=UTC)
        body = data.check_series(session, monitor, check, horizon_index=horizon or monitor.horizon_index,
                                 buckets=buckets, since=since, until=cutoff)
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    def _monitor_action(request: Request, monitor_id: uuid.UUID, principal: Principal, session: Any,
                              settings: Any, action: str, fields: dict[str, str]) -> Response:
        from app.monitors import service
        from app.monitors.outputs import request_snapshot

        require_change(principal)
        monitor = _monitor(session, principal, monitor_id, for_update=True)
        url = f"/ui/monitors/{monitor.id}"
        try:
            if action == "pause":
                service.pause_monitor(session, monitor)
                message = "Monitor paused: no period runs until you resume it."
            elif action == "resume":
                service.resume_monitor(session, monitor)
                message = f"Monitor resumed ({monitor.state}); the next period is at {_when(monitor.next_run_at)}."
            elif action == "reset":
                service.reset_monitor(session, monitor, settings)
                message = (f"Monitor reset: horizon {monitor.horizon_index} started with fresh detectors; "
                           "the open alarms are resolved.")
            else:
                try:
                    extra = int(fields.get("extra_samples") or 0)
                except ValueError:
                    extra = -1
                if not 0 <= extra <= 1_000_000:
                    return redirect_with(request, url, "Extra samples must be a whole number from 0 to 1 000 000.",
                                         error=True)
                snap = request_snapshot(session, monitor, "on_demand", extra_samples=extra, alpha=0.05)
                return redirect_with(request, f"/ui/snapshots/{snap.id}",
                                     "Snapshot queued; this page shows it once a worker has computed it.")
        except ConflictError as exc:
            return redirect_with(request, url, exc.detail, error=True)
        return redirect_with(request, url, message)

    def action_route(action: str) -> Callable[..., Any]:
        # The action is bound here, not as a defaulted parameter: FastAPI would read such a
        # parameter from the query string, and ?_action=reset would override the form's route.
        def handler(request: Request, monitor_id: uuid.UUID, principal: WebPrincipal, session: SessionDep,
                    settings: SettingsDep, fields: CheckedForm) -> Any:
            return _monitor_action(request, monitor_id, principal, session, settings, action, fields)

        return handler

    for action in ("pause", "resume", "reset", "snapshot"):
        router.add_api_route(f"/ui/monitors/{{monitor_id}}/{action}", action_route(action), methods=["POST"],
                             name=f"web_monitor_{action}")

    # ---------------------------------------------------------------- snapshots

    @router.get("/ui/snapshots/{snapshot_id}")
    def snapshot_page(request: Request, snapshot_id: uuid.UUID, principal: WebPrincipal,
                      session: SessionDep) -> HTMLResponse:
        snap = data.get_snapshot(session, principal.tenant_id, snapshot_id)
        monitor = _monitor(session, principal, snap.monitor_id)
        previous = data.previous_snapshot(session, snap)
        result = snap.result or {}
        pairs = []
        for pair in result.get("pairs", []):
            pairs.append({k: v for k, v in pair.items() if k not in ("loss_curve", "privacy_profile")})
        claim = monitor_claim(monitor)
        verdict = snapshot_verdict(result, snap.status) if result else None
        return render(request, "snapshot.html", {
            "snap": snap, "monitor": monitor, "claim": claim, "previous": previous,
            "result": result, "pairs": pairs, "verdict": verdict,
        }, session=session)

    @router.get("/ui/data/snapshots/{snapshot_id}")
    def snapshot_data(snapshot_id: uuid.UUID, principal: WebPrincipal, session: SessionDep) -> JSONResponse:
        snap = data.get_snapshot(session, principal.tenant_id, snapshot_id)
        monitor = _monitor(session, principal, snap.monitor_id)
        body = data.snapshot_charts(snap, data.previous_snapshot(session, snap), monitor_claim(monitor))
        body["history"] = data.snapshot_history(session, snap)
        body["status"] = snap.status
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    # ---------------------------------------------------------------- alarms

    @router.get("/ui/alarms")
    def alarms_page(request: Request, principal: WebPrincipal, session: SessionDep,
                    status: Annotated[str, Query(pattern="^(firing|resolved|all)$")] = "all",
                    monitor: Annotated[str | None, Query(max_length=64)] = None,
                    kind: Annotated[str | None, Query(max_length=16)] = None,
                    acknowledged: Annotated[str | None, Query(max_length=8)] = None,
                    since: Annotated[str | None, Query(max_length=8)] = None,
                    cursor: Annotated[str | None, Query(max_length=512)] = None) -> HTMLResponse:
        from app.alarms.service import list_alarms

        resolved = {"firing": False, "resolved": True}.get(status)
        monitor_id = _uuid_or_none(monitor)
        kind = kind if kind in ("privacy", "contract") else None
        acked = {"yes": True, "no": False}.get(acknowledged or "")
        since = since if since in RANGES else None
        alarms, next_cursor = list_alarms(session, principal.tenant_id, resolved=resolved, monitor_id=monitor_id,
                                          kind=kind, acknowledged=acked, limit=100, cursor=cursor,
                                          created_after=(utcnow() - RANGES[since]) if since else None)
        names = _monitor_names(session, {a.monitor_id for a in alarms if a.monitor_id})
        positions = _check_positions(session, {a.check_id for a in alarms if a.check_id})
        mechanisms = _monitor_mechanisms(session, {a.monitor_id for a in alarms if a.monitor_id})
        silenced = _silenced_alarms(session, principal.tenant_id, alarms)
        groups: dict[str, list[Any]] = {}
        for a in alarms:
            groups.setdefault(mechanisms.get(a.monitor_id, "(deleted monitor)"), []).append(a)
        filters = {"status": status, "monitor": str(monitor_id) if monitor_id else "", "kind": kind or "",
                   "acknowledged": acknowledged if acked is not None else "", "since": since or ""}
        next_url = ("/ui/alarms?" + urlencode({**{k: v for k, v in filters.items() if v}, "cursor": next_cursor})
                    if next_cursor else None)
        monitors = session.execute(select(Monitor.id, Monitor.name).where(Monitor.tenant_id == principal.tenant_id)
                                   .order_by(Monitor.name).limit(500)).all()
        return render(request, "alarms.html", {"alarms": alarms, "groups": sorted(groups.items()), "names": names,
                                               "silenced": silenced,
                                               "positions": positions, "status": status, "filters": filters,
                                               "monitors": monitors, "ranges": list(RANGES), "next_url": next_url},
                      session=session)

    @router.get("/ui/alarms/{alarm_id}")
    def alarm_page(request: Request, alarm_id: uuid.UUID, principal: WebPrincipal, session: SessionDep) -> HTMLResponse:
        from app.alarms.service import get_alarm
        from app.silences.service import alarm_silence

        alarm = get_alarm(session, principal.tenant_id, alarm_id)
        monitor = _monitor(session, principal, alarm.monitor_id)
        check = session.get(Check, alarm.check_id) if alarm.check_id else None
        claim_text = format_claim(alarm.claim or monitor_claim(monitor))
        return render(request, "alarm.html", {
            "alarm": alarm, "monitor": monitor, "check": check, "claim_text": claim_text,
            "verdict": alarm_verdict(alarm),
            "silence": alarm_silence(session, alarm, monitor.mechanism_id),
            "silence_values": silence_defaults(monitor_id=str(monitor.id), kind=alarm.kind,
                                               next=f"/ui/alarms/{alarm.id}",
                                               comment=""),
            "silence_errors": {},
        }, session=session)

    @router.post("/ui/alarms/{alarm_id}/acknowledge")
    def acknowledge(request: Request, alarm_id: uuid.UUID, principal: WebPrincipal, session: SessionDep,
                    fields: CheckedForm) -> Response:
        from app.alarms.service import acknowledge_alarm, get_alarm

        require_change(principal)
        alarm = get_alarm(session, principal.tenant_id, alarm_id)
        back = safe_next(fields.get("next") or f"/ui/alarms/{alarm.id}")
        note = (fields.get("note") or "").strip()[:2000] or None
        try:
            acknowledge_alarm(session, alarm, note)
        except ConflictError as exc:
            return redirect_with(request, back, exc.detail, error=True)
        return redirect_with(request, back, f"Alarm at period {alarm.t} acknowledged. It stays open until the "
                                            "monitor is reset.")

    # ---------------------------------------------------------------- webhooks

    @router.get("/ui/webhooks/{webhook_id}")
    def webhook_page(request: Request, webhook_id: uuid.UUID, principal: WebPrincipal, session: SessionDep,
                     cursor: Annotated[str | None, Query(max_length=512)] = None) -> HTMLResponse:
        from app.alarms.service import get_webhook, list_deliveries

        hook = get_webhook(session, principal.tenant_id, webhook_id)
        deliveries, next_cursor = list_deliveries(session, hook, limit=50, cursor=cursor)
        next_url = f"/ui/webhooks/{hook.id}?cursor={quote(next_cursor)}" if next_cursor else None
        return render(request, "webhook.html", {"hook": hook, "deliveries": deliveries, "next_url": next_url},
                      session=session)

    return router


def webhook_rows(session: Any, tenant_id: uuid.UUID) -> tuple[list[Webhook], dict[Any, dict[str, int]]]:
    """The tenant's webhooks, newest first, with their messages counted by status."""
    hooks = list(session.scalars(select(Webhook).where(Webhook.tenant_id == tenant_id)
                                 .order_by(Webhook.created_at.desc()).limit(200)))
    stats: dict[Any, dict[str, int]] = {h.id: {} for h in hooks}
    if hooks:
        for webhook_id, status, count in session.execute(
                select(WebhookMessage.webhook_id, WebhookMessage.status, func.count())
                .where(WebhookMessage.webhook_id.in_(list(stats)))
                .group_by(WebhookMessage.webhook_id, WebhookMessage.status)):
            stats[webhook_id][status] = count
    return hooks, stats


#: The configuration's names as the monitor page shows them (no underscores, the mathematics as symbols).
CONFIG_LABELS = {
    "epsilon": "ε (claimed)", "alpha": "α", "gamma": "γ", "horizon": "horizon T", "samples_per_period": "n per side",
    "period_seconds": "period (s)", "kappa": "κ (variance floor)", "renew": "renew horizons",
    "outputs_window": "outputs kept per period", "snapshot_every": "snapshot every (periods)",
    "alarm_snapshot_samples": "samples of an alarm's snapshot", "horizon_index": "horizon j",
    "horizon_alpha": "αⱼ", "threshold": "threshold q(T, γ, αⱼ/m)", "threshold_std_error": "threshold std. error",
    "threshold_source": "threshold source", "created_at": "created", "updated_at": "updated",
}

#: The time ranges of the alarm list and of the charts (the picker's choices).
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None


def _silenced_alarms(session: Any, tenant_id: uuid.UUID, alarms: list[Any]) -> set[uuid.UUID]:
    """The alarms of a page that a silence matched when they fired (the same rule as
    :func:`app.silences.service.matching_silence`, over the tenant's last 500 silences)."""
    from app.models.silences import Silence

    if not alarms:
        return set()
    silences = list(session.scalars(select(Silence).where(Silence.tenant_id == tenant_id)
                                    .order_by(Silence.created_at.desc()).limit(500)))
    if not silences:
        return set()
    mechanism_of = dict(session.execute(select(Monitor.id, Monitor.mechanism_id).where(
        Monitor.id.in_({a.monitor_id for a in alarms if a.monitor_id}))).all())
    out = set()
    for a in alarms:
        for s in silences:
            if (s.starts_at <= a.created_at < s.ends_at and s.monitor_id in (None, a.monitor_id)
                    and s.mechanism_id in (None, mechanism_of.get(a.monitor_id)) and s.kind in (None, a.kind)):
                out.add(a.id)
                break
    return out


def _monitor_mechanisms(session: Any, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Each monitor's mechanism name (alarms are grouped by mechanism)."""
    if not ids:
        return {}
    return dict(session.execute(select(Monitor.id, Mechanism.name).join(Mechanism, Mechanism.id == Monitor.mechanism_id)
                                .where(Monitor.id.in_(list(ids)))).all())


def _monitor_names(session: Any, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    if not ids:
        return {}
    return dict(session.execute(select(Monitor.id, Monitor.name).where(Monitor.id.in_(list(ids)))).all())


def _check_positions(session: Any, ids: set[uuid.UUID]) -> dict[uuid.UUID, int]:
    if not ids:
        return {}
    return dict(session.execute(select(Check.id, Check.position).where(Check.id.in_(list(ids)))).all())
