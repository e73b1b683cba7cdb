"""Fair calibration claims across tenants: when a monitor's latest calibration attempt was claimed.

- ``monitors.calibration_claimed_at``: stamped by each calibration claim; a tenant's latest over its
  monitors is when its calibrations were last served. Calibration claims take the tenant with the
  fewest calibrations in flight, then the one served least recently (never served first), then the
  oldest waiting monitor (app/monitors/leases.py ``claim_calibrations``).

Revision ID: 0010calibration_claimed_at
Revises: 0009calibration_failures
Create Date: 2026-11-28 12:00:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010calibration_claimed_at'
down_revision: str | Sequence[str] | None = '0009calibration_failures'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.add_column(sa.Column('calibration_claimed_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.drop_column('calibration_claimed_at')
