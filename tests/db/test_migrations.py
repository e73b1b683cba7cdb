"""The Alembic tree builds the models' schema on both backends, and goes down and up again."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from app.db import _alembic_config, make_engine, migrations_current, run_migrations
from app.models import load_models
from tests.conftest import POSTGRES_URL

TABLES = {
    "tenants",
    "api_keys",
    "mechanisms",
    "monitors",
    "checks",
    "period_runs",
    "period_checks",
    "alarms",
    "webhooks",
    "webhook_messages",
    "webhook_attempts",
    "jobs",
}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def empty_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database (not migrated) on the test's backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
        return
    request.getfixturevalue("postgres_url")  # skips (or fails under CI) when the server is unreachable
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    name = f"dpwatch_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_upgrade_matches_models_then_downgrade_and_upgrade(empty_url: str) -> None:
    engine = make_engine(empty_url)
    try:
        assert migrations_current(engine) is False
        run_migrations(empty_url)
        assert TABLES <= set(inspect(engine).get_table_names())
        assert migrations_current(engine) is True

        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": True}
            )
            diff = compare_metadata(context, load_models().metadata)
        assert diff == [], f"models and migrations differ: {diff}"

        indexes = {ix["name"] for ix in inspect(engine).get_indexes("monitors")}
        assert "ix_monitors_state_next_run_at" in indexes
        outbox = {ix["name"] for ix in inspect(engine).get_indexes("webhook_messages")}
        assert "ix_webhook_messages_status_next_attempt_at" in outbox
        uniques = {tuple(u["column_names"]) for u in inspect(engine).get_unique_constraints("period_runs")}
        assert {("monitor_id", "scheduled_for"), ("monitor_id", "horizon_index", "t")} <= uniques

        engine.dispose()
        command.downgrade(_alembic_config(empty_url), "base")
        assert not TABLES & set(inspect(engine).get_table_names())
        assert migrations_current(engine) is False
        run_migrations(empty_url)
        assert migrations_current(engine) is True
    finally:
        engine.dispose()


def test_foreign_keys_cascade(empty_url: str) -> None:
    """Deleting a tenant removes everything it owns (ON DELETE CASCADE, enforced on SQLite too)."""
    run_migrations(empty_url)
    engine = make_engine(empty_url)
    from app.auth.service import create_tenant_with_key
    from app.db import make_session_factory

    try:
        with make_session_factory(engine)() as session:
            tenant, _ = create_tenant_with_key(session, "t", "k")
            session.commit()
            session.execute(text("DELETE FROM tenants WHERE name = 't'"))
            session.commit()
            assert session.execute(text("SELECT count(*) FROM api_keys")).scalar() == 0
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_alembic_command_line_takes_the_url_from_x(empty_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPWATCH_")}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini"), "-x", f"url={empty_url}", "upgrade", "head"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    engine = make_engine(empty_url)
    try:
        assert migrations_current(engine)
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_replicas_migrating_together_take_turns(empty_url: str) -> None:
    """Two processes starting at once both run `upgrade head`; the advisory lock serialises them."""
    code = "import sys; from app.db import run_migrations; run_migrations(sys.argv[1])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPWATCH_")}
    processes = [
        subprocess.Popen([sys.executable, "-c", code, empty_url], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    engine = make_engine(empty_url)
    try:
        assert migrations_current(engine)
    finally:
        engine.dispose()
