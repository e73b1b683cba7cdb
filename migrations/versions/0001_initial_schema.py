"""Initial schema: tenants, keys, mechanisms, monitors, checks, periods, alarms, webhooks, outbox.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('tenants',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tenants'))
    )
    op.create_table('api_keys',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_api_keys_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_keys_tenant_id'), ['tenant_id'], unique=False)

    op.create_table('mechanisms',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('sampling_url', sa.String(length=2048), nullable=False),
    sa.Column('output_kind', sa.String(length=16), nullable=False),
    sa.Column('dim', sa.Integer(), nullable=True),
    sa.Column('max_batch', sa.Integer(), nullable=False),
    sa.Column('timeout_seconds', sa.Double(), nullable=False),
    sa.Column('prefer_binary', sa.Boolean(), nullable=False),
    sa.Column('secret', sa.String(length=100), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("(output_kind = 'vector') = (dim IS NOT NULL)", name=op.f('ck_mechanisms_dim_iff_vector')),
    sa.CheckConstraint("output_kind IN ('real', 'discrete', 'vector')", name=op.f('ck_mechanisms_output_kind')),
    sa.CheckConstraint('max_batch >= 1', name=op.f('ck_mechanisms_max_batch_positive')),
    sa.CheckConstraint('timeout_seconds > 0', name=op.f('ck_mechanisms_timeout_positive')),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_mechanisms_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_mechanisms')),
    sa.UniqueConstraint('tenant_id', 'name', name=op.f('uq_mechanisms_tenant_id_name'))
    )
    op.create_table('webhooks',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=False),
    sa.Column('event_types', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('secret', sa.String(length=100), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('disabled_reason', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_webhooks_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhooks'))
    )
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.create_index('ix_webhooks_tenant_id_created_at', ['tenant_id', 'created_at'], unique=False)

    op.create_table('monitors',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('mechanism_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('epsilon', sa.Double(), nullable=False),
    sa.Column('alpha', sa.Double(), nullable=False),
    sa.Column('gamma', sa.Double(), nullable=False),
    sa.Column('horizon', sa.Integer(), nullable=False),
    sa.Column('samples_per_period', sa.Integer(), nullable=False),
    sa.Column('period_seconds', sa.Integer(), nullable=True),
    sa.Column('cron', sa.String(length=200), nullable=True),
    sa.Column('variance', sa.String(length=8), nullable=False),
    sa.Column('kappa', sa.Double(), nullable=False),
    sa.Column('symmetric', sa.Boolean(), nullable=False),
    sa.Column('renew', sa.Boolean(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('paused_from_state', sa.String(length=16), nullable=True),
    sa.Column('horizon_index', sa.Integer(), nullable=False),
    sa.Column('horizon_alpha', sa.Double(), nullable=False),
    sa.Column('threshold', sa.Double(), nullable=True),
    sa.Column('threshold_std_error', sa.Double(), nullable=True),
    sa.Column('threshold_source', sa.String(length=16), nullable=True),
    sa.Column('t', sa.Integer(), nullable=False),
    sa.Column('consecutive_failures', sa.Integer(), nullable=False),
    sa.Column('schedule_anchor', sa.DateTime(timezone=True), nullable=False),
    sa.Column('next_run_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_period_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_owner', sa.String(length=200), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("state IN ('calibrating', 'active', 'alarm', 'completed', 'paused', 'degraded')", name=op.f('ck_monitors_state')),
    sa.CheckConstraint("variance IN ('score', 'wald')", name=op.f('ck_monitors_variance')),
    sa.CheckConstraint('(period_seconds IS NULL) <> (cron IS NULL)', name=op.f('ck_monitors_one_schedule')),
    sa.CheckConstraint('alpha > 0 AND alpha < 1', name=op.f('ck_monitors_alpha_range')),
    sa.CheckConstraint('epsilon > 0', name=op.f('ck_monitors_epsilon_positive')),
    sa.CheckConstraint('gamma >= 0 AND gamma < 0.5', name=op.f('ck_monitors_gamma_range')),
    sa.CheckConstraint('horizon >= 2', name=op.f('ck_monitors_horizon_min')),
    sa.CheckConstraint('samples_per_period >= 1', name=op.f('ck_monitors_samples_positive')),
    sa.ForeignKeyConstraint(['mechanism_id'], ['mechanisms.id'], name=op.f('fk_monitors_mechanism_id_mechanisms'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_monitors_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_monitors'))
    )
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_monitors_mechanism_id'), ['mechanism_id'], unique=False)
        batch_op.create_index('ix_monitors_state_next_run_at', ['state', 'next_run_at'], unique=False)
        batch_op.create_index('ix_monitors_tenant_id_created_at', ['tenant_id', 'created_at'], unique=False)

    op.create_table('webhook_messages',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('webhook_id', sa.Uuid(), nullable=False),
    sa.Column('event_type', sa.String(length=64), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('pending', 'delivered', 'failed', 'disabled')", name=op.f('ck_webhook_messages_status')),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_webhook_messages_tenant_id_tenants'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['webhook_id'], ['webhooks.id'], name=op.f('fk_webhook_messages_webhook_id_webhooks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_messages'))
    )
    with op.batch_alter_table('webhook_messages', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_messages_status_next_attempt_at', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_webhook_messages_tenant_id'), ['tenant_id'], unique=False)
        batch_op.create_index('ix_webhook_messages_webhook_id_created_at', ['webhook_id', 'created_at'], unique=False)

    op.create_table('checks',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('monitor_id', sa.Uuid(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('x', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('x_prime', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('event', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('reversed', sa.Boolean(), nullable=False),
    sa.Column('detector_state', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=True),
    sa.Column('last_z', sa.Double(), nullable=True),
    sa.Column('last_statistic', sa.Double(), nullable=True),
    sa.Column('max_statistic', sa.Double(), nullable=True),
    sa.ForeignKeyConstraint(['monitor_id'], ['monitors.id'], name=op.f('fk_checks_monitor_id_monitors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_checks')),
    sa.UniqueConstraint('monitor_id', 'position', name=op.f('uq_checks_monitor_id_position'))
    )
    op.create_table('period_runs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('monitor_id', sa.Uuid(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('scheduled_for', sa.DateTime(timezone=True), nullable=False),
    sa.Column('horizon_index', sa.Integer(), nullable=False),
    sa.Column('t', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=8), nullable=False),
    sa.Column('failure_reason', sa.String(length=64), nullable=True),
    sa.Column('failure_detail', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('sampling_seconds', sa.Double(), nullable=True),
    sa.Column('worker_id', sa.String(length=200), nullable=True),
    sa.CheckConstraint("status IN ('ok', 'failed')", name=op.f('ck_period_runs_status')),
    sa.ForeignKeyConstraint(['monitor_id'], ['monitors.id'], name=op.f('fk_period_runs_monitor_id_monitors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_period_runs')),
    sa.UniqueConstraint('monitor_id', 'horizon_index', 't', name=op.f('uq_period_runs_monitor_id_horizon_index_t')),
    sa.UniqueConstraint('monitor_id', 'scheduled_for', name=op.f('uq_period_runs_monitor_id_scheduled_for')),
    sa.UniqueConstraint('monitor_id', 'seq', name=op.f('uq_period_runs_monitor_id_seq'))
    )
    op.create_table('webhook_attempts',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('message_id', sa.String(length=40), nullable=False),
    sa.Column('attempted_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('duration_ms', sa.Double(), nullable=True),
    sa.Column('worker_id', sa.String(length=200), nullable=True),
    sa.ForeignKeyConstraint(['message_id'], ['webhook_messages.id'], name=op.f('fk_webhook_attempts_message_id_webhook_messages'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts'))
    )
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_attempts_message_id'), ['message_id'], unique=False)

    op.create_table('alarms',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('monitor_id', sa.Uuid(), nullable=False),
    sa.Column('check_id', sa.Uuid(), nullable=False),
    sa.Column('period_run_id', sa.Uuid(), nullable=False),
    sa.Column('horizon_index', sa.Integer(), nullable=False),
    sa.Column('t', sa.Integer(), nullable=False),
    sa.Column('statistic', sa.Double(), nullable=False),
    sa.Column('threshold', sa.Double(), nullable=False),
    sa.Column('a', sa.Integer(), nullable=False),
    sa.Column('b', sa.Integer(), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.Column('z', sa.Double(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('acknowledged_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('acknowledged_note', sa.Text(), nullable=True),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['check_id'], ['checks.id'], name=op.f('fk_alarms_check_id_checks'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['monitor_id'], ['monitors.id'], name=op.f('fk_alarms_monitor_id_monitors'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['period_run_id'], ['period_runs.id'], name=op.f('fk_alarms_period_run_id_period_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_alarms_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alarms'))
    )
    with op.batch_alter_table('alarms', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alarms_check_id'), ['check_id'], unique=False)
        batch_op.create_index('ix_alarms_monitor_id_resolved_at', ['monitor_id', 'resolved_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_alarms_period_run_id'), ['period_run_id'], unique=False)
        batch_op.create_index('ix_alarms_tenant_id_created_at', ['tenant_id', 'created_at'], unique=False)

    op.create_table('period_checks',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('period_run_id', sa.Uuid(), nullable=False),
    sa.Column('check_id', sa.Uuid(), nullable=False),
    sa.Column('a', sa.Integer(), nullable=False),
    sa.Column('b', sa.Integer(), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.Column('p_hat', sa.Double(), nullable=False),
    sa.Column('q_hat', sa.Double(), nullable=False),
    sa.Column('d_hat', sa.Double(), nullable=False),
    sa.Column('sigma_hat', sa.Double(), nullable=False),
    sa.Column('z', sa.Double(), nullable=False),
    sa.Column('statistic', sa.Double(), nullable=False),
    sa.Column('threshold', sa.Double(), nullable=False),
    sa.ForeignKeyConstraint(['check_id'], ['checks.id'], name=op.f('fk_period_checks_check_id_checks'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['period_run_id'], ['period_runs.id'], name=op.f('fk_period_checks_period_run_id_period_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_period_checks')),
    sa.UniqueConstraint('period_run_id', 'check_id', name=op.f('uq_period_checks_period_run_id_check_id'))
    )
    with op.batch_alter_table('period_checks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_period_checks_check_id'), ['check_id'], unique=False)



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('period_checks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_period_checks_check_id'))

    op.drop_table('period_checks')
    with op.batch_alter_table('alarms', schema=None) as batch_op:
        batch_op.drop_index('ix_alarms_tenant_id_created_at')
        batch_op.drop_index(batch_op.f('ix_alarms_period_run_id'))
        batch_op.drop_index('ix_alarms_monitor_id_resolved_at')
        batch_op.drop_index(batch_op.f('ix_alarms_check_id'))

    op.drop_table('alarms')
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_attempts_message_id'))

    op.drop_table('webhook_attempts')
    op.drop_table('period_runs')
    op.drop_table('checks')
    with op.batch_alter_table('webhook_messages', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_messages_webhook_id_created_at')
        batch_op.drop_index(batch_op.f('ix_webhook_messages_tenant_id'))
        batch_op.drop_index('ix_webhook_messages_status_next_attempt_at')

    op.drop_table('webhook_messages')
    with op.batch_alter_table('monitors', schema=None) as batch_op:
        batch_op.drop_index('ix_monitors_tenant_id_created_at')
        batch_op.drop_index('ix_monitors_state_next_run_at')
        batch_op.drop_index(batch_op.f('ix_monitors_mechanism_id'))

    op.drop_table('monitors')
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.drop_index('ix_webhooks_tenant_id_created_at')

    op.drop_table('webhooks')
    op.drop_table('mechanisms')
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_keys_tenant_id'))

    op.drop_table('api_keys')
    op.drop_table('tenants')
