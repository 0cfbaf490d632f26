"""One kind of job: scorings become jobs of `session_evaluations`, like every other run of the judges.

`session_evaluations` is the one job table. A scoring (`POST …/score`) is a job of the investigation judge:
`scoring` names its variant (`freeform`, `structured`; null for an evaluation), `prompt_hash` the prompt it was
asked under, and once completed `total_score`, `score_detail` (JSON: the analyses, the points per category,
the missing tools, the alternative approaches, the tokens) and `raw_output` keep what the score API returns.
`evaluators` is renamed `judges` (one name per concept) and `verdict` `verdict_cache` (the verdict model's
summary kept with each job: a cache of derived fields). "One active job per session" becomes one active
scoring and one active evaluation per session, as the two tables allowed: two partial unique indexes on
`session_id`, one over active evaluations (`scoring` null), one over active scorings.

Every row of `session_scores` becomes a job here, with its id (the API's `score_id`), status, times, owner,
model and smoke mark, its trigger, variant and prompt hash, and its score (the `breakdown_*` columns and the
`score_missing_tools` rows into `score_detail`); those two tables are dropped. Old scorings have no report
(they were stored as columns, never as a `RecordReport`): the score API reads them as before.

Downgrade recreates the two tables as 0008 had them, moves the scorings back and the columns out.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

_ACTIVE = "status IN ('pending', 'in_progress')"
# The investigation judge of each variant (`evaluators.investigation.JUDGE_OF_VARIANT`, as of this revision).
_JUDGE_OF_VARIANT = {'freeform': 'investigation_score', 'structured': 'investigation_score_structured'}
_CATEGORIES = ('logical_flow', 'consistency', 'tool_relevance', 'synthesis_quality')
# Rows moved per query (bounded memory on a large table).
_BATCH = 500

_JOB_COLUMNS = ('session_id', 'status', 'started_at_us', 'claimed_at_us', 'completed_at_us', 'error_message', 'owner', 'model')
_scores = sa.table(
    'session_scores',
    *(sa.column(c) for c in ('score_id', 'variant', 'prompt_hash', 'total_score', 'score_analysis', 'missing_tools_analysis')),
    *(sa.column(c) for c in ('score_triggered_by', 'input_tokens', 'output_tokens', 'raw_output', *_JOB_COLUMNS)),
    sa.column('alternative_approaches', sa.JSON()),
    sa.column('smoke', sa.Boolean()),
    *(sa.column(f'breakdown_{c}') for c in _CATEGORIES),
)
_tools = sa.table('score_missing_tools', sa.column('id'), sa.column('score_id'), sa.column('tool_name'), sa.column('rationale'))


def _jobs(*, old: bool) -> sa.TableClause:
    """`session_evaluations` as this revision writes it (`old`: with 0008's column names)."""
    judges, cache = ('evaluators', 'verdict') if old else ('judges', 'verdict_cache')
    return sa.table(
        'session_evaluations',
        sa.column('evaluation_id'),
        sa.column(judges, sa.JSON()),
        sa.column('triggered_by'),
        sa.column('overall_score'),
        sa.column('report', sa.JSON()),
        sa.column(cache, sa.JSON()),
        sa.column('scoring'),
        sa.column('prompt_hash'),
        sa.column('total_score'),
        sa.column('score_detail', sa.JSON()),
        sa.column('raw_output'),
        sa.column('smoke', sa.Boolean()),
        *(sa.column(c) for c in _JOB_COLUMNS),
    )


def upgrade() -> None:
    with op.batch_alter_table('session_evaluations') as batch:
        batch.drop_index('uq_session_evaluations_one_active')
        batch.alter_column('evaluators', new_column_name='judges', existing_type=sa.JSON(), existing_nullable=False)
        batch.alter_column('verdict', new_column_name='verdict_cache', existing_type=sa.JSON(), existing_nullable=True)
        batch.add_column(sa.Column('scoring', sa.String(32), nullable=True))
        batch.add_column(sa.Column('prompt_hash', sa.String(64), nullable=True))
        batch.add_column(sa.Column('total_score', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('score_detail', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('raw_output', sa.Text(), nullable=True))
    _move_scorings_in()
    op.drop_table('score_missing_tools')
    op.drop_index('uq_session_scores_one_active', table_name='session_scores')
    op.drop_table('session_scores')
    op.create_index('ix_session_evaluations_prompt_hash', 'session_evaluations', ['prompt_hash'])
    op.create_index('ix_session_evaluations_total_score', 'session_evaluations', ['total_score'])
    for name, kind in (
        ('uq_session_evaluations_one_active', 'IS NULL'),
        ('uq_session_evaluations_one_active_scoring', 'IS NOT NULL'),
    ):
        where = sa.text(f'{_ACTIVE} AND scoring {kind}')
        op.create_index(name, 'session_evaluations', ['session_id'], unique=True, sqlite_where=where, postgresql_where=where)


def _move_scorings_in() -> None:
    """Each `session_scores` row (with its missing tools) as a job of `session_evaluations`."""
    conn = op.get_bind()
    jobs = _jobs(old=False)
    last = ''
    while True:
        rows = (
            conn.execute(sa.select(_scores).where(_scores.c.score_id > last).order_by(_scores.c.score_id).limit(_BATCH))
            .mappings()
            .all()
        )
        if not rows:
            break
        ids = [r['score_id'] for r in rows]
        tools: dict[str, list[dict[str, str]]] = defaultdict(list)
        for score_id, name, rationale in conn.execute(
            sa.select(_tools.c.score_id, _tools.c.tool_name, _tools.c.rationale)
            .where(_tools.c.score_id.in_(ids))
            .order_by(_tools.c.id)
        ):
            tools[score_id].append({'tool_name': name, 'rationale': rationale})
        conn.execute(sa.insert(jobs), [_job_values(r, tools.get(r['score_id'], [])) for r in rows])
        last = ids[-1]


def _job_values(row: Any, tools: list[dict[str, str]]) -> dict[str, Any]:
    breakdown = {c: row[f'breakdown_{c}'] for c in _CATEGORIES if row[f'breakdown_{c}'] is not None}
    detail = {
        'score_analysis': row['score_analysis'],
        'missing_tools_analysis': row['missing_tools_analysis'],
        'score_breakdown': breakdown or None,
        'missing_tools': tools,
        'alternative_approaches': row['alternative_approaches'],
        'input_tokens': row['input_tokens'],
        'output_tokens': row['output_tokens'],
    }
    return {
        'evaluation_id': row['score_id'],
        'judges': [_JUDGE_OF_VARIANT.get(row['variant'], 'investigation_score')],
        'triggered_by': row['score_triggered_by'],
        'overall_score': None,
        'report': None,
        'verdict_cache': None,
        'scoring': row['variant'],
        'prompt_hash': row['prompt_hash'],
        'total_score': row['total_score'],
        'score_detail': detail,
        'raw_output': row['raw_output'],
        'smoke': bool(row['smoke']),
        **{c: row[c] for c in _JOB_COLUMNS},
    }


def downgrade() -> None:
    op.drop_index('uq_session_evaluations_one_active_scoring', table_name='session_evaluations')
    op.drop_index('uq_session_evaluations_one_active', table_name='session_evaluations')
    op.drop_index('ix_session_evaluations_total_score', table_name='session_evaluations')
    op.drop_index('ix_session_evaluations_prompt_hash', table_name='session_evaluations')
    _create_score_tables()
    _move_scorings_out()
    with op.batch_alter_table('session_evaluations') as batch:
        batch.drop_column('raw_output')
        batch.drop_column('score_detail')
        batch.drop_column('total_score')
        batch.drop_column('prompt_hash')
        batch.drop_column('scoring')
        batch.alter_column('verdict_cache', new_column_name='verdict', existing_type=sa.JSON(), existing_nullable=True)
        batch.alter_column('judges', new_column_name='evaluators', existing_type=sa.JSON(), existing_nullable=False)
    op.create_index(
        'uq_session_evaluations_one_active',
        'session_evaluations',
        ['session_id'],
        unique=True,
        sqlite_where=sa.text(_ACTIVE),
        postgresql_where=sa.text(_ACTIVE),
    )


def _create_score_tables() -> None:
    """`session_scores` and `score_missing_tools` as revisions 0001-0003 left them."""
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
        sa.Column('alternative_approaches', sa.JSON(), nullable=True),
        sa.Column('owner', sa.String(64), nullable=True),
        sa.Column('model', sa.String(255), nullable=True),
        sa.Column('input_tokens', sa.Integer(), nullable=True),
        sa.Column('output_tokens', sa.Integer(), nullable=True),
        sa.Column('raw_output', sa.Text(), nullable=True),
        sa.Column('smoke', sa.Boolean(), nullable=False, server_default=sa.false()),
        *(sa.Column(f'breakdown_{c}', sa.Integer(), nullable=True) for c in _CATEGORIES),
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


def _move_scorings_out() -> None:
    """Each scoring job back into `session_scores` (its missing tools into `score_missing_tools`)."""
    conn = op.get_bind()
    jobs = _jobs(old=False)
    last = ''
    while True:
        rows = (
            conn.execute(
                sa.select(jobs)
                .where(jobs.c.scoring.is_not(None), jobs.c.evaluation_id > last)
                .order_by(jobs.c.evaluation_id)
                .limit(_BATCH)
            )
            .mappings()
            .all()
        )
        if not rows:
            break
        scores, tools = [], []
        for r in rows:
            detail = r['score_detail'] if isinstance(r['score_detail'], dict) else {}
            breakdown = detail.get('score_breakdown') or {}
            scores.append(
                {
                    'score_id': r['evaluation_id'],
                    'variant': r['scoring'],
                    'prompt_hash': r['prompt_hash'] or '',
                    'total_score': r['total_score'],
                    'score_analysis': detail.get('score_analysis'),
                    'missing_tools_analysis': detail.get('missing_tools_analysis'),
                    'score_triggered_by': r['triggered_by'],
                    'alternative_approaches': detail.get('alternative_approaches'),
                    'input_tokens': detail.get('input_tokens'),
                    'output_tokens': detail.get('output_tokens'),
                    'raw_output': r['raw_output'],
                    'smoke': bool(r['smoke']),
                    **{f'breakdown_{c}': breakdown.get(c) for c in _CATEGORIES},
                    **{c: r[c] for c in _JOB_COLUMNS},
                }
            )
            tools += [
                {'score_id': r['evaluation_id'], 'tool_name': t['tool_name'], 'rationale': t['rationale']}
                for t in detail.get('missing_tools') or []
            ]
        conn.execute(sa.insert(_scores), scores)
        if tools:
            conn.execute(sa.insert(_tools), tools)
        last = rows[-1]['evaluation_id']
    conn.execute(sa.delete(jobs).where(jobs.c.scoring.is_not(None)))
