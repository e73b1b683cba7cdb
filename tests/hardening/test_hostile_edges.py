"""The API's edges under hostile input."""

from __future__ import annotations

import io
import logging
import re
import uuid

import pytest
from fastapi.testclient import TestClient

from app.observability import configure_logging

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


ID = "0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1"
#: The dashboard's pages are not in the OpenAPI document.
PAGES = ["/", "/ui", "/ui/login", "/ui/monitors", f"/ui/monitors/{ID}", f"/ui/snapshots/{ID}",
         f"/ui/data/monitors/{ID}/checks/{ID}/series", f"/ui/data/snapshots/{ID}", "/ui/static/app.css", "/docs", "/redoc", "/openapi.json"]


def _get_paths(app) -> list[str]:  # noqa: ANN001
    """One concrete path per GET operation of the OpenAPI document (path parameters filled with a
    UUID), and the pages outside it."""
    paths = list(PAGES)
    for template, item in app.openapi()["paths"].items():
        if "get" in item:
            paths.append(re.sub(r"\{[^}]+\}", ID, template))
    return sorted(set(paths))


@SQLITE_ONLY
@pytest.mark.parametrize("value", ["3%1D"])
def test_a_control_character_in_the_query_is_a_422_on_every_route(client: TestClient, app, value: str) -> None:  # noqa: ANN001
    configure_logging("INFO", "json")
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "dpwatch")
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        paths = _get_paths(app)
        assert "/healthz" in paths and "/readyz" in paths and "/metrics" in paths and "/v1/monitors" in paths
        assert any(p.startswith("/ui/") for p in paths)
        for path in paths:
            response = client.get(f"{path}?x={value}", follow_redirects=False)
            assert response.status_code == 422, (path, response.status_code, response.text[:200])
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["errors"][0]["type"] == "string_control_character"
        for other in ("3%1c", "%1F", "a%0Ab", "%09", "%01", "1%7F"):
            assert client.get(f"/healthz?x={other}").status_code == 422, other
            assert client.get(f"/healthz?{other}=1").status_code == 422, other
    finally:
        handler.setStream(previous)
    assert "Traceback" not in buffer.getvalue() and "unhandled_exception" not in buffer.getvalue()


@SQLITE_ONLY
def test_numbers_python_cannot_read_are_left_to_the_route(client: TestClient) -> None:
    assert client.get("/healthz", params={"x": "3\u2028"}).status_code == 200  # no control character
    assert client.get("/v1/monitors", params={"limit": "1e999"}).status_code == 422


# ------------------------------------------------------------------------------- item 9: addresses


def test_every_special_purpose_block_is_refused_and_public_addresses_are_not() -> None:
    import ipaddress

    from app.sampling.safe_http import _SPECIAL_PURPOSE, AddressPolicy

    policy = AddressPolicy()
    for network, _why in _SPECIAL_PURPOSE:
        for address in (network.network_address, network.network_address + 1,
                        network.network_address + (network.num_addresses // 2), network.broadcast_address):
            assert policy.refusal_reason(address) is not None, (network, address)
    for text in ("192.0.0.8", "192.0.0.9", "192.0.0.170", "::ffff:192.0.0.8", "64:ff9b::c000:8",
                 "2002:c000:8::1", "3fff::1", "5f00::1", "64:ff9b:1::1", "100:0:0:1::1", "2001:20::1",
                 "192.88.99.1"):
        assert policy.refusal_reason(ipaddress.ip_address(text)) is not None, text
    for text in ("8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "2606:4700::1111", "192.31.196.1",
                 "2620:4f:8000::1", "64:ff9b::808:808"):
        assert policy.refusal_reason(ipaddress.ip_address(text)) is None, text
    # An operator's allow-list still opens them (tests, the local demo).
    assert AddressPolicy.from_cidrs(["192.0.0.0/24"]).refusal_reason(ipaddress.ip_address("192.0.0.8")) is None


# ------------------------------------------------------------------------------- item 9: booleans


@SQLITE_ONLY
@pytest.mark.parametrize(("change", "pointer"), [
    ({"epsilon": True}, "#/epsilon"),
    ({"epsilon": None, "claim": {"epsilon": 1.0, "delta": False}}, "#/claim/delta"),
    ({"epsilon": None, "claim": {"epsilon": True}}, "#/claim/epsilon"),
    ({"alpha": True}, "#/alpha"),
    ({"checks": [{"x": [1, 1, 0], "x_prime": [1, 1, 1], "event": {"kind": "interval", "low": True, "high": None}}]},
     "#/checks/0/event/low"),
])
def test_a_boolean_where_a_number_is_due_is_refused(client: TestClient, change: dict, pointer: str) -> None:
    from tests.support.api_helpers import MONITOR, create_mechanism

    mechanism = create_mechanism(client)
    body = {**MONITOR, "mechanism_id": mechanism["id"], **change}
    body = {k: v for k, v in body.items() if v is not None}
    response = client.post("/v1/monitors", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["pointer"] == pointer, response.json()


@SQLITE_ONLY
def test_booleans_where_booleans_are_due_and_any_json_are_kept(client: TestClient) -> None:
    from tests.support.api_helpers import MONITOR, create_mechanism

    mechanism = create_mechanism(client, prefer_binary=True)
    assert mechanism["prefer_binary"] is True
    body = {**MONITOR, "mechanism_id": mechanism["id"],
            "checks": [{"x": {"flag": True, "values": [1, 0]}, "x_prime": {"flag": False, "values": [1, 1]},
                        "event": {"kind": "interval", "low": 0.5, "high": None}}]}
    assert client.post("/v1/monitors", json=body).status_code == 201


# ------------------------------------------------------------------------------- item 9: headers


@SQLITE_ONLY
@pytest.mark.parametrize("env", ["development", "production"])
def test_hsts_outside_development_and_a_permissions_policy_everywhere(settings, session_factory, env: str) -> None:  # noqa: ANN001
    from app.main import create_app

    app = create_app(settings.model_copy(update={"env": env}), session_factory=session_factory)
    with TestClient(app) as anonymous:
        answers = [anonymous.get("/healthz"), anonymous.get("/v1/monitors"), anonymous.get("/ui/login"),
                   anonymous.get("/healthz?x=%01"), anonymous.get("/nowhere")]
    for answer in answers:
        assert "camera=()" in answer.headers.get("permissions-policy", ""), answer.request.url
        if env == "production":
            assert answer.headers.get("strict-transport-security") == "max-age=31536000; includeSubDomains"
        else:
            assert "strict-transport-security" not in answer.headers


# ------------------------------------------------------------------------------- item 9: dashboard


def _web(app):  # noqa: ANN001, ANN202
    return TestClient(app, follow_redirects=False)


def _signed_in(app, key: str) -> TestClient:  # noqa: ANN001
    from tests.web.test_web_pages import sign_in

    client = _web(app)
    client.__enter__()
    sign_in(client, key)
    return client


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_session_cookie_stops_working_after_sign_out(app, tenants) -> None:  # noqa: ANN001
    from app.web.session import SESSION_COOKIE
    from tests.web.test_web_pages import csrf

    browser = _signed_in(app, tenants[0].key)
    try:
        stolen = browser.cookies.get(SESSION_COOKIE)
        monitors = browser.get("/ui/monitors")
        assert monitors.status_code == 200
        out = browser.post("/ui/logout", data={"csrf_token": csrf(monitors.text)})
        assert out.status_code == 303
    finally:
        browser.__exit__(None, None, None)
    with _web(app) as replay:  # a copy of the cookie, kept from before the sign-out
        replay.cookies.set(SESSION_COOKIE, stolen, path="/ui")
        assert replay.get("/ui/monitors").status_code == 303
        assert replay.get("/ui/data/monitors/0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1/checks/"
                          "0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1/series").status_code == 401
    # Another sign-in of the same key is its own session, untouched by this sign-out.
    other = _signed_in(app, tenants[0].key)
    try:
        assert other.get("/ui/monitors").status_code == 200
    finally:
        other.__exit__(None, None, None)


@SQLITE_ONLY
def test_the_query_string_cannot_change_a_forms_action(app, client, tenants, db) -> None:  # noqa: ANN001
    from app.models.monitors import Monitor
    from tests.support.api_helpers import create_mechanism, create_monitor
    from tests.web.test_web_pages import csrf

    monitor = create_monitor(client, create_mechanism(client)["id"])
    browser = _signed_in(app, tenants[0].key)
    try:
        page = browser.get(f"/ui/monitors/{monitor['id']}")
        response = browser.post(f"/ui/monitors/{monitor['id']}/pause?_action=reset",
                                data={"csrf_token": csrf(page.text)})
        assert response.status_code == 303
    finally:
        browser.__exit__(None, None, None)
    with db() as session:
        row = session.get(Monitor, uuid.UUID(monitor["id"]))
        assert row.state == "paused" and row.horizon_index == 1  # paused, not reset


@SQLITE_ONLY
def test_numbers_where_booleans_are_due_and_strings_where_numbers_are_due_are_refused(client: TestClient) -> None:
    from tests.support.api_helpers import MONITOR, create_mechanism, create_webhook

    hook = create_webhook(client)
    enabled = client.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": 0})
    assert enabled.status_code == 422 and enabled.json()["errors"][0]["pointer"] == "#/enabled", enabled.text
    mechanism = create_mechanism(client)
    pairs = [{"x": [0, 0], "x_prime": [1, 1]}]
    for path, body, pointer in (
        ("discover", {"epsilon": 1.0, "pairs": pairs, "learned": 0}, "#/learned"),
        ("audits", {"epsilon": 1.0, "pairs": pairs, "delta": False}, "#/delta"),  # a oneOf body
    ):
        refused = client.post(f"/v1/mechanisms/{mechanism['id']}/{path}", json=body)
        assert refused.status_code == 422 and refused.json()["errors"][0]["pointer"] == pointer, refused.text
    body = {**MONITOR, "mechanism_id": mechanism["id"], "samples_per_period": "1000"}
    refused = client.post("/v1/monitors", json=body)
    assert refused.status_code == 422 and refused.json()["errors"][0]["pointer"] == "#/samples_per_period"
    assert client.post("/v1/monitors", json={**body, "samples_per_period": 1000.0}).status_code == 201
