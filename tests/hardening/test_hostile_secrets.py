"""No log line carries a secret.

The schema accepted a 200-character `secret` that the column (100) could not hold: rotating to a
126-character secret answered 500 on Postgres, and the logged exception held the current secret
and the new one (SQLAlchemy prints a failed statement's parameters). Now the schema and the columns
agree, database errors hide their parameters, and the log pipeline removes secret values from
every line, tracebacks included. Each test provokes errors with known secrets and greps everything
the real log pipeline wrote.
"""

from __future__ import annotations

import base64
import io
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import structlog
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.auth.schemas import SECRET_MAX_LENGTH
from app.models.alarms import Webhook
from app.models.mechanisms import Mechanism
from app.observability import configure_logging
from tests.support.api_helpers import create_mechanism, create_webhook


def _secret(nbytes: int) -> str:
    return "whsec_" + base64.b64encode(os.urandom(nbytes)).decode()


@contextmanager
def _captured() -> Iterator[io.StringIO]:
    """Everything the real pipeline writes (JSON lines, DEBUG and up) while the block runs."""
    configure_logging("DEBUG", "json")
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "dpwatch")
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        yield buffer
    finally:
        handler.setStream(previous)


def test_the_columns_hold_the_longest_secret_the_schema_accepts(app) -> None:  # noqa: ANN001
    for column in (Mechanism.secret, Mechanism.previous_secret, Webhook.secret, Webhook.previous_secret):
        assert column.type.length == SECRET_MAX_LENGTH, column
    schemas = app.openapi()["components"]["schemas"]
    lengths = {name: schema["properties"]["secret"]
               for name, schema in schemas.items() if "secret" in schema.get("properties", {})}
    stated = []
    for name, prop in lengths.items():
        for branch in prop.get("anyOf", [prop]):
            if "maxLength" in branch:
                stated.append((name, branch["maxLength"]))
    assert stated and all(length == SECRET_MAX_LENGTH for _, length in stated), stated


def test_an_overlong_secret_is_refused_and_no_line_holds_a_secret(client: TestClient, monkeypatch) -> None:  # noqa: ANN001
    mechanism = create_mechanism(client)
    live = mechanism["secret"]
    overlong, longest = _secret(90), _secret(70)  # 126 and 102 -> 100 characters with padding stripped
    longest = longest.rstrip("=")[:SECRET_MAX_LENGTH]
    assert len(overlong) == 126
    with _captured() as logs:
        refused = client.post(f"/v1/mechanisms/{mechanism['id']}/rotate-secret", json={"secret": overlong})
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"][0]["pointer"] == "#/secret"
        accepted = client.post(f"/v1/mechanisms/{mechanism['id']}/rotate-secret",
                               json={"secret": _secret(60), "grace_seconds": 60})
        assert accepted.status_code == 200, accepted.text
        new_live = accepted.json()["secret"]

        # An unexpected exception whose message holds both secrets, logged with its traceback.
        import app.mechanisms.router as router

        def explode(obj, new_secret, grace, now=None):  # noqa: ANN001, ANN202
            raise RuntimeError(f"could not store {new_secret} over {obj.secret}")

        monkeypatch.setattr(router, "rotate_secret", explode)
        crashed = client.post(f"/v1/mechanisms/{mechanism['id']}/rotate-secret", json={"secret": overlong[:60]})
        assert crashed.status_code == 500
        # Library and stdlib lines, messages and fields, exceptions with a cause.
        logging.getLogger("somelib").error("connecting with %s", new_live)
        try:
            raise ValueError(f"bad key dpw_{'x' * 40}") from KeyError(live)
        except ValueError:
            structlog.get_logger("dpwatch.test").exception("failed", detail=f"secret {live}", nested={"a": [live]})
            logging.getLogger("somelib").exception("failed again")
        structlog.get_logger("dpwatch.test").warning("db", url="postgresql://u:hunter2@db/x")
    written = logs.getvalue()
    assert "could not store" in written and "unhandled_exception" in written and "Traceback" in written
    for secret in (live, new_live, overlong, overlong[:60], "dpw_" + "x" * 40, "hunter2"):
        assert secret not in written, secret
    assert written.count("[redacted]") >= 8


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_database_error_does_not_show_the_statements_values(client: TestClient, postgres_url: str) -> None:  # noqa: ANN001
    """The app's engine hides parameters: the error of an insert that is too long for its column
    (what the 126-character rotation hit) names the statement, not the values."""
    from app.db import make_engine

    overlong = _secret(90)
    engine = make_engine(postgres_url)
    try:
        with _captured() as logs, engine.connect() as connection:
            connection.execute(text("CREATE TEMPORARY TABLE secrets (secret VARCHAR(100))"))
            with pytest.raises(DBAPIError) as failed:
                connection.execute(text("INSERT INTO secrets VALUES (:secret)"), {"secret": overlong})
            structlog.get_logger("dpwatch.test").error("write_failed", exc_info=failed.value)
    finally:
        engine.dispose()
    assert overlong not in str(failed.value) and "hidden" in str(failed.value)
    assert overlong not in logs.getvalue() and "write_failed" in logs.getvalue()


def test_webhook_secrets_obey_the_same_length(client: TestClient) -> None:
    hook = create_webhook(client)
    assert len(hook["secret"]) <= SECRET_MAX_LENGTH
    rotated = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", json={"grace_seconds": 0})
    assert rotated.status_code == 200 and len(rotated.json()["secret"]) <= SECRET_MAX_LENGTH
