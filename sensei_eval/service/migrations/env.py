"""Alembic environment for the scoring service's store (shipped inside the package).

Run through `sensei_eval.service.migrate` (which sets `script_location` to this folder), so migrations
work after `pip install` without an `alembic.ini`. The URL comes from the Alembic config's
`sqlalchemy.url`, or an open connection in `config.attributes['connection']`.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from sensei_eval.service.store import Base, normalise_url

config = context.config
target_metadata = Base.metadata


def _run_online() -> None:
    connection = config.attributes.get('connection')
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = normalise_url(config.get_main_option('sqlalchemy.url') or '')
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option('sqlalchemy.url'), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    _run_online()
