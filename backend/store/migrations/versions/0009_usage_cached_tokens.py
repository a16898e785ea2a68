"""input tokens the provider's prompt cache served or stored, per model call

Revision ID: 0009
Revises: 0008
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('usage', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('cached_input_tokens', sa.Integer(), nullable=False, server_default='0')
        )
        batch_op.add_column(
            sa.Column('cache_write_tokens', sa.Integer(), nullable=False, server_default='0')
        )


def downgrade() -> None:
    with op.batch_alter_table('usage', schema=None) as batch_op:
        batch_op.drop_column('cache_write_tokens')
        batch_op.drop_column('cached_input_tokens')
