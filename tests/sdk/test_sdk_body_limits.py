"""The SDK endpoint refuses what it can before it reads a body, bounds what it reads and how many
requests and connections it serves at once, and reads chunked bodies under WSGI
(sdk/python/dpwatch_sdk/endpoint.py; the memory figures are bench/sdk_body.py's)."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time

import httpx
import pytest
from dpwatch_sdk import Endpoint, generate_secret
from dpwatch_sdk.protocol import sign

SECRET = generate_secret()
MiB = 1024 * 1024


def laplace(database, n, rng):  # noqa: ANN001, ANN201
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def body(database=None, n=3) -> bytes:  # noqa: ANN001
    doc = {"database": database if database is not None else [1.0], "n": n, "request_id": "r-1",
           "monitor_id": "m", "period": 1}
    return json.dumps(doc).encode()


def signed(raw: bytes) -> dict[str, str]:
    return {**sign(SECRET, "r-1", raw), "content-type": "application/json"}


# --------------------------------------------------------------------------- ASGI, with a counting receive


async def _asgi(endpoint: Endpoint, headers: dict[str, str], chunks: list[bytes]) -> tuple[int, int, dict]:
    """Call the ASGI app; the status, how many body bytes it took from ``receive``, the answer."""
    taken = 0
    queue = list(chunks)

    async def receive() -> dict:
        nonlocal taken
        if not queue:
            return {"type": "http.disconnect"}
        chunk = queue.pop(0)
        taken += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(queue)}

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(k.lower().encode(), v.encode())
                                                                          for k, v in headers.items()]}
    await endpoint.asgi(scope, receive, send)
    answer = json.loads(sent[1]["body"] or b"{}")
    return sent[0]["status"], taken, answer


class CountingInput(io.RawIOBase):
    """A WSGI input of ``size`` bytes that counts what is read from it."""

    def __init__(self, data: bytes | None = None, size: int = 0) -> None:
        self.data = data
        self.size = size if data is None else len(data)
        self.taken = 0

    def read(self, n: int = -1) -> bytes:
        left = self.size - self.taken
        n = left if n is None or n < 0 else min(n, left)
        out = self.data[self.taken:self.taken + n] if self.data is not None else b"\0" * n
        self.taken += n
        return out

    def readline(self, limit: int = -1) -> bytes:
        assert self.data is not None
        end = self.data.find(b"\n", self.taken)
        end = self.size if end < 0 else end + 1
        if limit is not None and limit >= 0:
            end = min(end, self.taken + limit)
        out = self.data[self.taken:end]
        self.taken = end
        return out


def _wsgi(endpoint: Endpoint, headers: dict[str, str], stream: CountingInput, *, content_length: int | None,
          terminated: bool = False) -> tuple[int, dict]:
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "wsgi.input": stream, "wsgi.input_terminated": terminated}
    if content_length is not None:
        environ["CONTENT_LENGTH"] = str(content_length)
    for key, value in headers.items():
        if key.lower() == "content-type":
            environ["CONTENT_TYPE"] = value
        else:
            environ["HTTP_" + key.upper().replace("-", "_")] = value
    status: list[str] = []
    out = endpoint.wsgi(environ, lambda s, h: status.append(s))
    return int(status[0].split()[0]), json.loads(b"".join(out) or b"{}")


def test_an_unsigned_16_mib_body_is_refused_before_a_byte_is_read() -> None:
    endpoint = Endpoint(laplace, secret=SECRET)
    headers = {"content-length": str(16 * MiB), "content-type": "application/json"}
    status, taken, answer = asyncio.run(_asgi(endpoint, headers, [b"\0" * MiB] * 16))
    assert (status, taken) == (401, 0) and "Missing required headers" in answer["detail"]
    stream = CountingInput(size=16 * MiB)
    status, answer = _wsgi(endpoint, headers, stream, content_length=16 * MiB)
    assert (status, stream.taken) == (401, 0)


def test_stale_or_malformed_signature_headers_are_refused_before_the_body() -> None:
    endpoint = Endpoint(laplace, secret=SECRET)
    raw = body()
    stale = sign(SECRET, "r-1", raw, timestamp=int(time.time()) - 3600)
    not_base64 = {**signed(raw), "webhook-signature": "v1,not*base64"}
    wrong_version = {**signed(raw), "webhook-signature": "v2," + signed(raw)["webhook-signature"][3:]}
    for headers in (stale, not_base64, wrong_version):
        hdrs = {**headers, "content-length": str(len(raw))}
        status, taken, _ = asyncio.run(_asgi(endpoint, hdrs, [raw]))
        assert (status, taken) == (401, 0), headers
        stream = CountingInput(raw)
        assert _wsgi(endpoint, hdrs, stream, content_length=len(raw))[0] == 401 and stream.taken == 0


def test_a_declared_length_over_the_limit_is_413_before_the_body() -> None:
    endpoint = Endpoint(laplace, secret=SECRET, max_body_bytes=1024)
    raw = body(list(range(1000)))
    headers = {**signed(raw), "content-length": str(len(raw))}
    status, taken, _ = asyncio.run(_asgi(endpoint, headers, [raw]))
    assert (status, taken) == (413, 0)
    stream = CountingInput(raw)
    assert _wsgi(endpoint, headers, stream, content_length=len(raw))[0] == 413 and stream.taken == 0


def test_a_body_longer_than_declared_or_a_chunked_body_over_the_limit_is_refused() -> None:
    endpoint = Endpoint(laplace, secret=SECRET, max_body_bytes=4096)
    raw = body()
    headers = {**signed(raw), "content-length": str(len(raw))}
    status, _, _ = asyncio.run(_asgi(endpoint, headers, [raw, b" " * 100]))
    assert status == 400
    big = body(list(range(2000)))  # no Content-Length: read up to the limit, then 413
    status, taken, _ = asyncio.run(_asgi(endpoint, signed(big), [big[i:i + 1000] for i in range(0, len(big), 1000)]))
    assert status == 413 and taken <= 4096 + 1000


def test_a_signed_request_is_served_under_both() -> None:
    endpoint = Endpoint(laplace, secret=SECRET)
    raw = body()
    headers = {**signed(raw), "content-length": str(len(raw))}
    status, _, answer = asyncio.run(_asgi(endpoint, headers, [raw[:10], raw[10:]]))
    assert status == 200 and len(answer["samples"]) == 3
    status, answer = _wsgi(endpoint, headers, CountingInput(raw), content_length=len(raw))
    assert status == 200 and len(answer["samples"]) == 3


def _chunked(raw: bytes, size: int = 7) -> bytes:
    out = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(raw[i:i + size]), raw[i:i + size]) for i in range(0, len(raw), size))
    return out + b"0\r\nx-trailer: 1\r\n\r\n"


def test_wsgi_decodes_a_chunked_body_the_server_passes_raw() -> None:
    endpoint = Endpoint(laplace, secret=SECRET, max_body_bytes=2048)
    raw = body()
    headers = {**signed(raw), "transfer-encoding": "chunked"}
    status, answer = _wsgi(endpoint, headers, CountingInput(_chunked(raw)), content_length=None)
    assert status == 200, answer
    assert len(answer["samples"]) == 3
    # A server that decoded it already (gunicorn, werkzeug) says so with wsgi.input_terminated.
    status, answer = _wsgi(endpoint, headers, CountingInput(raw), content_length=None, terminated=True)
    assert status == 200, answer
    # Over the limit, malformed, or neither a length nor chunked.
    big = body(list(range(1000)))
    assert _wsgi(endpoint, {**signed(big), "transfer-encoding": "chunked"}, CountingInput(_chunked(big, 500)),
                 content_length=None)[0] == 413
    assert _wsgi(endpoint, headers, CountingInput(b"zz\r\n" + raw), content_length=None)[0] == 400
    assert _wsgi(endpoint, signed(raw), CountingInput(raw), content_length=None)[0] == 411


def test_a_signed_chunked_request_over_a_real_wsgi_server_is_served() -> None:
    """httpx sends a generator body chunked; the standard library's server passes it raw."""
    endpoint = Endpoint(laplace, secret=SECRET)
    raw = body()

    def parts():  # noqa: ANN202
        yield raw[:5]
        yield raw[5:]

    with endpoint.start() as server, httpx.Client(timeout=10) as client:
        response = client.post(server.url, content=parts(), headers=signed(raw))
    assert response.status_code == 200, response.text
    assert len(response.json()["samples"]) == 3


def test_requests_beyond_max_concurrency_are_503() -> None:
    gate = threading.Event()
    entered = threading.Semaphore(0)

    def held(database, n, rng):  # noqa: ANN001, ANN202
        entered.release()
        gate.wait(10)
        return [0.0] * n

    endpoint = Endpoint(held, secret=SECRET, max_concurrency=2)
    raw = body()
    headers = {**signed(raw), "content-length": str(len(raw))}

    async def go() -> list[int]:
        first = [asyncio.create_task(_asgi(endpoint, headers, [raw])) for _ in range(2)]
        for _ in range(2):
            await asyncio.to_thread(entered.acquire, True, 10)
        third = await _asgi(endpoint, headers, [raw])
        gate.set()
        return [third[0]] + [(await t)[0] for t in first]

    assert asyncio.run(go()) == [503, 200, 200]


def test_bodies_held_at_once_never_exceed_the_buffer_budget() -> None:
    """Two 600-byte bodies fit a 1,000-byte budget one at a time: the second waits, then is
    served; with no time to wait, it is 503 and nothing of it is read."""
    gate = threading.Event()
    entered = threading.Event()

    def held(database, n, rng):  # noqa: ANN001, ANN202
        entered.set()
        gate.wait(10)
        return [0.0] * n

    raw = body([0.5] * 100)
    assert 500 < len(raw) < 1000
    headers = {**signed(raw), "content-length": str(len(raw))}
    endpoint = Endpoint(held, secret=SECRET, max_body_bytes=1000, max_buffered_bytes=1000, queue_seconds=0.2)

    blocker = CountingInput(raw)
    stalled: list[tuple[int, dict]] = []

    class SlowInput(CountingInput):  # the first request holds its reservation while it reads
        def read(self, n: int = -1) -> bytes:
            if self.taken == 0:
                entered.set()
                gate.wait(10)
            return super().read(n)

    slow = SlowInput(raw)
    thread = threading.Thread(target=lambda: stalled.append(_wsgi(endpoint, headers, slow, content_length=len(raw))))
    thread.start()
    assert entered.wait(5)
    status, answer = _wsgi(endpoint, headers, blocker, content_length=len(raw))
    assert status == 503 and blocker.taken == 0, answer
    gate.set()
    thread.join(10)
    assert stalled[0][0] == 200


def test_the_server_of_its_own_serves_a_bounded_pool_of_connections() -> None:
    """200 slow connections do not make 200 threads: 4 are served, 8 wait, the rest get a 503 at
    once; a request after they close is served."""
    endpoint = Endpoint(laplace, secret=SECRET)
    before = threading.active_count()
    with endpoint.start(threads=4, backlog=8, socket_timeout=5) as server:
        sockets = []
        try:
            for _ in range(200):
                sock = socket.create_connection((server.host, server.port), timeout=5)
                sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")  # headers never finished
                sockets.append(sock)
            time.sleep(0.5)
            assert threading.active_count() - before <= 4 + 2  # the pool, the serving thread
            busy = 0
            for sock in sockets[12:]:
                sock.settimeout(5)
                if sock.recv(64).startswith(b"HTTP/1.1 503"):
                    busy += 1
            assert busy == 200 - 12
        finally:
            for sock in sockets:
                sock.close()
        raw = body()
        deadline = time.monotonic() + 10
        while True:
            response = httpx.post(server.url, content=raw, headers=signed(raw), timeout=10)
            if response.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("options", [{"max_concurrency": 0}, {"max_buffered_bytes": 10, "max_body_bytes": 100},
                                     {"queue_seconds": -1}])
def test_bad_limits_are_refused(options: dict) -> None:
    with pytest.raises(ValueError):
        Endpoint(laplace, secret=SECRET, **options)


def test_signed_requests_chunked_or_not_over_uvicorn_are_served() -> None:
    from tests.support.sampling_server import serve_app

    endpoint = Endpoint(laplace, secret=SECRET)
    raw = body()

    def parts():  # noqa: ANN202
        yield raw[:5]
        yield raw[5:]

    with serve_app(endpoint.asgi) as base_url, httpx.Client(timeout=10) as client:
        chunked = client.post(base_url + "/", content=parts(), headers=signed(raw))
        plain = client.post(base_url + "/", content=raw, headers=signed(raw))
        unsigned = client.post(base_url + "/", content=b"\0" * MiB, headers={"content-type": "application/json"})
    assert chunked.status_code == 200 and len(chunked.json()["samples"]) == 3, chunked.text
    assert plain.status_code == 200
    assert unsigned.status_code == 401
