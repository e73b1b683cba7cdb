"""One hardened HTTP client for every user-supplied URL (mechanism sampling
endpoints, alert webhooks).

Guarantees
----------
* Only ``http`` and ``https`` URLs with a host, a valid port and no
  credentials are accepted (:func:`validate_url`).
* The host is resolved by *this* module at connect time and every resolved
  address is checked against an :class:`AddressPolicy`; if any of them is
  refused, the whole host is refused.  The TCP connection is then opened to
  one of the checked IP literals, so there is no second DNS lookup and no
  DNS-rebinding window.  This is done with a custom ``httpcore`` network
  backend: httpcore still performs TLS against the *original* hostname
  (SNI and certificate verification), and httpx still sends the original
  ``Host`` header.
* Loopback, private, link-local, multicast, reserved, unspecified, shared
  (CGNAT), site-local and other non-global addresses are refused unless they
  are inside ``allow_networks``.  Cloud metadata addresses are refused even
  when they are inside ``allow_networks``.  IPv4 addresses embedded in IPv6
  (IPv4-mapped, NAT64 ``64:ff9b::/96``, 6to4) are judged by the IPv4 address.
* Redirects are never followed: a 3xx answer raises ``reason="redirect"``.
* Environment proxies and ``.netrc`` are ignored (``trust_env=False``): a proxy
  would connect on our behalf and bypass the address check.
* Connect, read and write timeouts, plus a total deadline per request.
* The body is streamed and the request is aborted as soon as it exceeds
  ``max_bytes`` (``reason="oversized"``), or as soon as a shared
  :class:`ByteBudget` (several requests' bytes together, e.g. one period's
  batches) is spent; with ``truncate=True`` (webhook replies) the body is
  cut at ``max_bytes`` instead.  ``Accept-Encoding: identity`` is requested
  and **no body is ever decompressed**: bytes are counted and returned as
  sent.  With ``identity_only=True`` (sampling) a successful answer with any
  other ``Content-Encoding`` is refused (``reason="content_encoding_refused"``)
  before a byte of its body is read.  A ``reader`` may consume a successful
  body chunk by chunk as it arrives (the sampling client parses answers so,
  and stops at the first wrong output).
* **Connections are never shared between isolation keys.**  A request with
  ``isolation=<key>`` (the sampling client passes one key per mechanism)
  uses a keep-alive pool of its own key; a request without one gets a fresh
  connection that is closed after its answer.  A connection is also dropped,
  never reused, when its answer's framing was not exact: bytes received past
  the end of the response, bytes arriving while it is idle, or a body that
  was not read to its end.  Extra bytes a server writes after its response
  can therefore never become the answer to another key's request.
"""

from __future__ import annotations

import ipaddress
import re
import select
import socket
import ssl
import time
import typing
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import anyio.to_thread
import httpcore
import httpx

__all__ = [
    "METADATA_ADDRESSES",
    "BodyReader",
    "ByteBudget",
    "AddressPolicy",
    "SafeAsyncClient",
    "SafeHttpConfig",
    "SafeHttpError",
    "SafeResponse",
    "redact_url",
    "validate_url",
]

from .logs import get_logger

log = get_logger("dpwatch.safe_http")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Cloud instance-metadata and platform addresses.  Refused even when they are
#: inside ``allow_networks``: no legitimate mechanism lives there.
METADATA_ADDRESSES: tuple[str, ...] = (
    "169.254.169.254",  # AWS / GCP / Azure / OpenStack / DigitalOcean / Oracle IMDS
    "169.254.170.2",  # AWS ECS task metadata
    "169.254.170.23",  # AWS EKS pod identity agent
    "169.254.169.123",  # AWS time sync
    "169.254.169.253",  # AWS VPC DNS
    "168.63.129.16",  # Azure WireServer (a *public* address)
    "100.100.100.200",  # Alibaba Cloud metadata
    "192.0.0.192",  # Oracle Cloud (legacy) metadata
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "fd00:ec2::23",  # AWS EKS pod identity agent over IPv6
    "fd00:ec2::253",  # AWS VPC DNS over IPv6
    "fd20:ce::254",  # GCP metadata over IPv6
)
_METADATA = frozenset(ipaddress.ip_address(a) for a in METADATA_ADDRESSES)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

_MAX_URL_LENGTH = 2048
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_ERROR_BODY_LIMIT = 8192
#: A body reader is fed this much at a time, with a turn of the event loop in between.
_FEED_SLICE = 16 * 1024
#: A reader's ``finish()`` runs in a thread for bodies larger than this (inline below: no thread hop).
_FINISH_INLINE_BYTES = 64 * 1024

SafeHttpReason = typing.Literal[
    "invalid_url", "refused_address", "redirect", "oversized", "timeout", "connection_error",
    "content_encoding_refused",
]


class SafeHttpError(Exception):
    """A request to a user-supplied URL was refused or failed.

    ``reason`` is machine readable: ``invalid_url``, ``refused_address``,
    ``redirect``, ``oversized``, ``timeout``, ``connection_error`` or
    ``content_encoding_refused``;
    ``detail`` is a human readable explanation that never contains secrets
    (URLs are shown without their query string).
    """

    def __init__(self, reason: SafeHttpReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: SafeHttpReason = reason
        self.detail = detail


# --------------------------------------------------------------------------- URL checks


def redact_url(url: str | httpx.URL) -> str:
    """``scheme://host:port/path`` without userinfo, query or fragment (safe to log)."""
    try:
        u = httpx.URL(url) if isinstance(url, str) else url
    except Exception:  # noqa: BLE001 - anything unparsable is shown as a placeholder
        return "<unparsable url>"
    host = u.host
    if ":" in host:
        host = f"[{host}]"
    port = f":{u.port}" if u.port is not None else ""
    return f"{u.scheme}://{host}{port}{u.path}"


def _literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def validate_url(url: str) -> httpx.URL:
    """Check a user-supplied URL without touching the network; return it parsed.

    Refused (``SafeHttpError(reason="invalid_url")``): anything that is not
    ``http``/``https``, a missing host, credentials (``user:pass@``), a port
    outside 1..65535, hosts with characters other than letters, digits, ``-``,
    ``_`` and dots (IDNs are accepted and converted to punycode), IPv6 zone
    ids, and numeric hosts that are not a canonical dotted-quad IPv4 address
    (``2130706433``, ``0x7f.1``, ``127.1``: the classic ways of hiding
    ``127.0.0.1``).  Whether the host's *addresses* are acceptable is decided
    at connect time (see :meth:`SafeAsyncClient.check_destination` for an
    early check).
    """
    if not isinstance(url, str):
        raise SafeHttpError("invalid_url", "the URL must be a string")
    if not url.strip():
        raise SafeHttpError("invalid_url", "the URL is empty")
    if len(url) > _MAX_URL_LENGTH:
        raise SafeHttpError("invalid_url", f"the URL is longer than {_MAX_URL_LENGTH} characters")
    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise SafeHttpError("invalid_url", f"the URL cannot be parsed: {exc}") from None
    if u.scheme not in ("http", "https"):
        shown = u.scheme or "none"
        raise SafeHttpError(
            "invalid_url", f"only http and https URLs are allowed (got scheme {shown!r})"
        )
    if u.userinfo:
        raise SafeHttpError(
            "invalid_url",
            "credentials in the URL (user:password@host) are not allowed; "
            "the service authenticates itself with the webhook signature",
        )
    if not u.host:
        raise SafeHttpError("invalid_url", "the URL has no host")
    if u.port is not None and not 1 <= u.port <= 65535:
        raise SafeHttpError("invalid_url", f"port {u.port} is out of range 1..65535")
    raw_host = u.raw_host.decode("ascii", "replace").lower()
    if "%" in raw_host:
        raise SafeHttpError(
            "invalid_url", "the host contains '%' (percent-encoding or an IPv6 zone id)"
        )
    if _literal_ip(raw_host) is None:
        labels = raw_host.rstrip(".").split(".")
        if not all(_HOST_LABEL.match(label) for label in labels):
            raise SafeHttpError("invalid_url", f"invalid host name {u.host!r}")
        last = labels[-1]
        if last.isdigit() or re.fullmatch(r"0x[0-9a-f]*", last):
            raise SafeHttpError(
                "invalid_url",
                f"numeric host {u.host!r} is not a canonical IPv4 address "
                "(write IPv4 addresses as four decimal numbers, e.g. 203.0.113.7)",
            )
    return u


# --------------------------------------------------------------------------- address policy


def _embedded_ipv4(ip: IPAddress) -> tuple[ipaddress.IPv4Address | None, str]:
    """The IPv4 address an IPv6 address stands for, if any, and how it is embedded."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None, ""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    return None, ""


#: The IANA IPv4 and IPv6 Special-Purpose Address Registries (2025), every block not marked
#: "globally reachable", stated here rather than left to the ``ipaddress`` flags of the running
#: Python (3.11.7 calls 192.0.0.8, 3fff::/20 and 5f00::/16 global). Whole blocks are refused
#: even where the registry lists a globally reachable exception inside them (192.0.0.9/32 and
#: 192.0.0.10/32, PCP and TURN anycast; 2001:1::1-3, 2001:3::/32, 2001:4:112::/48, 2001:20::/28,
#: 2001:30::/28 inside 2001::/23): anycast service addresses are not where a mechanism lives.
_SPECIAL_PURPOSE: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(cidr), why) for cidr, why in (
        ("0.0.0.0/8", "\"this network\""),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),
        ("100::/64", "discard-only"),
        ("100:0:0:1::/64", "dummy prefix"),
        ("2001::/23", "IETF protocol assignments"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6) SIDs"),
        ("fc00::/7", "unique local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)


def _category(ip: IPAddress) -> str | None:
    """Why a (non-embedded) address is not a public destination, or None if it is."""
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "site-local"
    if ip.is_private:
        return "private"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:
        return "not globally routable"
    for network, why in _SPECIAL_PURPOSE:  # what this Python's flags call global
        if ip.version == network.version and ip in network:
            return why
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """Which resolved addresses may be connected to.

    ``allow_networks`` are CIDRs (``"127.0.0.0/8"``, ``"::1/128"``) whose
    addresses are accepted even though they are not public.  Cloud metadata
    addresses (:data:`METADATA_ADDRESSES`) are refused regardless.
    """

    allow_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str]) -> AddressPolicy:
        if isinstance(cidrs, str):
            raise TypeError("allow_networks must be a list of CIDR strings, not a string")
        nets: list[IPNetwork] = []
        for cidr in cidrs:
            try:
                nets.append(ipaddress.ip_network(cidr, strict=True))
            except ValueError as exc:
                raise ValueError(f"invalid network in allow_networks: {cidr!r} ({exc})") from None
        return cls(tuple(nets))

    def _allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.allow_networks)

    def refusal_reason(self, ip: IPAddress) -> str | None:
        """A human readable reason to refuse ``ip``, or None if it may be used."""
        embedded, how = _embedded_ipv4(ip)
        if ip in _METADATA or (embedded is not None and embedded in _METADATA):
            return "cloud metadata address"
        if self._allowed(ip) or (embedded is not None and self._allowed(embedded)):
            return None
        if embedded is not None:
            category = _category(embedded)
            if category is not None:
                return f"{how} {category} address ({embedded})"
            if how == "6to4":  # the 6to4 address itself must be acceptable too
                category = _category(ip)
                return None if category is None else f"{category} address"
            return None
        category = _category(ip)
        return None if category is None else f"{category} address"

    def check(self, ip: IPAddress, host: str | None = None) -> None:
        """Raise ``SafeHttpError("refused_address")`` if ``ip`` may not be used."""
        why = self.refusal_reason(ip)
        if why is None:
            return
        shown = f"host {host!r} resolves to {ip}" if host and host != str(ip) else f"address {ip}"
        if why == "cloud metadata address":
            remedy = "requests to it are always refused"
        else:
            remedy = "requests to it are refused (add its network to allow_networks to permit it)"
        raise SafeHttpError("refused_address", f"{shown} ({why}); {remedy}")


def _check_resolved(policy: AddressPolicy, host: str, infos: Sequence[tuple]) -> list[str]:
    """Check every resolved address; return the distinct IP literals to try, in order."""
    if not infos:
        raise httpcore.ConnectError(f"host {host!r} did not resolve to any address")
    seen: list[str] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        ip = ipaddress.ip_address(str(sockaddr[0]))
        policy.check(ip, host)
        if str(ip) not in seen:
            seen.append(str(ip))
    if not seen:
        raise httpcore.ConnectError(f"host {host!r} has no IPv4/IPv6 address")
    return seen


def _literal_info(host: str, port: int) -> list[tuple] | None:
    """getaddrinfo's answer for an IP literal, without calling the resolver."""
    ip = _literal_ip(host)
    if ip is None:
        return None
    if ip.version == 4:
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(ip), port))]
    return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(ip), port, 0, 0))]


# Indirections so that tests can simulate DNS answers without a resolver.
async def _async_getaddrinfo(host: str, port: int) -> list[tuple]:
    return list(await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM))


async def _async_resolve(host: str, port: int) -> list[tuple]:
    literal = _literal_info(host, port)
    return literal if literal is not None else await _async_getaddrinfo(host, port)


def _socket_readable(sock: socket.socket) -> bool:
    """httpcore's ``is_socket_readable``: readable while idle means closed by the server (or data
    nobody asked for); a closed socket counts as readable."""
    fd = sock.fileno()
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class _TrackedStream(httpcore.AsyncNetworkStream):
    """A connection's network stream that can be marked *tainted*: the connection pool then
    sees it as readable while idle (httpcore's test for a server-side close), so the connection
    is closed instead of being reused (see :func:`_taint_if_inexact`)."""

    def __init__(self, inner: httpcore.AsyncNetworkStream, tainted: list[bool] | None = None) -> None:
        self._inner = inner
        self._tainted = tainted if tainted is not None else [False]
        self._socket: typing.Any = None  # the raw socket, looked up once (False: the stream has none)

    def taint(self) -> None:
        self._tainted[0] = True

    @property
    def tainted(self) -> bool:
        return self._tainted[0]

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        inner = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _TrackedStream(inner, self._tainted)

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":
            if self._tainted[0]:
                return True
            # httpcore asks this of every pooled connection on every request (``has_expired``); its
            # anyio backend looks the socket up through anyio's typed attributes, which call
            # getpeername() each time (10% of a worker's event loop under bench/scale.py). The
            # socket of a stream does not change: look it up once, then poll it as httpcore does.
            if self._socket is None:
                self._socket = self._inner.get_extra_info("socket") or False
            if self._socket is not False:
                return _socket_readable(self._socket)
        return self._inner.get_extra_info(info)


def _taint_if_inexact(core_stream: object, network_stream: object) -> None:
    """After a body was read to its end: taint the connection unless the HTTP/1.1 parser holds
    no byte past this response. The parser's state is httpcore's (``PoolByteStream._stream`` ->
    ``HTTP11ConnectionByteStream._connection._h11_state``); if that path is not found (another
    httpcore), every connection is tainted: no reuse, never a wrong answer."""
    if not isinstance(network_stream, _TrackedStream):
        return
    try:
        h11_state = core_stream._stream._connection._h11_state  # type: ignore[attr-defined]
        leftover, _closed = h11_state.trailing_data
    except AttributeError:
        network_stream.taint()
        return
    if leftover:
        network_stream.taint()


class GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    """httpcore network backend that resolves, checks and connects to the checked IP."""

    def __init__(self, policy: AddressPolicy, inner: httpcore.AsyncNetworkBackend | None = None):
        self._policy = policy
        self._inner = inner if inner is not None else httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            with anyio.fail_after(timeout):
                try:
                    infos = await _async_resolve(host, port)
                except OSError as exc:
                    raise httpcore.ConnectError(f"cannot resolve host {host!r}: {exc}") from exc
                addresses = _check_resolved(self._policy, host, infos)
                last_error: Exception | None = None
                for address in addresses:
                    remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
                    try:
                        stream = await self._inner.connect_tcp(
                            address,
                            port,
                            timeout=remaining,
                            local_address=local_address,
                            socket_options=socket_options,
                        )
                        return _TrackedStream(stream)
                    except httpcore.ConnectError as exc:
                        last_error = exc
                assert last_error is not None
                raise last_error
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {host!r} timed out") from None

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise SafeHttpError("refused_address", "unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


_HTTPCORE_TO_HTTPX: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    # most specific first
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


def _map_httpcore_error(exc: Exception) -> Exception:
    for core_type, httpx_type in _HTTPCORE_TO_HTTPX:
        if isinstance(exc, core_type):
            return httpx_type(str(exc))
    return exc


def _core_request(request: httpx.Request) -> httpcore.Request:
    if request.url.scheme not in ("http", "https"):
        raise SafeHttpError("invalid_url", f"scheme {request.url.scheme!r} is not allowed")
    return httpcore.Request(
        method=request.method,
        url=httpcore.URL(
            scheme=request.url.raw_scheme,
            host=request.url.raw_host,
            port=request.url.port,
            target=request.url.raw_path,
        ),
        headers=request.headers.raw,
        content=request.stream,
        extensions=request.extensions,
    )


class _AsyncCoreStream(httpx.AsyncByteStream):
    def __init__(self, stream: typing.AsyncIterable[bytes], network_stream: object = None,
                 on_close: typing.Callable[[], typing.Awaitable[None]] | None = None) -> None:
        self._stream = stream
        self._network_stream = network_stream
        self._on_close = on_close

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except Exception as exc:
            mapped = _map_httpcore_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        # The whole body was read: was that the end of what the server sent?
        _taint_if_inexact(self._stream, self._network_stream)

    async def aclose(self) -> None:
        try:
            aclose = getattr(self._stream, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            if self._on_close is not None:
                on_close, self._on_close = self._on_close, None
                await on_close()


#: Request extension naming the connection pool a request may use (see :meth:`SafeAsyncClient.request`).
ISOLATION_EXTENSION = "dpwatch.isolation"


@dataclass
class _Pool:
    pool: httpcore.AsyncConnectionPool
    active: int = 0
    last_used: float = 0.0


class _GuardedAsyncTransport(httpx.AsyncBaseTransport):
    """One keep-alive pool per isolation key, and one pool that keeps nothing alive (requests
    without a key). Pools idle for longer than the keep-alive expiry are closed, as are the least
    recently used idle ones beyond ``max_pools``."""

    KEEPALIVE_SECONDS = 5.0

    def __init__(self, policy: AddressPolicy, ssl_context: ssl.SSLContext, max_connections: int,
                 max_pools: int = 512):
        self._policy = policy
        self._ssl_context = ssl_context
        self._max_connections = max_connections
        self._max_pools = max_pools
        self._pools: dict[str, _Pool] = {}
        self._ephemeral = self._new_pool(keepalive=False)

    def _new_pool(self, *, keepalive: bool) -> httpcore.AsyncConnectionPool:
        return httpcore.AsyncConnectionPool(
            ssl_context=self._ssl_context,
            max_connections=self._max_connections,
            max_keepalive_connections=self._max_connections if keepalive else 0,
            keepalive_expiry=self.KEEPALIVE_SECONDS if keepalive else 0.0,
            http1=True,
            http2=False,
            network_backend=GuardedAsyncBackend(self._policy),
        )

    async def _acquire(self, key: str | None) -> tuple[httpcore.AsyncConnectionPool, _Pool | None]:
        if key is None:
            return self._ephemeral, None
        now = time.monotonic()
        entry = self._pools.get(key)
        stale: list[_Pool] = []
        if entry is None:
            # Take the stale pools out and put the new one in before the first await: closing a
            # pool yields to other requests, which must neither pop the same keys again nor be
            # handed a pool that is being closed, nor create a second pool for this key.
            stale = self._take_stale(now)
            entry = self._pools[key] = _Pool(self._new_pool(keepalive=True))
        entry.active += 1
        entry.last_used = now
        if stale:
            try:
                with anyio.CancelScope(shield=True):
                    await self._close_pools(stale)
            except BaseException:
                entry.active -= 1
                raise
        return entry.pool, entry

    def _take_stale(self, now: float) -> list[_Pool]:
        """Remove the idle pools past their keep-alive expiry, and the least recently used idle
        ones beyond ``max_pools`` (counting one pool about to be added); return them to close.
        Synchronous, so that no other request sees a pool on its way out."""
        idle = [(e.last_used, k) for k, e in self._pools.items() if e.active == 0]
        stale = {k for used, k in idle if now - used > self.KEEPALIVE_SECONDS}
        excess = len(self._pools) + 1 - self._max_pools
        if excess > 0:
            stale.update(k for _, k in sorted(idle)[:excess])
        return [self._pools.pop(key) for key in stale]

    @staticmethod
    async def _close_pools(entries: list[_Pool]) -> None:
        for entry in entries:
            try:
                await entry.pool.aclose()
            except Exception as exc:  # noqa: BLE001 - an idle pool that fails to close is dropped anyway
                log.warning("safe_http.idle_pool_close_failed", error=f"{type(exc).__name__}: {exc}")

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = request.extensions.pop(ISOLATION_EXTENSION, None)
        core_request = _core_request(request)
        pool, entry = await self._acquire(key)

        async def release() -> None:
            if entry is not None:
                entry.active -= 1
                entry.last_used = time.monotonic()

        try:
            resp = await pool.handle_async_request(core_request)
        except Exception as exc:
            await release()
            mapped = _map_httpcore_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        assert isinstance(resp.stream, typing.AsyncIterable)
        return httpx.Response(
            status_code=resp.status,
            headers=resp.headers,
            stream=_AsyncCoreStream(resp.stream, resp.extensions.get("network_stream"), release),
            extensions=resp.extensions,
        )

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for entry in pools:
            await entry.pool.aclose()
        await self._ephemeral.aclose()


@dataclass(frozen=True)
class SafeHttpConfig:
    """Configuration of :class:`SafeAsyncClient` (plain values,
    so that it can be filled from the application settings).

    ``allow_networks``: CIDRs exempt from the private-address refusal, e.g.
    ``["127.0.0.0/8", "::1/128"]`` for tests and the local demo.
    ``verify``: ``True`` (system/certifi CAs), ``False`` (no TLS verification:
    never in production) or an ``ssl.SSLContext``.
    ``total_timeout``: default deadline for a whole request (connect, send,
    headers and body); ``connect/read/write_timeout`` bound each phase.
    ``max_bytes``: default cap on the response body (as sent: nothing is decompressed).
    """

    allow_networks: Sequence[str] = ()
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    write_timeout: float = 30.0
    total_timeout: float = 60.0
    max_bytes: int = 64 * 1024 * 1024
    max_connections: int = 64
    user_agent: str = "dpwatch/0.1"
    verify: bool | ssl.SSLContext = True
    policy: AddressPolicy = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", AddressPolicy.from_cidrs(self.allow_networks))
        for name in ("connect_timeout", "read_timeout", "write_timeout", "total_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        if self.max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        if self.max_connections < 1:
            raise ValueError("max_connections must be >= 1")

    def ssl_context(self) -> ssl.SSLContext:
        if isinstance(self.verify, ssl.SSLContext):
            return self.verify
        return httpx.create_ssl_context(verify=self.verify)


@dataclass(frozen=True)
class SafeResponse:
    """A fully read answer.  For status >= 400 the body is truncated to 8 KiB
    (``truncated=True``) instead of raising ``oversized``.  When a ``reader`` consumed the
    body, ``content`` is empty and ``parsed`` holds what the reader's ``finish()`` returned."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    url: str  # redacted (no query string)
    elapsed: float
    truncated: bool = False
    parsed: typing.Any = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def _timeouts(config: SafeHttpConfig, total: float) -> httpx.Timeout:
    return httpx.Timeout(
        connect=min(config.connect_timeout, total),
        read=min(config.read_timeout, total),
        write=min(config.write_timeout, total),
        pool=min(config.connect_timeout, total),
    )


def _redirect_error(status: int, headers: httpx.Headers) -> SafeHttpError:
    location = headers.get("location")
    to = f" to {redact_url(location)}" if location else ""
    return SafeHttpError(
        "redirect", f"redirects are not followed (got HTTP {status}{to}); configure the final URL"
    )


def _oversized(limit: int, seen: int | None = None) -> SafeHttpError:
    if seen is None:
        return SafeHttpError("oversized", f"the answer is larger than the limit of {limit} bytes")
    return SafeHttpError(
        "oversized", f"the answer announces {seen} bytes, more than the limit of {limit} bytes"
    )


class BodyReader(typing.Protocol):
    """Consumes a successful answer's body as it arrives (:meth:`SafeAsyncClient.request`'s
    ``reader``). ``feed`` may raise to abort the request (the connection is then dropped);
    ``finish`` is called once the body ended and its result becomes ``SafeResponse.parsed``.
    A reader whose ``parses`` attribute is true does CPU work in ``feed``: it is fed 16 KiB at a
    time with a turn of the event loop in between."""

    def feed(self, chunk: bytes) -> None: ...

    def finish(self) -> typing.Any: ...


#: ``reader(status_code, headers)``: a :class:`BodyReader` for this answer, or None to read it whole.
ReaderFactory = typing.Callable[[int, httpx.Headers], "BodyReader | None"]


class ByteBudget:
    """Bytes that several requests may read together (one period's batches, retries included).

    Requests that share it take from it chunk by chunk as bodies arrive; the one that crosses
    the limit fails with ``oversized``.  Used from one event loop (no lock needed: ``take`` does
    not await).

    ``heavy_at`` and ``admit``: once the requests together have read more than ``heavy_at``
    bytes, each of them awaits ``admit()`` before it reads on (:meth:`heavy`); ``admit`` must be
    idempotent (it is awaited on every chunk past the mark, by every request). The caller uses it
    to let one heavy call at a time past the mark (the worker: one period per tenant, docs/hardening.md)."""

    def __init__(self, limit: int, *, heavy_at: int | None = None,
                 admit: typing.Callable[[], typing.Awaitable[None]] | None = None) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        if (heavy_at is None) != (admit is None):
            raise ValueError("heavy_at and admit go together")
        self.limit = limit
        self.used = 0
        self.heavy_at = heavy_at
        self._admit = admit

    async def heavy(self) -> None:
        """Past ``heavy_at``: wait for ``admit()``."""
        if self._admit is not None and self.used > typing.cast(int, self.heavy_at):
            await self._admit()

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def take(self, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            raise SafeHttpError(
                "oversized",
                f"the answers of this call add up to more than its budget of {self.limit} bytes",
            )


_IDENTITY = frozenset({"", "identity"})


def _refused_encoding(headers: httpx.Headers) -> SafeHttpError | None:
    codings = [c.strip().lower() for c in headers.get_list("content-encoding", split_commas=True)]
    others = [c for c in codings if c not in _IDENTITY]
    if not others:
        return None
    return SafeHttpError(
        "content_encoding_refused",
        f"the answer is sent with Content-Encoding {', '.join(others)!s} although identity was asked for; "
        "compressed answers are refused (not decompressed)",
    )


def _announced_length(headers: httpx.Headers) -> int | None:
    value = headers.get("content-length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


def _map_httpx_error(exc: httpx.HTTPError, url: httpx.URL) -> SafeHttpError:
    where = redact_url(url)
    if isinstance(exc, httpx.TimeoutException):
        phase = {
            httpx.ConnectTimeout: "connect",
            httpx.ReadTimeout: "read",
            httpx.WriteTimeout: "write",
            httpx.PoolTimeout: "connection pool",
        }.get(type(exc), "request")
        return SafeHttpError("timeout", f"{phase} timeout calling {where}")
    return SafeHttpError("connection_error", f"{type(exc).__name__} calling {where}: {exc}")


def _prepare(url: str, headers: typing.Mapping[str, str] | None) -> tuple[httpx.URL, dict[str, str]]:
    u = validate_url(url)
    h = {"accept-encoding": "identity"}
    if headers:
        h.update({k.lower(): v for k, v in headers.items()})
    return u, h


class SafeAsyncClient:
    """Async hardened client; share one instance (it keeps one keep-alive pool per isolation
    key, see :meth:`request`).

    Use as ``async with SafeAsyncClient(config) as http: ...`` or call
    :meth:`aclose`.
    """

    def __init__(self, config: SafeHttpConfig | None = None) -> None:
        self.config = config if config is not None else SafeHttpConfig()
        self._client = httpx.AsyncClient(
            transport=_GuardedAsyncTransport(
                self.config.policy, self.config.ssl_context(), self.config.max_connections
            ),
            follow_redirects=False,
            trust_env=False,
            timeout=_timeouts(self.config, self.config.total_timeout),
            headers={"user-agent": self.config.user_agent},
        )

    async def __aenter__(self) -> SafeAsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def check_destination(self, url: str) -> list[str]:
        """Registration-time check: validate ``url``, resolve its host and apply
        the address policy.  Returns the accepted addresses.  Raises
        ``SafeHttpError`` (``invalid_url``, ``refused_address`` or
        ``connection_error`` if the host does not resolve).  Requests re-check
        at connect time, so a later DNS change cannot bypass the policy."""
        u = validate_url(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        host = u.raw_host.decode("ascii")
        try:
            with anyio.fail_after(self.config.connect_timeout):
                infos = await _async_resolve(host, port)
            return _check_resolved(self.config.policy, host, infos)
        except OSError as exc:
            raise SafeHttpError("connection_error", f"cannot resolve host {host!r}: {exc}") from None
        except TimeoutError:
            raise SafeHttpError("timeout", f"resolving host {host!r} timed out") from None
        except httpcore.ConnectError as exc:
            raise SafeHttpError("connection_error", str(exc)) from None

    async def request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: typing.Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
        identity_only: bool = False,
        budget: ByteBudget | None = None,
        isolation: str | None = None,
        truncate: bool = False,
        reader: ReaderFactory | None = None,
    ) -> SafeResponse:
        """Send one request and read the whole answer.

        ``timeout`` is the total deadline (default ``config.total_timeout``);
        ``max_bytes`` caps the body as sent (default ``config.max_bytes``; nothing is ever
        decompressed). ``truncate`` cuts a body at ``max_bytes`` instead of refusing it.
        ``identity_only`` refuses a successful answer whose ``Content-Encoding`` is not
        ``identity`` before reading its body; ``budget`` is shared with other requests and
        charged with this answer's body bytes (successful answers only).
        ``isolation`` names the keep-alive pool the request may use: requests with another key,
        or none, never share a connection with it; without a key the connection is closed after
        the answer. ``reader(status, headers)`` may return a :class:`BodyReader` that consumes a
        successful (< 400) body as it arrives.
        Any non-3xx status is returned (the caller decides what it means);
        failures raise :class:`SafeHttpError`.
        """
        u, h = _prepare(url, headers)
        limit = self.config.max_bytes if max_bytes is None else max_bytes
        total = self.config.total_timeout if timeout is None else timeout
        if total <= 0:
            raise SafeHttpError("timeout", f"no time left to call {redact_url(u)}")
        started = time.monotonic()
        extensions = {ISOLATION_EXTENSION: isolation} if isolation is not None else None
        try:
            with anyio.fail_after(total):
                async with self._client.stream(
                    method, u, content=content, headers=h, timeout=_timeouts(self.config, total),
                    extensions=extensions,
                ) as resp:
                    if 300 <= resp.status_code < 400:
                        raise _redirect_error(resp.status_code, resp.headers)
                    is_error = resp.status_code >= 400
                    if not is_error and identity_only and (refusal := _refused_encoding(resp.headers)):
                        raise refusal
                    cap = min(limit, _ERROR_BODY_LIMIT) if is_error else limit
                    cut = truncate or is_error
                    announced = _announced_length(resp.headers)
                    if not cut and announced is not None and announced > cap:
                        raise _oversized(cap, announced)
                    charge = budget if budget is not None and not is_error else None
                    if charge is not None and announced is not None and announced > charge.remaining:
                        charge.take(announced)  # raises: it cannot fit
                    sink = reader(resp.status_code, resp.headers) if reader is not None and not is_error else None
                    chunks: list[bytes] = []
                    size = 0
                    truncated = False
                    # Raw bytes only: a body sent compressed is counted and kept as sent, never inflated.
                    async for chunk in resp.aiter_raw():
                        if charge is not None:
                            charge.take(len(chunk))
                            await charge.heavy()
                        size += len(chunk)
                        if size > cap:
                            if not cut:
                                raise _oversized(cap)
                            chunk = chunk[: len(chunk) - (size - cap)]
                            truncated = True
                        if sink is not None and getattr(sink, "parses", False):
                            # Parsing is CPU work: let the loop run between slices, even when the
                            # next chunk is already buffered (a read then does not yield).
                            for start in range(0, len(chunk), _FEED_SLICE):
                                sink.feed(chunk[start : start + _FEED_SLICE] if len(chunk) > _FEED_SLICE else chunk)
                                await anyio.lowlevel.checkpoint()
                        elif sink is not None:
                            sink.feed(chunk)
                        else:
                            chunks.append(chunk)
                        if truncated:
                            break  # the connection is dropped with the unread rest
                    parsed = None
                    if sink is not None:
                        # Building the outputs of a large answer (a keyed answer's key table: sorting
                        # and mapping up to 10⁵ keys) is a long stretch of CPU: in a thread, the loop
                        # keeps its turns (the interpreter switches threads every few ms).
                        parsed = (await anyio.to_thread.run_sync(sink.finish) if size > _FINISH_INLINE_BYTES
                                  else sink.finish())
                    return SafeResponse(
                        status_code=resp.status_code,
                        headers=resp.headers,
                        content=b"".join(chunks),
                        url=redact_url(u),
                        elapsed=time.monotonic() - started,
                        truncated=truncated,
                        parsed=parsed,
                    )
        except TimeoutError:
            raise SafeHttpError(
                "timeout", f"total deadline of {total:g}s exceeded calling {redact_url(u)}"
            ) from None
        except httpx.HTTPError as exc:
            raise _map_httpx_error(exc, u) from None

    async def post(self, url: str, *, content: bytes, **kwargs: typing.Any) -> SafeResponse:
        return await self.request("POST", url, content=content, **kwargs)
