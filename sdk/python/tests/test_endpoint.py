"""The endpoint against docs/protocol.md: signatures, limits, errors, JSON and binary answers,
under ASGI, WSGI and the standalone server."""

from __future__ import annotations

import asyncio
import json
import math
import struct
import time

import httpx
import numpy as np
import pytest
from dpwatch_sdk import Endpoint, Mechanism, Output, generate_secret, one_at_a_time
from dpwatch_sdk.protocol import ACCEPT_BINARY, BINARY_MEDIA_TYPE, negotiate_binary, sign

SECRET = generate_secret()
DOC_SECRET = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def body(database=None, n=5, **extra):
    doc = {"database": database, "n": n, "request_id": "run-1-0", "monitor_id": "mon", "period": 3, **extra}
    return json.dumps(doc, separators=(",", ":")).encode()


def signed(raw: bytes, secret: str = SECRET, accept: str = "application/json") -> dict[str, str]:
    return {**sign(secret, "run-1-0", raw), "content-type": "application/json", "accept": accept}


def laplace(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


class Client:
    """One request API over the three servers."""

    def __init__(self, endpoint: Endpoint, how: str) -> None:
        self.endpoint, self.how = endpoint, how

    def post(self, raw: bytes, headers: dict[str, str]) -> httpx.Response:
        if self.how == "wsgi":
            with httpx.Client(transport=httpx.WSGITransport(app=self.endpoint.wsgi), base_url="http://t") as c:
                return c.post("/", content=raw, headers=headers)
        if self.how == "asgi":
            async def go() -> httpx.Response:
                async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.endpoint.asgi),
                                             base_url="http://t") as c:
                    return await c.post("/", content=raw, headers=headers)
            return asyncio.run(go())
        with self.endpoint.start() as server, httpx.Client() as c:
            return c.post(server.url, content=raw, headers=headers)


@pytest.fixture(params=["asgi", "wsgi"])
def how(request) -> str:
    """The protocol's cases under ASGI and WSGI; test_the_standalone_server runs the main ones over
    a real socket."""
    return request.param


def serve(f, how, output="real", **kw) -> Client:
    return Client(Endpoint(f, output=output, secret=SECRET, **kw), how)


def test_real_json_and_binary(how):
    client = serve(laplace, how)
    raw = body([1, 2, 3], n=1000)
    r = client.post(raw, signed(raw))
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    samples = r.json()["samples"]
    assert len(samples) == 1000 and abs(np.mean(samples) - 6.0) < 0.3
    r = client.post(raw, signed(raw, accept=ACCEPT_BINARY))
    assert r.status_code == 200 and r.headers["content-type"] == BINARY_MEDIA_TYPE
    values = np.frombuffer(r.content, dtype="<f8")
    assert len(values) == 1000 and "x-dpwatch-dim" not in r.headers


def test_the_standalone_server():
    for case in (test_real_json_and_binary, test_signature_missing_bad_stale_and_rotated,
                 test_body_limit_413_and_method_405, test_binary_vectors_lists_and_nulls):
        case("server")
    test_wrong_fields_are_422("server", {"n": "5"}, "n")


def test_signature_missing_bad_stale_and_rotated(how):
    client = serve(laplace, how)
    raw = body([0])
    assert client.post(raw, {"content-type": "application/json"}).status_code == 401
    assert client.post(raw, signed(raw, secret=generate_secret())).status_code == 401
    stale = {**sign(SECRET, "run-1-0", raw, timestamp=int(time.time()) - 3600), "content-type": "application/json"}
    r = client.post(raw, stale)
    assert r.status_code == 401 and "signature" in r.json()["detail"]
    tampered = signed(raw)
    assert client.post(body([1]), tampered).status_code == 401  # signature of another body
    rotated = Client(Endpoint(laplace, secret=[generate_secret(), SECRET]), how)
    assert rotated.post(raw, signed(raw)).status_code == 200


def test_the_documented_example_signature():
    raw = b'{"database":{"values":[3,1,4,1,5]},"n":3,"request_id":"run-42.7-0","monitor_id":"mon-7","period":7}'
    headers = sign(DOC_SECRET, "run-42.7-0", raw, timestamp=1700000000)
    assert headers["webhook-signature"] == "v1,6ButcXtHCElH8H8q4GXbHvf/fW7ETA+t8PykEutrDmI="


@pytest.mark.parametrize("doc, field", [
    ({"n": "5"}, "n"), ({"n": 0}, "n"), ({"n": True}, "n"), ({"period": -1}, "period"),
    ({"request_id": 7}, "request_id"), ({"n": 2_000_001}, "n"),
])
def test_wrong_fields_are_422(how, doc, field):
    client = serve(laplace, how, max_n=2_000_000)
    raw = body([0], **{}) if not doc else json.dumps(
        {"database": [0], "n": 5, "request_id": "r", "monitor_id": "m", "period": 0, **doc}).encode()
    r = client.post(raw, signed(raw))
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", field]


def test_missing_field_unknown_field_and_not_json(how):
    client = serve(laplace, how)
    raw = json.dumps({"database": [0], "n": 2, "request_id": "r", "period": 0}).encode()
    r = client.post(raw, signed(raw))
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "monitor_id"]
    raw = body([0], n=2, future_field={"x": 1})  # unknown fields are ignored
    assert client.post(raw, signed(raw)).status_code == 200
    for raw in (b"{not json", b'{"n": NaN}', b"[1, 2]"):
        assert client.post(raw, signed(raw)).status_code == 422


def test_body_limit_413_and_method_405(how):
    client = serve(laplace, how, max_body_bytes=200)
    raw = body(list(range(100)))
    assert client.post(raw, signed(raw)).status_code == 413
    if how == "wsgi":
        with httpx.Client(transport=httpx.WSGITransport(app=client.endpoint.wsgi), base_url="http://t") as c:
            r = c.get("/")
    elif how == "server":
        with client.endpoint.start() as server:
            r = httpx.get(server.url)
    else:
        async def go():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=client.endpoint.asgi),
                                         base_url="http://t") as c:
                return await c.get("/")
        r = asyncio.run(go())
    assert r.status_code == 405 and r.headers["allow"] == "POST"


@pytest.mark.parametrize("output, f, expect", [
    ("integer", lambda db, n, rng: np.floor(rng.exponential(3.0, n)), int),
    ("label", lambda db, n, rng: np.where(rng.random(n) < 0.5, "yes", "no"), str),
    ("discrete", lambda db, n, rng: [2] * n, int),
    (("vector", 3), lambda db, n, rng: rng.normal(size=(n, 3)), list),
])
def test_every_output_kind_in_json(how, output, f, expect):
    client = serve(f, how, output=output)
    raw = body(None, n=20)
    r = client.post(raw, signed(raw))
    assert r.status_code == 200, r.text
    assert all(type(s) is expect for s in r.json()["samples"])


def test_binary_vectors_lists_and_nulls(how):
    client = serve(lambda db, n, rng: rng.normal(size=(n, 2)), how, output=("vector", 2))
    raw = body(None, n=4)
    r = client.post(raw, signed(raw, accept=ACCEPT_BINARY))
    assert r.headers["x-dpwatch-dim"] == "2" and len(r.content) == 4 * 2 * 8
    svt = serve(lambda db, n, rng: [[0, 1], [1], [], [0, 0, 1]][:n], how, output="list")
    raw = body(None, n=4)
    r = svt.post(raw, signed(raw, accept=ACCEPT_BINARY))
    assert r.status_code == 200 and r.headers["x-dpwatch-dim"] == "4"
    rows = np.frombuffer(r.content, "<f8").reshape(4, 4)
    assert rows[:, 0].tolist() == [2, 1, 0, 3] and math.isnan(rows[1, 2]) and rows[3, 3] == 1
    assert svt.post(raw, signed(raw)).json()["samples"] == [[0, 1], [1], [], [0, 0, 1]]
    nullable = serve(lambda db, n, rng: [None, 1.5], how, output=Output("real", nullable=True))
    raw = body(None, n=2)
    assert nullable.post(raw, signed(raw)).json()["samples"] == [None, 1.5]
    r = nullable.post(raw, signed(raw, accept=ACCEPT_BINARY))
    assert math.isnan(struct.unpack("<2d", r.content)[0])
    labels = serve(lambda db, n, rng: ["a"] * n, how, output="label")  # labels never go binary
    raw = body(None, n=2)
    assert labels.post(raw, signed(raw, accept=ACCEPT_BINARY)).headers["content-type"] == "application/json"


@pytest.mark.parametrize("output, returned, reason", [
    ("real", [1.0, 2.0], "expected 3 outputs, got 2"),
    ("real", [1.0, float("nan"), 2.0], "not a finite number"),
    ("real", np.array([1.0, np.inf, 2.0]), "NaN or infinity"),
    ("real", [1.0, True, 2.0], "must be a number"),
    ("real", [1.0, "2", 2.0], "must be a number"),
    ("integer", [1, 2.5, 3], "must be an integer"),
    ("discrete", [1, "a", 3], "not a mix"),
    ("vector", [[1.0], [1.0, 2.0], [3.0]], "same length"),
    ("vector", [[], [], []], "must not be empty"),
    ("real", 5.0, "sequence of outputs"),
    ("real", {"a": 1}, "sequence of outputs"),
])
def test_invalid_outputs_are_500_with_the_reason(how, output, returned, reason):
    client = serve(lambda db, n, rng: returned, how, output=output)
    raw = body(None, n=3)
    r = client.post(raw, signed(raw))
    assert r.status_code == 500 and reason in r.json()["detail"], r.text


def test_a_mechanism_that_raises_is_500(how):
    def broken(db, n, rng):
        raise ValueError("database must be a list")
    client = serve(broken, how)
    raw = body(None)
    r = client.post(raw, signed(raw))
    assert r.status_code == 500 and "ValueError: database must be a list" in r.json()["detail"]


def test_one_at_a_time_and_period():
    calls = []

    def draw(x):
        calls.append(x)
        return x + 0.5

    def doubled(database):
        return 2 * database

    endpoint = Endpoint(Mechanism(one_at_a_time(draw, prepare=doubled)), secret=None)
    status, _, answer = endpoint.handle(body(3, n=4), {})
    assert status == 200 and json.loads(answer)["samples"] == [6.5] * 4 and calls == [6] * 4

    def by_period(db, n, rng, period):
        return [float(period)] * n
    status, _, answer = Endpoint(by_period, secret=None).handle(body(None, n=2), {})
    assert json.loads(answer)["samples"] == [3.0, 3.0]


def test_seeded_generators_are_reproducible_and_fresh_per_request():
    a = Endpoint(laplace, secret=None, seed=7)
    b = Endpoint(laplace, secret=None, seed=7)
    first = [json.loads(a.handle(body([0], n=3), {})[2])["samples"] for _ in range(2)]
    second = [json.loads(b.handle(body([0], n=3), {})[2])["samples"] for _ in range(2)]
    assert first == second and first[0] != first[1]


def test_negotiation():
    assert negotiate_binary(ACCEPT_BINARY)
    assert not negotiate_binary("application/json")
    assert not negotiate_binary(f"{BINARY_MEDIA_TYPE};q=0, application/json")
    assert negotiate_binary(f"{BINARY_MEDIA_TYPE}, */*")
    assert not negotiate_binary(None)


def test_mounted_in_fastapi_and_flask():
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from flask import Flask

    endpoint = Endpoint(laplace, secret=SECRET)
    api = FastAPI()

    @api.get("/hello")
    def hello():
        return {"hello": "world"}

    api.mount("/dp", endpoint.asgi)
    api.add_route("/sample", endpoint.asgi, methods=["POST"])
    raw = body([1], n=3)
    with TestClient(api) as c:
        assert c.get("/hello").json() == {"hello": "world"}
        assert len(c.post("/dp", content=raw, headers=signed(raw), follow_redirects=True).json()["samples"]) == 3
        assert len(c.post("/sample", content=raw, headers=signed(raw)).json()["samples"]) == 3

    flask_app = Flask("user")

    @flask_app.get("/hello")
    def flask_hello():
        return {"hello": "flask"}

    flask_app.wsgi_app = endpoint.wsgi_middleware(flask_app.wsgi_app, "/dp")
    with httpx.Client(transport=httpx.WSGITransport(app=flask_app), base_url="http://t") as c:
        assert c.get("/hello").json() == {"hello": "flask"}
        assert len(c.post("/dp", content=raw, headers=signed(raw)).json()["samples"]) == 3


def partition_counts(db, n, rng):
    """Laplace counts per key, released when they pass a threshold (keys as ints and strings)."""
    out = []
    for _ in range(n):
        noisy = {k: c + rng.laplace(0.0, 1.0) for k, c in {7: 10.0, "b": 1.0}.items()}
        out.append({k: v for k, v in noisy.items() if v > 3.0})
    return out


def test_keyed_outputs_are_json_objects_with_string_keys(how):
    client = serve(partition_counts, how, output=Output("keyed"))
    raw = body(None, n=50)
    r = client.post(raw, signed(raw, accept=ACCEPT_BINARY))  # keyed outputs never go binary
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    samples = r.json()["samples"]
    assert len(samples) == 50 and all(type(s) is dict for s in samples)
    assert {k for s in samples for k in s} <= {"7", "b"} and any("7" in s for s in samples)
    numpy_values = serve(lambda db, n, rng: [{np.int64(3): np.float64(1.5), "x": np.int32(2)}] * n, how,
                         output=Output("keyed", values="integer", nullable=True, keys=["3", "x", "y"]))
    raw = body(None, n=2)
    r = numpy_values.post(raw, signed(raw))
    assert r.status_code == 500 and "must be an integer" in r.json()["detail"]
    nulls = serve(lambda db, n, rng: [{"a": None, "b": float("nan")}, {}][:n], how, output=Output("keyed", nullable=True))
    raw = body(None, n=2)
    assert nulls.post(raw, signed(raw)).json()["samples"] == [{"a": None, "b": None}, {}]


@pytest.mark.parametrize("output, returned, reason", [
    (Output("keyed"), [{"a": 1.0}, [1.0], {}], "must be a dict"),
    (Output("keyed"), [{"a": float("inf")}, {}, {}], "not a finite number"),
    (Output("keyed"), [{"a": None}, {}, {}], "not nullable"),
    (Output("keyed"), [{1.5: 1.0}, {}, {}], "must be a string or an integer"),
    (Output("keyed"), [{True: 1.0}, {}, {}], "must be a string or an integer"),
    # a group-by on two columns returns tuple keys: the answer says how to send them
    (Output("keyed"), [{("a", 1): 1.0}, {}, {}], "join a composite key into one string"),
    (Output("keyed"), [{7: 1.0, "7": 2.0}, {}, {}], "twice"),
    (Output("keyed", keys=("a", "b")), [{"a": 1.0}, {"c": 1.0}, {}], "not a declared key"),
    (Output("keyed", max_keys=1), [{"a": 1.0, "b": 2.0}, {}, {}], "more than max_keys=1"),
    (Output("keyed"), [{"a": "1"}, {}, {}], "must be a number"),
])
def test_invalid_keyed_outputs_are_500_with_the_reason(how, output, returned, reason):
    client = serve(lambda db, n, rng: returned, how, output=output)
    raw = body(None, n=3)
    r = client.post(raw, signed(raw))
    assert r.status_code == 500 and reason in r.json()["detail"], r.text


def test_keyed_output_declaration():
    assert Output.of("keyed") == Output("keyed")
    assert Output("keyed").output_kind == "keyed" and not Output("keyed").binary_capable
    assert Output("keyed").shape() == {"container": "keyed"}
    spec = Output("keyed", keys=[1, "b"], max_keys=2, values="integer", nullable=True)
    assert spec.keys == ("1", "b")
    assert spec.shape() == {"container": "keyed", "values": "integer", "keys": ["1", "b"], "max_keys": 2,
                            "nullable": True}
    body_ = Mechanism(partition_counts, spec).registration("https://dp.example.org/s")
    assert body_["output_kind"] == "keyed" and body_["output_shape"]["keys"] == ["1", "b"] and "dim" not in body_
    for bad in (dict(keys=[]), dict(keys=["a", "a"]), dict(keys="ab"), dict(max_keys=0), dict(values="label")):
        with pytest.raises(ValueError):
            Output("keyed", **bad)
    with pytest.raises(ValueError):
        Output("real", keys=["a"])


def test_a_hanging_sampler_does_not_starve_another_endpoint():
    """Each endpoint runs its sampler in a pool of its own: requests stuck in one endpoint (more of
    them than the event loop's default pool has threads, 32 at most) leave the other answering."""
    import threading

    release = threading.Event()

    def hangs(database, n, rng):
        release.wait(30)
        return [0.0] * n

    stuck = Endpoint(hangs, secret=None, max_concurrency=40)
    healthy = Endpoint(laplace, secret=None)
    raw = body([1], n=3)

    async def go() -> tuple[int, float]:
        stuck_client = httpx.AsyncClient(transport=httpx.ASGITransport(app=stuck.asgi), base_url="http://t", timeout=60)
        async with stuck_client, httpx.AsyncClient(transport=httpx.ASGITransport(app=healthy.asgi),
                                                   base_url="http://t") as ok_client:
            hanging = [asyncio.create_task(stuck_client.post("/", content=raw)) for _ in range(36)]
            await asyncio.sleep(0.5)  # every stuck request is inside its sampler
            t0 = time.monotonic()
            try:
                answer = await asyncio.wait_for(ok_client.post("/", content=raw), timeout=10)
            finally:
                release.set()
            elapsed = time.monotonic() - t0
            assert all(r.status_code == 200 for r in await asyncio.gather(*hanging))
            return answer.status_code, elapsed

    status, elapsed = asyncio.run(go())
    assert status == 200 and elapsed < 5
