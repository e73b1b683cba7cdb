"""API keys: the keys API and CLI, scopes enforced in one dependency, the dashboard's
read-only view, unique tenant names, and the migration that brings them."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.auth.service import (
    LastAdminKeyError,
    TenantExistsError,
    add_key_to_tenant,
    create_api_key,
    create_tenant,
    revoke_api_key,
)
from app.models.auth import ApiKey, Tenant
from tests.support.api_helpers import create_mechanism, create_monitor

DB = Callable[[], AbstractContextManager[Session]]
#: For tests whose logic does not depend on the database (validation, OpenAPI, the dashboard).
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def _new_key(client: TestClient, scope: str, name: str = "k") -> dict:
    response = client.post("/v1/keys", json={"name": name, "scope": scope})
    assert response.status_code == 201, response.text
    return response.json()


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ------------------------------------------------------------------------------------ the API


def test_create_list_and_revoke_a_key(client: TestClient, tenants, db: DB) -> None:  # noqa: ANN001
    created = _new_key(client, "read", "dashboard")
    assert set(created) >= {"id", "key", "scope", "created_at", "name", "prefix", "revoked_at", "last_used_at"}
    assert created["scope"] == "read" and created["key"].startswith("dpw_")
    assert created["prefix"] == created["key"][:8] and created["revoked_at"] is None
    # Stored hashed: the plaintext is nowhere in the row.
    with db() as session:
        row = session.get(ApiKey, uuid.UUID(created["id"]))
        assert row.key_hash != created["key"] and created["key"] not in (row.key_hash, row.prefix, row.name)

    assert client.get("/v1/monitors", headers=_bearer(created["key"])).status_code == 200
    listed = client.get("/v1/keys").json()
    assert [k["id"] for k in listed["items"]][0] == created["id"] and len(listed["items"]) == 2
    assert all("key" not in k and "key_hash" not in k for k in listed["items"])
    assert created["key"] not in client.get("/v1/keys").text
    assert client.get(f"/v1/keys/{created['id']}").json()["name"] == "dashboard"

    response = client.delete(f"/v1/keys/{created['id']}")
    assert response.status_code == 204 and response.content == b""
    after = client.get("/v1/monitors", headers=_bearer(created["key"]))
    assert after.status_code == 401 and after.headers["content-type"].startswith("application/problem+json")
    assert 'error="invalid_token"' in after.headers["www-authenticate"]
    assert client.delete(f"/v1/keys/{created['id']}").status_code == 204  # idempotent
    assert [k["id"] for k in client.get("/v1/keys", params={"revoked": "true"}).json()["items"]] == [created["id"]]
    assert created["id"] not in {k["id"] for k in client.get("/v1/keys", params={"revoked": "false"}).json()["items"]}


def test_keys_are_the_tenants_own(client: TestClient, tenants, other_headers) -> None:  # noqa: ANN001
    theirs = client.post("/v1/keys", json={"name": "x", "scope": "admin"}, headers=other_headers).json()
    assert client.get(f"/v1/keys/{theirs['id']}").status_code == 404
    assert client.delete(f"/v1/keys/{theirs['id']}").status_code == 404
    assert client.get("/v1/monitors", headers=_bearer(theirs["key"])).status_code == 200
    assert theirs["id"] not in {k["id"] for k in client.get("/v1/keys").json()["items"]}


def test_the_last_admin_key_cannot_be_revoked(client: TestClient, tenants) -> None:  # noqa: ANN001
    own = client.get("/v1/keys").json()["items"][0]
    refused = client.delete(f"/v1/keys/{own['id']}")
    assert refused.status_code == 409 and refused.json()["type"].endswith("/last-admin-key")
    assert "last active admin key" in refused.json()["detail"]
    # A read key does not count as a way back in.
    _new_key(client, "read")
    assert client.delete(f"/v1/keys/{own['id']}").status_code == 409
    # With another admin key, a key may revoke itself, and then gets 401.
    second = _new_key(client, "admin")
    assert client.delete(f"/v1/keys/{own['id']}").status_code == 204
    assert client.get("/v1/keys").status_code == 401
    assert client.get("/v1/keys", headers=_bearer(second["key"])).status_code == 200


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"name": "", "scope": "read"}, "#/name"),
        ({"name": "a\u0000b", "scope": "read"}, "#/name"),
        ({"name": "k", "scope": "owner"}, "#/scope"),
        ({"name": "k", "scope": "read", "key": "dpw_mine"}, "#/key"),
        ({"scope": "read"}, "#/name"),
    ],
)
def test_key_validation(client: TestClient, body: dict, pointer: str) -> None:
    response = client.post("/v1/keys", json=body)
    assert response.status_code == 422, response.text
    assert pointer in {e["pointer"] for e in response.json()["errors"]}


# ------------------------------------------------------------------------------------ scopes


def _write_routes(app) -> list[tuple[str, str]]:  # noqa: ANN001
    """Every non-GET operation under /v1 (from the app's OpenAPI document, which lists every route)."""
    out = []
    for path, item in app.openapi()["paths"].items():
        if path.startswith("/v1/"):
            out += [(method.upper(), path) for method in item if method not in ("get", "head", "options")]
    return sorted(out)


def test_a_read_key_gets_403_on_every_write_route(app, client: TestClient, tenants) -> None:  # noqa: ANN001
    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    reader = _bearer(_new_key(client, "read")["key"])
    routes = _write_routes(app)
    # Every kind of write the brief names is among them.
    paths = {p for _, p in routes}
    for needle in ("/v1/mechanisms", "/v1/monitors", "/acknowledge", "/v1/webhooks", "/v1/keys", "/v1/jobs",
                   "snapshots", "/rotate-secret"):
        assert any(needle in p for p in paths), needle
    assert len(routes) >= 20
    ids = {"mechanism_id": mechanism["id"], "monitor_id": monitor["id"]}
    for method, path in routes:
        url = re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), str(uuid.uuid4())), path)
        response = client.request(method, url, json={}, headers=reader)
        assert response.status_code == 403, (method, url, response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["type"].endswith("/forbidden") and "read scope" in response.json()["detail"]
    # Nothing changed, and reads work.
    for path in ("/v1/mechanisms", "/v1/monitors", "/v1/alarms", "/v1/webhooks", "/v1/keys", "/v1/jobs"):
        assert client.get(path, headers=reader).status_code == 200, path
    assert client.get(f"/v1/monitors/{monitor['id']}", headers=reader).json()["state"] == monitor["state"]
    # The same requests with an admin key get past the scope check (whatever they answer then).
    method, path = "POST", "/v1/keys"
    assert client.request(method, path, json={"name": "a", "scope": "read"}).status_code == 201


@SQLITE_ONLY
def test_openapi_documents_403_on_write_routes_only(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    writes = reads = 0
    for path, item in schema["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in item.items():
            if method == "get":
                reads += 1
                assert "403" not in operation["responses"], path
            else:
                writes += 1
                assert "403" in operation["responses"], (method, path)
                assert "application/problem+json" in operation["responses"]["403"]["content"]
    assert writes >= 20 and reads >= 10
    keys = schema["paths"]["/v1/keys"]
    # app.api.contract adds the statuses every route may answer (400, 413, 503, ...) beside these.
    assert {"201", "401", "403", "422"} <= set(keys["post"]["responses"])
    assert "404" not in keys["post"]["responses"]
    assert {"204", "401", "403", "404", "409", "422"} <= set(schema["paths"]["/v1/keys/{key_id}"]["delete"]["responses"])
    assert "key" not in schema["components"]["schemas"]["ApiKeyRead"]["properties"]


@SQLITE_ONLY
def test_the_dashboard_hides_changes_from_a_read_key(app, client: TestClient, tenants, db: DB) -> None:  # noqa: ANN001
    from app.auth.service import Principal
    from app.web.permissions import may_change_monitor
    from tests.web.test_web_pages import csrf, sign_in, web_client

    assert may_change_monitor(Principal(uuid.uuid4(), uuid.uuid4(), scope="admin"))
    assert not may_change_monitor(Principal(uuid.uuid4(), uuid.uuid4(), scope="read"))

    monitor = create_monitor(client, create_mechanism(client)["id"])
    reader = _new_key(client, "read")["key"]
    url = f"/ui/monitors/{monitor['id']}"
    with web_client(app) as admin_web:
        sign_in(admin_web, tenants[0].key)
        assert re.search(rf'action="{url}/pause"', admin_web.get(url).text)
    with web_client(app) as read_web:
        sign_in(read_web, reader)
        page = read_web.get(url)
        assert page.status_code == 200
        assert not re.search(rf'action="{url}/(pause|reset|snapshot)"', page.text)
        for action in ("pause", "reset", "snapshot"):
            response = read_web.post(f"{url}/{action}", data={"csrf_token": csrf(page.text)})
            assert response.status_code == 403, (action, response.status_code)
    assert client.get(f"/v1/monitors/{monitor['id']}").json()["state"] == monitor["state"]


# ------------------------------------------------------------------------------------ services


def test_tenant_names_are_unique(db: DB) -> None:
    with db() as session:
        create_tenant(session, "initech")
        with pytest.raises(TenantExistsError, match="initech"):
            create_tenant(session, "initech")
    with db() as session:
        tenant, key, _, created = add_key_to_tenant(session, "initech", "second", "read")
        assert not created and key.scope == "read"
        assert session.scalar(select(Tenant.id).where(Tenant.name == "initech")) == tenant.id
        with pytest.raises(LookupError):
            add_key_to_tenant(session, "nobody", "k", create=False)
        with pytest.raises(ValueError, match="first key"):
            add_key_to_tenant(session, "nobody", "k", "read")
        with pytest.raises(ValueError, match="scope"):
            create_api_key(session, tenant.id, "k", "owner")


def test_the_database_refuses_a_duplicate_tenant_name(db: DB) -> None:
    from sqlalchemy.exc import IntegrityError

    with db() as session:
        session.add(Tenant(name="dup"))
        session.flush()
        session.add(Tenant(name="dup"))
        with pytest.raises(IntegrityError):
            session.flush()
        session.rollback()


def test_revoking_in_the_service(db: DB) -> None:
    with db() as session:
        tenant = create_tenant(session, "hooli")
        only, _ = create_api_key(session, tenant.id, "only")
        with pytest.raises(LastAdminKeyError):
            revoke_api_key(session, only.id)
        assert revoke_api_key(session, only.id, allow_last_admin=True).revoked_at is not None
        assert revoke_api_key(session, uuid.uuid4()) is None


# ------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    monkeypatch.setenv("DPWATCH_DATABASE_URL", url)
    monkeypatch.setenv("DPWATCH_MIGRATE_ON_START", "true")
    monkeypatch.setenv("DPWATCH_LOG_LEVEL", "WARNING")
    return url


def _cli(*args: str):  # noqa: ANN202
    from app.cli import app

    return CliRunner().invoke(app, list(args))


def test_cli_create_twice_adds_a_key_to_one_tenant_then_list_and_revoke(cli_env: str) -> None:
    first = _cli("keys", "create", "--tenant", "acme")
    assert first.exit_code == 0, first.output
    second = _cli("keys", "create", "--tenant", "acme", "--name", "ci", "--scope", "read")
    assert second.exit_code == 0, second.output
    key1, key2 = first.stdout.strip().splitlines()[-1], second.stdout.strip().splitlines()[-1]
    assert key1.startswith("dpw_") and key2.startswith("dpw_") and key1 != key2

    engine = create_engine(cli_env)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM tenants WHERE name = 'acme'")).scalar() == 1
        rows = connection.execute(text("SELECT id, scope FROM api_keys ORDER BY created_at")).all()
    engine.dispose()
    assert [r.scope for r in rows] == ["admin", "read"]

    listed = _cli("keys", "list", "--tenant", "acme")
    assert listed.exit_code == 0, listed.output
    assert key1[:8] in listed.stdout and key2[:8] in listed.stdout and key1 not in listed.stdout
    assert "read" in listed.stdout and "admin" in listed.stdout
    admin_id = str(uuid.UUID(str(rows[0].id))) if not isinstance(rows[0].id, uuid.UUID) else str(rows[0].id)
    read_id = str(uuid.UUID(str(rows[1].id))) if not isinstance(rows[1].id, uuid.UUID) else str(rows[1].id)

    assert _cli("keys", "revoke", read_id).exit_code == 0
    refused = _cli("keys", "revoke", admin_id)
    assert refused.exit_code == 2 and "last active admin key" in refused.output
    assert _cli("keys", "revoke", admin_id, "--force").exit_code == 0
    import json as _json

    as_json = [_json.loads(line) for line in _cli("keys", "list", "--tenant", "acme", "--json").stdout.splitlines()]
    assert all(k["revoked_at"] != "-" for k in as_json) and len(as_json) == 2

    assert _cli("keys", "list", "--tenant", "nobody").exit_code == 2
    assert _cli("keys", "create", "--tenant", "nobody", "--no-create-tenant").exit_code == 2
    assert _cli("keys", "create", "--tenant", "acme", "--scope", "owner").exit_code == 2
    assert _cli("keys", "revoke", "not-a-uuid").exit_code == 2
    assert _cli("keys", "revoke", str(uuid.uuid4())).exit_code == 2


# ------------------------------------------------------------------------------------ migration


def test_migration_renames_duplicate_tenants_and_makes_existing_keys_admin(tmp_path: Path) -> None:
    from alembic import command

    from app.db import _alembic_config

    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    command.upgrade(_alembic_config(url), "0003s")
    engine = create_engine(url)
    ids = [uuid.uuid4() for _ in range(3)]
    with engine.begin() as connection:
        for i, (tenant_id, name) in enumerate(zip(ids, ["acme", "acme", "globex"], strict=True)):
            connection.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (:id, :name, :at)"),
                               {"id": tenant_id.hex, "name": name, "at": f"2026-01-0{i + 1} 00:00:00.000000"})
            connection.execute(
                text("INSERT INTO api_keys (id, tenant_id, name, prefix, key_hash, created_at) "
                     "VALUES (:id, :tenant, 'k', 'dpw_abcd', :hash, '2026-01-01 00:00:00.000000')"),
                {"id": uuid.uuid4().hex, "tenant": tenant_id.hex, "hash": uuid.uuid4().hex * 2},
            )
    command.upgrade(_alembic_config(url), "head")
    with engine.connect() as connection:
        names = dict(connection.execute(text("SELECT id, name FROM tenants")).all())
        scopes = {row[0] for row in connection.execute(text("SELECT scope FROM api_keys"))}
    engine.dispose()
    assert names[ids[0].hex] == "acme" and names[ids[2].hex] == "globex"
    assert names[ids[1].hex] == f"acme ({ids[1].hex[:8]})"
    assert scopes == {"admin"}
    # Down and up again keeps every tenant and key (no table that others reference is recreated).
    command.downgrade(_alembic_config(url), "0003s")
    command.upgrade(_alembic_config(url), "head")
    engine = create_engine(url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM api_keys")).scalar() == 3
        assert connection.execute(text("SELECT count(*) FROM tenants")).scalar() == 3
    engine.dispose()
