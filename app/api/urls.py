"""Validation of user-supplied URLs (mechanism sampling URLs, webhook URLs).

Two layers: ``check_http_url`` is the syntactic check used by request schemas (http/https, a
host, no credentials, no fragment). ``check_destination_allowed`` refuses IP-literal hosts in
private, loopback, link-local or reserved ranges unless ``allow_networks`` opens them. Host names
are not resolved here: the safe HTTP client resolves and checks the address at request time,
which is the check that matters (DNS can change between now and then).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from app.settings import Settings

MAX_URL_LENGTH = 2048


def check_http_url(value: str) -> str:
    """Return ``value`` if it is an absolute http(s) URL without credentials; raise ValueError."""
    if len(value) > MAX_URL_LENGTH:
        raise ValueError(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if value != value.strip() or any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise ValueError("the URL must not contain whitespace or control characters")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise ValueError("the URL must start with http:// or https://")
    if not parts.hostname:
        raise ValueError("the URL must name a host, e.g. https://example.org/sample")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError(
            "the URL must not contain credentials (user:password@); the service signs its requests instead"
        )
    if parts.fragment or value.endswith("#"):
        raise ValueError("the URL must not contain a #fragment")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ValueError(f"the URL has an invalid port: {exc}") from exc
    return value


def ip_literal(url: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    host = urlsplit(url).hostname or ""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def destination_problem(url: str, settings: Settings) -> str | None:
    """Why ``url``'s IP-literal host may not be contacted, or None if it may (or is a name)."""
    address = ip_literal(url)
    if address is None or is_public_address(address):
        return None
    for cidr in settings.allow_networks:
        network = ipaddress.ip_network(cidr)
        if address.version == network.version and address in network:
            return None
    return (
        f"the host {address} is a private, loopback, link-local or reserved address; "
        "such addresses are reachable only through the DPWATCH_ALLOW_NETWORKS setting"
    )
