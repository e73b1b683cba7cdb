"""The API's edges under hostile input (issue 17, items 7 and 9)."""

from __future__ import annotations

import io
import logging
import re

import pytest
from fastapi.testclient import TestClient

from app.observability import configure_logging

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


ID = "0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1"
#: The dashboard's pages are not in the OpenAPI document.
PAGES = ["/", "/ui", "/ui/login", "/ui/monitors", f"/ui/monitors/{ID}", f"/ui/snapshots/{ID}",
         f"/ui/data/monitors/{ID}/checks/{ID}", "/ui/static/app.css", "/docs", "/redoc", "/openapi.json"]


def _get_paths(app) -> list[str]:  # noqa: ANN001
    """One concrete path per GET operation of the OpenAPI document (path parameters filled with a
    UUID), and the pages outside it."""
    paths = list(PAGES)
    for template, item in app.openapi()["paths"].items():
        if "get" in item:
            paths.append(re.sub(r"\{[^}]+\}", ID, template))
    return sorted(set(paths))


@SQLITE_ONLY
@pytest.mark.parametrize("value", ["3%1D", "1%7F"])
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
        for other in ("3%1c", "%1F", "a%0Ab", "%09", "%01"):
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
