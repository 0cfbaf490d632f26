"""Judge runs spread over worker processes: one `judge_jobs` row per record and repeat.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'judge_jobs',
        sa.Column('job_id', sa.String(36), primary_key=True),
        sa.Column('run_id', sa.String(255), nullable=False),
        sa.Column('seq', sa.Integer(), nullable=False),
        sa.Column('query_id', sa.String(255), nullable=False),
        sa.Column('repeat', sa.Integer(), nullable=False),
        sa.Column('record', sa.JSON(), nullable=False),
        sa.Column('config', sa.JSON(), nullable=False),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('owner', sa.String(64), nullable=True),
        sa.Column('lease_until_us', sa.BigInteger(), nullable=True),
        sa.Column('attempts', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('report', sa.JSON(), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('collected', sa.Boolean(), nullable=False, server_default=sa.text('false')),
        sa.Column('created_at_us', sa.BigInteger(), nullable=False),
        sa.Column('completed_at_us', sa.BigInteger(), nullable=True),
    )
    op.create_index('uq_judge_jobs_run_query_repeat', 'judge_jobs', ['run_id', 'query_id', 'repeat'], unique=True)
    op.create_index('ix_judge_jobs_status_lease', 'judge_jobs', ['status', 'lease_until_us'])
    op.create_index('ix_judge_jobs_run_status', 'judge_jobs', ['run_id', 'status'])


def downgrade() -> None:
    op.drop_table('judge_jobs')
