"""On the API's own Postgres engine, a GET reads in autocommit (no BEGIN and COMMIT round trips),
under the connection's timeouts; other methods keep one transaction per request."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.auth.service import create_tenant_with_key
from app.db import make_engine, make_session_factory
from app.settings import Settings

pytestmark = pytest.mark.postgres


def test_gets_read_in_autocommit_and_writes_in_a_transaction(postgres_url: str) -> None:
    from app.main import create_app

    setup = make_engine(postgres_url)
    with make_session_factory(setup)() as session:
        tenant, key = create_tenant_with_key(session, "autocommit-reads", "k")
        session.commit()
        tenant_id = tenant.id
    settings = Settings(_env_file=None, database_url=postgres_url, migrate_on_start=False,  # type: ignore[call-arg]
                        log_level="WARNING", allow_networks=["127.0.0.0/8"], db_statement_timeout_ms=4321)
    app = create_app(settings)
    seen: list[tuple[str, str]] = []
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {key}"}) as client:
            engine = app.state.engine

            @event.listens_for(engine, "after_cursor_execute")
            def status(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
                raw = conn.connection.dbapi_connection
                seen.append((statement.split()[0].upper(), raw.info.transaction_status.name))

            assert client.get("/v1/mechanisms").status_code == 200
            reads = [state for verb, state in seen if verb == "SELECT"]
            assert reads and all(state == "IDLE" for state in reads), seen  # no open transaction
            # The key's first use is written after the request, in a short transaction of its own.
            assert [(verb, state) for verb, state in seen if verb != "SELECT"] == [("UPDATE", "INTRANS")]
            with app.state.read_session_factory() as session:  # the timeouts still hold
                assert session.connection().exec_driver_sql("SHOW statement_timeout").scalar() == "4321ms"
            seen.clear()
            created = client.post("/v1/mechanisms", json={"name": "m", "sampling_url": "http://127.0.0.1:9/x",
                                                          "output_kind": "real"})
            assert created.status_code == 201, created.text
            assert any(state == "INTRANS" for _, state in seen), seen  # a write is one transaction
            assert client.get(f"/v1/mechanisms/{created.json()['id']}").status_code == 200
    finally:
        from sqlalchemy import delete

        from app.models.auth import Tenant

        with make_session_factory(setup)() as session:
            session.execute(delete(Tenant).where(Tenant.id == tenant_id))
            session.commit()
        setup.dispose()
