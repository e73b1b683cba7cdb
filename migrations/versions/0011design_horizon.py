"""The horizon an e-process monitor's checks are tuned to.

- ``monitors.design_horizon``: the ``horizon`` an e-process monitor was created with, whose checks run
  the horizon-tuned design for it (docs/method.md §13.3d); null when none was given (the design without
  a horizon, as every e-process monitor before) and for the other detectors.

Revision ID: 0011design_horizon
Revises: 0010calibration_claimed_at
Create Date: 2026-11-28 15:15:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011design_horizon'
down_revision: str | Sequence[str] | None = '0010calibration_claimed_at'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.add_column(sa.Column('design_horizon', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.drop_column('design_horizon')
