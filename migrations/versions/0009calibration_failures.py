"""A monitor's calibration runs in a child process with limits: its failed attempts and their reason.

- ``monitors.calibration_attempts``: failed attempts at the current calibration (0 after a success,
  a new horizon or a resume); a calibration is tried again up to ``calibration_max_attempts``.
- ``monitors.calibration_error``: why the last attempt failed (``memory limit``, ``time limit``,
  ``crashed`` or ``error``, with details); a monitor whose calibration gave up is ``paused`` with
  ``paused_from_state = 'calibrating'`` and this reason (app/monitors/calibration.py).

Revision ID: 0009calibration_failures
Revises: 0008job_failure_reason
Create Date: 2026-11-28 09:00:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009calibration_failures'
down_revision: str | Sequence[str] | None = '0008job_failure_reason'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.add_column(sa.Column('calibration_attempts', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('calibration_error', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.drop_column('calibration_error')
        batch_op.drop_column('calibration_attempts')
