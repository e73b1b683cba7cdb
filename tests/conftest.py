"""Fixtures for API and database tests on both backends.

- SQLite: the schema is built once by ``alembic upgrade head`` into a template file; each test
  gets a fresh copy, used through the app's real engine (WAL, foreign keys).
- Postgres: a fresh database ``dpwatch_test_<random>`` is created on the server at
  ``DPWATCH_TEST_POSTGRES_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``),
  migrated once, and dropped at the end. Each test runs inside an outer transaction that is rolled
  back; the app's sessions commit to savepoints inside it (polar's pattern).

Postgres tests are skipped when the server is unreachable, except under ``CI``, where they fail.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.db import make_engine, make_session_factory, normalise_url, run_migrations

POSTGRES_URL = normalise_url(
    os.environ.get("DPWATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
)
BACKENDS = ["sqlite", "postgres"]


# ------------------------------------------------------------------------------------ databases


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head, copied by every SQLite test."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.sqlite3"
    run_migrations(f"sqlite:///{path}")
    return path


def _admin_engine() -> Engine:
    return create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a fresh, migrated database on the test server, dropped at the end of the session."""
    admin = _admin_engine()
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT 1"))
    except OperationalError as exc:
        admin.dispose()
        message = (
            f"PostgreSQL at {make_url(POSTGRES_URL).render_as_string(hide_password=True)} is unreachable: {exc.orig}"
        )
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set: Postgres tests must run)")
        pytest.skip(message + " (set DPWATCH_TEST_POSTGRES_URL, or start the server)")
    name = f"dpwatch_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    try:
        run_migrations(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the Postgres variants, so that ``-m "not postgres"`` runs the SQLite half alone."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "postgres":
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database backend of a test: every test using a database runs on both."""
    return request.param


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A migrated database URL for the test's backend (a private SQLite copy, or the test PG db)."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "dpwatch.sqlite3"
        shutil.copyfile(template, path)
        return f"sqlite:///{path}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def session_factory(backend: str, db_url: str, request: pytest.FixtureRequest) -> Iterator[sessionmaker[Session]]:
    """Sessions for the app and for the test. On Postgres they commit into savepoints of one outer
    transaction that is rolled back after the test."""
    if backend == "sqlite":
        engine = make_engine(db_url)
        yield make_session_factory(engine)
        engine.dispose()
        return
    engine: Engine = request.getfixturevalue("postgres_engine")
    connection = engine.connect()
    outer = connection.begin()
    try:
        yield make_session_factory(connection, join_transaction_mode="create_savepoint")
    finally:
        outer.rollback()
        connection.close()


@pytest.fixture
def db(session_factory: sessionmaker[Session]) -> Callable[[], AbstractContextManager[Session]]:
    """``with db() as session:`` — a unit of work for test setup and checks (commits at the end)."""

    @contextmanager
    def unit_of_work() -> Iterator[Session]:
        with session_factory() as session:
            yield session
            session.commit()

    return unit_of_work


# ------------------------------------------------------------------------------------ the app


@pytest.fixture
def settings(db_url: str):  # noqa: ANN201
    from app.settings import Settings

    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=db_url,
        migrate_on_start=False,
        env="development",
        allow_networks=["127.0.0.0/8"],
        worker_id="test-worker",
        public_url="http://dpwatch.test",
        log_level="WARNING",
    )


@dataclass(frozen=True)
class TenantKey:
    tenant_id: uuid.UUID
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture
def tenants(db: Callable[[], AbstractContextManager[Session]]) -> tuple[TenantKey, TenantKey]:
    """Two tenants, each with one API key: the test's own, and another for isolation checks."""
    from app.auth.service import create_tenant_with_key

    out = []
    with db() as session:
        for name in ("acme", "globex"):
            tenant, key = create_tenant_with_key(session, name, f"{name}-key")
            out.append(TenantKey(tenant.id, key))
    return out[0], out[1]


@pytest.fixture
def app(settings, session_factory: sessionmaker[Session]):  # noqa: ANN001, ANN201
    from app.main import create_app

    return create_app(settings, session_factory=session_factory)


@pytest.fixture
def client(app, tenants: tuple[TenantKey, TenantKey]):  # noqa: ANN001, ANN201
    """A TestClient authenticated as the first tenant."""
    from fastapi.testclient import TestClient

    with TestClient(app, headers=tenants[0].headers) as test_client:
        yield test_client


@pytest.fixture
def other_headers(tenants: tuple[TenantKey, TenantKey]) -> dict[str, str]:
    """Authorization headers of the second tenant."""
    return tenants[1].headers
