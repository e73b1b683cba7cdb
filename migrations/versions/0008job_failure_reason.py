"""Jobs run in child processes: why a job failed (`failure_reason`); quotas per tenant.

- ``jobs.failure_reason``: ``memory limit``, ``time limit``, ``cancelled``, ``crashed`` or ``error``
  (the handler's own failure), set when a job ends without a result (app/jobs/isolation.py).
- ``tenant_quotas``: a tenant's own limits, each column NULL for the deployment's default
  (app/quotas, docs/hardening.md "Quotas and retention").
- ``ix_jobs_tenant_id_state``: fair job claims count each tenant's running jobs.
- Postgres: the period tables are vacuumed after a fixed number of dead rows rather than a fifth
  of the table (``autovacuum_vacuum_scale_factor`` 0): every period deletes as many kept outputs as
  it writes, and retention deletes old periods, so the tables churn at a constant size and their
  freed pages must be reused at the rate they are freed (docs/hardening.md "Retention").

Revision ID: 0008job_failure_reason
Revises: 0007keyed
Create Date: 2026-11-28 06:00:00

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008job_failure_reason'
down_revision: str | Sequence[str] | None = '0007keyed'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


#: (table, dead rows that start an autovacuum) on Postgres.
CHURN_TABLES = (("period_outputs", 1000), ("period_runs", 5000), ("period_checks", 5000))


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('failure_reason', sa.String(length=32), nullable=True))
        batch_op.create_index('ix_jobs_tenant_id_state', ['tenant_id', 'state'], unique=False)
    op.create_table(
        'tenant_quotas',
        sa.Column('tenant_id', sa.Uuid(), nullable=False),
        sa.Column('max_monitors', sa.Integer(), nullable=True),
        sa.Column('max_concurrent_jobs', sa.Integer(), nullable=True),
        sa.Column('max_queued_jobs', sa.Integer(), nullable=True),
        sa.Column('max_outputs_per_day', sa.BigInteger(), nullable=True),
        sa.Column('max_stored_output_bytes', sa.BigInteger(), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_tenant_quotas_tenant_id_tenants'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('tenant_id', name=op.f('pk_tenant_quotas')),
    )
    if op.get_bind().dialect.name == 'postgresql':
        for table, threshold in CHURN_TABLES:
            op.execute(f"ALTER TABLE {table} SET (autovacuum_vacuum_scale_factor = 0, "
                       f"autovacuum_vacuum_threshold = {threshold}, autovacuum_vacuum_cost_delay = 0)")


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        for table, _ in CHURN_TABLES:
            op.execute(f"ALTER TABLE {table} RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
                       "autovacuum_vacuum_cost_delay)")
    op.drop_table('tenant_quotas')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_tenant_id_state')
        batch_op.drop_column('failure_reason')
