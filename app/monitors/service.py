"""Monitors: create, read, pause/resume/reset, delete; the start of a horizon. Never commits.

The engine (period runner, calibration) uses :func:`check_alpha`, :func:`lookup_threshold`,
:func:`activate`, :func:`start_horizon` and :class:`app.monitors.schedule.Schedule`.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.alarms.service import resolve_open_alarms
from app.api.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    ProblemError,
    field_problem,
)
from app.api.pagination import SortKey, paginate
from app.claims.service import effective_claim
from app.db import utcnow
from app.mechanisms.service import get_mechanism
from app.models.alarms import Alarm
from app.models.mechanisms import Mechanism
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.monitors.schedule import Schedule
from app.monitors.schemas import (
    SAFE_FIELDS,
    TEST_FIELDS,
    CheckStatus,
    MonitorCreate,
    MonitorStatus,
    MonitorUpdate,
    useless_event,
)
from app.settings import Settings
from app.stats.claims import ApproxDP, Claim, PureDP, parse_claim

PAUSABLE_STATES = ("calibrating", "active", "alarm", "degraded")

log = structlog.get_logger("dpwatch.monitors")


# --------------------------------------------------------------------------- levels, thresholds


def horizon_level(alpha: float, renew: bool, horizon_index: int) -> float:
    """α_j: the whole α for a single horizon, 6α/(π²j²) for horizon j of a renewing monitor."""
    from app.stats.multiple import renewal_alpha

    return renewal_alpha(alpha, horizon_index) if renew else alpha


def check_alpha(monitor: Monitor, checks_count: int) -> float:
    """The level of each check present at the start of a horizon: α_j/m (Bonferroni over the m
    checks), or α_j/(2m) when re-discovery may add checks during the horizon (method.md §11)."""
    from app.stats.multiple import initial_check_alpha

    return initial_check_alpha(monitor.horizon_alpha, checks_count, rediscovers(monitor))


def rediscovers(monitor: Monitor) -> bool:
    """Whether checks may be added to this monitor during a horizon: re-discovery (``auto`` checks
    and a period K) or a search every ``search_every`` periods (app.monitors.searches)."""
    return bool(monitor.rediscover_every or monitor.search_every)


def default_rediscover_every(horizon: int) -> int:
    """K for monitors with ``auto`` events when none is given: ten re-discoveries per horizon at
    most, and not more often than every 5 periods."""
    return max(5, -(-horizon // 10))


def lookup_threshold(horizon: int, gamma: float, alpha: float) -> Any:
    """The shipped ``ThresholdEstimate`` for (T, γ, α), or None when off the table's grid."""
    from app.stats.thresholds import threshold_from_table

    return threshold_from_table(horizon, gamma, alpha)


def is_auto(check: Check) -> bool:
    """An ``auto`` check whose event is not chosen yet (or none was worth adopting: it is then
    dormant, its detector does not run, and re-discovery keeps looking)."""
    return check.event.get("kind") == "auto"


def awaits_discovery(check: Check) -> bool:
    """An ``auto`` check that discovery has not looked at yet (it keeps the monitor calibrating)."""
    return is_auto(check) and check.discovery is None


def initial_detector_state(monitor: Monitor, check: Check | None = None) -> dict[str, Any]:
    """A fresh detector of the monitor's kind for ``check`` (app/monitors/detectors.py)."""
    from app.monitors.detectors import initial_state

    assert monitor.threshold is not None
    claim = check_claim(monitor, check) if check is not None else (monitor_claim(monitor) or PureDP(1.0))
    return initial_state(monitor.detector or "aggregator", horizon=monitor.horizon, gamma=monitor.gamma,
                         threshold=monitor.threshold, level=check.level if check is not None else None, claim=claim,
                         design_horizon=monitor.design_horizon)


def horizon_free_estimate(monitor: Monitor, level: float) -> Any:
    """The alarm threshold of an e-process / e-detector check at ``level``, as a table estimate (its
    log, exact: no Monte Carlo)."""
    from app.monitors.detectors import sequential_log_threshold
    from app.stats.thresholds import ThresholdEstimate

    value = sequential_log_threshold(monitor.detector, level, monitor.horizon)
    return ThresholdEstimate(monitor.horizon, monitor.gamma, level, value, 0.0, 0, 0, monitor.detector)


def activate(monitor: Monitor, checks: Sequence[Check], estimate: Any) -> None:
    """Set the threshold from ``estimate`` (a ``ThresholdEstimate``), start fresh detectors and
    make the monitor ``active``. The engine calls this when calibration finishes."""
    if any(awaits_discovery(check) for check in checks):
        raise ValueError("every auto check must go through discovery before the monitor can be activated")
    monitor.threshold = float(estimate.value)
    monitor.threshold_std_error = float(estimate.std_error)
    monitor.threshold_source = str(estimate.source)
    for check in checks:
        check.detector_state = None if is_auto(check) else initial_detector_state(monitor, check)
    monitor.state = "active"


def start_horizon(monitor: Monitor, checks: Sequence[Check], horizon_index: int) -> None:
    """Begin horizon ``horizon_index``: t = 0, α_j, a threshold from the table if it has one,
    new detectors, and state ``active`` — or ``calibrating`` when the threshold is off the table
    or an event is still ``auto`` (the engine then computes/discovers and calls :func:`activate`)."""
    monitor.horizon_index = horizon_index
    monitor.horizon_alpha = horizon_level(monitor.alpha, monitor.renew, horizon_index)
    monitor.t = 0
    monitor.consecutive_failures = 0
    monitor.paused_from_state = None
    monitor.rediscoveries = 0
    monitor.calibration_attempts = 0
    monitor.calibration_error = None
    level = check_alpha(monitor, len(checks))
    for check in checks:
        # Checks re-discovery added in an earlier horizon are ordinary checks of this one.
        check.detector_state = None
        check.claim_state = None
        check.last_z = None
        check.last_statistic = None
        check.max_statistic = None
        check.joined_t = 0
        check.level = level
    from app.monitors.detectors import is_horizon_free

    if is_horizon_free(monitor.detector or "aggregator"):
        estimate = horizon_free_estimate(monitor, level)
    else:
        estimate = lookup_threshold(monitor.horizon, monitor.gamma, level)
    if estimate is None:
        monitor.threshold = None
        monitor.threshold_std_error = None
        monitor.threshold_source = None
        monitor.state = "calibrating"
        return
    if any(awaits_discovery(check) for check in checks):
        # The threshold does not depend on the events: keep it, discover the events first.
        monitor.threshold = float(estimate.value)
        monitor.threshold_std_error = float(estimate.std_error)
        monitor.threshold_source = str(estimate.source)
        monitor.state = "calibrating"
        return
    activate(monitor, checks, estimate)


# --------------------------------------------------------------------------- claims


def monitor_claim(monitor: Monitor) -> Claim | None:
    """The monitor's default claim, parsed once from its stored JSON; ε-DP with the monitor's
    ``epsilon`` for monitors made before claims."""
    if monitor.claim:
        return parse_claim(monitor.claim)
    return None if monitor.epsilon is None else PureDP(float(monitor.epsilon))


def monitor_claim_api_form(monitor: Monitor | Any) -> dict[str, float] | None:
    """``monitor_claim(monitor).to_dict()``, worked out once per distinct claim."""
    if not monitor.claim and monitor.epsilon is None:
        return None
    return _claim_forms(effective_claim(None, monitor.claim, monitor.epsilon))[0]


def check_claim(monitor: Monitor, check: Check) -> Claim:
    """The claim ``check`` is tested against: its own, else the monitor's (parsed once)."""
    return parse_claim(effective_claim(check.claim, monitor.claim, monitor.epsilon))


def check_claim_fields(monitor: Monitor, check: Check) -> dict[str, Any]:
    """The check's claim in its API form, and in words."""
    api_form, words = _claim_forms(effective_claim(check.claim, monitor.claim, monitor.epsilon))
    return {"claim": api_form, "claim_description": words}


def _claim_forms(data: Any) -> tuple[dict[str, float], str]:
    """A stored claim's API form and its words: from the cache when its fields are plain scalars."""
    key = _claim_key(data)
    if key is None:
        claim = parse_claim(data)
        return claim.to_dict(), claim.describe()
    api_form, words = _claim_api_form(key)
    return dict(api_form), words


def _claim_key(data: Any) -> tuple[tuple[str, type, Any], ...] | None:
    """A hashable key of a stored claim's fields (types included: ``1`` and ``True`` differ), or
    None when a value is not a plain scalar."""
    if not isinstance(data, dict):
        return None
    items = []
    for name, value in data.items():
        if not isinstance(value, (int, float, str, type(None))):
            return None
        items.append((name, type(value), value))
    return tuple(sorted(items, key=lambda item: item[0]))


@functools.lru_cache(maxsize=1024)
def _claim_api_form(key: tuple[tuple[str, type, Any], ...]) -> tuple[tuple[tuple[str, float], ...], str]:
    """A claim's API form and its words, worked out once per distinct claim (the reads list the
    same few claims for every check of every monitor)."""
    claim = parse_claim({name: value for name, _, value in key})
    return tuple(claim.to_dict().items()), claim.describe()


# --------------------------------------------------------------------------- events vs outputs


def event_mismatch(event: dict[str, Any], mechanism: Mechanism) -> str | None:  # noqa: C901
    """Why ``event`` cannot apply to the mechanism's outputs, or None if it can."""
    kind = event["kind"]
    output = mechanism.output_kind
    if kind == "auto":
        return None
    useless = useless_event(event, mechanism.output_kind, mechanism.output_shape)
    if useless is not None:
        return useless
    if output == "keyed" or kind in KEYED_EVENT_KINDS:
        return _keyed_mismatch(event, mechanism)
    if kind in ("rows", "projection"):
        return None if output == "vector" else f"a `{kind}` event applies to vector or list outputs, but the " \
            f"mechanism's outputs are {output}"
    if kind == "lattice":
        return None if output != "vector" else "a `lattice` event applies to scalar outputs, but the mechanism's " \
            "outputs are vectors"
    if output == "vector":
        if kind == "box":
            if len(event["low"]) != mechanism.dim:
                return (
                    f"the box has dimension {len(event['low'])} but the mechanism's outputs are vectors "
                    f"of length {mechanism.dim}"
                )
            return None
        if kind == "set" and event["values"] and isinstance(event["values"][0], list):
            if len(event["values"][0]) != mechanism.dim:
                return (
                    f"the set's tuples have length {len(event['values'][0])} but the mechanism's outputs "
                    f"have length {mechanism.dim}"
                )
            return None
        return f"the mechanism's outputs are vectors; use a `box` or a `set` of tuples (got `{kind}`)"
    if kind == "box":
        return f"a `box` applies to vector outputs, but the mechanism's outputs are {output}"
    if kind == "set":
        first = event["values"][0]
        if isinstance(first, list):
            return f"a `set` of tuples applies to vector outputs, but the mechanism's outputs are {output}"
        if isinstance(first, str) and output == "real":
            return "a `set` of strings cannot contain real outputs; use an `interval` or a set of numbers"
    return None


#: The events of keyed outputs (app.stats.events, docs/audit.md §8).
KEYED_EVENT_KINDS = frozenset({"key", "key_value", "key_count", "key_set", "key_sets", "key_sum"})


def _keyed_mismatch(event: dict[str, Any], mechanism: Mechanism) -> str | None:
    """Keyed events on keyed outputs only; a key outside the declared universe is never released."""
    kind = event["kind"]
    if mechanism.output_kind != "keyed":
        return f"a `{kind}` event applies to keyed outputs, but the mechanism's outputs are {mechanism.output_kind}"
    if kind not in KEYED_EVENT_KINDS:
        return (f"the mechanism's outputs are keyed (objects from keys to values); use a `key`, `key_value`, "
                f"`key_count`, `key_set`, `key_sets` or `key_sum` event (got `{kind}`)")
    universe = (mechanism.output_shape or {}).get("keys")
    if universe is not None and kind in ("key", "key_value") and event["key"] not in set(universe):
        if kind == "key" and not event.get("released", True) or kind == "key_value" and event.get("absent"):
            return (f"the key {event['key']!r} is not a declared key: no output releases it, so the event holds "
                    "every output (p = q = 1) and can never show a violation")
        return (f"the key {event['key']!r} is not a declared key of the mechanism's output_shape: no output releases "
                "it, so the event holds no output (p = q = 0)")
    return None


# --------------------------------------------------------------------------- CRUD


def get_monitor(session: Session, tenant_id: uuid.UUID, monitor_id: uuid.UUID, *, for_update: bool = False) -> Monitor:
    stmt = select(Monitor).where(Monitor.id == monitor_id, Monitor.tenant_id == tenant_id)
    if for_update:
        stmt = stmt.with_for_update()
    monitor = session.scalar(stmt)
    if monitor is None:
        raise NotFoundError(f"Monitor {monitor_id} not found.")
    return monitor


def get_checks(session: Session, monitor_id: uuid.UUID) -> list[Check]:
    return list(session.scalars(select(Check).where(Check.monitor_id == monitor_id).order_by(Check.position)))


def list_monitors(
    session: Session,
    tenant_id: uuid.UUID,
    *,
    state: str | None = None,
    mechanism_id: uuid.UUID | None = None,
    limit: int,
    cursor: str | None,
) -> tuple[list[Monitor], str | None]:
    stmt = select(Monitor).where(Monitor.tenant_id == tenant_id)
    if state is not None:
        stmt = stmt.where(Monitor.state == state)
    if mechanism_id is not None:
        stmt = stmt.where(Monitor.mechanism_id == mechanism_id)
    return paginate(
        session, stmt, [SortKey(Monitor.created_at, "datetime"), SortKey(Monitor.id, "uuid")], limit, cursor
    )


def _plain(row: Any, keys: Sequence[str] | None = None) -> SimpleNamespace:
    """A row as an object with one attribute per column (a Row's own ``t`` would shadow the
    monitors.t column), for the read-only responses that only read attributes. ``keys``: the
    result's column names, taken once for all its rows (a row's ``_mapping`` builds its key view
    on every use: five times the cost)."""
    return SimpleNamespace(**dict(zip(row._fields if keys is None else keys, row, strict=True)))


def get_monitor_plain(session: Session, tenant_id: uuid.UUID, monitor_id: uuid.UUID) -> SimpleNamespace:
    """:func:`get_monitor` for the API's reads: the row without an ORM object (the ORM's
    row loading was a visible share of a read's CPU); :class:`NotFoundError` for
    another tenant's monitor."""
    row = session.execute(select(*Monitor.__table__.c).where(Monitor.id == monitor_id,
                                                             Monitor.tenant_id == tenant_id)).first()
    if row is None:
        raise NotFoundError(f"Monitor {monitor_id} not found.")
    return _plain(row)


def list_monitors_plain(session: Session, tenant_id: uuid.UUID, *, state: str | None = None,
                        mechanism_id: uuid.UUID | None = None, limit: int,
                        cursor: str | None) -> tuple[list[SimpleNamespace], str | None]:
    """:func:`list_monitors` as plain rows (see :func:`get_monitor_plain`)."""
    stmt = select(*Monitor.__table__.c).where(Monitor.tenant_id == tenant_id)
    if state is not None:
        stmt = stmt.where(Monitor.state == state)
    if mechanism_id is not None:
        stmt = stmt.where(Monitor.mechanism_id == mechanism_id)
    rows, next_cursor = paginate(session, stmt, [SortKey(Monitor.created_at, "datetime"), SortKey(Monitor.id, "uuid")],
                                 limit, cursor, as_rows=True)
    keys = rows[0]._fields if rows else ()
    return [_plain(row, keys) for row in rows], next_cursor


def checks_plain_by_monitor(session: Session, monitor_ids: Sequence[uuid.UUID],
                            columns: Sequence[str] | None = None) -> dict[uuid.UUID, list[SimpleNamespace]]:
    """:func:`checks_by_monitor` as plain rows (see :func:`get_monitor_plain`): every column, or
    only ``columns`` (``monitor_id`` is always read). A read that names its columns leaves out the
    detector's state, the largest JSON of a check, which the responses never show."""
    out: dict[uuid.UUID, list[SimpleNamespace]] = {mid: [] for mid in monitor_ids}
    if monitor_ids:
        table = Check.__table__.c
        selected = list(table) if columns is None else [table[name] for name in dict.fromkeys(("monitor_id", *columns))]
        result = session.execute(select(*selected).where(Check.monitor_id.in_(list(monitor_ids)))
                                 .order_by(Check.position))
        keys = tuple(result.keys())
        for row in result:
            out[row.monitor_id].append(_plain(row, keys))
    return out


def checks_by_monitor(session: Session, monitor_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[Check]]:
    out: dict[uuid.UUID, list[Check]] = {mid: [] for mid in monitor_ids}
    if monitor_ids:
        for check in session.scalars(
            select(Check).where(Check.monitor_id.in_(list(monitor_ids))).order_by(Check.position)
        ):
            out[check.monitor_id].append(check)
    return out


def _monitor_claim_of(data: MonitorCreate) -> dict[str, Any] | None:
    if data.claim is not None:
        return data.claim.to_dict()
    return None if data.epsilon is None else {"epsilon": data.epsilon}


def _claim_epsilon(data: MonitorCreate) -> float | None:
    """The monitors.epsilon column: the ε of the default claim when it has one."""
    claim = _monitor_claim_of(data)
    parsed = None if claim is None else parse_claim(claim)
    return parsed.epsilon if isinstance(parsed, (PureDP, ApproxDP)) else None


def _rediscover_every(data: MonitorCreate) -> int:
    """K of the monitor: 0 without ``auto`` checks; the given value, or the default, with them."""
    if not any(check.event.kind == "auto" for check in data.checks) or data.detector != "aggregator":
        return 0
    if data.rediscover_every is not None:
        return data.rediscover_every
    return default_rediscover_every(_horizon_of(data))


def _horizon_of(data: MonitorCreate) -> int:
    """T of the aggregator; the e-detector's window (default 1000); a placeholder for the e-process."""
    from app.monitors.detectors import DEFAULT_WINDOW

    return data.horizon if data.horizon is not None else DEFAULT_WINDOW


def create_monitor(
    session: Session, tenant_id: uuid.UUID, data: MonitorCreate, *, now: datetime | None = None
) -> Monitor:
    """Create a monitor with its checks (and their reversed copies when ``symmetric``)."""
    now = now or utcnow()
    mechanism = get_mechanism(session, tenant_id, data.mechanism_id)
    for i, check in enumerate(data.checks):
        problem = event_mismatch(check.event.model_dump(mode="json"), mechanism)
        if problem is not None:
            raise InvalidInputError(
                f"checks[{i}].event: {problem}.", field=["body", "checks", i, "event"], error_type="event_mismatch"
            )
    if data.search_every and mechanism.input_domain is None:
        raise InvalidInputError(
            "search_every needs a mechanism with an input_domain (the databases its claim covers): set it with "
            "PATCH /v1/mechanisms/{id}.", field=["body", "search_every"], error_type="no_input_domain")
    anchor = data.start_at or now
    monitor = Monitor(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        mechanism_id=mechanism.id,
        name=data.name,
        epsilon=_claim_epsilon(data),
        claim=_monitor_claim_of(data),
        alpha=data.alpha,
        gamma=data.gamma,
        horizon=_horizon_of(data),
        detector=data.detector,
        design_horizon=data.horizon if data.detector == "e-process" else None,
        samples_per_period=data.samples_per_period,
        period_seconds=data.period_seconds,
        cron=data.cron,
        variance=data.variance,
        kappa=data.kappa,
        symmetric=data.symmetric,
        renew=data.renew,
        outputs_window=data.outputs_window,
        snapshot_every=data.snapshot_every,
        alarm_snapshot_samples=data.alarm_snapshot_samples,
        rediscover_every=_rediscover_every(data),
        rediscoveries=0,
        discovery_samples=data.discovery_samples,
        discovery_fresh_samples=data.discovery_fresh_samples,
        search_every=data.search_every,
        search_budget=data.search_budget,
        state="calibrating",
        schedule_anchor=anchor,
        next_run_at=anchor,
        created_at=now,
        updated_at=now,
    )
    if data.cron is not None:
        monitor.next_run_at = Schedule.of(monitor).slot_at_or_after(anchor)
    checks: list[Check] = []
    default_claim = _monitor_claim_of(data)
    for item in data.checks:
        event = item.event.model_dump(mode="json")
        claim = item.claim.to_dict() if item.claim is not None else default_claim
        pairs = [(item.x, item.x_prime, False)]
        if data.symmetric:
            pairs.append((item.x_prime, item.x, True))
        for x, x_prime, reversed_ in pairs:
            checks.append(
                Check(
                    monitor_id=monitor.id, position=len(checks), x=x, x_prime=x_prime, event=event, reversed=reversed_,
                    claim=claim,
                    origin="auto" if event["kind"] == "auto" else "given", joined_t=0,
                )
            )
    start_horizon(monitor, checks, 1)
    session.add(monitor)
    session.flush()  # the monitor first: checks reference it
    session.add_all(checks)
    session.flush()
    return monitor


def _test_field_conflict(monitor: Monitor, name: str, data: MonitorUpdate) -> str | None:
    """Why PATCH cannot give ``name`` this value (a field that defines the test), or None when
    the value is the current one."""
    if name == "checks":
        return ("the checks cannot change in place: a check's level, threshold and detector belong to the horizon "
                "it started in; create a new monitor with the new checks (or add a search's finding with "
                "POST /v1/monitors/{id}/checks/from-search)")
    if name in ("epsilon", "claim"):
        if name == "claim":
            new = data.claim.to_claim() if data.claim is not None else None
        else:
            new = None if data.epsilon is None else PureDP(data.epsilon)
        if new == monitor_claim(monitor):
            return None
        return (f"{name} is the claim the checks are tested against (each period's line and z depend on it); a "
                "monitor cannot change it in place: create a new monitor with the new claim")
    value, current = getattr(data, name), getattr(monitor, name)
    if value == current:
        return None
    # T's part in the test depends on the detector (an e-process created without one never gets here)
    horizon_why = {
        "e-detector": "T is the e-detector's window, which sets its threshold c = T/α and so its guarantee (ARL ≥ c)",
        "e-process": f"the e-process's checks run a design tuned to the horizon it was created with "
                     f"({monitor.design_horizon} periods; docs/method.md §13.3d)",
    }.get(monitor.detector, "T sets the threshold q(T, γ, α) and the length of the horizon the detectors run over")
    why = {
        "mechanism_id": "the monitor tests one mechanism",
        "alpha": "α sets every check's level α_j/m and so the threshold",
        "gamma": "γ sets the aggregator's weights and its threshold q(T, γ, α)",
        "detector": "the detector is the sequential test itself",
        "horizon": horizon_why,
        "variance": "the variance estimator defines σ̂ and so each period's z",
        "kappa": "κ is the variance floor of each period's z",
        "symmetric": "symmetric decides which checks exist and their Bonferroni share of α",
        "renew": "renew sets the horizon levels α_j (α, or 6α/(π²j²))",
    }[name]
    return (f"{name} cannot change in place ({current!r} → {value!r}): {why}. Create a new monitor with the new "
            "value (dpwatch apply --allow-replace does that), and delete this one")


def update_monitor(session: Session, monitor: Monitor, data: MonitorUpdate, *,
                   now: datetime | None = None) -> list[str]:
    """Apply a merge patch (``PATCH /v1/monitors/{id}``); the names of the fields that changed.

    Fields that define the test (``TEST_FIELDS``) may only be given with their current value (409
    otherwise); ``rediscover_every`` and ``search_every`` may not switch between 0 and a positive K,
    which would change the α split of the running horizon (409). The others change in place and take
    effect from the next period. A new schedule is anchored at the monitor's last period slot (its
    anchor when none ran), and the next period is its first slot from now."""
    now = now or utcnow()
    given = data.model_fields_set
    # an e-process created without a horizon ignores the stored T, so for it `horizon` is a safe field;
    # one created with a horizon runs a design tuned to it (method.md §13.3d): for it T is the test's
    test_fields, safe_fields = TEST_FIELDS, SAFE_FIELDS
    if monitor.detector == "e-process" and monitor.design_horizon is None:
        test_fields = tuple(f for f in TEST_FIELDS if f != "horizon")
        safe_fields = (*SAFE_FIELDS, "horizon")
    conflicts = [(name, why) for name in test_fields if name in given
                 and (why := _test_field_conflict(monitor, name, data)) is not None]
    for name in ("rediscover_every", "search_every"):
        if name in given and bool(getattr(data, name)) != bool(getattr(monitor, name)):
            conflicts.append((name, (
                f"{name} cannot switch between 0 and a positive value in place ({getattr(monitor, name)} → "
                f"{getattr(data, name)}): a monitor that may add checks reserves half of each horizon's α for them "
                "(α_j/(2m) per check instead of α_j/m), fixed when the horizon starts. Create a new monitor with "
                "the new value; between positive values it may change")))
    if conflicts:
        raise ProblemError(
            "; ".join(why for _, why in conflicts) + ".", status=409, slug="monitor-test-change",
            errors=[field_problem(["body", name], why, "test_field") for name, why in conflicts])

    changed: list[str] = []
    for name in safe_fields:
        if name in given and name not in ("period_seconds", "cron") and getattr(monitor, name) != getattr(data, name):
            setattr(monitor, name, getattr(data, name))
            changed.append(name)
    if given & {"period_seconds", "cron"}:
        period_seconds = data.period_seconds if "period_seconds" in given else (
            None if data.cron is not None else monitor.period_seconds)
        cron = data.cron if "cron" in given else (None if data.period_seconds is not None else monitor.cron)
        if (period_seconds, cron) != (monitor.period_seconds, monitor.cron):
            changed += [n for n, old, new in (("period_seconds", monitor.period_seconds, period_seconds),
                                              ("cron", monitor.cron, cron)) if old != new]
            last = session.scalar(select(func.max(PeriodRun.scheduled_for)).where(PeriodRun.monitor_id == monitor.id))
            monitor.period_seconds, monitor.cron = period_seconds, cron
            if last is not None:
                # Slots of the new schedule follow the last period; never one already used.
                monitor.schedule_anchor = last
                earliest = max(now, last + timedelta(microseconds=1))
            else:
                earliest = max(now, monitor.schedule_anchor)
            monitor.next_run_at = Schedule.of(monitor).slot_at_or_after(earliest)
    if changed:
        log.info("monitor_updated", monitor_id=str(monitor.id), fields=changed)
        session.flush()
    return changed


def pause_monitor(session: Session, monitor: Monitor) -> Monitor:
    if monitor.state == "paused":
        raise ConflictError(f"Monitor {monitor.id} is already paused.")
    if monitor.state not in PAUSABLE_STATES:
        raise ConflictError(
            f"Monitor {monitor.id} is {monitor.state}; only {', '.join(PAUSABLE_STATES)} monitors can be paused."
        )
    monitor.paused_from_state = monitor.state
    monitor.state = "paused"
    session.flush()
    return monitor


def resume_monitor(session: Session, monitor: Monitor, *, now: datetime | None = None) -> Monitor:
    """Return to the state before the pause; the next period is the next slot from now."""
    if monitor.state != "paused":
        raise ConflictError(f"Monitor {monitor.id} is {monitor.state}, not paused.")
    now = now or utcnow()
    monitor.state = monitor.paused_from_state or "active"
    monitor.paused_from_state = None
    if monitor.state == "calibrating":  # a calibration that gave up starts again from its first attempt
        monitor.calibration_attempts = 0
        monitor.lease_expires_at = None if monitor.lease_owner is None else monitor.lease_expires_at
    monitor.next_run_at = Schedule.of(monitor).slot_at_or_after(now)
    session.flush()
    return monitor


def reset_monitor(session: Session, monitor: Monitor, settings: Settings, *, now: datetime | None = None) -> Monitor:
    """After a fix: start horizon j+1 with fresh detectors; resolve the open alarms (enqueueing
    ``alarm.resolved``). Past periods and alarms are kept."""
    now = now or utcnow()
    checks = get_checks(session, monitor.id)
    resolve_open_alarms(session, monitor, settings, now=now)
    start_horizon(monitor, checks, monitor.horizon_index + 1)
    monitor.next_run_at = Schedule.of(monitor).slot_at_or_after(now)
    session.flush()
    return monitor


def delete_monitor(session: Session, monitor: Monitor) -> None:
    """Delete the monitor with its checks and periods (FK cascade); its alarms are archived."""
    from app.alarms.service import archive_monitor_alarms

    archive_monitor_alarms(session, monitor)
    session.delete(monitor)
    session.flush()


# --------------------------------------------------------------------------- status, periods


def open_alarm_check_ids(session: Session, monitor_id: uuid.UUID) -> set[uuid.UUID]:
    return set(
        session.scalars(select(Alarm.check_id).where(Alarm.monitor_id == monitor_id, Alarm.resolved_at.is_(None)))
    )


def monitor_status(session: Session, monitor: Monitor) -> MonitorStatus:
    checks = get_checks(session, monitor.id)
    open_ids = open_alarm_check_ids(session, monitor.id)
    open_count = (
        session.scalar(
            select(func.count()).select_from(Alarm).where(Alarm.monitor_id == monitor.id, Alarm.resolved_at.is_(None))
        )
        or 0
    )
    from app.monitors.power import check_detection_power, check_power, power_warning

    powers = {c.id: (None if is_auto(c) else check_power(c, check_claim(monitor, c), monitor.samples_per_period,
                                                          c.level, horizon=monitor.horizon, gamma=monitor.gamma))
              for c in checks}
    detection = {c.id: (None if is_auto(c) else check_detection_power(
        c, check_claim(monitor, c), n=monitor.samples_per_period, detector=monitor.detector, level=c.level,
        threshold=_check_threshold(c, monitor), horizon=monitor.horizon, gamma=monitor.gamma, t=monitor.t))
        for c in checks}
    warnings = [w for c in checks if (w := power_warning(c.position, powers[c.id])) is not None]
    return MonitorStatus(
        id=monitor.id,
        name=monitor.name,
        state=monitor.state,  # type: ignore[arg-type]
        paused_from_state=monitor.paused_from_state,  # type: ignore[arg-type]
        t=monitor.t,
        horizon=monitor.horizon,
        horizon_index=monitor.horizon_index,
        detector=monitor.detector,  # type: ignore[arg-type]
        periods_remaining=None if monitor.detector != "aggregator" else monitor.horizon - monitor.t,
        alpha=monitor.alpha,
        horizon_alpha=monitor.horizon_alpha,
        check_alpha=next((c.level for c in checks if c.joined_t == 0 and c.level is not None),
                         check_alpha(monitor, len(checks))),
        checks_count=len(checks),
        threshold=monitor.threshold,
        threshold_std_error=monitor.threshold_std_error,
        threshold_source=monitor.threshold_source,
        consecutive_failures=monitor.consecutive_failures,
        calibration_attempts=monitor.calibration_attempts or 0,
        calibration_error=monitor.calibration_error,
        open_alarms=open_count,
        last_period_at=monitor.last_period_at,
        next_run_at=monitor.next_run_at,
        checks=[
            CheckStatus(
                id=c.id,
                position=c.position,
                reversed=c.reversed,
                event=c.event,
                origin=c.origin,  # type: ignore[arg-type]
                joined_t=c.joined_t,
                level=c.level,
                threshold=_check_threshold(c, monitor),
                discovery=c.discovery,
                **check_claim_fields(monitor, c),
                line=(c.claim_state or {}).get("line") if c.claim_state else _pure_line(monitor, c),
                last_z=c.last_z,
                last_statistic=c.last_statistic,
                max_statistic=c.max_statistic,
                alarm=c.id in open_ids,
                power=powers[c.id],
                detection_power=detection[c.id],
            )
            for c in checks
        ],
        warnings=warnings,
    )


def creation_warnings(monitor: Monitor, checks: Sequence[Check]) -> list[str]:
    """Sparse-event warnings for the checks that have an estimate at creation (app/monitors/power.py)."""
    from app.monitors.power import check_power, power_warning

    out = []
    for c in checks:
        if is_auto(c):
            continue
        w = power_warning(c.position, check_power(c, check_claim(monitor, c), monitor.samples_per_period, c.level))
        if w is not None:
            out.append(w)
    return out


def _pure_line(monitor: Monitor, check: Check) -> dict[str, Any] | None:
    """The fixed line p − e^ε q ≤ 0 of a pure-ε check, once it has run a period."""
    claim = check_claim(monitor, check)
    if check.last_z is None or not isinstance(claim, PureDP):
        return None
    import math

    return {"orientation": "upper", "slope": math.exp(claim.epsilon), "intercept": 0.0}


def _check_threshold(check: Check, monitor: Monitor) -> float | None:
    """A re-discovered check runs with its own threshold (for its level and remaining periods)."""
    if check.origin == "rediscovery" and check.joined_t > 0 and check.discovery:
        return check.discovery.get("threshold", monitor.threshold)
    return None if is_auto(check) else monitor.threshold


#: The columns GET /v1/monitors/{id}/periods answers with (app.monitors.schemas.PeriodRead, PeriodCheckRead).
_PERIOD_COLUMNS = (PeriodRun.id, PeriodRun.seq, PeriodRun.scheduled_for, PeriodRun.horizon_index, PeriodRun.t,
                   PeriodRun.status, PeriodRun.failure_reason, PeriodRun.failure_detail, PeriodRun.started_at,
                   PeriodRun.finished_at, PeriodRun.sampling_seconds, PeriodRun.worker_id)
_PERIOD_CHECK_COLUMNS = (PeriodCheck.period_run_id, PeriodCheck.check_id, PeriodCheck.a, PeriodCheck.b, PeriodCheck.n,
                         PeriodCheck.p_hat, PeriodCheck.q_hat, PeriodCheck.d_hat, PeriodCheck.sigma_hat, PeriodCheck.z,
                         PeriodCheck.statistic, PeriodCheck.threshold, PeriodCheck.claim, PeriodCheck.line)


def list_period_rows(
    session: Session, tenant_id: uuid.UUID, monitor_id: uuid.UUID, *, limit: int, cursor: str | None
) -> tuple[list[tuple[Any, list[Any]]], str | None]:
    """:func:`list_periods` for the API's read: the tenant's monitor (:class:`NotFoundError`
    otherwise), then its periods as rows of the columns the response needs, no ORM objects
    (loading ORM objects was a visible share of a read's CPU)."""
    if session.scalar(select(Monitor.id).where(Monitor.id == monitor_id, Monitor.tenant_id == tenant_id)) is None:
        raise NotFoundError(f"Monitor {monitor_id} not found.")
    stmt = select(*_PERIOD_COLUMNS).where(PeriodRun.monitor_id == monitor_id)
    runs, next_cursor = paginate(session, stmt, [SortKey(PeriodRun.seq, "int")], limit, cursor, as_rows=True)
    by_run: dict[uuid.UUID, list[Any]] = {run.id: [] for run in runs}
    if runs:
        for row in session.execute(
            select(*_PERIOD_CHECK_COLUMNS)
            .join(Check, Check.id == PeriodCheck.check_id)
            .where(PeriodCheck.period_run_id.in_(list(by_run)))
            .order_by(Check.position)
        ):
            by_run[row.period_run_id].append(row)
    return [(run, by_run[run.id]) for run in runs], next_cursor


def list_periods(
    session: Session, monitor: Monitor, *, limit: int, cursor: str | None
) -> tuple[list[tuple[PeriodRun, list[PeriodCheck]]], str | None]:
    """The monitor's periods, newest first, each with its per-check numbers (in check order)."""
    stmt = select(PeriodRun).where(PeriodRun.monitor_id == monitor.id)
    runs, next_cursor = paginate(session, stmt, [SortKey(PeriodRun.seq, "int")], limit, cursor)
    by_run: dict[uuid.UUID, list[PeriodCheck]] = {run.id: [] for run in runs}
    if runs:
        rows = session.execute(
            select(PeriodCheck)
            .join(Check, Check.id == PeriodCheck.check_id)
            .where(PeriodCheck.period_run_id.in_(list(by_run)))
            .order_by(Check.position)
        ).scalars()
        for row in rows:
            by_run[row.period_run_id].append(row)
    return [(run, by_run[run.id]) for run in runs], next_cursor
