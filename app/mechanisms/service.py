"""Mechanisms: CRUD scoped to a tenant, and probing an endpoint once. Never commits."""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.api.errors import ConflictError, InvalidInputError, NotFoundError
from app.api.pagination import SortKey, paginate
from app.api.urls import destination_problem
from app.auth.service import generate_signing_secret
from app.mechanisms.schemas import MechanismCreate, MechanismUpdate
from app.models.mechanisms import Mechanism
from app.models.monitors import Monitor
from app.settings import Settings

PROBE_PREVIEW = 5


def get_mechanism(session: Session, tenant_id: uuid.UUID, mechanism_id: uuid.UUID) -> Mechanism:
    mechanism = session.scalar(select(Mechanism).where(Mechanism.id == mechanism_id, Mechanism.tenant_id == tenant_id))
    if mechanism is None:
        raise NotFoundError(f"Mechanism {mechanism_id} not found.")
    return mechanism


def list_mechanisms(
    session: Session, tenant_id: uuid.UUID, *, limit: int, cursor: str | None
) -> tuple[list[Mechanism], str | None]:
    stmt = select(Mechanism).where(Mechanism.tenant_id == tenant_id)
    return paginate(
        session, stmt, [SortKey(Mechanism.created_at, "datetime"), SortKey(Mechanism.id, "uuid")], limit, cursor
    )


def _check_destination(url: str, settings: Settings) -> None:
    problem = destination_problem(url, settings)
    if problem is not None:
        raise InvalidInputError(
            f"sampling_url: {problem}.", field=["body", "sampling_url"], error_type="url_not_allowed"
        )


def _name_taken(session: Session, tenant_id: uuid.UUID, name: str, exclude: uuid.UUID | None = None) -> bool:
    stmt = select(Mechanism.id).where(Mechanism.tenant_id == tenant_id, Mechanism.name == name)
    if exclude is not None:
        stmt = stmt.where(Mechanism.id != exclude)
    return session.scalar(stmt) is not None


def _flush_unique(session: Session, name: str) -> None:
    # The pre-check covers the common case; the savepoint turns a race into a 409 as well.
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:
        raise ConflictError(f"A mechanism named {name!r} already exists.") from exc


def build_mechanism(tenant_id: uuid.UUID, data: MechanismCreate) -> Mechanism:
    """A transient mechanism (not yet in the session): probed first when ``?validate=true``."""
    return Mechanism(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        name=data.name,
        sampling_url=data.sampling_url,
        output_kind=data.output_kind,
        dim=data.dim,
        max_batch=data.max_batch,
        timeout_seconds=data.timeout_seconds,
        prefer_binary=data.prefer_binary,
        secret=data.secret or generate_signing_secret(),
        output_shape=_shape_json(data.output_shape),
        output_shape_source="declared" if data.output_shape is not None else None,
        probe_database=data.probe_database,
        input_domain=_domain_json(data.input_domain),
    )


def _domain_json(domain: Any) -> dict[str, Any] | None:
    """An input domain as stored: its JSON without unset fields."""
    if domain is None:
        return None
    from app.search.domain import InputDomain

    return InputDomain.model_validate(domain).model_dump(mode="json", exclude_none=True)


def _shape_json(shape: Any) -> dict[str, Any] | None:
    """A contract as stored: compact JSON of the ``OutputShape``."""
    if shape is None:
        return None
    from app.stats.shapes import OutputShape

    return OutputShape.model_validate(shape).model_dump(mode="json", exclude_defaults=True)


def check_create(session: Session, tenant_id: uuid.UUID, data: MechanismCreate, settings: Settings) -> None:
    _check_destination(data.sampling_url, settings)
    if _name_taken(session, tenant_id, data.name):
        raise ConflictError(f"A mechanism named {data.name!r} already exists.")


def add_mechanism(session: Session, mechanism: Mechanism) -> Mechanism:
    session.add(mechanism)
    _flush_unique(session, mechanism.name)
    return mechanism


def create_mechanism(session: Session, tenant_id: uuid.UUID, data: MechanismCreate, settings: Settings) -> Mechanism:
    check_create(session, tenant_id, data, settings)
    return add_mechanism(session, build_mechanism(tenant_id, data))


def draft_update(mechanism: Mechanism, data: MechanismUpdate) -> Mechanism:
    """A transient copy of ``mechanism`` with the update applied (for probing before saving)."""
    values = {
        name: getattr(mechanism, name)
        for name in (
            "id",
            "tenant_id",
            "name",
            "sampling_url",
            "output_kind",
            "dim",
            "max_batch",
            "timeout_seconds",
            "prefer_binary",
            "secret",
            "previous_secret",  # a probe during a rotation's overlap signs with both secrets
            "previous_secret_expires_at",
            "output_shape",
            "output_shape_source",
            "probe_database",
            "input_domain",
        )
    }
    changes = data.model_dump(exclude_unset=True)
    if "output_shape" in changes:
        changes["output_shape"] = _shape_json(changes["output_shape"])
        changes["output_shape_source"] = "declared" if changes["output_shape"] is not None else None
    if "input_domain" in changes:
        changes["input_domain"] = _domain_json(changes["input_domain"])
    values.update(changes)
    if changes.get("output_kind") in ("real", "discrete") and "dim" not in changes:
        values["dim"] = None
    return Mechanism(**values)


def _monitor_count(session: Session, mechanism_id: uuid.UUID) -> int:
    return session.scalar(select(func.count()).select_from(Monitor).where(Monitor.mechanism_id == mechanism_id)) or 0


def check_update(session: Session, mechanism: Mechanism, data: MechanismUpdate, settings: Settings) -> Mechanism:
    """Validate an update; return the draft with the new values (nothing is changed yet)."""
    draft = draft_update(mechanism, data)
    if draft.output_kind == "vector" and draft.dim is None:
        raise InvalidInputError(
            "dim is required when output_kind is 'vector' (the length of each output vector).",
            field=["body", "dim"],
        )
    if draft.output_kind != "vector" and draft.dim is not None:
        raise InvalidInputError(
            f"dim must be null unless output_kind is 'vector' (the mechanism's output_kind is '{draft.output_kind}').",
            field=["body", "dim"],
        )
    if (draft.output_kind, draft.dim) != (mechanism.output_kind, mechanism.dim):
        count = _monitor_count(session, mechanism.id)
        if count:
            raise ConflictError(
                f"output_kind and dim cannot change while {count} monitor(s) use this mechanism: their "
                "events are defined on the current outputs. Delete or recreate those monitors first."
            )
    if draft.output_shape is not None and (
        "output_shape" in data.model_fields_set or {"output_kind", "dim"} & data.model_fields_set
    ):
        from app.mechanisms.schemas import _check_shape
        from app.stats.shapes import OutputShape

        try:
            _check_shape(OutputShape.model_validate(draft.output_shape), draft.output_kind, draft.dim)
        except ValueError as exc:
            raise InvalidInputError(f"output_shape: {exc}.", field=["body", "output_shape"]) from exc
    if "sampling_url" in data.model_fields_set:
        _check_destination(draft.sampling_url, settings)
    if draft.name != mechanism.name and _name_taken(session, mechanism.tenant_id, draft.name, exclude=mechanism.id):
        raise ConflictError(f"A mechanism named {draft.name!r} already exists.")
    return draft


def apply_update(session: Session, mechanism: Mechanism, draft: Mechanism) -> Mechanism:
    for name in ("name", "sampling_url", "output_kind", "dim", "max_batch", "timeout_seconds", "prefer_binary",
                 "output_shape", "output_shape_source", "probe_database", "input_domain"):
        value = getattr(draft, name)
        if getattr(mechanism, name) != value:
            setattr(mechanism, name, value)
    _flush_unique(session, mechanism.name)
    return mechanism


def update_mechanism(session: Session, mechanism: Mechanism, data: MechanismUpdate, settings: Settings) -> Mechanism:
    return apply_update(session, mechanism, check_update(session, mechanism, data, settings))


def delete_mechanism(session: Session, mechanism: Mechanism, *, cascade: bool = False) -> None:
    """Delete the mechanism. While monitors use it, 409 unless ``cascade``; with ``cascade`` its
    monitors, checks, periods and alarms go with it (FK cascade)."""
    monitors = session.scalar(select(func.count()).select_from(Monitor).where(Monitor.mechanism_id == mechanism.id))
    if monitors and not cascade:
        raise ConflictError(
            f"Mechanism {mechanism.id} is used by {monitors} monitor{'s' if monitors != 1 else ''}; delete them first, "
            "or pass ?cascade=true to delete them with it (their periods and alarms too)."
        )
    session.delete(mechanism)
    session.flush()


@dataclass(frozen=True)
class ProbeResult:
    """What one sampling call to a mechanism showed."""

    ok: bool
    problems: list[str] = field(default_factory=list)
    reason: str | None = None
    outputs_received: int = 0
    elapsed_seconds: float = 0.0
    preview: list[Any] = field(default_factory=list)


Prober = Callable[..., Awaitable[ProbeResult]]


def _strict_shape(mechanism: Mechanism) -> Any:
    from app.mechanisms.contract import strict_shape

    return strict_shape(mechanism)


def _finite_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_finite_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    return value


def _preview(outputs: Any) -> list[Any]:
    return _finite_json(outputs[:PROBE_PREVIEW].tolist())


def probe_databases(session: Session, mechanism: Mechanism, limit: int = 4) -> list[Any]:
    """The inputs a validation probe uses when none is given: the mechanism's ``probe_database``,
    else the distinct databases of its monitors' checks (never a guessed, empty input)."""
    if mechanism.probe_database is not None:
        return [mechanism.probe_database]
    from app.models.monitors import Check

    rows = session.execute(
        select(Check.x, Check.x_prime).join(Monitor, Monitor.id == Check.monitor_id)
        .where(Monitor.mechanism_id == mechanism.id).order_by(Monitor.created_at, Check.position).limit(4 * limit)
    ).all()
    seen: dict[str, Any] = {}
    for x, x_prime in rows:
        for db in (x, x_prime):
            seen.setdefault(json.dumps(db, sort_keys=True), db)
    return list(seen.values())[:limit]


NO_PROBE_DATABASE = (
    "No input to probe the mechanism with: give `probe_database` (on the mechanism, or `database` in the "
    "validation request), or validate a monitor of it, which probes with its checks' databases. dpwatch does "
    "not guess an input (many mechanisms refuse an empty one)."
)


_REDIRECT_TARGET = re.compile(r"got HTTP (\d{3})(?: to (\S+?))?\)")


def redirect_advice(sampling_url: str, detail: str) -> str:
    """The fix for a probe answered with a redirect, from the safe client's detail ("got HTTP 307
    to URL"). dpwatch never follows redirects (a sampling request, which carries a signature, must
    not be sent somewhere else), so the registered URL has to be the final one. The usual cause is
    a trailing slash: FastAPI and Starlette's ``app.mount("/dp", …)`` answers at ``/dp/`` and
    redirects ``/dp`` there (and a route ``/dp`` redirects ``/dp/``)."""
    from app.sampling.safe_http import redact_url

    found = _REDIRECT_TARGET.search(detail)
    status = found.group(1) if found else "3xx"
    target = found.group(2) if found and found.group(2) else None
    registered = redact_url(sampling_url)
    if target is None:
        return (f"fix: the endpoint answers {registered} with HTTP {status}; register the URL it redirects to as "
                "sampling_url (dpwatch never follows redirects)")
    if target.startswith("/"):
        base = redact_url(sampling_url)
        scheme_host = base.split("/", 3)
        target = "/".join(scheme_host[:3]) + target
    if target.rstrip("/") == registered.rstrip("/") and target != registered:
        with_slash = target.endswith("/")
        why = ('FastAPI/Starlette\'s app.mount("/dp", …) serves "/dp/" and redirects "/dp" there'
               if with_slash else 'a route declared without the slash redirects the URL with one')
        return (f"fix: register sampling_url {target!r} ({'with' if with_slash else 'without'} the trailing slash): "
                f"the endpoint redirects {registered} to {target} (HTTP {status}), and dpwatch never follows "
                f"redirects ({why})")
    return (f"fix: register sampling_url {target!r}: the endpoint redirects {registered} there (HTTP {status}), "
            "and dpwatch never follows redirects")


async def probe_endpoint(mechanism: Mechanism, settings: Settings, *, database: Any = None, n: int = 10) -> ProbeResult:
    """Ask the endpoint once for ``n`` outputs on ``database`` and report what is wrong.

    Goes through the same safe sampling client as the monitors (address checks, signing, byte
    and time caps, strict validation of the answer, against the declared output contract when
    there is one), so a mechanism that validates here is one the scheduler can sample. One
    attempt only: a probe reports, it does not retry.
    """
    from app.mechanisms.contract import sampling_endpoint
    from app.sampling.client import SamplingClient, SamplingClientConfig
    from app.sampling.protocol import SamplingError

    n = max(1, min(n, mechanism.max_batch))
    started = time.perf_counter()
    try:
        endpoint = sampling_endpoint(mechanism, _strict_shape(mechanism))
        config = SamplingClientConfig(
            max_attempts=1,
            deadline_seconds=mechanism.timeout_seconds + 1.0,
            max_response_bytes=settings.sampling_max_bytes,
            max_keys=settings.sampling_max_keys,
            max_key_length=settings.sampling_max_key_length,
        )
        async with SamplingClient(config=config, http_config=settings.safe_http_config()) as client:
            if database is None:
                raise ValueError(NO_PROBE_DATABASE)
            outputs = await client.sample(
                endpoint,
                database,
                n,
                monitor_id=f"validate:{mechanism.id}",
                period=0,
                request_id_prefix=f"validate-{mechanism.id.hex}",
            )
    except SamplingError as exc:
        problems = [exc.detail or exc.reason]
        if exc.reason == "redirect":
            problems.append(redirect_advice(mechanism.sampling_url, exc.detail or ""))
        return ProbeResult(
            ok=False,
            problems=problems,
            reason=exc.reason,
            elapsed_seconds=time.perf_counter() - started,
        )
    except ValueError as exc:  # e.g. a database that is not strict JSON
        return ProbeResult(
            ok=False, problems=[str(exc)], reason="invalid_request", elapsed_seconds=time.perf_counter() - started
        )
    return ProbeResult(
        ok=True,
        outputs_received=len(outputs),
        elapsed_seconds=time.perf_counter() - started,
        preview=_preview(outputs),
    )
