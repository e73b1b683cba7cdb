"""A routine period's write in one statement (Postgres).

Most periods change nothing but numbers: no alarm, no contract event, no end of horizon, no
snapshot or re-discovery due. Their write is one statement of data-modifying CTEs, so a period
costs one round trip to write whatever the number of checks (≤ 6 round trips per period
for one check, ≤ 8 for four, claim and plan included):

    m: UPDATE monitors … WHERE <lease and plan guard> RETURNING last_seq   (row-locks the monitor)
    r: INSERT INTO period_runs … SELECT … FROM m                            (nothing if the guard fails)
    c: INSERT INTO period_checks … FROM (VALUES …), r                       (all checks' rows)
    u: UPDATE checks … FROM (VALUES …) WHERE EXISTS (r)                     (O(1) detector states)
    o: INSERT INTO period_outputs … FROM (VALUES …), r                      (kept raw outputs)
    d: DELETE FROM period_outputs … seq ≤ r.seq − window                    (the window's oldest)

The guard is the ORM path's (``PeriodRunner._guarded_monitor``): still our lease, and slot,
horizon, t and state as planned. All CTEs see the same snapshot and run to completion; the
inserts into ``period_checks`` and ``period_outputs`` reference the ``period_runs`` row inserted in
the same statement, which Postgres checks at the end of the statement. Every other period (and
SQLite) goes through the ORM path, which writes the same rows.
"""

from __future__ import annotations

import functools
import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import TextClause, text
from sqlalchemy.orm import Session

from app.monitors.output_codec import encode_outputs
from app.monitors.outputs import database_digest

if TYPE_CHECKING:
    from app.monitors.period_plan import CheckResult, PeriodPlan


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, allow_nan=False, separators=(",", ":"))


def write_routine_period(session: Session, plan: PeriodPlan, results: list[CheckResult],
                         outputs: dict[str, np.ndarray], *, started: datetime, finished: datetime,
                         sampling_seconds: float, worker_id: str) -> int | None:
    """Write the period; its seq, or None when the guard failed (lost lease, reset, paused…)."""
    t = plan.t + 1
    params: dict[str, Any] = {
        "monitor_id": plan.monitor_id, "worker": worker_id, "scheduled": plan.scheduled,
        "horizon_index": plan.horizon_index, "t_old": plan.t, "t_new": t, "slot": plan.slot,
        "next_slot": plan.next_slot, "now": finished, "run_id": uuid.uuid4(), "started": started,
        "finished": finished, "sampling_seconds": float(sampling_seconds), "n": plan.n,
        "window": int(plan.outputs_window),
    }
    n_out = len(outputs) if plan.outputs_window > 0 and outputs else 0
    for i, res in enumerate(results):
        p = f"c{i}_"
        params.update({
            p + "id": uuid.uuid4(), p + "check": res.check_id, p + "a": res.a, p + "b": res.b,
            p + "p": res.p_hat, p + "q": res.q_hat, p + "d": res.d_hat, p + "s": res.sigma_hat,
            p + "z": res.z, p + "stat": res.statistic, p + "thr": res.threshold,
            p + "claim": _json(res.claim.to_dict()), p + "line": _json(res.line), p + "prefix": res.prefix_sum,
            p + "ds": _json(res.detector_state), p + "cs": _json(res.claim_state),
            p + "max": res.max_statistic if np.isfinite(res.max_statistic) else None,
        })
    if n_out:
        for i, (key, values) in enumerate(outputs.items()):
            encoding, shape, data = encode_outputs(values)
            p = f"o{i}_"
            params.update({p + "id": uuid.uuid4(), p + "key": database_digest(key), p + "enc": encoding,
                           p + "shape": _json(shape), p + "data": data})
    seq = session.execute(_statement(len(results), n_out), params).scalar_one_or_none()
    return None if seq is None else int(seq)


@functools.lru_cache(maxsize=64)
def _statement(n_checks: int, n_outputs: int) -> TextClause:
    """The statement for a period of ``n_checks`` checks and ``n_outputs`` kept outputs, built and
    parsed once per shape (building the text and parsing its bind parameters was 5% of a worker)."""
    ctes = [
        """m AS (
            UPDATE monitors SET t = :t_new, last_seq = last_seq + 1, consecutive_failures = 0,
                last_period_at = :slot, next_run_at = :next_slot, lease_owner = NULL, lease_expires_at = NULL,
                state = 'active', updated_at = :now
            WHERE id = :monitor_id AND lease_owner = :worker AND next_run_at = :scheduled
                AND horizon_index = :horizon_index AND t = :t_old AND state IN ('active', 'degraded')
            RETURNING id, last_seq)""",
        """r AS (
            INSERT INTO period_runs (id, monitor_id, seq, scheduled_for, horizon_index, t, status, started_at,
                finished_at, sampling_seconds, worker_id)
            SELECT :run_id, m.id, m.last_seq, :slot, :horizon_index, :t_new, 'ok', :started, :finished,
                :sampling_seconds, :worker FROM m
            RETURNING id, seq)""",
    ]
    if n_checks:
        pc_rows, ck_rows = [], []
        for i in range(n_checks):
            p = f"c{i}_"
            pc_rows.append(
                f"(CAST(:{p}id AS uuid), CAST(:{p}check AS uuid), CAST(:{p}a AS integer), CAST(:{p}b AS integer), "
                f"CAST(:{p}p AS double precision), CAST(:{p}q AS double precision), CAST(:{p}d AS double precision), "
                f"CAST(:{p}s AS double precision), CAST(:{p}z AS double precision), "
                f"CAST(:{p}stat AS double precision), CAST(:{p}thr AS double precision), CAST(:{p}claim AS jsonb), "
                f"CAST(:{p}line AS jsonb), CAST(:{p}prefix AS double precision))")
            ck_rows.append(
                f"(CAST(:{p}check AS uuid), CAST(:{p}ds AS jsonb), CAST(:{p}cs AS jsonb), "
                f"CAST(:{p}z AS double precision), CAST(:{p}stat AS double precision), "
                f"CAST(:{p}max AS double precision))")
        ctes.append(f"""c AS (
            INSERT INTO period_checks (id, period_run_id, check_id, a, b, n, p_hat, q_hat, d_hat, sigma_hat, z,
                statistic, threshold, claim, line, prefix_sum)
            SELECT v.id, r.id, v.check_id, v.a, v.b, :n, v.p, v.q, v.d, v.s, v.z, v.stat, v.thr, v.claim, v.line,
                v.prefix
            FROM (VALUES {", ".join(pc_rows)})
                AS v(id, check_id, a, b, p, q, d, s, z, stat, thr, claim, line, prefix), r)""")
        ctes.append(f"""u AS (
            UPDATE checks SET detector_state = v.ds, claim_state = v.cs, last_z = v.z, last_statistic = v.stat,
                max_statistic = v.mx
            FROM (VALUES {", ".join(ck_rows)}) AS v(id, ds, cs, z, stat, mx)
            WHERE checks.id = v.id AND EXISTS (SELECT 1 FROM r))""")
    if n_outputs:
        out_rows = []
        for i in range(n_outputs):
            p = f"o{i}_"
            out_rows.append(f"(CAST(:{p}id AS uuid), CAST(:{p}key AS varchar), CAST(:{p}enc AS varchar), "
                            f"CAST(:{p}shape AS jsonb), CAST(:{p}data AS bytea))")
        ctes.append(f"""o AS (
            INSERT INTO period_outputs (id, monitor_id, period_run_id, seq, horizon_index, t, database_key, encoding,
                shape, data)
            SELECT v.id, :monitor_id, r.id, r.seq, :horizon_index, :t_new, v.key, v.enc, v.shape, v.data
            FROM (VALUES {", ".join(out_rows)}) AS v(id, key, enc, shape, data), r)""")
        ctes.append("""d AS (
            DELETE FROM period_outputs WHERE monitor_id = :monitor_id
                AND seq <= (SELECT seq FROM r) - :window)""")
    return text("WITH " + ",\n".join(ctes) + "\nSELECT seq FROM r")
