"""/v1/jobs, and the routes that start jobs: discovery and audits of a mechanism."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.api.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.api.errors import InvalidInputError, problem_responses
from app.api.pagination import CursorQuery, LimitQuery, Page
from app.jobs import service
from app.jobs.schemas import AuditRequest, DiscoverRequest, JobKind, JobRead, JobState
from app.mechanisms.service import get_mechanism
from app.quotas.service import check_new_job
from app.search.schemas import SearchRequest

router = APIRouter(tags=["jobs"])

_POLL = ("Answers `202 Accepted` with the job and a `Location` header: poll `GET /v1/jobs/{id}` until `state` is "
         "`succeeded` (the answer is in `result`), `failed` (`error`) or `cancelled`; `progress` says how far it "
         "is meanwhile. `POST /v1/jobs/{id}/cancel` stops it within seconds. "
         "Each job runs in a process of its own with a memory and a time limit; a job over one fails with "
         "`failure_reason` `memory limit` or `time limit`. A tenant's jobs run at most `max_concurrent_jobs` at once "
         "and take turns with other tenants' (`GET /v1/quotas`); 429 when the tenant has `max_queued_jobs` jobs "
         "queued or running, or the job would take it over `max_outputs_per_day`; 422 when the job alone is over it.")


def _accepted(response: Response, job_read: JobRead) -> JobRead:
    response.headers["Location"] = f"/v1/jobs/{job_read.id}"
    return job_read


@router.post(
    "/mechanisms/{mechanism_id}/discover",
    response_model=JobRead,
    status_code=status.HTTP_202_ACCEPTED,
    tags=["mechanisms"],
    summary="Find the events worth watching (a job)",
    description="Queues a discovery job: it draws `samples` + `fresh_samples` outputs on each database of the "
    "candidate pairs, runs MPL (seed 003, Algorithms 3-4) and ranks candidate checks: the pair, a small event "
    "around t̂, ε̂ and the lower bound LB on fresh draws. " + _POLL,
    responses=problem_responses(401, 404, 422, 429),
)
def discover_events(mechanism_id: uuid.UUID, body: DiscoverRequest, principal: CurrentPrincipal,
                    session: SessionDep, settings: SettingsDep, response: Response) -> JobRead:
    get_mechanism(session, principal.tenant_id, mechanism_id)
    params = body.model_dump(mode="json")
    check_new_job(session, principal.tenant_id, "discovery", params, settings)
    job = service.enqueue_job(session, principal.tenant_id, "discovery", params, mechanism_id=mechanism_id)
    return _accepted(response, service.to_job_read(job))


@router.post(
    "/mechanisms/{mechanism_id}/audits",
    response_model=JobRead,
    status_code=status.HTTP_202_ACCEPTED,
    tags=["mechanisms"],
    summary="Audit a claimed ε once (a job)",
    description="Queues a one-shot audit of the claimed `epsilon` on the candidate pairs: the engine estimates ε̂ "
    "and a lower confidence bound LB, and `refutes_claim` is true when LB exceeds the claim (level α). " + _POLL,
    responses=problem_responses(401, 404, 422, 429),
)
def create_audit(mechanism_id: uuid.UUID, body: AuditRequest, principal: CurrentPrincipal, session: SessionDep,
                 settings: SettingsDep, response: Response) -> JobRead:
    get_mechanism(session, principal.tenant_id, mechanism_id)
    params = body.model_dump(mode="json")
    check_new_job(session, principal.tenant_id, "audit", params, settings)
    job = service.enqueue_job(session, principal.tenant_id, "audit", params, mechanism_id=mechanism_id)
    return _accepted(response, service.to_job_read(job))


@router.post(
    "/mechanisms/{mechanism_id}/searches",
    response_model=JobRead,
    status_code=status.HTTP_202_ACCEPTED,
    tags=["mechanisms"],
    summary="Search for inputs that break a claim (a job)",
    description="Queues a `search` job (docs/search.md): candidate pairs of neighbouring databases from the input "
    "domain (the request's `domain`, else the mechanism's `input_domain`; 422 with neither), screened by successive "
    "halving, refined by a derivative-free optimiser, and the finalists certified on fresh samples with the audit "
    "engine at level `alpha`. `result.certified` is true only when a violation was certified; otherwise none was "
    "found within the budget, which does not show that the claim holds. Inputs the endpoint fails on are listed in "
    "`result.failing_inputs`. " + _POLL,
    responses=problem_responses(401, 404, 422, 429),
)
def create_search(mechanism_id: uuid.UUID, body: SearchRequest, principal: CurrentPrincipal, session: SessionDep,
                  settings: SettingsDep, response: Response) -> JobRead:
    mechanism = get_mechanism(session, principal.tenant_id, mechanism_id)
    if body.domain is None and mechanism.input_domain is None:
        raise InvalidInputError("the mechanism declares no input_domain: give `domain` in the request, or set it on "
                                "the mechanism (PATCH /v1/mechanisms/{id})", field=["body", "domain"])
    params = body.model_dump(mode="json", exclude_none=True)
    check_new_job(session, principal.tenant_id, "search", params, settings)
    job = service.enqueue_job(session, principal.tenant_id, "search", params, mechanism_id=mechanism_id)
    return _accepted(response, service.to_job_read(job))


@router.get(
    "/jobs",
    response_model=Page[JobRead],
    summary="List jobs",
    description="This tenant's jobs, newest first, optionally filtered.",
    responses=problem_responses(401, 422),
)
def list_jobs(
    principal: CurrentPrincipal,
    session: SessionDep,
    kind: Annotated[JobKind | None, Query(description="Only jobs of this kind.")] = None,
    state: Annotated[JobState | None, Query(description="Only jobs in this state.")] = None,
    mechanism_id: Annotated[uuid.UUID | None, Query(description="Only jobs on this mechanism.")] = None,
    monitor_id: Annotated[uuid.UUID | None, Query(description="Only jobs of this monitor (re-discovery).")] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[JobRead]:
    jobs, next_cursor = service.list_jobs(session, principal.tenant_id, kind=kind, state=state,
                                          mechanism_id=mechanism_id, monitor_id=monitor_id, limit=limit,
                                          cursor=cursor)
    return Page[JobRead](items=[service.to_job_read(j) for j in jobs], next_cursor=next_cursor)


@router.get(
    "/jobs/{job_id}",
    response_model=JobRead,
    summary="Get a job",
    description="Its state, progress, and, once finished, its result or error.",
    responses=problem_responses(401, 404, 422),
)
def get_job(job_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> JobRead:
    return service.to_job_read(service.get_job(session, principal.tenant_id, job_id))


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobRead,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Cancel a job",
    description="A queued job is cancelled at once (`state: cancelled`). A running job gets "
    "`cancel_requested: true`; its worker sees the flag within about a second and ends the job's process: poll "
    "it until `state` is `cancelled`. 409 when the job has already finished.",
    responses=problem_responses(401, 404, 409, 422),
)
def cancel_job(job_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> JobRead:
    job = service.get_job(session, principal.tenant_id, job_id, for_update=True)
    return service.to_job_read(service.cancel_job(session, job))
