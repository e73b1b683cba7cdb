"""Building an alarm's evidence from stored periods (the numerics are app.stats.evidence).

- :func:`privacy_evidence`: at the alarm, the anytime-valid lower bound on the claim's parameter
  from every period of the check in the horizon (app.stats.confidence, valid at the alarm, a
  stopping time), what the detector's alarm guarantees, and the detector's window (the last k
  periods) with its bound as a descriptive figure;
- :func:`with_confirmation`: the exact test of the claim on the fresh outputs the alarm's
  snapshot draws (valid by construction, also given that the alarm happened);
- :func:`with_snapshot`: when the alarm's MPL snapshot is done, its result is added after the
  alarm's own evidence, labelled as a separate estimator (never as clearing the mechanism).
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.claims.service import effective_claim
from app.models.monitors import Check, Monitor, PeriodCheck, PeriodRun
from app.stats.claims import parse_claim
from app.stats.evidence import (
    alarm_evidence,
    confirmation,
    confirmation_statement,
    snapshot_reading,
)
from app.stats.sequential import design_of_state


def evidence_claim(claim: dict[str, Any]) -> Any:
    """The claim an alarm's evidence tests (``app.stats.heldout.Claim``): a pure ε keeps the
    score bound (app.stats.evidence), every other claim ((ε, δ), μ-GDP, ρ-zCDP) goes through
    the one claim type (app.stats.claims) and the exact test."""
    return parse_claim(claim)


def check_evidence_claim(monitor: Monitor, check: Check) -> Any:
    """The claim ``check`` tests (its own, else the monitor's), as :func:`evidence_claim`."""
    return evidence_claim(effective_claim(check.claim, monitor.claim, monitor.epsilon))


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


def check_periods(session: Session, check_id: uuid.UUID, horizon_index: int) -> tuple[list[int], ...]:
    """a, b, n and t of every period of the check in the horizon, oldest first."""
    rows = session.execute(
        select(PeriodCheck.a, PeriodCheck.b, PeriodCheck.n, PeriodRun.t)
        .join(PeriodRun, PeriodRun.id == PeriodCheck.period_run_id)
        .where(PeriodCheck.check_id == check_id, PeriodRun.horizon_index == horizon_index,
               PeriodRun.status == "ok")
        .order_by(PeriodRun.seq)
    ).all()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [int(r[3]) for r in rows]


def privacy_evidence(session: Session, monitor: Monitor, check: Check, horizon_index: int,
                     lag: int) -> dict[str, Any]:
    """The evidence a privacy alarm carries when it fires (the period's rows must be flushed)."""
    a, b, n, t = check_periods(session, check.id, horizon_index)
    detector = monitor.detector
    arl = None
    if detector == "e-detector" and check.detector_state and check.detector_state.get("log_threshold") is not None:
        arl = math.exp(float(check.detector_state["log_threshold"]))  # c: ARL ≥ c (method.md §13.4)
    # An e-process check's anytime bound inverts its own e-process (older checks: §13.3b's design).
    design = design_of_state(check.detector_state) if detector == "e-process" else None
    evidence = alarm_evidence(a, b, n, t, lag=max(1, min(lag, len(a))), claim=check_evidence_claim(monitor, check),
                              alpha=monitor.alpha, detector=detector, arl=arl, window=monitor.horizon,
                              design=design)
    return {"kind": "privacy", "statement": evidence["statement"], "check": evidence, "contract": None,
            "snapshot": None, "confirmation": None}


def with_confirmation(evidence: dict[str, Any] | None, a: int, b: int, n: int, claim: Any,
                      alpha: float) -> dict[str, Any]:
    """The alarm's evidence with the exact test of its claim on fresh outputs counted in its event
    (app.stats.evidence.confirmation: the event and its complement), stored as ``confirmation`` and
    said in the statement. It is tested in the orientation of the alarm's own evidence (``check.
    orientation``, from the periods before the alarm, so fixed before the fresh outputs; x if none)."""
    evidence = dict(evidence or {"kind": "privacy", "statement": "", "check": None, "contract": None})
    check = evidence.get("check") if isinstance(evidence.get("check"), dict) else {}
    orientation = check.get("orientation") if check.get("orientation") in ("x", "x_prime") else "x"
    conf = confirmation(a, b, n, claim, alpha, orientation=orientation)
    describe = claim.describe() if hasattr(claim, "describe") else str(claim)
    conf["statement"] = confirmation_statement(conf, describe)
    evidence["confirmation"] = conf
    evidence["statement"] = " ".join(s for s in (evidence.get("statement"), conf["statement"]) if s)
    return evidence


def with_snapshot(evidence: dict[str, Any] | None, result: dict[str, Any], snapshot_id: str,
                  claim: Any) -> dict[str, Any]:
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
    if result.get("claim_terms"):  # the snapshot in the claim's own terms (δ̂, μ̂, …; app/stats/empirical.py)
        evidence["snapshot"]["claim_terms"] = result["claim_terms"]
    own = ((evidence.get("check") or {}).get("statement") or (evidence.get("contract") or {}).get("detail")
           or evidence.get("statement"))
    evidence["statement"] = " ".join(s for s in (own, reading["statement"]) if s)
    return evidence
