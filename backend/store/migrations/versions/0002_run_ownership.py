"""run ownership: instances with leases, run owner and stop flag, one running run per
conversation

Revision ID: 0002
Revises: 0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

ONE_RUNNING = "status = 'running'"


def upgrade() -> None:
    op.create_table(
        'instances',
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('host', sa.String(length=200), nullable=False),
        sa.Column('pid', sa.Integer(), nullable=False),
        sa.Column('started_at', sa.DateTime(), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('owner', sa.String(length=64), nullable=True))
        batch_op.add_column(
            sa.Column('stop_requested', sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.create_index(batch_op.f('ix_runs_owner'), ['owner'], unique=False)
    # runs left running by an older version belong to no live instance: recovery fails them
    op.execute("UPDATE runs SET owner = 'legacy' WHERE status = 'running'")
    # an older version could let two runs into one conversation: keep the newest running
    op.execute(
        "UPDATE runs SET status = 'failed', error = 'interrupted by an upgrade' "
        "WHERE status = 'running' AND EXISTS (SELECT 1 FROM runs r2 WHERE "
        "r2.conversation_id = runs.conversation_id AND r2.status = 'running' "
        "AND r2.created_at > runs.created_at)"
    )
    op.create_index(
        'uq_runs_one_running',
        'runs',
        ['conversation_id'],
        unique=True,
        sqlite_where=sa.text(ONE_RUNNING),
        postgresql_where=sa.text(ONE_RUNNING),
    )


def downgrade() -> None:
    op.drop_index('uq_runs_one_running', table_name='runs')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runs_owner'))
        batch_op.drop_column('stop_requested')
        batch_op.drop_column('owner')
    op.drop_table('instances')
