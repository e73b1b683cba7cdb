"""``dpwatch apply``'s probe: every mechanism a monitor of the plan samples (and every mechanism the
plan creates or changes) answers one signed sampling request through the service
(``POST /v1/mechanisms/{id}/validate``) before any monitor is created. A monitor created on an
endpoint that cannot answer would only go degraded at its first period; the probe says why now,
with the fix when the service names one (e.g. the trailing slash of ``app.mount("/dp", …)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.manifest.plan import Plan

__all__ = ["ProbeFailed", "probe_mechanisms"]

Echo = Callable[[str], Any]
PROBE_OUTPUTS = 10


class ProbeFailed(Exception):
    """A mechanism's endpoint did not answer the probe correctly (the message has every failure)."""


def _probe_database(name: str, plan: Plan) -> Any:
    """The mechanism's ``probe_database``, else the first database of a monitor of it in the plan."""
    for change in plan.changes:
        if change.kind == "mechanism" and change.key == name and change.desired is not None:
            if change.desired.probe_database is not None:
                return change.desired.probe_database
    for change in plan.changes:
        if change.kind == "monitor" and change.desired is not None and change.desired.mechanism == name:
            for check in change.desired.checks:
                return check.x
    return None


def mechanisms_to_probe(plan: Plan) -> list[str]:
    """Mechanisms the plan creates or updates, and those a monitor it creates or replaces samples."""
    names: list[str] = []
    for change in plan.changes:
        if change.kind == "mechanism" and change.action in ("create", "update"):
            names.append(change.key)
        elif change.kind == "monitor" and change.action in ("create", "replace") and change.desired is not None:
            names.append(change.desired.mechanism)
    return list(dict.fromkeys(names))


def probe_mechanisms(client: Any, plan: Plan, mechanism_ids: dict[str, str], echo: Echo) -> None:
    """Probe them all; raise :class:`ProbeFailed` naming each one that failed and why."""
    failures: list[str] = []
    for name in mechanisms_to_probe(plan):
        mechanism_id = mechanism_ids.get(name)
        if mechanism_id is None:
            continue  # not registered (a dry run, or a step that failed before): nothing to probe
        database = _probe_database(name, plan)
        if database is None:
            echo(f'probe   mechanism "{name}": skipped (no probe_database and no monitor of it in the file)')
            continue
        report = client.mechanisms.validate(mechanism_id, {"database": database, "n": PROBE_OUTPUTS})
        if report.get("ok"):
            echo(f'probe   mechanism "{name}": {report.get("outputs_received")} outputs in '
                 f'{float(report.get("elapsed_seconds") or 0.0):.2f} s')
        else:
            failures.append(f'mechanism "{name}": its endpoint did not answer the probe correctly: '
                            + "; ".join(report.get("problems") or [str(report.get("reason"))]))
    if failures:
        raise ProbeFailed("\n".join(failures))
