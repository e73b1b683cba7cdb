"""Dashboard sessions kept server-side, so that signing out ends a session cookie (issue 17).

Revision ID: 0005hostile
Revises: 0005search
Create Date: 2026-11-25 19:45:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005hostile'
down_revision: str | Sequence[str] | None = '0005search'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema. Cookies signed before it name no session and are refused: sign in again."""
    op.create_table('web_sessions',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('api_key_id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['api_key_id'], ['api_keys.id'], name=op.f('fk_web_sessions_api_key_id_api_keys'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_web_sessions'))
    )
    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_web_sessions_api_key_id'), ['api_key_id'], unique=False)


def downgrade() -> None:
    """Downgrade schema (every dashboard session ends)."""
    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_web_sessions_api_key_id'))
    op.drop_table('web_sessions')
