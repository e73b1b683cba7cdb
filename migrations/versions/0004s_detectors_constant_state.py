"""Detector choice per monitor; O(1) detector state: the aggregator's prefix sums move from a JSON
list on the check into the per-period rows (period_checks.prefix_sum); monitors.last_seq.

Revision ID: 0004s
Revises: 0003s
Create Date: 2026-11-23 21:40:00

"""
import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004s'
down_revision: str | Sequence[str] | None = '0004k'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.add_column(sa.Column('detector', sa.String(length=16), server_default='aggregator', nullable=False))
        batch_op.add_column(sa.Column('last_seq', sa.Integer(), server_default='0', nullable=False))
        batch_op.create_check_constraint(op.f('ck_monitors_detector'), "detector IN ('aggregator', 'e-process', 'e-detector')")
    with op.batch_alter_table('period_checks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('prefix_sum', sa.Double(), nullable=True))

    conn = op.get_bind()
    conn.execute(sa.text(
        "UPDATE monitors SET last_seq = COALESCE((SELECT MAX(r.seq) FROM period_runs r WHERE r.monitor_id = monitors.id), 0)"))
    # Each past row's S_t: the sum of its check's z over the horizon's periods up to it (portable
    # correlated form; it runs once).
    conn.execute(sa.text(
        "UPDATE period_checks SET prefix_sum = (SELECT SUM(pc2.z) FROM period_checks pc2 "
        "JOIN period_runs r2 ON r2.id = pc2.period_run_id "
        "JOIN period_runs r1 ON r1.id = period_checks.period_run_id "
        "WHERE pc2.check_id = period_checks.check_id AND r2.monitor_id = r1.monitor_id "
        "AND r2.horizon_index = r1.horizon_index AND r2.t <= r1.t)"))
    # Version-1 aggregator states carried every prefix sum; keep only the last one (version 2).
    rows = conn.execute(sa.text("SELECT id, detector_state FROM checks WHERE detector_state IS NOT NULL")).fetchall()
    for check_id, state in rows:
        if isinstance(state, str):
            state = json.loads(state)
        if not isinstance(state, dict) or state.get("version") != 1 or "prefix_sums" not in state:
            continue
        prefix = [float(v) for v in state["prefix_sums"]]
        new = {"version": 2, "kind": "aggregator", "horizon": state["horizon"], "gamma": state["gamma"],
               "threshold": state["threshold"], "t": len(prefix) - 1, "s": prefix[-1],
               "alarm_t": state.get("alarm_t"), "max_statistic": state.get("max_statistic"), "lag": None}
        conn.execute(sa.text("UPDATE checks SET detector_state = :s WHERE id = :i").bindparams(
            sa.bindparam("s", type_=sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql"))),
            {"s": new, "i": check_id})


def downgrade() -> None:
    with op.batch_alter_table('period_checks', schema=None) as batch_op:
        batch_op.drop_column('prefix_sum')
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_monitors_detector'), type_='check')
        batch_op.drop_column('last_seq')
        batch_op.drop_column('detector')
