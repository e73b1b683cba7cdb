"""Privacy claims: a claim on monitors, checks, periods and alarms; ε optional on monitors.

Revision ID: 0003c
Revises: 0002
Create Date: 2026-11-22 18:30:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = '0003c'
down_revision: str | Sequence[str] | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claim', JSON, nullable=True))
        batch_op.alter_column('epsilon', existing_type=sa.Double(), nullable=True)

    with op.batch_alter_table('checks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claim', JSON, nullable=True))
        batch_op.add_column(sa.Column('claim_state', JSON, nullable=True))

    with op.batch_alter_table('period_checks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claim', JSON, nullable=True))
        batch_op.add_column(sa.Column('line', JSON, nullable=True))

    with op.batch_alter_table('alarms', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claim', JSON, nullable=True))


def downgrade() -> None:
    """Downgrade schema. Monitors without an ε (μ-GDP, ρ-zCDP claims) have no form in 0002: the
    downgrade stops rather than delete them; delete them through the API first."""
    count = op.get_bind().execute(sa.text("SELECT COUNT(*) FROM monitors WHERE epsilon IS NULL")).scalar()
    if count:
        raise RuntimeError(f"{count} monitor(s) claim μ-GDP or ρ-zCDP, which revision 0002 cannot hold; "
                           "delete them before downgrading")
    with op.batch_alter_table('alarms', schema=None) as batch_op:
        batch_op.drop_column('claim')

    with op.batch_alter_table('period_checks', schema=None) as batch_op:
        batch_op.drop_column('line')
        batch_op.drop_column('claim')

    with op.batch_alter_table('checks', schema=None) as batch_op:
        batch_op.drop_column('claim_state')
        batch_op.drop_column('claim')

    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.alter_column('epsilon', existing_type=sa.Double(), nullable=False)
        batch_op.drop_column('claim')
