"""The worker's engine pings a connection only after it idled in the pool (``ping_after_idle``),
and still recovers from a connection killed by the server (the ping per checkout was
14% of a worker's CPU)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db import make_engine

pytestmark = pytest.mark.postgres


def _kill(admin_url: str, pid: int) -> None:
    admin = make_engine(admin_url)
    with admin.begin() as c:
        c.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    admin.dispose()


def test_an_idle_connection_killed_by_the_server_is_replaced_at_checkout(postgres_url):
    engine = make_engine(postgres_url, ping_after_idle=0.2)
    with engine.connect() as c:
        pid = c.execute(text("SELECT pg_backend_pid()")).scalar_one()
    _kill(postgres_url, pid)
    time.sleep(0.3)
    with engine.connect() as c:  # pinged, found dead, replaced: no error
        assert c.execute(text("SELECT pg_backend_pid()")).scalar_one() != pid
    engine.dispose()


def test_a_busy_connection_is_not_pinged_and_a_dead_one_fails_once_then_recovers(postgres_url):
    engine = make_engine(postgres_url, ping_after_idle=60)
    statements: list[str] = []
    from sqlalchemy import event

    @event.listens_for(engine, "before_cursor_execute")
    def seen(conn, cursor, statement, *args):  # noqa: ANN001, ANN002, ANN202
        statements.append(statement)

    with engine.connect() as c:
        pid = c.execute(text("SELECT pg_backend_pid()")).scalar_one()
    statements.clear()
    with engine.connect() as c:
        c.execute(text("SELECT 2"))
    assert statements == ["SELECT 2"]  # no ping on a connection just checked in
    _kill(postgres_url, pid)
    with pytest.raises(DBAPIError) as failed, engine.connect() as c:
        c.execute(text("SELECT 3"))
    assert failed.value.connection_invalidated  # what PeriodRunner._retrying retries on
    with engine.connect() as c:
        assert c.execute(text("SELECT 4")).scalar_one() == 4
    engine.dispose()
