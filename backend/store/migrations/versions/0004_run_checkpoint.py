"""a run's checkpoint (its RunState at its last step), the workspace's files when it began
(stored once, not with every checkpoint), the current task's finished turns (stored before
each model call, not with every message), resumes and repeated model calls

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('checkpoint', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('start_files', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('transcript', sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column('resumes', sa.Integer(), nullable=False, server_default='0')
        )
        batch_op.add_column(
            sa.Column('repeated_calls', sa.Integer(), nullable=False, server_default='0')
        )


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('repeated_calls')
        batch_op.drop_column('resumes')
        batch_op.drop_column('transcript')
        batch_op.drop_column('start_files')
        batch_op.drop_column('checkpoint')
