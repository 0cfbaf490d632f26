"""Drop `judge_jobs`: judge runs past one machine go to Ray (`judge --ray`), not to a table of jobs.

The table was the home-made work queue of `judge --queue` / `sensei-eval worker`, removed with them.
Its rows were runs in progress; a run still queued there is judged again with `judge --ray` (the
cache answers what its workers had already judged on this machine). Downgrading recreates the empty
table as 0006 made it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import importlib

from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table('judge_jobs')


def downgrade() -> None:
    # 0006's own upgrade: the table and its indexes exactly as they were
    importlib.import_module('sensei_eval.service.migrations.versions.0006_judge_jobs').upgrade()
