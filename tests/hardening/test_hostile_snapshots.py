"""An alarm's snapshot on a busy machine: its fresh samples get a deadline
that follows their number, and a transient failure is tried again, so the alarm does not arrive
without its evidence because of a deadline fixed in seconds."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest

from app.sampling.client import MechanismEndpoint
from app.sampling.protocol import SamplingError, generate_secret
from app.snapshots import runner as snapshot_runner
from app.snapshots.runner import SnapshotPlan, SnapshotRunner


class _FlakyClient:
    """Times out on its first ``failures`` calls, then draws zeros; records each call's deadline."""

    def __init__(self, failures: int, reason: str = "timeout") -> None:
        self.failures = failures
        self.reason = reason
        self.deadlines: list[float | None] = []

    async def sample(self, endpoint, database, n, **kwargs):  # noqa: ANN001, ANN003, ANN201
        self.deadlines.append(kwargs.get("deadline_seconds"))
        if self.failures > 0:
            self.failures -= 1
            raise SamplingError(self.reason, "total deadline of 5.48882s exceeded calling …/reference/scenarios/d")
        return np.zeros(n)


def _plan(extra: int) -> SnapshotPlan:
    endpoint = MechanismEndpoint(sampling_url="https://mechanism.example.org/", secret=generate_secret())
    pair = {"label": {"position": 0}, "x_key": "x", "xp_key": "xp", "x_series": [], "xp_series": []}
    return SnapshotPlan(uuid.uuid4(), uuid.uuid4(), 1.0, 0.05, extra, "real", endpoint, 7, [pair],
                        {"x": [0], "xp": [1]})


def _runner(client: _FlakyClient) -> SnapshotRunner:
    return SnapshotRunner(session_factory=None, client=client, settings=None)  # type: ignore[arg-type]


def test_a_transient_failure_of_the_fresh_samples_is_tried_again() -> None:
    client = _FlakyClient(failures=1)
    pairs = asyncio.run(_runner(client).gather(_plan(50_000)))
    assert len(pairs) == 1 and len(pairs[0].bound_x) == 25_000
    assert len(client.deadlines) == 4  # two databases, twice


def test_the_deadline_follows_the_number_of_outputs() -> None:
    client = _FlakyClient(failures=0)
    asyncio.run(_runner(client).gather(_plan(50_000)))
    small, large = snapshot_runner.sampling_deadline(1_000, 2), snapshot_runner.sampling_deadline(50_000, 2)
    assert client.deadlines == [large, large] and large > small >= 20
    assert large == pytest.approx(120.0)  # 20 s + 1 ms per output
    cap = snapshot_runner.SAMPLING_SHARE_OF_LEASE * snapshot_runner.SNAPSHOT_LEASE_SECONDS
    assert snapshot_runner.sampling_deadline(10_000_000, 2) == cap


def test_a_refusal_is_not_tried_again() -> None:
    client = _FlakyClient(failures=1, reason="wrong_type")
    with pytest.raises(SamplingError):
        asyncio.run(_runner(client).gather(_plan(1_000)))
    assert len(client.deadlines) == 2
