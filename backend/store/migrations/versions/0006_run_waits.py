"""runs that wait for a person: the approval mode, ask_user, the wait a run is parked on

Revision ID: 0006
Revises: 0005
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('approval', sa.String(length=16), nullable=False, server_default='never')
        )
        batch_op.add_column(
            sa.Column('can_ask', sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch_op.add_column(sa.Column('wait_uuid', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('wait_kind', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('wait_until', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('wait_answer', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        for name in ('wait_answer', 'wait_until', 'wait_kind', 'wait_uuid', 'can_ask', 'approval'):
            batch_op.drop_column(name)
