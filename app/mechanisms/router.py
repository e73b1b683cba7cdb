"""/v1/mechanisms: register the HTTP endpoints that dpwatch samples."""

from __future__ import annotations

import uuid
from typing import Annotated

import anyio.from_thread
import structlog
from fastapi import APIRouter, Body, Depends, Query, Response, status
from sqlalchemy.orm import Session

from app.api.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.api.errors import (
    InvalidInputError,
    ProblemError,
    field_problem,
    problem_responses,
)
from app.api.pagination import CursorQuery, LimitQuery, Page
from app.auth.rotation import rotate_secret
from app.auth.schemas import RotateMechanismSecret, SecretRotated
from app.auth.service import generate_signing_secret
from app.mechanisms import service
from app.mechanisms.schemas import (
    MechanismCreate,
    MechanismCreated,
    MechanismRead,
    MechanismUpdate,
    MechanismUpdated,
    ProbeReport,
    ProbeRequest,
)
from app.models.mechanisms import Mechanism
from app.settings import Settings

log = structlog.get_logger("dpwatch.mechanisms")

router = APIRouter(prefix="/mechanisms", tags=["mechanisms"])

ValidateQuery = Annotated[
    bool,
    Query(
        description="Call the endpoint once before saving, on the `probe_database` (or, for an update, the "
        "databases of the mechanism's monitors). If its answer is wrong, nothing is saved and the response is a "
        "422 whose `errors` say what is wrong; with no input to probe with, 422 too."
    ),
]


def get_prober() -> service.Prober:
    """The function that probes an endpoint (a dependency, so tests can replace it)."""
    return service.probe_endpoint


ProberDep = Annotated[service.Prober, Depends(get_prober)]


def _probe(
    prober: service.Prober, mechanism: Mechanism, settings: Settings, session: Session,
    request: ProbeRequest | None = None,
) -> ProbeReport:
    """Probe with the request's database, else the mechanism's ``probe_database``, else one of its
    monitors' databases; 422 when there is none (no input is guessed)."""
    request = request or ProbeRequest()
    database = request.database
    if database is None:
        known = service.probe_databases(session, mechanism, limit=1)
        if not known:
            raise InvalidInputError(service.NO_PROBE_DATABASE, field=["body", "probe_database"],
                                    error_type="no_probe_database")
        database = known[0]
    # Handlers run in a worker thread; the probe is async (httpx), so hop back onto the loop.
    result = anyio.from_thread.run(lambda: prober(mechanism, settings, database=database, n=request.n))
    report = ProbeReport.model_validate(result)
    return report.model_copy(update={"database": database})


def _refuse_if_failed(report: ProbeReport) -> None:
    if report.ok:
        return
    raise ProblemError(
        "The sampling endpoint did not answer correctly; nothing was saved. " + "; ".join(report.problems),
        status=422,
        slug="endpoint-validation-failed",
        errors=[
            field_problem(["body", "sampling_url"], problem, f"endpoint_{report.reason or 'invalid'}")
            for problem in report.problems
        ],
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=MechanismCreated,
    summary="Register a mechanism",
    description="Register an HTTP endpoint that returns outputs of a DP mechanism. The response "
    "carries the signing `secret` once; dpwatch signs every sampling request with it (Standard "
    "Webhooks headers) so the endpoint can tell dpwatch's requests from anyone else's.",
    responses=problem_responses(401, 409, 422),
)
def create_mechanism(
    body: MechanismCreate,
    principal: CurrentPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    prober: ProberDep,
    validate: ValidateQuery = False,
) -> MechanismCreated:
    service.check_create(session, principal.tenant_id, body, settings)
    mechanism = service.build_mechanism(principal.tenant_id, body)
    report = None
    if validate:
        report = _probe(prober, mechanism, settings, session)
        _refuse_if_failed(report)
    service.add_mechanism(session, mechanism)
    return MechanismCreated.model_validate(
        {**MechanismRead.model_validate(mechanism).model_dump(), "secret": mechanism.secret, "validation": report}
    )


@router.get(
    "",
    response_model=Page[MechanismRead],
    summary="List mechanisms",
    description="This tenant's mechanisms, newest first.",
    responses=problem_responses(401, 422),
)
def list_mechanisms(
    principal: CurrentPrincipal, session: SessionDep, limit: LimitQuery = 50, cursor: CursorQuery = None
) -> Page[MechanismRead]:
    items, next_cursor = service.list_mechanisms(session, principal.tenant_id, limit=limit, cursor=cursor)
    return Page[MechanismRead](items=[MechanismRead.model_validate(m) for m in items], next_cursor=next_cursor)


@router.get(
    "/{mechanism_id}",
    response_model=MechanismRead,
    summary="Get a mechanism",
    description="The mechanism's configuration. The signing secret is never returned again.",
    responses=problem_responses(401, 404, 422),
)
def get_mechanism(mechanism_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> MechanismRead:
    return MechanismRead.model_validate(service.get_mechanism(session, principal.tenant_id, mechanism_id))


@router.patch(
    "/{mechanism_id}",
    response_model=MechanismUpdated,
    summary="Update a mechanism",
    description="Change some fields. `output_kind` and `dim` cannot change while monitors use the mechanism.",
    responses=problem_responses(401, 404, 409, 422),
)
def update_mechanism(
    mechanism_id: uuid.UUID,
    body: MechanismUpdate,
    principal: CurrentPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    prober: ProberDep,
    validate: ValidateQuery = False,
) -> MechanismUpdated:
    mechanism = service.get_mechanism(session, principal.tenant_id, mechanism_id)
    draft = service.check_update(session, mechanism, body, settings)
    report = None
    if validate:
        report = _probe(prober, draft, settings, session)
        _refuse_if_failed(report)
    service.apply_update(session, mechanism, draft)
    return MechanismUpdated.model_validate(
        {**MechanismRead.model_validate(mechanism).model_dump(), "validation": report}
    )


@router.delete(
    "/{mechanism_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a mechanism",
    description="Delete the mechanism. While monitors use it the answer is 409, unless `?cascade=true`, which "
    "deletes its monitors, their periods and alarms with it.",
    responses=problem_responses(401, 404, 409, 422),
)
def delete_mechanism(
    mechanism_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: SessionDep,
    cascade: Annotated[bool, Query(description="Also delete the monitors that use the mechanism.")] = False,
) -> Response:
    service.delete_mechanism(
        session, service.get_mechanism(session, principal.tenant_id, mechanism_id), cascade=cascade
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{mechanism_id}/validate",
    response_model=ProbeReport,
    summary="Validate a mechanism's endpoint",
    description="Call the endpoint once (for `n` outputs on `database`; default: the mechanism's `probe_database`, "
    "else a database of its monitors' checks) and report what, if anything, is wrong with its answer, including "
    "a breach of its output contract. 200 with `ok` telling whether it passed; 422 when there is no input to "
    "probe with.",
    responses=problem_responses(401, 404, 422),
)
def validate_mechanism(
    mechanism_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    prober: ProberDep,
    body: Annotated[ProbeRequest | None, Body()] = None,
) -> ProbeReport:
    mechanism = service.get_mechanism(session, principal.tenant_id, mechanism_id)
    return _probe(prober, mechanism, settings, session, body)


@router.post(
    "/{mechanism_id}/rotate-secret",
    response_model=SecretRotated,
    summary="Rotate a mechanism's signing secret",
    description="A new `whsec_` secret (generated, or the one given), shown in this answer only. For "
    "`grace_seconds` (default 24 h) every sampling request carries two signatures in `webhook-signature`, "
    "`v1,<new> v1,<old>`, so the endpoint accepts it whether it verifies with the old secret or the new "
    "one: reconfigure the endpoint within that time. An endpoint built with the SDK (`dpwatch_sdk.Endpoint`) may "
    "also be given both secrets during the switch. Rotating again during a grace period drops the "
    "older secret at once. 422 when the given secret is the current one. The body may be omitted.",
    responses=problem_responses(401, 403, 404, 422),
)
def rotate_mechanism_secret(
    mechanism_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: SessionDep,
    body: Annotated[RotateMechanismSecret | None, Body()] = None,
) -> SecretRotated:
    mechanism = service.get_mechanism(session, principal.tenant_id, mechanism_id)
    body = body or RotateMechanismSecret()
    new_secret = body.secret or generate_signing_secret()
    if new_secret == mechanism.secret:
        raise InvalidInputError("The new secret must differ from the current one.", field=["body", "secret"])
    expires = rotate_secret(mechanism, new_secret, body.grace_seconds)
    session.flush()
    log.info("mechanism.secret_rotated", mechanism_id=str(mechanism.id),
             previous_valid_until=expires and expires.isoformat())
    return SecretRotated(id=mechanism.id, secret=new_secret, previous_secret_expires_at=expires)
