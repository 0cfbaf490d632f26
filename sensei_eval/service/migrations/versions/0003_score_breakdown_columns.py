"""Score breakdown as columns; missing tools as rows for every scorer variant.

`session_scores.breakdown_logical_flow`, `…_consistency`, `…_tool_relevance`, `…_synthesis_quality`:
the points (0-25) of each rubric category, written from the scorer's typed result. They replace the
`score_breakdown` JSON column (structured scorings only), so the dashboard reads numbers instead of
parsing text. Existing rows are carried over once, here: structured rows from their JSON, freeform
rows from the breakdown lines of their analysis; freeform rows' listed missing tools become
`score_missing_tools` rows like the structured ones'.

Downgrade puts the category points back into `score_breakdown` (JSON) and drops the columns; the
missing-tool rows stay (revision 0002 ignores them for freeform scorings).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

_CATEGORIES = ('logical_flow', 'consistency', 'tool_relevance', 'synthesis_quality')
_COLUMNS = {key: f'breakdown_{key}' for key in _CATEGORIES}

# The freeform answer's formats as of this revision (kept here: a migration must not change with the code).
_BREAKDOWN_LINE = re.compile(
    r'^\W*(logical flow|consistency|tool relevance|synthesis quality)\W*:?\s*(\d{1,3})\s*/\s*25', re.I | re.M
)
_TOOL_ITEM = re.compile(r'^\s*(?:\d+[.)]|[-*\u2022])\s*\**`?([A-Za-z0-9_.:/-]+?)`?\**\s*(?::|\u2014|\u2013| - )[ \t]*(.*)$', re.M)

_scores = sa.table(
    'session_scores',
    sa.column('score_id', sa.String),
    sa.column('variant', sa.String),
    sa.column('status', sa.String),
    sa.column('score_analysis', sa.Text),
    sa.column('missing_tools_analysis', sa.Text),
    sa.column('score_breakdown', sa.JSON),
    *(sa.column(c, sa.Integer) for c in _COLUMNS.values()),
)
_tools = sa.table(
    'score_missing_tools',
    sa.column('score_id', sa.String),
    sa.column('tool_name', sa.String),
    sa.column('rationale', sa.Text),
)


def _points(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 0 <= value <= 25 else None


def upgrade() -> None:
    for column in _COLUMNS.values():
        op.add_column('session_scores', sa.Column(column, sa.Integer(), nullable=True))
    bind = op.get_bind()
    c = _scores.c
    columns = (c.score_id, c.variant, c.score_analysis, c.missing_tools_analysis, c.score_breakdown)
    rows = bind.execute(sa.select(*columns).where(c.status == 'completed')).all()
    for score_id, variant, analysis, missing, breakdown in rows:
        points: dict[str, int | None] = {}
        if isinstance(breakdown, dict):
            points = {key: _points(breakdown.get(key)) for key in _CATEGORIES}
        elif variant != 'structured':
            for label, value in _BREAKDOWN_LINE.findall(analysis or ''):
                points.setdefault(label.lower().replace(' ', '_'), _points(int(value)))
        values = {_COLUMNS[k]: v for k, v in points.items() if v is not None}
        if values:
            bind.execute(sa.update(_scores).where(_scores.c.score_id == score_id).values(**values))
        if variant != 'structured':
            seen: dict[str, str] = {}
            for name, rationale in _TOOL_ITEM.findall(missing or ''):
                seen.setdefault(name[:255], rationale.strip())
            if seen:
                bind.execute(sa.insert(_tools), [{'score_id': score_id, 'tool_name': n, 'rationale': r} for n, r in seen.items()])
    op.drop_column('session_scores', 'score_breakdown')


def downgrade() -> None:
    op.add_column('session_scores', sa.Column('score_breakdown', sa.JSON(), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(sa.select(_scores.c.score_id, *(_scores.c[c] for c in _COLUMNS.values()))).all()
    for score_id, *values in rows:
        breakdown = {key: v for key, v in zip(_CATEGORIES, values, strict=True) if v is not None}
        if breakdown:
            bind.execute(sa.update(_scores).where(_scores.c.score_id == score_id).values(score_breakdown=breakdown))
    for column in reversed(list(_COLUMNS.values())):
        op.drop_column('session_scores', column)
