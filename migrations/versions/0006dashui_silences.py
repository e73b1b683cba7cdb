"""Silences: on-call maintenance windows that mute matching alarms' webhooks (issue 18).

Revision ID: 0006dashui
Revises: 0005hostile
Create Date: 2026-11-25 22:40:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006dashui'
down_revision: str | Sequence[str] | None = '0005hostile'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('silences',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('monitor_id', sa.Uuid(), nullable=True),
    sa.Column('mechanism_id', sa.Uuid(), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=True),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('created_by', sa.String(length=240), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("kind IS NULL OR kind IN ('privacy', 'contract')", name=op.f('ck_silences_kind')),
    sa.CheckConstraint('monitor_id IS NOT NULL OR mechanism_id IS NOT NULL OR kind IS NOT NULL',
                       name=op.f('ck_silences_has_matcher')),
    sa.CheckConstraint('ends_at > starts_at', name=op.f('ck_silences_ends_after_start')),
    sa.ForeignKeyConstraint(['mechanism_id'], ['mechanisms.id'], name=op.f('fk_silences_mechanism_id_mechanisms'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['monitor_id'], ['monitors.id'], name=op.f('fk_silences_monitor_id_monitors'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_silences_tenant_id_tenants'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_silences'))
    )
    with op.batch_alter_table('silences', schema=None) as batch_op:
        batch_op.create_index('ix_silences_tenant_id_ends_at', ['tenant_id', 'ends_at'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('silences', schema=None) as batch_op:
        batch_op.drop_index('ix_silences_tenant_id_ends_at')
    op.drop_table('silences')
