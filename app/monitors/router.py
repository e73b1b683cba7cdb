"""/v1/monitors: create and steer monitors, read their status and periods."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

import anyio.from_thread
from fastapi import APIRouter, Query, Response, status
from sqlalchemy.orm import Session

from app.api.deps import CurrentPrincipal, SessionDep, SettingsDep, run_read
from app.api.errors import ProblemError, field_problem, problem_responses
from app.api.pagination import CursorQuery, LimitQuery, Page, SeqCursorQuery
from app.jobs.schemas import JobRead
from app.mechanisms.router import ProberDep
from app.mechanisms.schemas import ProbeReport
from app.mechanisms.service import Prober, get_mechanism
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor
from app.monitors import service
from app.monitors.schemas import (
    CheckRead,
    DatabaseProbe,
    MonitorCreate,
    MonitorCreated,
    MonitorRead,
    MonitorState,
    MonitorStatus,
    MonitorUpdate,
    MonitorValidation,
    PeriodCheckRead,
    PeriodRead,
)
from app.quotas.service import check_monitor as check_monitor_quotas
from app.search.schemas import AdoptFindingRequest
from app.settings import Settings

router = APIRouter(prefix="/monitors", tags=["monitors"])

# The hot reads (GET /v1/monitors, /{id}, /{id}/status, /{id}/periods) are
# ``async def`` handlers that do their queries, and end the request's session, in one thread-pool
# call (app.api.deps.run_read): a plain ``def`` handler is a hop to the pool, FastAPI validates
# its return value in a second one, and the session's end would be a third.


#: The fields _read copies from a monitor's and a check's row (the claims are worked out).
_MONITOR_FIELDS = tuple(name for name in MonitorRead.model_fields if name not in ("checks", "claim"))
_CHECK_FIELDS = tuple(name for name in CheckRead.model_fields if not name.startswith("claim"))
#: The check columns the reads select: those fields and the check's own claim.
_CHECK_COLUMNS = (*_CHECK_FIELDS, "claim")


def _read(monitor: Monitor | Any, checks: list[Check] | list[Any]) -> MonitorRead:
    """The response for a monitor and its checks: ORM objects, or the plain rows of the reads
    (app.monitors.service.get_monitor_plain)."""
    data = {name: getattr(monitor, name) for name in _MONITOR_FIELDS}
    data["claim"] = service.monitor_claim_api_form(monitor)
    check_reads = [
        CheckRead.model_validate({**{n: getattr(c, n) for n in _CHECK_FIELDS}, **service.check_claim_fields(monitor, c)})
        for c in checks
    ]
    return MonitorRead.model_validate({**data, "checks": check_reads})


ValidateMonitorQuery = Annotated[
    bool,
    Query(description="Call the mechanism once on each distinct database of the checks (x and x') before saving. "
          "If an answer is wrong (or breaks the mechanism's output contract), nothing is saved and the response is "
          "a 422 whose `errors` point at the check."),
]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=MonitorCreated,
    summary="Create a monitor",
    description=(
        "Create a monitor of a mechanism. With `symmetric`, each (x, x') check gets a reversed "
        "(x', x) copy. The m checks share α_j by Bonferroni (α_j/m each). If the threshold "
        "q(T, γ, α_j/m) is in the shipped table the monitor starts `active`; otherwise, or when an "
        "event is `auto`, it starts `calibrating` and becomes `active` once the threshold is "
        "computed (and the events chosen). The first period is at `start_at` (default: now)."
    ),
    responses=problem_responses(401, 404, 422, 429),
)
def create_monitor(body: MonitorCreate, principal: CurrentPrincipal, session: SessionDep, settings: SettingsDep,
                   prober: ProberDep, validate: ValidateMonitorQuery = False) -> MonitorCreated:
    validation = None
    if validate:
        mechanism = get_mechanism(session, principal.tenant_id, body.mechanism_id)
        databases = _check_databases([(c.x, c.x_prime) for c in body.checks])
        validation = _probe_databases(prober, mechanism, settings, databases)
        if not validation.ok:
            raise ProblemError(
                "The sampling endpoint did not answer correctly on the checks' databases; nothing was saved. "
                + "; ".join(f"{p.database!r}: {'; '.join(p.report.problems)}" for p in validation.probes
                            if not p.report.ok),
                status=422, slug="endpoint-validation-failed",
                errors=[field_problem(["body", "checks", pos, "x"], problem, f"endpoint_{p.report.reason or 'invalid'}")
                        for p in validation.probes if not p.report.ok for pos in p.checks[:1]
                        for problem in p.report.problems],
            )
    monitor = service.create_monitor(session, principal.tenant_id, body)
    check_monitor_quotas(session, principal.tenant_id, monitor.id, settings, creating=True)
    checks = service.get_checks(session, monitor.id)
    read = _read(monitor, checks)
    return MonitorCreated.model_validate({**read.model_dump(), "validation": validation,
                                          "warnings": service.creation_warnings(monitor, checks)})


def _check_databases(pairs: list[tuple[object, object]]) -> list[tuple[object, list[int]]]:
    """The distinct databases of the checks, each with the positions of the checks that use it."""
    seen: dict[str, tuple[object, list[int]]] = {}
    for i, (x, x_prime) in enumerate(pairs):
        for db in (x, x_prime):
            entry = seen.setdefault(json.dumps(db, sort_keys=True), (db, []))
            if i not in entry[1]:
                entry[1].append(i)
    return list(seen.values())


def _probe_databases(prober: Prober, mechanism: Mechanism, settings: Settings,
                     databases: list[tuple[object, list[int]]]) -> MonitorValidation:
    probes = []
    for database, positions in databases:
        result = anyio.from_thread.run(lambda db=database: prober(mechanism, settings, database=db, n=10))
        report = ProbeReport.model_validate(result).model_copy(update={"database": database})
        probes.append(DatabaseProbe(database=database, checks=positions, report=report))
    return MonitorValidation(ok=all(p.report.ok for p in probes), probes=probes)


@router.post(
    "/{monitor_id}/validate",
    response_model=MonitorValidation,
    summary="Validate a monitor's mechanism on its checks' databases",
    description="Calls the mechanism's endpoint once on each distinct database (x and x') of the monitor's checks "
    "and reports what, if anything, is wrong with each answer, including a breach of the mechanism's output "
    "contract. Always 200: `ok` tells whether every probe passed.",
    responses=problem_responses(401, 404, 422),
)
def validate_monitor(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep, settings: SettingsDep,
                     prober: ProberDep) -> MonitorValidation:
    monitor = service.get_monitor(session, principal.tenant_id, monitor_id)
    mechanism = get_mechanism(session, principal.tenant_id, monitor.mechanism_id)
    checks = [c for c in service.get_checks(session, monitor.id) if not c.reversed]
    return _probe_databases(prober, mechanism, settings, _check_databases([(c.x, c.x_prime) for c in checks]))


@router.get(
    "",
    response_model=Page[MonitorRead],
    summary="List monitors",
    description="This tenant's monitors, newest first, optionally filtered by state and mechanism.",
    responses=problem_responses(401, 422),
)
async def list_monitors(
    principal: CurrentPrincipal,
    session: SessionDep,
    state: Annotated[MonitorState | None, Query(description="Only monitors in this state.")] = None,
    mechanism_id: Annotated[uuid.UUID | None, Query(description="Only monitors of this mechanism.")] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[MonitorRead]:
    def read() -> Page[MonitorRead]:
        monitors, next_cursor = service.list_monitors_plain(
            session, principal.tenant_id, state=state, mechanism_id=mechanism_id, limit=limit, cursor=cursor
        )
        checks = service.checks_plain_by_monitor(session, [m.id for m in monitors], _CHECK_COLUMNS)
        return Page[MonitorRead](items=[_read(m, checks[m.id]) for m in monitors], next_cursor=next_cursor)

    return await run_read(session, read)


@router.get(
    "/{monitor_id}",
    response_model=MonitorRead,
    summary="Get a monitor",
    description="The monitor's configuration, state and checks.",
    responses=problem_responses(401, 404, 422),
)
async def get_monitor(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> MonitorRead:
    def read() -> MonitorRead:
        monitor = service.get_monitor_plain(session, principal.tenant_id, monitor_id)
        return _read(monitor, service.checks_plain_by_monitor(session, [monitor.id], _CHECK_COLUMNS)[monitor.id])

    return await run_read(session, read)


@router.patch(
    "/{monitor_id}",
    response_model=MonitorRead,
    summary="Update a monitor in place",
    description=(
        "A JSON merge patch (RFC 7396): the fields given change, the others keep their value; the monitor keeps its "
        "id, periods, alarms, horizon and running detectors. Changed in place, from the next period on (a period "
        "already sampling finishes with the values it started with): `name`, `samples_per_period` (n; each period's "
        "z_t is standardised with its own n, and the threshold q(T, γ, α) does not depend on n), the schedule "
        "(`period_seconds` or `cron`, one replacing the other: the next period is the first slot of the new "
        "schedule from now, counted from the last period's slot), `outputs_window`, `snapshot_every`, "
        "`alarm_snapshot_samples`, `discovery_samples`, `discovery_fresh_samples`, `search_budget`, and "
        "`rediscover_every` / `search_every` between positive values. "
        "**409** (`monitor-test-change`, `errors` naming each field) when a field that defines the test would "
        "change: `checks` (whenever given), `mechanism_id`, `epsilon`, `claim`, `alpha`, `gamma`, `detector`, "
        "`horizon` (except on an `e-process` monitor, which ignores it and lets it change in place), `variance`, "
        "`kappa`, `symmetric`, `renew`, or `rediscover_every` / `search_every` switching "
        "between 0 and a positive value (the α split of the running horizon); create a new monitor instead. "
        "Those fields given with their current value change nothing. **422** for an invalid value, an explicit "
        "`null` of a field that cannot be null, both or neither schedule, a cron that never fires, or an unknown "
        "field. Pause and resume with `POST …/pause` and `…/resume`. 404 for another tenant's monitor; 403 for "
        "a `read` key."
    ),
    responses=problem_responses(401, 403, 404, 409, 422, 429),
)
def update_monitor(monitor_id: uuid.UUID, body: MonitorUpdate, principal: CurrentPrincipal,
                   session: SessionDep, settings: SettingsDep) -> MonitorRead:
    monitor = service.get_monitor(session, principal.tenant_id, monitor_id, for_update=True)
    service.update_monitor(session, monitor, body)
    check_monitor_quotas(session, principal.tenant_id, monitor.id, settings, creating=False)
    return _read(monitor, service.get_checks(session, monitor.id))


@router.get(
    "/{monitor_id}/status",
    response_model=MonitorStatus,
    summary="Get a monitor's status",
    description="State, progress through the horizon, threshold and levels, and each check's latest "
    "z, M_t and largest M_t so far.",
    responses=problem_responses(401, 404, 422),
)
async def get_monitor_status(monitor_id: uuid.UUID, principal: CurrentPrincipal,
                             session: SessionDep) -> MonitorStatus:
    return await run_read(
        session, lambda: service.monitor_status(session, service.get_monitor(session, principal.tenant_id, monitor_id)))


@router.post(
    "/{monitor_id}/pause",
    response_model=MonitorRead,
    summary="Pause a monitor",
    description="Stop running periods. The current state is remembered for `resume`. 409 if the "
    "monitor is already paused or completed.",
    responses=problem_responses(401, 404, 409, 422),
)
def pause_monitor(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> MonitorRead:
    monitor = service.get_monitor(session, principal.tenant_id, monitor_id, for_update=True)
    service.pause_monitor(session, monitor)
    return _read(monitor, service.get_checks(session, monitor.id))


@router.post(
    "/{monitor_id}/resume",
    response_model=MonitorRead,
    summary="Resume a paused monitor",
    description="Return to the state before the pause. The next period is the next slot of the "
    "schedule from now (missed slots are skipped, not caught up). 409 unless paused.",
    responses=problem_responses(401, 404, 409, 422),
)
def resume_monitor(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> MonitorRead:
    monitor = service.get_monitor(session, principal.tenant_id, monitor_id, for_update=True)
    service.resume_monitor(session, monitor)
    return _read(monitor, service.get_checks(session, monitor.id))


@router.post(
    "/{monitor_id}/reset",
    response_model=MonitorRead,
    summary="Reset a monitor after a fix",
    description="Start a new horizon (j + 1) with t = 0 and fresh detectors, at level α_{j+1} when "
    "`renew`. Open alarms are resolved (and `alarm.resolved` webhooks sent). Past periods and "
    "alarms are kept. The state becomes `active`, or `calibrating` if the new threshold is not "
    "in the table; the next period is the next slot from now.",
    responses=problem_responses(401, 404, 422),
)
def reset_monitor(
    monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep, settings: SettingsDep
) -> MonitorRead:
    monitor = service.get_monitor(session, principal.tenant_id, monitor_id, for_update=True)
    service.reset_monitor(session, monitor, settings)
    return _read(monitor, service.get_checks(session, monitor.id))


@router.post(
    "/{monitor_id}/checks/from-search",
    response_model=JobRead,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Watch a search's finding (one call; a job)",
    description="Turns a finding of a succeeded `search` job on this monitor's mechanism into a new check of the "
    "monitor (its pair and event, the monitor's claim), with its own share of α: the r-th check added in the "
    "horizon runs at α_j·2^−(r+1) over the remaining periods (docs/search.md §5). Answers 202 with a job that "
    "computes the check's threshold and adds it (`result.check_id`). 422 when the job is not a succeeded search "
    "of this mechanism or has no such finding; 409 when the monitor reserved no α for added checks (create it with "
    "`search_every` > 0, or with an `auto` check and `rediscover_every` > 0), is not running, or its horizon is nearly over.",
    responses=problem_responses(401, 404, 409, 422),
)
def adopt_search_finding(monitor_id: uuid.UUID, body: AdoptFindingRequest, principal: CurrentPrincipal,
                         session: SessionDep, response: Response) -> JobRead:
    from app.api.errors import ConflictError, InvalidInputError
    from app.jobs.service import enqueue_job, to_job_read
    from app.monitors.searches import adoption_source

    monitor = service.get_monitor(session, principal.tenant_id, monitor_id)
    try:
        adoption_source(session, principal.tenant_id, monitor, body.job_id, body.finding)
    except ValueError as exc:
        raise InvalidInputError(str(exc), field=["body", "job_id"]) from None
    except LookupError as exc:
        raise ConflictError(str(exc)) from None
    job = enqueue_job(session, principal.tenant_id, "search",
                      {"mode": "adopt", "job_id": str(body.job_id), "finding": body.finding},
                      mechanism_id=monitor.mechanism_id, monitor_id=monitor.id)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return to_job_read(job)


@router.delete(
    "/{monitor_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a monitor",
    description="Delete the monitor with its checks and periods. Its alarms are kept, archived: they keep the "
    "monitor's id and name and are listed by `GET /v1/alarms?archived=true`.",
    responses=problem_responses(401, 404, 422),
)
def delete_monitor(monitor_id: uuid.UUID, principal: CurrentPrincipal, session: SessionDep) -> Response:
    service.delete_monitor(session, service.get_monitor(session, principal.tenant_id, monitor_id, for_update=True))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{monitor_id}/periods",
    response_model=Page[PeriodRead],
    summary="List a monitor's periods",
    description="Every period, newest first: for each check a, b, p̂, q̂, D̂, σ̂, z, M_t and the "
    "threshold; for failed periods the failure reason and detail.",
    responses=problem_responses(401, 404, 422),
)
async def list_periods(
    monitor_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: SeqCursorQuery = None,
) -> Page[PeriodRead]:
    return await run_read(session, _periods_page, session, principal.tenant_id, monitor_id, limit, cursor)


def _periods_page(session: Session, tenant_id: uuid.UUID, monitor_id: uuid.UUID, limit: int,
                  cursor: str | None) -> Page[PeriodRead]:
    rows, next_cursor = service.list_period_rows(session, tenant_id, monitor_id, limit=limit, cursor=cursor)
    items = []
    # Rows by column name (a Row's ``t`` is its tuple), the names taken once per result: a row's
    # ``_mapping`` builds its key view on every use.
    run_keys: tuple[str, ...] | None = None
    check_keys: tuple[str, ...] | None = None
    for run, period_checks in rows:
        run_keys = run_keys or run._fields
        data = dict(zip(run_keys, run, strict=True))
        checks = []
        for pc in period_checks:
            check_keys = check_keys or pc._fields
            values = dict(zip(check_keys, pc, strict=True))
            del values["period_run_id"]
            values["alarm"] = pc.statistic > pc.threshold
            checks.append(PeriodCheckRead.model_validate(values))
        items.append(PeriodRead.model_validate({**data, "checks": checks}))
    return Page[PeriodRead](items=items, next_cursor=next_cursor)
