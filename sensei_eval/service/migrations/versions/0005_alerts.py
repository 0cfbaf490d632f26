"""Degradation alerts: one row per alert, written when it fires and updated as it changes.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'alerts',
        sa.Column('alert_id', sa.String(32), primary_key=True),
        sa.Column('agent', sa.String(255), nullable=False),
        sa.Column('prompt_version', sa.String(255), nullable=False),
        sa.Column('baseline_version', sa.String(255), nullable=False),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('metrics', sa.JSON(), nullable=False),
        sa.Column('message', sa.String(2000), nullable=False),
        sa.Column('fired_at_us', sa.BigInteger(), nullable=False),
        sa.Column('resolved_at_us', sa.BigInteger(), nullable=True),
        sa.Column('webhook_status', sa.String(500), nullable=True),
    )
    op.create_index('ix_alerts_agent', 'alerts', ['agent'])
    op.create_index('ix_alerts_status', 'alerts', ['status'])
    op.create_index('ix_alerts_fired_at_us', 'alerts', ['fired_at_us'])


def downgrade() -> None:
    op.drop_table('alerts')
