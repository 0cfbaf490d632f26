"""Initial schema: sessions, session_scores (+ missing tools), session_evaluations, service_workers.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None

_ACTIVE = "status IN ('pending', 'in_progress')"


def upgrade() -> None:
    op.create_table(
        'sessions',
        sa.Column('session_id', sa.String(36), primary_key=True),
        sa.Column('query_id', sa.String(255), nullable=False),
        sa.Column('agent', sa.String(255), nullable=True),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('record', sa.JSON(), nullable=False),
        sa.Column('created_by', sa.String(255), nullable=True),
        sa.Column('created_at_us', sa.BigInteger(), nullable=False),
        sa.Column('updated_at_us', sa.BigInteger(), nullable=False),
    )
    op.create_index('ix_sessions_query_id', 'sessions', ['query_id'])
    op.create_index('ix_sessions_agent', 'sessions', ['agent'])
    op.create_index('ix_sessions_status', 'sessions', ['status'])
    op.create_index('ix_sessions_created_at_us', 'sessions', ['created_at_us'])

    op.create_table(
        'session_scores',
        sa.Column('score_id', sa.String(36), primary_key=True),
        sa.Column('session_id', sa.String(36), sa.ForeignKey('sessions.session_id', ondelete='CASCADE'), nullable=False),
        sa.Column('variant', sa.String(32), nullable=False),
        sa.Column('prompt_hash', sa.String(64), nullable=False),
        sa.Column('total_score', sa.Integer(), nullable=True),
        sa.Column('score_analysis', sa.Text(), nullable=True),
        sa.Column('missing_tools_analysis', sa.Text(), nullable=True),
        sa.Column('score_triggered_by', sa.String(255), nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('started_at_us', sa.BigInteger(), nullable=False),
        sa.Column('claimed_at_us', sa.BigInteger(), nullable=True),
        sa.Column('completed_at_us', sa.BigInteger(), nullable=True),
        sa.Column('error_message', sa.Text(), nullable=True),
        sa.Column('score_breakdown', sa.JSON(), nullable=True),
        sa.Column('alternative_approaches', sa.JSON(), nullable=True),
        sa.Column('owner', sa.String(64), nullable=True),
        sa.Column('model', sa.String(255), nullable=True),
        sa.Column('input_tokens', sa.Integer(), nullable=True),
        sa.Column('output_tokens', sa.Integer(), nullable=True),
        sa.CheckConstraint('total_score IS NULL OR (total_score >= 0 AND total_score <= 100)', name='ck_session_scores_range'),
    )
    op.create_index('ix_session_scores_session_id', 'session_scores', ['session_id'])
    op.create_index('ix_session_scores_prompt_hash', 'session_scores', ['prompt_hash'])
    op.create_index('ix_session_scores_total_score', 'session_scores', ['total_score'])
    op.create_index('ix_session_scores_status', 'session_scores', ['status'])
    op.create_index('ix_session_scores_session_status', 'session_scores', ['session_id', 'status'])
    op.create_index('ix_session_scores_status_started', 'session_scores', ['status', 'started_at_us'])
    op.create_index(
        'uq_session_scores_one_active',
        'session_scores',
        ['session_id'],
        unique=True,
        sqlite_where=sa.text(_ACTIVE),
        postgresql_where=sa.text(_ACTIVE),
    )

    op.create_table(
        'score_missing_tools',
        sa.Column('id', sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column('score_id', sa.String(36), sa.ForeignKey('session_scores.score_id', ondelete='CASCADE'), nullable=False),
        sa.Column('tool_name', sa.String(255), nullable=False),
        sa.Column('rationale', sa.Text(), nullable=False),
    )
    op.create_index('ix_score_missing_tools_score_id', 'score_missing_tools', ['score_id'])
    op.create_index('ix_score_missing_tools_tool_name', 'score_missing_tools', ['tool_name'])

    op.create_table(
        'session_evaluations',
        sa.Column('evaluation_id', sa.String(36), primary_key=True),
        sa.Column('session_id', sa.String(36), sa.ForeignKey('sessions.session_id', ondelete='CASCADE'), nullable=False),
        sa.Column('evaluators', sa.JSON(), nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('triggered_by', sa.String(255), nullable=False),
        sa.Column('started_at_us', sa.BigInteger(), nullable=False),
        sa.Column('claimed_at_us', sa.BigInteger(), nullable=True),
        sa.Column('completed_at_us', sa.BigInteger(), nullable=True),
        sa.Column('error_message', sa.Text(), nullable=True),
        sa.Column('overall_score', sa.Float(), nullable=True),
        sa.Column('report', sa.JSON(), nullable=True),
        sa.Column('owner', sa.String(64), nullable=True),
        sa.Column('model', sa.String(255), nullable=True),
    )
    op.create_index('ix_session_evaluations_session_id', 'session_evaluations', ['session_id'])
    op.create_index('ix_session_evaluations_status_started', 'session_evaluations', ['status', 'started_at_us'])
    op.create_index(
        'uq_session_evaluations_one_active',
        'session_evaluations',
        ['session_id'],
        unique=True,
        sqlite_where=sa.text(_ACTIVE),
        postgresql_where=sa.text(_ACTIVE),
    )

    op.create_table(
        'service_workers',
        sa.Column('worker_id', sa.String(64), primary_key=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('pid', sa.Integer(), nullable=False),
        sa.Column('started_at_us', sa.BigInteger(), nullable=False),
        sa.Column('heartbeat_at_us', sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table('service_workers')
    op.drop_index('uq_session_evaluations_one_active', table_name='session_evaluations')
    op.drop_table('session_evaluations')
    op.drop_table('score_missing_tools')
    op.drop_index('uq_session_scores_one_active', table_name='session_scores')
    op.drop_table('session_scores')
    op.drop_table('sessions')
