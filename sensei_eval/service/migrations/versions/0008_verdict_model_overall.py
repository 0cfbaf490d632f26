"""The verdict model's summary on every evaluation, and stored overall scores recomputed by it.

`session_evaluations.verdict` (JSON, nullable): the summary of the evaluation's verdict that the dashboard's
list and Patterns read (`service.verdict_cache.VerdictSummary`: overall score, coverage, each judge's verdict, the
failed and judged failure modes), written by the worker with each evaluation from now on.

Rows written before the verdict model (`sensei_eval.core.verdicts`) get theirs here, computed from the stored
per-judge results, and their `overall_score` column is recomputed the same way: it was computed by older
rules (an answer of the embedded model counted as a verdict, so a run nothing judged could store 1.0; a minor
finding could fail a mode). A row whose summary cannot be made keeps none: the service then computes the
verdict when it reads the row, as it does for a summary made under other verdict rules.

Downgrade drops the column; the recomputed overall scores stay (the old values are kept nowhere, and the old
code reads a null overall score as "no score", as it always could).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

# Rows read per query (a report carries the whole record: keep memory bounded on a large table).
_BATCH = 200


def upgrade() -> None:
    from sensei_eval.service.verdict_cache import stored_results, summarise

    op.add_column('session_evaluations', sa.Column('verdict', sa.JSON(), nullable=True))
    table = sa.table(
        'session_evaluations',
        sa.column('evaluation_id', sa.String()),
        sa.column('report', sa.JSON()),
        sa.column('overall_score', sa.Float()),
        sa.column('verdict', sa.JSON()),
    )
    conn = op.get_bind()
    last = ''
    while True:
        rows = conn.execute(
            sa.select(table.c.evaluation_id, table.c.report)
            .where(table.c.evaluation_id > last, table.c.report.is_not(None))
            .order_by(table.c.evaluation_id)
            .limit(_BATCH)
        ).all()
        if not rows:
            break
        for evaluation_id, report in rows:
            judges = report.get('judges') if isinstance(report, dict) else None
            if not isinstance(judges, dict):
                continue
            summary = summarise(stored_results(judges, where=f'evaluation {evaluation_id} (migration 0008)'))
            conn.execute(
                sa.update(table)
                .where(table.c.evaluation_id == evaluation_id)
                .values(overall_score=summary.overall_score, verdict=summary.model_dump(mode='json'))
            )
        last = rows[-1][0]


def downgrade() -> None:
    op.drop_column('session_evaluations', 'verdict')
