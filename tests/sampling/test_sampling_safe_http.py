"""The hardened HTTP client: URL validation, address policy, DNS pinning,
redirects, size caps, timeouts.  Network traffic only ever goes to 127.0.0.1;
refusals of other addresses are checked on the resolution path with the real
connect replaced by a spy that records (and fails) any attempt."""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import socket
import ssl
import subprocess
import time

import httpcore
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from app.sampling import safe_http
from app.sampling.safe_http import (
    AddressPolicy,
    SafeAsyncClient,
    SafeHttpConfig,
    SafeHttpError,
    redact_url,
    validate_url,
)
from tests.support.sampling_server import free_port, serve_app

LOOPBACK = ["127.0.0.0/8", "::1/128"]

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------- test server

HITS: list[str] = []


async def ok(request: Request) -> Response:
    HITS.append(request.url.path)
    return JSONResponse(
        {
            "host": request.headers.get("host"),
            "accept_encoding": request.headers.get("accept-encoding"),
            "user_agent": request.headers.get("user-agent"),
            "body": (await request.body()).decode(),
        }
    )


async def redirect(request: Request) -> Response:
    HITS.append(request.url.path)
    return RedirectResponse("/ok?token=s3cr3t", status_code=302)


async def big(request: Request) -> Response:
    return Response(b"x" * (2 * 1024 * 1024), media_type="application/octet-stream")


async def stream(request: Request) -> Response:
    async def chunks():
        for _ in range(800):  # up to 50 MiB, far more than any limit used here
            yield b"y" * 65536
            await asyncio.sleep(0)

    return StreamingResponse(chunks(), media_type="application/octet-stream")


async def slow(request: Request) -> Response:
    await asyncio.sleep(1.5)
    return Response(b"late")


async def error_big(request: Request) -> Response:
    return Response(b"e" * (1024 * 1024), status_code=500)


APP = Starlette(
    routes=[
        Route("/ok", ok, methods=["GET", "POST"]),
        Route("/redirect", redirect),
        Route("/big", big),
        Route("/stream", stream),
        Route("/slow", slow),
        Route("/error-big", error_big),
    ]
)


@pytest.fixture(scope="module")
def base_url():
    with serve_app(APP) as url:
        yield url


@pytest.fixture(autouse=True)
def _clear_hits():
    HITS.clear()


@pytest.fixture
def connect_spy(monkeypatch):
    """Replace the real TCP connect by a recorder that fails."""
    calls: list[tuple[str, int]] = []

    async def fake_async(self, host, port, timeout=None, local_address=None, socket_options=None):
        calls.append((host, port))
        raise httpcore.ConnectError("spy: no real connection in this test")

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", fake_async)
    return calls


def fake_dns(monkeypatch, answers: dict[str, list[list[str]]]) -> list[str]:
    """Resolve names from ``answers`` (one list of addresses per successive
    lookup, the last one repeating); record the looked-up names."""
    lookups: list[str] = []

    def resolve(host: str, port: int) -> list[tuple]:
        lookups.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        seq = answers[host]
        addrs = seq[min(lookups.count(host), len(seq)) - 1]
        out = []
        for a in addrs:
            if ipaddress.ip_address(a).version == 6:
                out.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0)))
            else:
                out.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)))
        return out

    async def resolve_async(host: str, port: int) -> list[tuple]:
        return resolve(host, port)

    monkeypatch.setattr(safe_http, "_async_getaddrinfo", resolve_async)
    return lookups


async def call(config: SafeHttpConfig, method: str, url: str, **kwargs):
    async with SafeAsyncClient(config) as client:
        return await client.request(method, url, **kwargs)


# --------------------------------------------------------------------------- validate_url


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/sample",
        "https://mech.example.org:8443/v1/sample?x=1",
        "http://127.0.0.1:8000/",
        "http://[::1]:8000/",
        "https://bücher.example/",
    ],
)
def test_validate_url_accepts(url):
    assert validate_url(url).scheme in ("http", "https")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/x", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("example.com/x", "only http and https"),
        ("http:///path", "no host"),
        ("http://user:pw@example.com/", "credentials"),
        ("http://token@example.com/", "credentials"),
        ("http://example.com:99999/", "out of range"),
        ("http://2130706433/", "not a canonical IPv4"),
        ("http://0x7f.1/", "not a canonical IPv4"),
        ("http://127.1/", "not a canonical IPv4"),
        ("http://exa mple.com/", "'%'"),
        ("http://[fe80::1%25eth0]/", "'%'"),
        ("http://bad_host!.com/", "invalid host name"),
        ("", "empty"),
        ("http://example.com/" + "a" * 3000, "longer than"),
        ("http://a\r\nb/", "cannot be parsed"),
    ],
)
def test_validate_url_refuses(url, message):
    with pytest.raises(SafeHttpError) as info:
        validate_url(url)
    assert info.value.reason == "invalid_url"
    assert message in info.value.detail


def test_redact_url_drops_credentials_query_and_fragment():
    assert redact_url("https://u:p@h.example:8443/a/b?token=x#f") == "https://h.example:8443/a/b"
    assert redact_url("http://[::1]:8080/x?y") == "http://[::1]:8080/x"


# --------------------------------------------------------------------------- address policy


@pytest.mark.parametrize(
    ("address", "category"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "private"),  # reserved (Python also reports it as private)
        ("100.64.0.1", "not globally routable"),  # shared address space (CGNAT)
        ("fec0::1", "site-local"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("168.63.129.16", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
        ("::ffff:10.0.0.1", "IPv4-mapped private"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("64:ff9b::a00:1", "NAT64 private"),
        ("2002:c0a8:101::1", "6to4 private"),
        ("::127.0.0.1", "reserved"),
    ],
)
def test_policy_refuses_non_public_addresses(address, category):
    reason = AddressPolicy().refusal_reason(ipaddress.ip_address(address))
    assert reason is not None and category in reason


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]
)
def test_policy_accepts_public_addresses(address):
    assert AddressPolicy().refusal_reason(ipaddress.ip_address(address)) is None


def test_allow_networks_exempts_only_their_addresses_and_never_metadata():
    policy = AddressPolicy.from_cidrs(["127.0.0.0/8", "::1/128", "169.254.0.0/16"])
    assert policy.refusal_reason(ipaddress.ip_address("127.0.0.1")) is None
    assert policy.refusal_reason(ipaddress.ip_address("::1")) is None
    assert policy.refusal_reason(ipaddress.ip_address("::ffff:127.0.0.2")) is None
    assert policy.refusal_reason(ipaddress.ip_address("169.254.7.7")) is None
    assert "metadata" in policy.refusal_reason(ipaddress.ip_address("169.254.169.254"))
    assert "private" in policy.refusal_reason(ipaddress.ip_address("10.0.0.1"))


def test_allow_networks_must_be_valid_cidrs():
    with pytest.raises(ValueError, match="invalid network"):
        SafeHttpConfig(allow_networks=["127.0.0.1/8"])  # host bits set
    with pytest.raises(ValueError, match="invalid network"):
        SafeHttpConfig(allow_networks=["localhost"])
    with pytest.raises(TypeError):
        SafeHttpConfig(allow_networks="127.0.0.0/8")


# --------------------------------------------------------------------------- refusals (no traffic)


@pytest.mark.parametrize(
    "host",
    ["10.0.0.1", "192.168.1.10", "169.254.169.254", "[fd00:ec2::254]", "0.0.0.0", "[::ffff:10.0.0.1]"],
)
async def test_literal_non_public_addresses_are_refused_before_connecting(host, connect_spy):
    config = SafeHttpConfig(allow_networks=LOOPBACK)
    with pytest.raises(SafeHttpError) as info:
        await call(config, "GET", f"http://{host}/latest/meta-data/")
    assert info.value.reason == "refused_address"
    assert connect_spy == []


async def test_hostname_resolving_to_private_address_is_refused(monkeypatch, connect_spy):
    fake_dns(monkeypatch, {"mechanism.example": [["192.168.0.7"]]})
    with pytest.raises(SafeHttpError) as info:
        await call(SafeHttpConfig(), "POST", "http://mechanism.example/sample", content=b"{}")
    assert info.value.reason == "refused_address"
    assert "'mechanism.example' resolves to 192.168.0.7 (private address)" in info.value.detail
    assert connect_spy == []


async def test_any_refused_address_refuses_the_whole_host(monkeypatch, connect_spy):
    fake_dns(monkeypatch, {"mixed.example": [["127.0.0.1", "10.9.9.9"]]})
    with pytest.raises(SafeHttpError) as info:
        await call(SafeHttpConfig(allow_networks=LOOPBACK), "GET", "http://mixed.example/")
    assert info.value.reason == "refused_address" and "10.9.9.9" in info.value.detail
    assert connect_spy == []


async def test_loopback_refused_by_default_allowed_with_allow_networks(base_url):
    with pytest.raises(SafeHttpError) as info:
        await call(SafeHttpConfig(), "GET", f"{base_url}/ok")
    assert info.value.reason == "refused_address"
    assert "loopback" in info.value.detail
    assert HITS == []

    resp = await call(SafeHttpConfig(allow_networks=LOOPBACK), "GET", f"{base_url}/ok")
    assert resp.status_code == 200
    assert HITS == ["/ok"]


async def test_registration_check_reports_refused_and_accepted(monkeypatch):
    fake_dns(monkeypatch, {"inside.example": [["10.0.0.5"]], "pub.example": [["93.184.216.34"]]})
    async with SafeAsyncClient(SafeHttpConfig()) as client:
        assert await client.check_destination("https://pub.example/x") == ["93.184.216.34"]
        with pytest.raises(SafeHttpError) as info:
            await client.check_destination("https://inside.example/x")
        assert info.value.reason == "refused_address"
        with pytest.raises(SafeHttpError) as info:
            await client.check_destination("https://unknown.example/x")
        assert info.value.reason == "connection_error"
        with pytest.raises(SafeHttpError) as info:
            await client.check_destination("https://user:pw@pub.example/x")
        assert info.value.reason == "invalid_url"


# --------------------------------------------------------------------------- DNS pinning


async def test_connects_to_the_checked_address_with_original_host_header(base_url, monkeypatch):
    port = int(base_url.rsplit(":", 1)[1])
    lookups = fake_dns(monkeypatch, {"mechanism.example": [["127.0.0.1"]]})
    resp = await call(
        SafeHttpConfig(allow_networks=LOOPBACK), "POST",
        f"http://mechanism.example:{port}/ok", content=b"payload",
    )
    assert resp.status_code == 200
    seen = resp.content.decode()
    assert f'"host":"mechanism.example:{port}"' in seen
    assert '"accept_encoding":"identity"' in seen and '"user_agent":"dpwatch/0.1"' in seen
    assert '"body":"payload"' in seen
    assert lookups == ["mechanism.example"]  # one lookup: the one that was checked


async def test_dns_rebinding_after_registration_check_is_refused_at_connect(
    base_url, monkeypatch, connect_spy
):
    # First lookup (registration) says loopback (allowed here), the next one
    # (at connect time) says 10.0.0.1: the request must be refused.
    port = int(base_url.rsplit(":", 1)[1])
    fake_dns(monkeypatch, {"rebind.example": [["127.0.0.1"], ["10.0.0.1"]]})
    async with SafeAsyncClient(SafeHttpConfig(allow_networks=LOOPBACK)) as client:
        assert await client.check_destination(f"http://rebind.example:{port}/ok") == ["127.0.0.1"]
        with pytest.raises(SafeHttpError) as info:
            await client.request("GET", f"http://rebind.example:{port}/ok")
    assert info.value.reason == "refused_address" and "10.0.0.1" in info.value.detail
    assert connect_spy == []


async def test_environment_proxies_are_ignored(base_url, monkeypatch):
    dead_proxy = f"http://127.0.0.1:{free_port()}"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(var, dead_proxy)
    resp = await call(SafeHttpConfig(allow_networks=LOOPBACK), "GET", f"{base_url}/ok")
    assert resp.status_code == 200 and HITS == ["/ok"]


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", "/CN=mechanism.test", "-addext", "subjectAltName=DNS:mechanism.test",
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


async def test_tls_verifies_the_url_hostname_while_connecting_to_the_checked_ip(
    tls_files, monkeypatch
):
    cert, key = tls_files
    fake_dns(monkeypatch, {"mechanism.test": [["127.0.0.1"]]})
    config = SafeHttpConfig(
        allow_networks=LOOPBACK, verify=ssl.create_default_context(cafile=cert)
    )
    with serve_app(APP, ssl_certfile=cert, ssl_keyfile=key) as url:
        port = int(url.rsplit(":", 1)[1])
        resp = await call(config, "GET", f"https://mechanism.test:{port}/ok")
        assert resp.status_code == 200
        assert f'"host":"mechanism.test:{port}"' in resp.content.decode()
        # Same server and certificate, but the URL names the IP: the certificate
        # does not match it, so verification (done against the URL host) fails.
        with pytest.raises(SafeHttpError) as info:
            await call(config, "GET", f"https://127.0.0.1:{port}/ok")
        assert info.value.reason == "connection_error"
        assert "CERTIFICATE_VERIFY_FAILED" in info.value.detail


# --------------------------------------------------------------------------- answers


async def test_redirects_are_not_followed(base_url):
    with pytest.raises(SafeHttpError) as info:
        await call(SafeHttpConfig(allow_networks=LOOPBACK), "GET", f"{base_url}/redirect")
    assert info.value.reason == "redirect"
    assert "redirects are not followed" in info.value.detail
    assert "s3cr3t" not in info.value.detail  # the Location's query string is not shown
    assert HITS == ["/redirect"]


async def test_announced_oversized_body_is_refused(base_url):
    config = SafeHttpConfig(allow_networks=LOOPBACK, max_bytes=1024 * 1024)
    with pytest.raises(SafeHttpError) as info:
        await call(config, "GET", f"{base_url}/big")
    assert info.value.reason == "oversized"
    assert "announces 2097152 bytes" in info.value.detail
    resp = await call(config, "GET", f"{base_url}/big", max_bytes=3 * 1024 * 1024)
    assert len(resp.content) == 2 * 1024 * 1024


async def test_streamed_body_is_aborted_past_the_limit(base_url):
    config = SafeHttpConfig(allow_networks=LOOPBACK)
    started = time.monotonic()
    with pytest.raises(SafeHttpError) as info:
        await call(config, "GET", f"{base_url}/stream", max_bytes=256 * 1024)
    assert info.value.reason == "oversized"
    assert "larger than the limit of 262144 bytes" in info.value.detail
    assert time.monotonic() - started < 5  # did not download the 50 MiB


async def test_error_bodies_are_truncated_not_refused(base_url):
    resp = await call(SafeHttpConfig(allow_networks=LOOPBACK), "GET", f"{base_url}/error-big")
    assert resp.status_code == 500
    assert resp.truncated and len(resp.content) == 8192


async def test_total_timeout(base_url):
    config = SafeHttpConfig(allow_networks=LOOPBACK)
    started = time.monotonic()
    with pytest.raises(SafeHttpError) as info:
        await call(config, "GET", f"{base_url}/slow", timeout=0.3)
    elapsed = time.monotonic() - started
    assert info.value.reason == "timeout"
    assert 0.25 < elapsed < 1.4  # the endpoint answers after 1.5 s


async def test_read_timeout_from_config(base_url):
    config = SafeHttpConfig(allow_networks=LOOPBACK, read_timeout=0.2)
    with pytest.raises(SafeHttpError) as info:
        await call(config, "GET", f"{base_url}/slow")
    assert info.value.reason == "timeout" and "read timeout" in info.value.detail


async def test_connection_refused():
    config = SafeHttpConfig(allow_networks=LOOPBACK)
    with pytest.raises(SafeHttpError) as info:
        await call(config, "GET", f"http://127.0.0.1:{free_port()}/")
    assert info.value.reason == "connection_error"


async def test_invalid_url_is_refused_by_the_clients(connect_spy):
    with pytest.raises(SafeHttpError) as info:
        await call(SafeHttpConfig(), "GET", "http://user:pw@example.com/")
    assert info.value.reason == "invalid_url"
    assert connect_spy == []
