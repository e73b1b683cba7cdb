"""The search (issue 16): a mechanism's input domain; search jobs; monitors that search again every
K periods (search_every, search_budget).

Revision ID: 0005search
Revises: 0004e
Create Date: 2026-11-25 19:20:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0005search'
down_revision: str | Sequence[str] | None = '0004e'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_KINDS = "kind IN ('discovery', 'audit', 'rediscovery')"
_NEW_KINDS = "kind IN ('discovery', 'audit', 'rediscovery', 'search')"


def upgrade() -> None:
    with op.batch_alter_table('mechanisms', schema=None) as batch_op:
        batch_op.add_column(sa.Column('input_domain', sa.JSON().with_variant(
            postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True))
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.add_column(sa.Column('search_every', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('search_budget', sa.Integer(), nullable=True))
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_jobs_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_jobs_kind'), _NEW_KINDS)


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind = 'search'")
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_jobs_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_jobs_kind'), _OLD_KINDS)
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.drop_column('search_budget')
        batch_op.drop_column('search_every')
    with op.batch_alter_table('mechanisms', schema=None) as batch_op:
        batch_op.drop_column('input_domain')
