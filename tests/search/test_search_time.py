"""Time, not just outputs (app/sampling/timing.py and its use by searches and audits)."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest

from app.audit.service import audit_endpoint, format_report
from app.reference.search_corpus import search_corpus
from app.reference.server import endpoint_app
from app.sampling.client import MechanismEndpoint
from app.sampling.protocol import SamplingError, generate_secret
from app.sampling.safe_http import SafeHttpConfig
from app.sampling.timing import DeadlineReached, RequestTimedOut, TimedSampler, format_duration, measure_rate
from app.search.domain import InputDomain
from app.search.draws import SearchDraws
from app.search.run import SearchSettings, run_search
from app.search.service import make_claim
from app.stats.claims import PureDP
from app.stats.shapes import OutputShape
from tests.support.sampling_server import serve_app


def slow_sampler(rate: float, latency: float = 0.002, seed: int = 0):
    """Outputs of a Laplace sum at ``rate`` outputs/s in all (concurrent calls queue on one lock)."""
    lock = asyncio.Lock()
    rng = np.random.default_rng(seed)

    async def sample(db, n):
        async with lock:
            await asyncio.sleep(latency + n / rate)
        return float(np.clip(np.asarray(db, dtype=float), 0, 1).sum()) + rng.laplace(0, 1.0, n)

    return sample


def test_the_rate_is_measured_in_about_a_second():
    t0 = time.monotonic()
    m = asyncio.run(measure_rate(slow_sampler(2_000), [1.0], target_seconds=0.5))
    assert time.monotonic() - t0 < 3
    assert 1_300 < m.rate < 2_600
    assert m.seconds_for(8_000_000) == pytest.approx(8_000_000 / m.rate, rel=0.3)


def test_a_timed_sampler_splits_draws_and_stops_at_its_deadline():
    calls = []

    async def sampler(db, n):
        calls.append(n)
        await asyncio.sleep(n / 10_000)
        return np.zeros(n)

    timed = TimedSampler(sampler, rate=10_000, slice_seconds=0.05)
    out = asyncio.run(timed([0], 2_000))
    assert out.shape == (2_000,) and max(calls) <= 500 and sum(calls) == 2_000
    timed.deadline = time.monotonic() + 0.1
    with pytest.raises(DeadlineReached):
        asyncio.run(timed([0], 100_000))
    assert sum(calls) < 2_000 + 10_000  # stopped long before the 100,000


def test_a_timed_out_request_stops_the_run_and_is_never_a_failing_input():
    async def sampler(db, n):
        raise SamplingError("timeout", "the endpoint did not answer within 60 s")

    timed = TimedSampler(sampler, rate=1_000)
    with pytest.raises(RequestTimedOut):
        asyncio.run(timed([1], 10))
    draws = SearchDraws(sampler)
    with pytest.raises(RequestTimedOut):
        asyncio.run(draws.draw([[1]], 10, "screening"))
    assert draws.failures == {}


def test_format_duration():
    assert format_duration(42) == "42 s"
    assert format_duration(200) == "3 min 20 s"
    assert format_duration(7_900) == "2 h 11 min"


def test_a_search_at_a_slow_rate_prints_its_estimate_and_ends_within_its_time_limit_with_its_power():
    e = search_corpus()["laplace-sum"]
    seen = []
    t0 = time.monotonic()

    def progress(p):
        seen.append((time.monotonic() - t0, p.phase, p.message))

    res = asyncio.run(run_search(slow_sampler(3_000, seed=1), InputDomain.model_validate(e.domain),
                                 make_claim(e.claim), e.shape, SearchSettings(time_limit=8, seed=1),
                                 progress=progress))
    wall = time.monotonic() - t0
    assert wall <= 8 + 5
    estimate = [s for s in seen if s[1] == "rate"]
    assert estimate and estimate[0][0] < 5 and "would take about" in estimate[0][2] and "time limit" in estimate[0][2]
    assert any("left" in s[2] for s in seen if s[1] in ("screening", "certification"))
    assert 1_500 < res.rate["outputs_per_second"] < 4_500
    assert not res.certified and res.power and "Power:" in res.statement
    assert res.samples["total"] < 8 * 3_000  # sized to the time, not to the 8,000,000 budget
    assert res.failing_inputs == []


def test_an_audit_over_http_with_a_time_limit_measures_first_and_ends_on_time():
    import threading

    lock = threading.Lock()

    def slow(db, n, rng):
        with lock:
            time.sleep(n / 2_000)
        return float(np.clip(np.asarray(db, dtype=float), 0, 1).sum()) + rng.laplace(0, 1.0, n)

    secret = generate_secret()
    lines = []
    with serve_app(endpoint_app({"/": (slow, "real")}, secret=secret, seed=1)) as url:
        endpoint = MechanismEndpoint(sampling_url=url + "/", secret=secret, shape=OutputShape(), timeout_seconds=30)
        from app.audit.engine import AuditSettings

        t0 = time.monotonic()
        result = asyncio.run(audit_endpoint(endpoint, [([1.0], [])], PureDP(1.0), AuditSettings(),
                                            http_config=SafeHttpConfig(allow_networks=("127.0.0.0/8",)),
                                            time_limit=7, on_estimate=lines.append))
        wall = time.monotonic() - t0
    assert wall <= 7 + 5
    assert lines and "would take about" in lines[0]
    assert "8,192,000 outputs" in lines[0]  # the budget asked for: 2 databases × 4,096,000
    assert not result.refuted and result.power
    report = format_report(result)
    assert "Power:" in report and json.dumps(result.settings["rate"])


def test_a_sampler_whose_rate_was_never_measured_draws_in_one_request():
    """When the rate measurement fails (the first database is one the endpoint cannot answer), the
    search goes on with an unmeasured rate: requests are not sliced (no OverflowError from inf)."""
    import asyncio

    from app.sampling.timing import TimedSampler

    calls: list[int] = []

    async def sampler(database, n):  # noqa: ANN001, ANN202
        calls.append(n)
        return [0.0] * n

    timed = TimedSampler(sampler, rate=float("inf"))
    out = asyncio.run(timed(["x"], 1234))
    assert len(out) == 1234 and calls == [1234]
