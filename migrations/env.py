"""Alembic environment for dpwatch: one tree for SQLite and Postgres (``render_as_batch``).

The URL comes from, in order: ``alembic -x url=...``, the config attribute ``dpwatch_url``
(set by ``app.db.run_migrations``), a ``connection`` config attribute (tests), and finally the
``DPWATCH_DATABASE_URL`` setting.
"""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import Connection, text

from app.db import Base, UTCDateTime, make_engine, normalise_url
from app.models import load_models

config = context.config

# Only the alembic command line configures logging from alembic.ini; inside the app
# (run_migrations on startup) the app's structlog configuration must stay in place.
if (
    config.config_file_name is not None
    and "dpwatch_url" not in config.attributes
    and "connection" not in config.attributes
):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

load_models()
target_metadata = Base.metadata


def _url() -> str:
    x_url = context.get_x_argument(as_dictionary=True).get("url")
    if x_url:
        return normalise_url(x_url)
    if config.attributes.get("dpwatch_url"):
        return normalise_url(config.attributes["dpwatch_url"])
    from app.settings import get_settings

    return normalise_url(get_settings().database_url)


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    """Write app.db's UTCDateTime as the plain type it stores, so migrations don't import app."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        render_item=render_item,
        **kwargs,
    )


def run_migrations_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


# Replicas that start together all run `upgrade head`; on Postgres they take turns on this lock,
# and each reads the version table only once it holds it.
MIGRATION_LOCK_KEY = 0x6470_7761_7463_68  # "dpwatch"


def _run_on(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
        return
    engine = make_engine(_url())
    # NullPool semantics: the migration connection is not kept around afterwards.
    try:
        with engine.connect() as connection:
            _run_on(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
