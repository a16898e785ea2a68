"""previews: services the agent started and the workspace's static pages, with their tokens

Revision ID: 0008
Revises: 0007
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'previews',
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('conversation_id', sa.String(length=64), nullable=False),
        sa.Column('user_id', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('port', sa.Integer(), nullable=False),
        sa.Column('path', sa.Text(), nullable=False),
        sa.Column('command', sa.Text(), nullable=False),
        sa.Column('runtime', sa.String(length=32), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('owner', sa.String(length=64), nullable=True),
        sa.Column('socket', sa.Text(), nullable=False),
        sa.Column('token', sa.String(length=64), nullable=False),
        sa.Column('token_expires', sa.DateTime(), nullable=False),
        sa.Column('started_at', sa.DateTime(), nullable=False),
        sa.Column('last_request_at', sa.DateTime(), nullable=False),
        sa.Column('stop_requested', sa.Boolean(), nullable=False),
        sa.Column('log', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('conversation_id', 'kind', 'name'),
        sa.UniqueConstraint('token'),
    )
    op.create_index('ix_previews_conversation_id', 'previews', ['conversation_id'])


def downgrade() -> None:
    op.drop_index('ix_previews_conversation_id', table_name='previews')
    op.drop_table('previews')
