"""Building an alarm's evidence from stored periods (the numerics are app.stats.evidence).

- :func:`privacy_evidence`: at the alarm, the check's last k periods (k the lag that attains
  M_t, eq. 13), their pooled counts and a Clopper–Pearson lower bound on ε;
- :func:`with_snapshot`: when the alarm's MPL snapshot is done, its result is added after the
  alarm's own evidence, labelled as a separate estimator (never as clearing the mechanism).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.monitors.models import Monitor, PeriodCheck, PeriodRun
from app.stats.evidence import alarm_evidence, snapshot_reading
from app.stats.heldout import EpsilonDelta


def monitor_claim(monitor: Monitor) -> EpsilonDelta:
    """The claim a monitor tests (pure ε today; issue 9 adds richer claims: any
    ``app.stats.heldout.Claim`` works from here on)."""
    return EpsilonDelta(float(monitor.epsilon))


def window_counts(session: Session, check_id: uuid.UUID, horizon_index: int,
                  lag: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """a, b, n and t of the check's last ``lag`` periods in the horizon, oldest first."""
    rows = session.execute(
        select(PeriodCheck.a, PeriodCheck.b, PeriodCheck.n, PeriodRun.t)
        .join(PeriodRun, PeriodRun.id == PeriodCheck.period_run_id)
        .where(PeriodCheck.check_id == check_id, PeriodRun.horizon_index == horizon_index,
               PeriodRun.status == "ok")
        .order_by(PeriodRun.seq.desc()).limit(lag)
    ).all()
    rows = list(reversed(rows))
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [int(r[3]) for r in rows]


def privacy_evidence(session: Session, monitor: Monitor, check_id: uuid.UUID, horizon_index: int,
                     lag: int) -> dict[str, Any]:
    """The evidence a privacy alarm carries when it fires (the period's rows must be flushed)."""
    a, b, n, t = window_counts(session, check_id, horizon_index, lag)
    check = alarm_evidence(a, b, n, t, lag=len(a), claim=monitor_claim(monitor), alpha=monitor.alpha)
    return {"kind": "privacy", "statement": check["statement"], "check": check, "contract": None,
            "snapshot": None}


def with_snapshot(evidence: dict[str, Any] | None, result: dict[str, Any], snapshot_id: str,
                  claim: EpsilonDelta) -> dict[str, Any]:
    """The alarm's evidence with its MPL snapshot added after it (a separate estimator)."""
    evidence = dict(evidence or {"kind": "privacy", "statement": "", "check": None, "contract": None})
    reading = snapshot_reading(float(result["lower_bound"]), float(result["epsilon_hat"]), claim,
                               alpha=float(result["alpha"]), after_alarm=True)
    evidence["snapshot"] = {
        "snapshot_id": snapshot_id,
        "role": "separate_estimator",
        "lower_bound": result["lower_bound"],
        "epsilon_hat": result["epsilon_hat"],
        "t_hat": result["t_hat"],
        "confidence": 1 - float(result["alpha"]),
        "verdict": reading["verdict"],
        "statement": reading["statement"],
    }
    own = ((evidence.get("check") or {}).get("statement") or (evidence.get("contract") or {}).get("detail")
           or evidence.get("statement"))
    evidence["statement"] = " ".join(s for s in (own, reading["statement"]) if s)
    return evidence
