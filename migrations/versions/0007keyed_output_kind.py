"""Keyed outputs: `keyed` joins the mechanisms' output kinds (a set of keys with values, keys
possibly absent: a group-by released with partition selection).

Revision ID: 0007keyed
Revises: 0006dashui
Create Date: 2026-12-02 10:00:00

"""
from collections.abc import Sequence

from alembic import op

revision: str = '0007keyed'
down_revision: str | Sequence[str] | None = '0006dashui'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('mechanisms', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_mechanisms_output_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_mechanisms_output_kind'),
                                         "output_kind IN ('real', 'discrete', 'vector', 'keyed')")


def downgrade() -> None:
    # A keyed mechanism has no older kind to become: refuse rather than rewrite its outputs' meaning.
    bind = op.get_bind()
    keyed = bind.exec_driver_sql("SELECT count(*) FROM mechanisms WHERE output_kind = 'keyed'").scalar()
    if keyed:
        raise RuntimeError(f"{keyed} mechanism(s) have keyed outputs; delete them before downgrading below 0007keyed")
    with op.batch_alter_table('mechanisms', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_mechanisms_output_kind'), type_='check')
        batch_op.create_check_constraint(op.f('ck_mechanisms_output_kind'),
                                         "output_kind IN ('real', 'discrete', 'vector')")
