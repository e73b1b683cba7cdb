"""API key scopes (existing keys become admin); unique tenant names (duplicates renamed first);
previous signing secrets with their expiry on webhooks and mechanisms (secret rotation).

Revision ID: 0004k
Revises: 0003s
Create Date: 2026-11-23 21:40:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0004k'
down_revision: str | Sequence[str] | None = '0003s'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _rename_duplicate_tenants() -> None:
    """Before the unique index: a tenant whose name an older tenant has already is renamed
    ``<name> (<first 8 hex of its id>)``, so no tenant, key or resource is lost."""
    bind = op.get_bind()
    tenants = sa.table('tenants', sa.column('id', sa.Uuid()), sa.column('name', sa.String(200)),
                       sa.column('created_at', sa.DateTime(timezone=True)))
    rows = bind.execute(sa.select(tenants.c.id, tenants.c.name).order_by(tenants.c.created_at, tenants.c.id)).all()
    seen = {name for _, name in rows}
    first: set[str] = set()
    for tenant_id, name in rows:
        if name not in first:
            first.add(name)
            continue
        new_name = f"{name[:180]} ({tenant_id.hex[:8]})"
        while new_name in seen:
            new_name += "'"
        seen.add(new_name)
        bind.execute(sa.update(tenants).where(tenants.c.id == tenant_id).values(name=new_name))


def upgrade() -> None:
    """Upgrade schema."""
    _rename_duplicate_tenants()
    # An index, not a constraint: on SQLite a new constraint recreates the table, and dropping the
    # old tenants table (foreign keys on) would cascade-delete everything the tenants own.
    op.create_index('uq_tenants_name', 'tenants', ['name'], unique=True)

    # api_keys is referenced by no table, so recreating it on SQLite (for the CHECK) loses nothing.
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scope', sa.String(length=16), server_default='admin', nullable=False))
        batch_op.create_check_constraint(batch_op.f('ck_api_keys_scope'), "scope IN ('read', 'admin')")

    # Plain ALTER TABLE ADD COLUMN on both backends (no table is recreated).
    for table in ('webhooks', 'mechanisms'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('previous_secret', sa.String(length=100), nullable=True))
            batch_op.add_column(sa.Column('previous_secret_expires_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Downgrade schema (key scopes and previous secrets are dropped; renamed tenants keep their names)."""
    # Not batch: ALTER TABLE DROP COLUMN (SQLite >= 3.35) keeps the rows that reference these tables,
    # which recreating them would cascade-delete.
    for table in ('mechanisms', 'webhooks'):
        op.drop_column(table, 'previous_secret_expires_at')
        op.drop_column(table, 'previous_secret')

    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('ck_api_keys_scope'), type_='check')
        batch_op.drop_column('scope')

    op.drop_index('uq_tenants_name', table_name='tenants')
