"""Smoke mark, raw model output and ingest warnings.

`session_scores.smoke` / `session_evaluations.smoke`: made by the embedded model (a smoke test, not a
verdict). `session_scores.raw_output`: the model's raw answer, kept when a scoring failed to parse.
`sessions.warnings`: what ingest changed in the record (lone surrogates and NULs replaced by U+FFFD).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE … ADD/DROP COLUMN on both backends (SQLite >= 3.35 drops columns itself): no
    # batch table rebuild, so the partial unique indexes stay exactly as migration 0001 made them.
    op.add_column('sessions', sa.Column('warnings', sa.JSON(), nullable=True))
    op.add_column('session_scores', sa.Column('raw_output', sa.Text(), nullable=True))
    op.add_column('session_scores', sa.Column('smoke', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column('session_evaluations', sa.Column('smoke', sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column('session_evaluations', 'smoke')
    op.drop_column('session_scores', 'smoke')
    op.drop_column('session_scores', 'raw_output')
    op.drop_column('sessions', 'warnings')
