"""A period dropped because the monitor was paused, resumed or reset while it sampled gives its
lease back at once: the monitor is not left leased, and so stalled, until the
lease expires (``lease_seconds``, 60 s by default)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.models.monitors import PeriodRun
from tests.monitors.test_engine import (  # noqa: F401 - fixtures
    _monitor,
    arun,
    engine_settings,
    make_monitor,
    make_worker,
    mechanism_server,
    run_ticks,
    session_factory,
)


@pytest.mark.parametrize("action", ["pause-resume", "reset", "pause"])
def test_a_period_dropped_mid_sampling_releases_its_lease(action, client, db, mechanism_server, make_worker,  # noqa: F811
                                                          arun, monkeypatch) -> None:  # noqa: F811, ANN001
    base, secret = mechanism_server
    mon = make_monitor(client, base, "/laplace", secret)
    worker, clock = make_worker(lease_seconds=300)
    arun(run_ticks(worker, clock, 1))  # the first period detects the output contract: the next is routine
    original = worker.runner.sample

    async def sample_then_change(plan, *args):  # noqa: ANN001, ANN002, ANN202
        outputs = await original(plan, *args)
        if action in ("pause-resume", "pause"):
            assert client.post(f"/v1/monitors/{mon['id']}/pause").status_code == 200
        if action == "pause-resume":  # resumed a second later: the next slot is the one after the plan's
            monkeypatch.setattr("app.monitors.service.utcnow", lambda: clock.now + timedelta(seconds=1))
            assert client.post(f"/v1/monitors/{mon['id']}/resume").status_code == 200
        if action == "reset":
            assert client.post(f"/v1/monitors/{mon['id']}/reset").status_code == 200
        return outputs

    monkeypatch.setattr(worker.runner, "sample", sample_then_change)
    claimed_at = clock.now
    arun(worker.tick_periods())
    arun(worker.drain())
    m = _monitor(db, mon["id"])
    with db() as session:
        assert len(session.scalars(select(PeriodRun).where(PeriodRun.monitor_id == m.id)).all()) == 1  # dropped
    assert (m.lease_owner, m.lease_expires_at) == (None, None)  # the lease is given back
    if action == "pause":
        return
    monkeypatch.setattr(worker.runner, "sample", original)
    # The next slot, well inside the old lease: the monitor is claimed and runs.
    clock.now = max(clock.now, m.next_run_at) + timedelta(seconds=1)
    assert clock.now < claimed_at + timedelta(seconds=worker.settings.lease_seconds)
    arun(worker.tick_periods())
    arun(worker.drain())
    m = _monitor(db, mon["id"])
    assert m.t == (1 if action == "reset" else 2) and m.lease_owner is None
