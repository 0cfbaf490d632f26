"""Stored overall scores recomputed by the verdict model.

`session_evaluations.overall_score` of rows written before the verdict model (`sensei_eval.core.verdicts`)
was computed by older rules: an answer of the embedded model counted as a verdict (a run nothing judged
could store 1.0), and a minor finding could fail a mode. The service no longer reads the column (every
surface recomputes the verdict from the stored per-judge results, `service.verdicts`), but a report or a
SQL query over the table would still see the old figure, so each stored report's overall score is
recomputed here, the way the service reads it. No column changes; rows without a report are left alone.

Downgrade leaves the recomputed values: the old ones are not kept anywhere, and the old code reads these
as well (a null overall score was always possible).

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
    from sensei_eval.service.verdicts import stored_verdict

    table = sa.table(
        'session_evaluations',
        sa.column('evaluation_id', sa.String()),
        sa.column('report', sa.JSON()),
        sa.column('overall_score', sa.Float()),
    )
    conn = op.get_bind()
    last = ''
    while True:
        rows = conn.execute(
            sa.select(table.c.evaluation_id, table.c.report, table.c.overall_score)
            .where(table.c.evaluation_id > last, table.c.report.is_not(None))
            .order_by(table.c.evaluation_id)
            .limit(_BATCH)
        ).all()
        if not rows:
            break
        for evaluation_id, report, stored in rows:
            verdict = stored_verdict(report, where=f'evaluation {evaluation_id} (migration 0008)')
            overall = verdict.overall_score if verdict is not None else None
            if overall != stored:
                conn.execute(sa.update(table).where(table.c.evaluation_id == evaluation_id).values(overall_score=overall))
        last = rows[-1][0]


def downgrade() -> None:
    pass
