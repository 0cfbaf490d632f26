"""Agent traces in: spans buffered per trace, the trace's state, and the sampler's decisions.

`traces` (one row per trace seen on `POST /v1/traces`: pending, ingested or rejected with why),
`trace_spans` (spans held until their trace's root arrives; removed once the trace is built) and
`session_sampling` (per session made from a trace: sampled or not, the reason, the judge calls it
costs, the evaluation it queued). The budget's sliding window is summed from `session_sampling`, so a
restart or a peer process does not reset it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'traces',
        sa.Column('trace_id', sa.String(32), primary_key=True),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('span_count', sa.Integer(), nullable=False),
        sa.Column('root_seen', sa.Boolean(), nullable=False),
        sa.Column('first_seen_us', sa.BigInteger(), nullable=False),
        sa.Column('updated_at_us', sa.BigInteger(), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
    )
    op.create_index('ix_traces_status_first_seen', 'traces', ['status', 'first_seen_us'])
    op.create_table(
        'trace_spans',
        sa.Column('trace_id', sa.String(32), sa.ForeignKey('traces.trace_id', ondelete='CASCADE'), primary_key=True),
        sa.Column('span_id', sa.String(16), primary_key=True),
        sa.Column('span', sa.JSON(), nullable=False),
    )
    op.create_table(
        'session_sampling',
        sa.Column('session_id', sa.String(36), sa.ForeignKey('sessions.session_id', ondelete='CASCADE'), primary_key=True),
        sa.Column('trace_id', sa.String(32), nullable=False),
        sa.Column('agent', sa.String(255), nullable=True),
        sa.Column('sampled', sa.Boolean(), nullable=False),
        sa.Column('reason', sa.String(16), nullable=False),
        sa.Column('detail', sa.Text(), nullable=False),
        sa.Column('judge_calls', sa.Integer(), nullable=False),
        sa.Column('judges', sa.JSON(), nullable=False),
        sa.Column('evaluation_id', sa.String(36), nullable=True),
        sa.Column('decided_at_us', sa.BigInteger(), nullable=False),
    )
    op.create_index('ix_session_sampling_trace_id', 'session_sampling', ['trace_id'])
    op.create_index('ix_session_sampling_sampled_decided', 'session_sampling', ['sampled', 'decided_at_us'])


def downgrade() -> None:
    op.drop_table('session_sampling')
    op.drop_table('trace_spans')
    op.drop_table('traces')
