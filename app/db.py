"""Database plumbing: the declarative base, portable column types, engines, sessions, migrations.

Services take a ``Session`` and never commit: the request (``session_dependency``) or the
background job that opened the session owns the transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, DateTime, Engine, MetaData, Uuid, create_engine, event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
ALEMBIC_INI = Path(__file__).resolve().parent.parent / "alembic.ini"


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend.

    Postgres stores ``timestamptz``. SQLite has no time zones, so values are stored as naive UTC
    and given ``tzinfo=UTC`` again when read. Naive datetimes are refused on the way in: a naive
    value is ambiguous, and treating it as local time is the classic bug.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r} given for a UTC column; attach a time zone")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# JSON everywhere, JSONB on Postgres (indexable, compact, compares by value).
JSONType = JSON().with_variant(JSONB(), "postgresql")
UUIDType = Uuid(as_uuid=True)


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_uuid() -> uuid.UUID:
    return uuid.uuid4()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime: UTCDateTime(),
        uuid.UUID: UUIDType,
        dict[str, Any]: JSONType,
        list[Any]: JSONType,
    }


def normalise_url(url: str) -> str:
    """Route plain ``postgresql://`` URLs to psycopg 3 (the only Postgres driver installed)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def ensure_sqlite_folder(url: str) -> None:
    """Create the folder of a SQLite file database (the default lives in ./data)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def make_engine(url: str, *, echo: bool = False, pool_timeout: float = 30.0,
                ping_after_idle: float | None = None, statement_timeout_ms: int | None = None,
                lock_timeout_ms: int | None = None, pool_size: int = 10, max_overflow: int = 10) -> Engine:
    """An engine for ``url``: SQLite with WAL and enforced foreign keys, or Postgres via psycopg 3.

    Postgres connections are tested before use (``pool_pre_ping``), or, with ``ping_after_idle``
    (the worker), only when they have been idle in the pool that many seconds: a worker checks a
    connection out several times per period, and each ping is a round trip (14% of a worker's
    CPU under bench/scale.py). A connection killed while in use then fails its statement once:
    SQLAlchemy invalidates the pool, and the period runner retries a write once on a fresh
    connection (``PeriodRunner.run``).

    ``statement_timeout_ms`` / ``lock_timeout_ms`` (Postgres): set once per connection when it is
    opened (libpq ``options``), for every statement sent on it; the API's engine (app.main), whose
    every transaction used to set them with ``SET LOCAL`` (a round trip per request)."""
    url = normalise_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        ensure_sqlite_folder(url)
        engine = create_engine(url, echo=echo, hide_parameters=True,
                               connect_args={"check_same_thread": False, "timeout": 5})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # The pool is at least as large as the threads that use it (asyncio.to_thread's workers), so
    # that connections are not opened and closed on every period. ``pool_size`` connections are
    # kept open; up to ``max_overflow`` more are opened under load and closed as soon as they come
    # back to a full pool (a new Postgres connection each time: the API keeps all of its open).
    # pool_timeout: how long a checkout waits for a free connection (sqlalchemy.exc.TimeoutError,
    # a 503 in the API). connect_timeout: a database that does not accept connections fails fast.
    # hide_parameters: a database error's message never holds the statement's values (secrets, API
    # key hashes, outputs), so neither does any log line that shows the error.
    connect_args: dict[str, Any] = {"connect_timeout": max(1, int(pool_timeout))}
    options = [f"-c {name}={value}ms" for name, value in (("statement_timeout", statement_timeout_ms),
                                                           ("lock_timeout", lock_timeout_ms)) if value is not None]
    if options:
        connect_args["options"] = " ".join(options)
    engine = create_engine(
        url, echo=echo, hide_parameters=True, pool_pre_ping=ping_after_idle is None, pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout, connect_args=connect_args,
    )
    if ping_after_idle is not None:
        _ping_when_idle(engine, ping_after_idle)
    return engine


def _ping_when_idle(engine: Engine, seconds: float) -> None:
    """SQLAlchemy's pessimistic disconnect handling through pool events ("Disconnect Handling -
    Pessimistic", custom form): a connection back from more than ``seconds`` in the pool is pinged
    at checkout; a dead one raises ``DisconnectionError``, which makes the pool discard it and
    check out (or open) another."""
    import time

    from sqlalchemy import exc

    @event.listens_for(engine, "checkin")
    def checkin(dbapi_connection: Any, record: Any) -> None:  # noqa: ANN401
        record.info["checked_in"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:  # noqa: ANN401
        if time.monotonic() - record.info.get("checked_in", 0.0) <= seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise exc.DisconnectionError("connection failed its ping after idling") from error


def make_session_factory(bind: Engine | Connection, **kwargs: Any) -> sessionmaker[Session]:
    # expire_on_commit=False: responses are serialised after the request's commit.
    return sessionmaker(bind=bind, autoflush=True, expire_on_commit=False, **kwargs)


def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit if the body succeeds, roll back if it raises."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _alembic_config(url: str) -> Any:
    from alembic.config import Config

    config = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.exists() else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Alembic's ini interpolation treats % specially; URLs may carry %-escapes in passwords.
    config.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    config.attributes["dpwatch_url"] = normalise_url(url)
    return config


def run_migrations(url: str, revision: str = "head") -> None:
    """``alembic upgrade <revision>`` against ``url`` (used on startup and by ``dpwatch migrate``)."""
    from alembic import command

    ensure_sqlite_folder(normalise_url(url))
    command.upgrade(_alembic_config(url), revision)


def head_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return set(ScriptDirectory(str(MIGRATIONS_DIR)).get_heads())


def migrations_current(bind: Engine | Connection) -> bool:
    """True when the database is at the Alembic head (the check behind ``/readyz``)."""
    from alembic.runtime.migration import MigrationContext

    if isinstance(bind, Engine):
        with bind.connect() as connection:
            return migrations_current(connection)
    current = set(MigrationContext.configure(bind).get_current_heads())
    return current == head_revisions()
