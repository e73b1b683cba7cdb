"""The API's edges (docs/hardening.md): body size, values JSON cannot carry, query strings, URLs
checked at registration, events that cannot work, safe deletes, database timeouts → 503."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.api.urls import check_http_url, destination_problem
from app.main import create_app
from tests.support.api_helpers import MECHANISM, MONITOR, create_mechanism, create_monitor

SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def _problem(response, status: int) -> dict:  # noqa: ANN001
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()


# ------------------------------------------------------------------------------------ body size


@SQLITE
def test_body_over_the_limit_is_413_from_content_length(client: TestClient) -> None:
    big = b'{"name": "' + b"a" * (1024 * 1024) + b'"}'
    body = _problem(client.post("/v1/mechanisms", content=big, headers={"content-type": "application/json"}), 413)
    assert "1048576 bytes" in body["detail"]


@SQLITE
def test_chunked_body_is_counted_as_it_streams(client: TestClient) -> None:
    sent = []

    def chunks() -> Iterator[bytes]:
        for _ in range(64):  # 64 × 64 KiB = 4 MiB, without a Content-Length
            sent.append(1)
            yield b" " * 65536

    response = client.post("/v1/mechanisms", content=chunks(), headers={"content-type": "application/json"})
    _problem(response, 413)


@SQLITE
def test_body_limit_is_configurable(settings, session_factory, tenants) -> None:  # noqa: ANN001
    app = create_app(settings.model_copy(update={"max_body_bytes": 2048}), session_factory=session_factory)
    with TestClient(app, headers=tenants[0].headers) as client:
        ok = client.post("/v1/mechanisms", json=MECHANISM)
        assert ok.status_code == 201
        _problem(client.post("/v1/mechanisms", json={**MECHANISM, "name": "x" * 3000}), 413)


# ------------------------------------------------------------------------ NaN, infinities, NUL


@SQLITE
@pytest.mark.parametrize(
    ("raw", "pointer"),
    [
        ('"x": [NaN]', "#/checks/0/x/0"),
        ('"x": [Infinity]', "#/checks/0/x/0"),
        ('"x": {"a": [-Infinity]}', "#/checks/0/x/a/0"),
        ('"x": [1e999]', "#/checks/0/x/0"),
        ('"x": ["a\\u0000b"]', "#/checks/0/x/0"),
        ('"x": {"k\\u0000": 1}', "#/checks/0/x/k\u0000"),
    ],
)
def test_values_json_cannot_carry_are_422_with_a_pointer(client: TestClient, raw: str, pointer: str) -> None:
    mechanism = create_mechanism(client)
    body = (
        '{"name": "m", "mechanism_id": "' + mechanism["id"] + '", "epsilon": 1, "horizon": 100, '
        '"samples_per_period": 10, "period_seconds": 60, "checks": [{' + raw + ', "x_prime": [1], '
        '"event": {"kind": "interval", "low": 0}}]}'
    )
    problem = _problem(client.post("/v1/monitors", content=body, headers={"content-type": "application/json"}), 422)
    assert problem["errors"][0]["pointer"] == pointer
    assert problem["errors"][0]["type"] == "json_value_not_allowed"


@SQLITE
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/mechanisms", {**MECHANISM, "name": "bad\u0000name"}),
        ("/v1/mechanisms", {**MECHANISM, "sampling_url": "https://dp.example.org/\u0000"}),
        ("/v1/mechanisms", {**MECHANISM, "probe_database": {"meta": ["\u0000"]}}),
        ("/v1/webhooks", {"url": "https://h.example.org/\u0000", "event_types": ["alarm.firing"]}),
    ],
)
def test_nul_is_refused_in_names_urls_and_metadata(client: TestClient, path: str, body: dict) -> None:
    problem = _problem(client.post(path, json=body), 422)
    assert "NUL" in problem["errors"][0]["message"]


@SQLITE
def test_nan_epsilon_is_422_not_500(client: TestClient) -> None:
    mechanism = create_mechanism(client)
    body = json.dumps({**MONITOR, "mechanism_id": mechanism["id"]}).replace('"epsilon": 1.0', '"epsilon": NaN')
    problem = _problem(client.post("/v1/monitors", content=body, headers={"content-type": "application/json"}), 422)
    assert problem["errors"][0]["pointer"] == "#/epsilon"


@SQLITE
def test_malformed_and_non_utf8_json_are_422_json_invalid(client: TestClient) -> None:
    for raw in (b"{not json", b'{"name": "\xff"}'):
        problem = _problem(client.post("/v1/mechanisms", content=raw, headers={"content-type": "application/json"}), 422)
        assert problem["errors"][0]["type"] == "json_invalid"


@SQLITE
@pytest.mark.parametrize("query", ["cursor=a%00b", "limit=nan", "limit=inf", "limit=1e999", "mechanism_id=%00"])
def test_nul_and_non_finite_numbers_in_query_strings(client: TestClient, query: str) -> None:
    problem = _problem(client.get(f"/v1/monitors?{query}"), 422)
    assert problem["errors"][0]["pointer"].startswith("query:")


@SQLITE
def test_unknown_query_parameters_and_enum_values_are_422(client: TestClient) -> None:
    problem = _problem(client.get("/v1/monitors?status=bogus"), 422)
    assert problem["errors"][0]["pointer"] == "query:status"
    assert "state" in problem["errors"][0]["message"]
    _problem(client.get("/v1/monitors?state=bogus"), 422)
    _problem(client.get("/v1/alarms?kind=bogus"), 422)
    assert client.get("/v1/monitors?state=active&limit=5").status_code == 200


@SQLITE
def test_cursor_is_exactly_its_pattern(client: TestClient) -> None:
    for i in range(3):
        create_mechanism(client, name=f"m{i}")
    first = client.get("/v1/mechanisms?limit=2").json()
    assert first["next_cursor"] is not None
    second = client.get(f"/v1/mechanisms?limit=2&cursor={first['next_cursor']}").json()
    assert len(second["items"]) == 1 and second["next_cursor"] is None
    assert {m["id"] for m in first["items"]}.isdisjoint({m["id"] for m in second["items"]})
    # Any string of the pattern decodes (a cursor past the end gives an empty page); others are 422.
    assert client.get(f"/v1/mechanisms?cursor=0~{'0' * 32}").json()["items"] == []
    _problem(client.get("/v1/mechanisms?cursor=not-a-cursor"), 422)


# ------------------------------------------------------------------------- URLs at registration


@pytest.mark.parametrize("url", ["http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/",
                                 "http://[::1]/", "http://h.example.org:99999/", "http://h.example.org/%zz"])
def test_non_canonical_hosts_are_refused_by_the_syntax(url: str) -> None:
    with pytest.raises(ValueError):
        check_http_url(url)


def test_names_that_resolve_to_refused_addresses_are_refused(settings) -> None:  # noqa: ANN001
    closed = settings.model_copy(update={"allow_networks": []})
    assert "resolves to 127.0.0.1" in (destination_problem("http://localhost:9000/x", closed) or "")
    assert "loopback" in (destination_problem("http://127.0.0.1/x", closed) or "")
    assert destination_problem("http://localhost:9000/x", settings) is None  # 127.0.0.0/8 allowed in tests
    assert destination_problem("https://does-not-resolve.invalid/x", closed) is None  # checked again at use


@SQLITE
def test_registration_applies_the_address_policy(settings, session_factory, tenants) -> None:  # noqa: ANN001
    app = create_app(settings.model_copy(update={"allow_networks": []}), session_factory=session_factory)
    with TestClient(app, headers=tenants[0].headers) as client:
        for url in ("http://localhost:9000/s", "http://127.1/s", "http://2130706433/s", "http://10.0.0.1/s"):
            problem = _problem(client.post("/v1/mechanisms", json={**MECHANISM, "sampling_url": url}), 422)
            assert problem["errors"][0]["pointer"] == "#/sampling_url", problem
            hook = client.post("/v1/webhooks", json={"url": url, "event_types": ["alarm.firing"]})
            assert _problem(hook, 422)["errors"][0]["pointer"] == "#/url"


# ------------------------------------------------------------------------- events at creation


@SQLITE
@pytest.mark.parametrize(
    ("mechanism", "check", "message"),
    [
        ({}, {"event": {"kind": "interval", "low": None, "high": None}}, "holds every output"),
        # Strings where numbers are due are refused by type (pydantic read "-Infinity" as -inf).
        ({}, {"event": {"kind": "interval", "low": "-Infinity", "high": "Infinity"}}, "a string is not allowed here"),
        ({}, {"event": {"kind": "union", "intervals": [{"low": 0, "high": 1}, {}]}}, "holds every output"),
        ({"output_shape": {"values": "real", "bounds": [0, 10]}, "dim": None},
         {"event": {"kind": "interval", "low": 0, "high": 10}}, "holds every output"),
        ({"output_kind": "vector", "dim": 2}, {"event": {"kind": "box", "low": [None, None], "high": [None, None]}},
         "holds every output"),
        ({}, {"event": {"kind": "set", "values": [0.5, 1.5]}}, "probability 0"),
        ({"output_shape": {"values": "real"}}, {"event": {"kind": "set", "values": [1]}}, "probability 0"),
        ({}, {"x": [1, 0], "x_prime": [1, 0]}, "same database"),
    ],
)
def test_checks_that_can_never_work_are_refused(client: TestClient, mechanism: dict, check: dict,
                                                message: str) -> None:
    mech = create_mechanism(client, **mechanism)
    base = {"x": [0], "x_prime": [1], "event": {"kind": "interval", "low": 0.5}}
    response = client.post("/v1/monitors", json={**MONITOR, "mechanism_id": mech["id"], "checks": [{**base, **check}]})
    problem = _problem(response, 422)
    assert any(message in e["message"] for e in problem["errors"]), problem
    assert problem["errors"][0]["pointer"].startswith("#/checks/0")


@SQLITE
def test_sets_still_fit_integer_outputs(client: TestClient) -> None:
    mech = create_mechanism(client, output_shape={"values": "integer"})
    create_monitor(client, mech["id"], checks=[{"x": [0], "x_prime": [1], "event": {"kind": "set", "values": [0]}}])


# ------------------------------------------------------------------------------- the contract


@SQLITE
def test_openapi_states_statuses_links_and_patterns(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    create = spec["paths"]["/v1/mechanisms"]["post"]["responses"]
    assert {"401", "409", "413", "422", "503"} <= set(create)
    assert "Retry-After" in create["503"]["headers"]
    links = create["201"]["links"]
    assert links["CreateMonitor"]["requestBody"] == {"mechanism_id": "$response.body#/id"}
    monitor_links = spec["paths"]["/v1/monitors"]["post"]["responses"]["201"]["links"]
    assert monitor_links["ListAlarmsOfMonitor"]["parameters"] == {"monitor_id": "$response.body#/id"}
    params = {p["name"]: p for p in spec["paths"]["/v1/mechanisms"]["get"]["parameters"]}
    assert params["cursor"]["schema"]["anyOf"][0]["pattern"].startswith("^[0-9]")
    delete = spec["paths"]["/v1/mechanisms/{mechanism_id}"]["delete"]
    assert "409" in delete["responses"] and any(p["name"] == "cascade" for p in delete["parameters"])


@SQLITE
def test_405_names_every_allowed_method(client: TestClient) -> None:
    response = client.put("/v1/mechanisms")
    assert response.status_code == 405
    assert set(response.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}


@SQLITE
def test_unexpected_errors_are_logged_once(app, caplog) -> None:  # noqa: ANN001
    def explode() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/boom", explode, methods=["GET"])
    with caplog.at_level(logging.ERROR), TestClient(app, raise_server_exceptions=True) as client:
        response = client.get("/boom")  # raise_server_exceptions: nothing escapes to the server
    assert response.status_code == 500
    assert sum("unhandled_exception" in r.getMessage() for r in caplog.records) == 1


# ------------------------------------------------------------------------- database timeouts


@pytest.fixture
def pg_app(postgres_url: str):  # noqa: ANN201
    """The app on its own engine (committed data, real locks), with short timeouts."""
    from app.auth.service import create_tenant_with_key
    from app.db import make_engine, make_session_factory
    from app.settings import Settings

    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=postgres_url, migrate_on_start=False, env="development", log_level="WARNING",
        db_statement_timeout_ms=3000, db_lock_timeout_ms=1000, readyz_timeout_ms=500, retry_after_seconds=3,
    )
    engine = make_engine(postgres_url, pool_timeout=2)
    factory = make_session_factory(engine)
    name = f"lock-{uuid.uuid4().hex[:8]}"
    with factory() as session:
        tenant, key = create_tenant_with_key(session, name, name)
        session.commit()
    app = create_app(settings, session_factory=factory)
    try:
        yield app, key, engine
    finally:
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM tenants WHERE id = :id"), {"id": tenant.id})
        engine.dispose()


@pytest.mark.postgres
def test_a_locked_table_gives_503_with_retry_after_then_recovers(pg_app, postgres_url: str) -> None:  # noqa: ANN001
    app, key, _engine = pg_app
    locker = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    with TestClient(app, headers={"Authorization": f"Bearer {key}"}) as client:
        assert client.get("/v1/monitors").status_code == 200
        with locker.connect() as connection:
            transaction = connection.begin()
            connection.execute(text("LOCK TABLE monitors IN ACCESS EXCLUSIVE MODE"))
            started = time.perf_counter()
            response = client.get("/v1/monitors")
            elapsed = time.perf_counter() - started
            problem = _problem(response, 503)
            assert response.headers["retry-after"] == "3"
            assert "locked" in problem["detail"]
            assert elapsed < 1.0 + 1.0, elapsed  # lock_timeout + 1 s
            transaction.rollback()
        assert client.get("/v1/monitors").status_code == 200
    locker.dispose()


@pytest.mark.postgres
def test_readyz_goes_red_while_the_database_does_not_answer(pg_app, postgres_url: str) -> None:  # noqa: ANN001
    app, _key, _engine = pg_app
    locker = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
        with locker.connect() as connection:
            transaction = connection.begin()
            connection.execute(text("LOCK TABLE alembic_version IN ACCESS EXCLUSIVE MODE"))
            started = time.perf_counter()
            response = client.get("/readyz")
            assert time.perf_counter() - started < 1.5
            _problem(response, 503)
            assert response.headers["retry-after"] == "1"
            transaction.rollback()
        assert client.get("/readyz").status_code == 200
    locker.dispose()


@pytest.mark.postgres
def test_an_exhausted_pool_gives_503(pg_app) -> None:  # noqa: ANN001
    app, key, engine = pg_app
    held = [engine.connect() for _ in range(engine.pool.size() + engine.pool._max_overflow)]  # noqa: SLF001
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {key}"}) as client:
            response = client.get("/v1/monitors")
            problem = _problem(response, 503)
            assert "connection" in problem["detail"] and "retry-after" in response.headers
    finally:
        for connection in held:
            connection.close()


@pytest.mark.postgres
def test_the_apps_own_engine_sets_the_timeouts_per_connection_and_a_lock_still_gives_503(postgres_url: str) -> None:
    """With the engine the lifespan makes (`dpwatch serve`), the requests' statement and lock
    timeouts are set once per connection, not by each transaction: the same
    values, the same 503 on a lock; an in-process worker's own engine has none."""
    from app.auth.service import create_tenant_with_key
    from app.db import make_engine, make_session_factory
    from app.scheduler import attach_worker
    from app.settings import Settings

    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=postgres_url, migrate_on_start=False, env="development", log_level="WARNING",
        db_statement_timeout_ms=3000, db_lock_timeout_ms=1000, retry_after_seconds=3,
    )
    setup = make_engine(postgres_url)
    name = f"conn-{uuid.uuid4().hex[:8]}"
    with make_session_factory(setup)() as session:
        tenant, key = create_tenant_with_key(session, name, name)
        session.commit()
    app = create_app(settings)
    attach_worker(app, settings)
    locker = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {key}"}) as client:
            assert app.state.timeouts_at_connect is True
            with app.state.engine.connect() as connection:
                assert connection.execute(text("SHOW statement_timeout")).scalar_one() == "3s"
                assert connection.execute(text("SHOW lock_timeout")).scalar_one() == "1s"
            with app.state.worker_engine.connect() as connection:
                assert connection.execute(text("SHOW statement_timeout")).scalar_one() == "0"
                assert connection.execute(text("SHOW lock_timeout")).scalar_one() == "0"
            assert client.get("/v1/monitors").status_code == 200
            with locker.connect() as connection:
                transaction = connection.begin()
                connection.execute(text("LOCK TABLE monitors IN ACCESS EXCLUSIVE MODE"))
                started = time.perf_counter()
                response = client.get("/v1/monitors")
                elapsed = time.perf_counter() - started
                problem = _problem(response, 503)
                assert response.headers["retry-after"] == "3"
                assert "locked" in problem["detail"]
                assert elapsed < 1.0 + 1.0, elapsed  # lock_timeout + 1 s
                transaction.rollback()
            assert client.get("/v1/monitors").status_code == 200
    finally:
        locker.dispose()
        with setup.begin() as connection:
            connection.execute(text("DELETE FROM tenants WHERE id = :id"), {"id": tenant.id})
        setup.dispose()
