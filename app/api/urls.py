"""Validation of user-supplied URLs (mechanism sampling URLs, webhook URLs).

Two layers: ``check_http_url`` is the syntactic check used by request schemas; it enforces
``URL_PATTERN``, which the OpenAPI schema states. ``destination_problem`` applies the sampling
client's own address policy (``app.sampling.safe_http``) at registration: IP literals directly,
host names after resolving them. The client checks again at connect time, which is the check
that matters (DNS can change)."""

from __future__ import annotations

import ipaddress
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from app.settings import Settings

MAX_URL_LENGTH = 2048


_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_LAST_LABEL = r"[A-Za-z]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_PORT = r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
_PATH_CHAR = r"([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})"
#: The exact syntax of a URL the API accepts, stated in the OpenAPI schema (``pattern``) and
#: enforced by :func:`check_http_url`: http(s), an ASCII host name whose last label starts with a
#: letter (so no numeric or hex disguise of an address: ``127.1``, ``2130706433``, ``0x7f000001``)
#: or a canonical dotted-quad IPv4 address, an optional port 1-65535, and a path and query of
#: printable ASCII (percent-encode the rest). No credentials, no fragment, no IPv6 literal.
URL_PATTERN = (
    rf"^[Hh][Tt][Tt][Pp][Ss]?://(({_LABEL}\.)*{_LAST_LABEL}|{_OCTET}(\.{_OCTET}){{3}})(:{_PORT})?"
    rf"([/?]{_PATH_CHAR}*)?$"
)
_URL_RE = re.compile(URL_PATTERN)


def url_schema_extra() -> dict[str, object]:
    """The ``pattern`` and ``format`` of URL fields in the OpenAPI schema."""
    return {"pattern": URL_PATTERN, "format": "uri"}


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
    address = ip_literal(value)
    if isinstance(address, ipaddress.IPv6Address):
        if not is_public_address(address):
            raise ValueError(f"the host {address} is a private, loopback, link-local or reserved address")
        raise ValueError("IPv6 literal hosts are not accepted; use a host name")
    if not _URL_RE.match(value) or value.endswith("\n"):
        raise ValueError(
            "the URL must be http(s)://host[:port][/path][?query] with an ASCII host name whose last label starts "
            "with a letter, or a dotted-quad IPv4 address (not 127.1, 2130706433 or 0x7f000001); percent-encode "
            "other characters"
        )
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


_RESOLVER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dpwatch-resolve")
RESOLVE_TIMEOUT_SECONDS = 2.0


def _resolve(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def destination_problem(url: str, settings: Settings) -> str | None:
    """Why ``url`` may not be registered, or None: the sampling client's own checks, applied early.

    The URL is parsed by ``app.sampling.safe_http.validate_url`` and its host checked against the
    same ``AddressPolicy`` the client applies at connect time: an IP literal directly, a host name
    after resolving it (within ``RESOLVE_TIMEOUT_SECONDS``). A name that does not resolve now is
    accepted; the client checks again at every connection, so a later DNS change cannot bypass the
    policy either way."""
    from app.sampling.safe_http import AddressPolicy, SafeHttpError, validate_url

    try:
        parsed = validate_url(url)
    except SafeHttpError as exc:
        return exc.detail
    policy = AddressPolicy.from_cidrs(settings.allow_networks)
    host = parsed.host
    literal = ip_literal(url)
    if literal is not None:
        why = policy.refusal_reason(literal)
        if why is None:
            return None
        return (
            f"the host {literal} is a {why}; private, loopback, link-local or reserved addresses are reachable only "
            "through the DPWATCH_ALLOW_NETWORKS setting"
        )
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        addresses = _RESOLVER.submit(_resolve, host, port).result(timeout=RESOLVE_TIMEOUT_SECONDS)
    except (OSError, UnicodeError, FuturesTimeout):
        return None
    for address in addresses:
        why = policy.refusal_reason(ipaddress.ip_address(address.split("%", 1)[0]))
        if why is not None:
            return (
                f"the host {host!r} resolves to {address}, a {why}; such addresses are reachable only through the "
                "DPWATCH_ALLOW_NETWORKS setting"
            )
    return None


#: A URL field of the API: the syntax of :func:`check_http_url`, stated in the OpenAPI schema.
HttpUrl = Annotated[
    str,
    Field(
        min_length=1, max_length=MAX_URL_LENGTH, json_schema_extra=url_schema_extra(),
        description="Absolute http(s) URL with an ASCII host name or dotted-quad IPv4 address (`pattern`); no "
        "credentials, no fragment. Its host must not be, or resolve to, a private, loopback, link-local or reserved "
        "address unless DPWATCH_ALLOW_NETWORKS opens it (422 otherwise).",
    ),
    AfterValidator(check_http_url),
]
