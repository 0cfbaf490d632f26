"""Run the store's Alembic migrations from code: `upgrade(url)`, `downgrade(url)`, `current_revision(url)`.

The migration scripts ship inside the package (`sensei_eval/service/migrations`), and the Alembic config
is built here rather than read from an `alembic.ini`, so `serve` can bring any database to the current
schema after a plain `pip install`. The service calls `upgrade` at start-up; it is idempotent.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

from sensei_eval.service.store import normalise_url

__all__ = ('HEAD', 'alembic_config', 'current_revision', 'downgrade', 'upgrade')

HEAD = '0009'
_SCRIPTS = Path(__file__).parent / 'migrations'


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option('script_location', str(_SCRIPTS))
    # Alembic's config is a ConfigParser: a literal % in a URL (an encoded password) must be doubled.
    config.set_main_option('sqlalchemy.url', normalise_url(url).replace('%', '%%'))
    return config


def upgrade(url: str, revision: str = 'head') -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = 'base') -> None:
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    engine = create_engine(normalise_url(url))
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
