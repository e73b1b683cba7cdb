"""JSON vs binary (application/x-dpwatch-float64) sampling answers over loopback.

Serves a real-valued mechanism (standard normal draws) with
dpwatch_sdk.Endpoint (app.reference.server.endpoint_app) on 127.0.0.1 (uvicorn in a thread), then times
SamplingClient.sample() end to end (sign request, serve, serialize, transfer,
parse and validate), one request per call (max_batch = n), after warm-up.
Also times the serialize/parse steps alone, without HTTP.

    .venv/bin/python bench/sampling_formats.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import pathlib
import platform
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import structlog  # noqa: E402
import uvicorn  # noqa: E402

from app.reference.server import endpoint_app, sdk_answer  # noqa: E402
from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig  # noqa: E402
from app.sampling.protocol import (  # noqa: E402
    BINARY_MEDIA_TYPE,
    generate_secret,
    parse_samples,
)
from app.sampling.safe_http import SafeHttpConfig  # noqa: E402


def normal(database, n, rng):
    return rng.standard_normal(n)


class Server:
    def __init__(self, app) -> None:
        # proto=IPPROTO_TCP so that asyncio sets TCP_NODELAY on accepted sockets
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def ms(seconds: list[float]) -> tuple[float, float]:
    s = sorted(seconds)
    return statistics.median(s) * 1e3, s[min(len(s) - 1, int(0.9 * len(s)))] * 1e3


async def end_to_end(url: str, secret: str, n: int, binary: bool, repeats: int) -> list[float]:
    ep = MechanismEndpoint(url, secret, "real", max_batch=n, prefer_binary=binary, timeout_seconds=60)
    config = SamplingClientConfig(max_response_bytes=256 * 1024 * 1024, deadline_seconds=120)
    times = []
    async with SamplingClient(http_config=SafeHttpConfig(allow_networks=["127.0.0.0/8"]), config=config) as c:
        for i in range(repeats + 3):
            t0 = time.perf_counter()
            out = await c.sample(ep, None, n, monitor_id="bench", period=0)
            elapsed = time.perf_counter() - t0
            assert out.shape == (n,)
            if i >= 3:  # warm-up
                times.append(elapsed)
    return times


def offline(n: int, repeats: int) -> dict[str, float]:
    x = np.random.default_rng(0).standard_normal(n)

    def median_ms(fn) -> float:
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t0)
        return statistics.median(runs) * 1e3

    def encode_json(x: np.ndarray) -> bytes:  # the SDK endpoint's JSON answer
        return sdk_answer(x, "real")[0]

    def encode_binary(x: np.ndarray) -> bytes:  # the SDK endpoint's binary answer
        return sdk_answer(x, "real", binary=True)[0]

    js = encode_json(x)
    bn = encode_binary(x)
    return {
        "json_bytes": len(js),
        "bin_bytes": len(bn),
        "json_encode": median_ms(lambda: encode_json(x)),
        "stdlib_encode": median_ms(lambda: json.dumps({"samples": x.tolist()}, separators=(",", ":")).encode()),
        "bin_encode": median_ms(lambda: encode_binary(x)),
        "json_parse": median_ms(lambda: parse_samples(js, "application/json", n, "real")),
        "stdlib_parse": median_ms(lambda: np.array(json.loads(js)["samples"], dtype=np.float64)),
        "bin_parse": median_ms(lambda: parse_samples(bn, BINARY_MEDIA_TYPE, n, "real")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    secret = generate_secret()
    app = endpoint_app({"/": (normal, "real")}, secret=secret, max_n=max(args.sizes))
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
          f"{len(__import__('os').sched_getaffinity(0))} usable CPU(s); repeats={args.repeats}")
    print()
    print("End to end, SamplingClient.sample() over loopback (one request; median / p90 ms):")
    print()
    print("|      n | JSON median | JSON p90 | binary median | binary p90 | binary saves |")
    print("|-------:|------------:|---------:|--------------:|-----------:|-------------:|")
    with Server(app) as server:
        for n in args.sizes:
            repeats = args.repeats if n <= 10_000 else max(5, args.repeats // 3)
            j = ms(asyncio.run(end_to_end(server.url, secret, n, False, repeats)))
            b = ms(asyncio.run(end_to_end(server.url, secret, n, True, repeats)))
            saves = 100 * (1 - b[0] / j[0])
            print(f"| {n:>6} | {j[0]:>11.2f} | {j[1]:>8.2f} | {b[0]:>13.2f} | {b[1]:>10.2f} | {saves:>11.0f}% |")
    print()
    print("Without HTTP (median ms): encode = server side, parse = client side incl. validation;")
    print("'stdlib' = the same with json.dumps / json.loads, for reference:")
    print()
    print("|      n | JSON encode | stdlib encode | binary encode | JSON parse | stdlib parse "
          "| binary parse | JSON bytes | binary bytes |")
    print("|-------:|------------:|--------------:|--------------:|-----------:|-------------:"
          "|-------------:|-----------:|-------------:|")
    for n in args.sizes:
        o = offline(n, args.repeats)
        print(f"| {n:>6} | {o['json_encode']:>11.3f} | {o['stdlib_encode']:>13.3f} | {o['bin_encode']:>13.3f} "
              f"| {o['json_parse']:>10.3f} | {o['stdlib_parse']:>12.3f} | {o['bin_parse']:>12.3f} "
              f"| {o['json_bytes']:>10} | {o['bin_bytes']:>12} |")

if __name__ == "__main__":
    main()
