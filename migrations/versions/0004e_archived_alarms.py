"""Alarms outlive their monitor: deleting a monitor archives its alarms (foreign keys to the
monitor, check and period set null; archived_at, origin_monitor_id and monitor_name kept).

Revision ID: 0004e
Revises: 0003s
Create Date: 2026-11-23 22:10:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004e'
down_revision: str | Sequence[str] | None = '0004s'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FKS = (
    ('fk_alarms_monitor_id_monitors', 'monitors', 'monitor_id'),
    ('fk_alarms_check_id_checks', 'checks', 'check_id'),
    ('fk_alarms_period_run_id_period_runs', 'period_runs', 'period_run_id'),
)


def _foreign_keys(batch_op, ondelete: str) -> None:
    for name, table, column in _FKS:
        batch_op.drop_constraint(op.f(name), type_='foreignkey')
        batch_op.create_foreign_key(op.f(name), table, [column], ['id'], ondelete=ondelete)


def upgrade() -> None:
    with op.batch_alter_table('alarms', schema=None) as batch_op:
        batch_op.add_column(sa.Column('origin_monitor_id', sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column('monitor_name', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('archived_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.alter_column('monitor_id', existing_type=sa.Uuid(), nullable=True)
        batch_op.alter_column('period_run_id', existing_type=sa.Uuid(), nullable=True)
        batch_op.drop_constraint(op.f('ck_alarms_privacy_has_check'), type_='check')
        batch_op.create_check_constraint(
            op.f('ck_alarms_privacy_has_check'),
            "(kind = 'contract') OR (check_id IS NOT NULL) OR (archived_at IS NOT NULL)",
        )
        _foreign_keys(batch_op, 'SET NULL')
        batch_op.create_index(batch_op.f('ix_alarms_origin_monitor_id'), ['origin_monitor_id'], unique=False)
    op.execute("UPDATE alarms SET origin_monitor_id = monitor_id")


def downgrade() -> None:
    # Archived alarms have no monitor to belong to again.
    op.execute("DELETE FROM alarms WHERE archived_at IS NOT NULL")
    with op.batch_alter_table('alarms', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alarms_origin_monitor_id'))
        _foreign_keys(batch_op, 'CASCADE')
        batch_op.drop_constraint(op.f('ck_alarms_privacy_has_check'), type_='check')
        batch_op.create_check_constraint(op.f('ck_alarms_privacy_has_check'), "(kind = 'contract') OR (check_id IS NOT NULL)")
        batch_op.alter_column('period_run_id', existing_type=sa.Uuid(), nullable=False)
        batch_op.alter_column('monitor_id', existing_type=sa.Uuid(), nullable=False)
        batch_op.drop_column('archived_at')
        batch_op.drop_column('monitor_name')
        batch_op.drop_column('origin_monitor_id')
