"""API key scopes (existing keys become admin); unique tenant names (duplicates renamed first);
previous signing secrets with their expiry on webhooks and mechanisms (secret rotation).

Revision ID: 0004k
Revises: 0003s
Create Date: 2026-11-23 21:40:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision: str = '0004k'
down_revision: Union[str, Sequence[str], None] = '0003s'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


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
    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f('uq_tenants_name'), ['name'])

    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scope', sa.String(length=16), server_default='admin', nullable=False))
        batch_op.create_check_constraint(batch_op.f('ck_api_keys_scope'), "scope IN ('read', 'admin')")

    for table in ('webhooks', 'mechanisms'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('previous_secret', sa.String(length=100), nullable=True))
            batch_op.add_column(sa.Column('previous_secret_expires_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Downgrade schema (key scopes and previous secrets are dropped; renamed tenants keep their names)."""
    for table in ('mechanisms', 'webhooks'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('previous_secret_expires_at')
            batch_op.drop_column('previous_secret')

    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('ck_api_keys_scope'), type_='check')
        batch_op.drop_column('scope')

    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('uq_tenants_name'), type_='unique')
