"""The SDK's endpoint answers what the service's sampling client accepts, for every output kind,
in JSON and in binary (docs/protocol.md is the one statement of the rules; this test holds the two
implementations to it)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from dpwatch_sdk import Endpoint, Output, generate_secret

from app.sampling.client import MechanismEndpoint, SamplingClient
from app.sampling.safe_http import SafeHttpConfig
from app.stats.shapes import KeyedSamples, ListSamples, OutputShape

SECRET = generate_secret()
LOOPBACK = SafeHttpConfig(allow_networks=("127.0.0.0/8",))

CASES = [
    ("real", lambda db, n, rng: rng.laplace(0.0, 1.0, n), lambda a: a.dtype == np.float64),
    ("real", lambda db, n, rng: [float(i) for i in range(n)], lambda a: a[:40].tolist() == list(map(float, range(40)))),
    ("integer", lambda db, n, rng: np.floor(rng.exponential(3.0, n)), lambda a: a.dtype == np.int64),
    ("label", lambda db, n, rng: ["yes" if i % 3 else "no" for i in range(n)], lambda a: set(a) == {"yes", "no"}),
    (Output("vector", 3), lambda db, n, rng: rng.normal(size=(n, 3)), lambda a: a.shape[1] == 3),
    ("list", lambda db, n, rng: [[1] * (i % 4) for i in range(n)],
     lambda a: isinstance(a, ListSamples) and a.lengths.tolist()[:4] == [0, 1, 2, 3]),
    (Output("vector", 2, nullable=True), lambda db, n, rng: [[None, 1.5]] * n,
     lambda a: np.isnan(a[:, 0]).all() and (a[:, 1] == 1.5).all()),
    # keyed outputs (always JSON): integer keys become strings, and batches with other keys concatenate
    (Output("keyed", keys=[7, "b", "c"], nullable=True),
     lambda db, n, rng: [{7: np.float64(i)} if i % 2 else ({"b": None} if i % 3 else {}) for i in range(n)],
     lambda a: isinstance(a, KeyedSamples) and a.keys == ("7", "b") and a.tolist()[:4] == [{}, {"7": 1.0}, {"b": None},
                                                                                          {"7": 3.0}]),
]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("spec, f, check", CASES, ids=[f"{Output.of(c[0]).kind}-{i}" for i, c in enumerate(CASES)])
def test_sdk_answers_parse_with_the_services_client(spec, f, check, binary):
    output = Output.of(spec)
    shape = OutputShape.model_validate(output.shape() if output.kind != "list" else {**output.shape(),
                                                                                     "values": "integer"})
    with Endpoint(f, output=output, secret=SECRET).start() as server:
        mechanism = MechanismEndpoint(sampling_url=server.url, secret=SECRET, shape=shape, prefer_binary=binary,
                                      max_batch=40)

        async def draw():
            async with SamplingClient(http_config=LOOPBACK) as client:
                return await client.sample(mechanism, [1, 2, 3], 100, monitor_id="m", period=0,
                                           request_id_prefix="conformance")

        samples = asyncio.run(draw())  # three batches: 40 + 40 + 20
    assert len(samples) == 100 and check(samples)
