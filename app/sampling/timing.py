"""Time, not just outputs: an endpoint's rate, the time a budget will take, and draws that end on
time (docs/audit.md §10, docs/search.md §2).

- :func:`measure_rate` times two small draws (a warm-up of ``first`` outputs, then one sized to
  take about ``target_seconds`` at the warm-up's pace) and fits ``t(n) = latency + n/rate``: the
  endpoint's throughput in outputs per second, measured in at most a few seconds.
- :class:`TimedSampler` wraps a sampler: a call for n outputs is split into requests that each
  take about ``slice_seconds`` at the measured rate (so that no single request outlives the time
  limit by much), the rate is kept up to date from every request, and once the **hard deadline**
  has passed it raises :class:`DeadlineReached` between two requests, which the audit engine and
  the search treat as "stop here and report what was tested" (never as a failing input).
- :func:`endpoint_rate` measures an HTTP endpoint loading only the sampling client, so that the
  commands print their estimate before they load the statistics; :func:`limit_left` takes the
  command's own start-up off its ``--time-limit``.
- :func:`format_duration` and :func:`budget_estimate` are the words the CLI prints.

Nothing here knows about statistics: splitting a draw into requests changes no output's
distribution (each output is an independent draw of the mechanism).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeadlineReached", "RateMeasurement", "RequestTimedOut", "TimedSampler", "budget_estimate", "endpoint_rate",
           "format_duration", "limit_left", "measure_rate", "seconds_since_process_start"]

Sampler = Callable[[Any, int], Awaitable[Any]]


class DeadlineReached(Exception):
    """The time limit passed: stop drawing and report what was tested."""


class RequestTimedOut(DeadlineReached):
    """A request timed out after its retries: the endpoint is too slow for now. The run stops
    drawing and reports what it tested; the input is not a failing input (it was not refused)."""


@dataclass
class RateMeasurement:
    """Outputs per second (throughput), the fixed cost of a request (latency) and what was drawn."""

    rate: float
    latency: float
    outputs: int
    seconds: float

    def seconds_for(self, outputs: int, request_size: int | None = None) -> float:
        """The time ``outputs`` will take, in requests of ``request_size`` (default: about 2 s each)."""
        size = request_size or max(1, int(self.rate * 2))
        return outputs / self.rate + math.ceil(outputs / size) * self.latency

    def to_dict(self) -> dict[str, float]:
        return {"outputs_per_second": round(self.rate, 1), "latency_seconds": round(self.latency, 4),
                "outputs": self.outputs, "seconds": round(self.seconds, 3)}


async def measure_rate(sampler: Sampler, database: Any, *, first: int = 50, target_seconds: float = 0.5,
                       max_outputs: int = 200_000) -> RateMeasurement:
    """Time ``first`` outputs, then draws sized to about ``target_seconds`` at the pace seen so far
    (at most three in all, and about 2·target_seconds of drawing): the rate is the throughput of
    the last, largest draw, request overhead included (so it errs low: a run sized to it ends
    early rather than late); the latency is what the first draw took beyond that."""
    t0 = time.monotonic()
    await sampler(database, first)
    t1 = time.monotonic() - t0
    total_n, total_t = first, t1
    n, t = first, t1
    for _ in range(2):
        if total_t >= 2 * target_seconds or t >= target_seconds / 2 and n > first:
            break
        pace = n / max(t, 1e-6)
        n = int(min(max_outputs, max(2 * first, pace * target_seconds)))
        t0 = time.monotonic()
        await sampler(database, n)
        t = time.monotonic() - t0
        total_n += n
        total_t += t
    rate = n / max(t, 1e-6)
    latency = max(0.0, t1 - first / rate)
    return RateMeasurement(rate=max(rate, 1e-3), latency=latency, outputs=total_n, seconds=total_t)


@dataclass
class TimedSampler:
    """``await sampler(db, n)`` in requests of about ``slice_seconds``, with a hard deadline."""

    sampler: Sampler
    rate: float
    deadline: float | None = None  # time.monotonic() value
    slice_seconds: float = 2.0
    min_request: int = 50
    outputs: int = 0
    seconds: float = 0.0
    requests: int = field(default=0)

    def request_size(self) -> int:
        if not math.isfinite(self.rate):  # not measured (the measurement failed): one request for all
            return 2**62
        return max(self.min_request, int(self.rate * self.slice_seconds))

    async def __call__(self, database: Any, n: int) -> Any:
        from app.stats.shapes import concat_outputs

        parts = []
        left = n
        while left > 0:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise DeadlineReached("the time limit passed")
            size = min(left, self.request_size())
            t0 = time.monotonic()
            try:
                out = await self.sampler(database, size)
            except Exception as exc:
                if getattr(exc, "reason", None) == "timeout":  # our request timed out: not the input's fault
                    raise RequestTimedOut(f"a request for {size:,} outputs timed out: {exc}") from None
                raise
            dt = time.monotonic() - t0
            self.requests += 1
            self.outputs += size
            self.seconds += dt
            if dt > 0:  # a running mean of the throughput, weighted towards recent requests
                self.rate = 0.7 * self.rate + 0.3 * (size / dt)
            parts.append(out)
            left -= size
        return parts[0] if len(parts) == 1 else concat_outputs(parts)


def seconds_since_process_start() -> float:
    """Wall seconds since this process started (Linux: /proc; elsewhere 0), so that a command's
    ``--time-limit`` also covers its own start-up (imports take seconds on a loaded machine)."""
    try:
        import os

        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def limit_left(time_limit: float | None) -> float | None:
    """What is left of a command's ``--time-limit`` after its start-up (at least a second)."""
    if time_limit is None:
        return None
    return max(1.0, time_limit - seconds_since_process_start())


async def endpoint_rate(url: str, secret: str, shape: Any, database: Any, *, max_batch: int, binary: bool,
                        http_config: Any) -> RateMeasurement:
    """:func:`measure_rate` on an HTTP endpoint with a declared shape, loading only the sampling
    client: the commands call it before they load the statistics, so that the time estimate is
    printed within seconds of the start."""
    from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig

    endpoint = MechanismEndpoint(sampling_url=url, secret=secret, max_batch=max_batch, timeout_seconds=60,
                                 prefer_binary=binary, shape=shape)
    async with SamplingClient(config=SamplingClientConfig(deadline_seconds=30), http_config=http_config) as client:
        counter = {"i": 0}

        async def sample(db: Any, n: int) -> Any:
            counter["i"] += 1
            return await client.sample(endpoint, db, n, monitor_id="rate", period=0,
                                       request_id_prefix=f"rate-{counter['i']}")

        return await measure_rate(sample, database)


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 11 min``, ``3.2 days``."""
    if not math.isfinite(seconds):
        return "unknown"
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    if s < 86_400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"
    return f"{s / 86_400:.1f} days"


def budget_estimate(measured: RateMeasurement, budget: int, time_limit: float | None, *, usable: float) -> str:
    """One line: the rate, how long the budget will take, and what a time limit leaves."""
    line = (f"endpoint rate: {measured.rate:,.0f} outputs/s (measured on {measured.outputs:,} outputs in "
            f"{measured.seconds:.1f} s); the budget of {budget:,} outputs would take about "
            f"{format_duration(measured.seconds_for(budget))}")
    if time_limit is not None:
        line += (f"; the time limit of {format_duration(time_limit)} allows about {int(usable):,} outputs, "
                 f"so the run is sized to those")
    return line
