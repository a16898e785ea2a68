"""checkpoints of a workspace (their index), share links, messages out of the history

Revision ID: 0010
Revises: 0009
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('hidden', sa.Integer(), server_default='0', nullable=False)
        )
    op.create_table(
        'checkpoints',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('conversation_id', sa.String(length=64), nullable=False),
        sa.Column('seq', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.String(length=64), nullable=False),
        sa.Column('label', sa.String(length=200), nullable=False),
        sa.Column('files_changed', sa.Integer(), nullable=False),
        sa.Column('commit', sa.String(length=64), nullable=False),
        sa.Column('bytes', sa.BigInteger(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('conversation_id', 'seq', name='uq_checkpoints_seq'),
    )
    op.create_index('ix_checkpoints_conversation_id', 'checkpoints', ['conversation_id'])
    op.create_table(
        'shares',
        sa.Column('token', sa.String(length=64), nullable=False),
        sa.Column('conversation_id', sa.String(length=64), nullable=False),
        sa.Column('user_id', sa.String(length=64), nullable=False),
        sa.Column('seq', sa.Integer(), nullable=False),
        sa.Column('commit', sa.String(length=64), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('seqs', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('token'),
    )
    op.create_index('ix_shares_conversation_id', 'shares', ['conversation_id'])


def downgrade() -> None:
    op.drop_index('ix_shares_conversation_id', table_name='shares')
    op.drop_table('shares')
    op.drop_index('ix_checkpoints_conversation_id', table_name='checkpoints')
    op.drop_table('checkpoints')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_column('hidden')
