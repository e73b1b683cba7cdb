# ruff: noqa: F811  (fixtures imported from tests/test_engine.py are parameters of the tests)
"""Jobs in child processes: a job over its memory or CPU limit, a job that never yields, a job whose
process dies, and a cancel, each leave the worker's loop free and end with their reason; fair claims
across tenants. Both database backends (the jobs' children connect on their own, so the database
is committed to, as with real workers)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
from sqlalchemy import update

from app.jobs.runner import JobRunner, job_sampling_client
from app.jobs.service import cancel_job, enqueue_job
from app.models.jobs import Job
from tests.monitors.test_engine import arun, engine_settings, session_factory  # noqa: F401, F811  (fixtures)
from tests.support import job_handlers


@pytest.fixture
def two_tenants(db):
    from app.auth.service import create_tenant_with_key

    with db() as session:
        return [create_tenant_with_key(session, name, f"{name}-key")[0].id for name in ("acme", "globex")]


def _enqueue(db, tenant_id: uuid.UUID, n: int = 1) -> list[uuid.UUID]:
    with db() as session:
        return [enqueue_job(session, tenant_id, "search", {"budget": 20_000}).id for _ in range(n)]


def _job(db, job_id: uuid.UUID) -> Job:
    with db() as session:
        job = session.get(Job, job_id)
        session.expunge(job)
        return job


def _runner(session_factory, settings, handler, **overrides) -> JobRunner:
    s = settings.model_copy(update={"job_isolation": "process", "job_lease_seconds": 6, **overrides})
    return JobRunner(session_factory, job_sampling_client(s), s, handlers={"search": handler})


async def _run_watching_the_loop(runner: JobRunner, job_id: uuid.UUID, during=None) -> tuple[str, float]:
    """Run the job and measure the loop's longest stall meanwhile (a 20 ms ticker)."""
    stall = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.02)
            now = time.perf_counter()
            stall = max(stall, now - last - 0.02)
            last = now

    watch = asyncio.create_task(ticker())
    extra = asyncio.create_task(during()) if during is not None else None
    try:
        state = await runner.run(job_id)
    finally:
        done.set()
        await watch
        if extra is not None:
            await extra
        await runner.client.aclose()
    return state, stall


def test_a_job_that_never_yields_leaves_the_loop_free_keeps_its_lease_and_is_cancelled_within_seconds(
        db, two_tenants, session_factory, engine_settings, arun):
    [job_id] = _enqueue(db, two_tenants[0])
    runner = _runner(session_factory, engine_settings, job_handlers.spin, job_lease_seconds=3)
    other = JobRunner(session_factory, None, engine_settings.model_copy(update={"worker_id": "other"}),  # type: ignore[arg-type]
                      handlers={})
    assert runner.claim(1) == [job_id]
    asked: dict[str, float] = {}

    async def cancel_later() -> None:
        await asyncio.sleep(4.0)  # the child spins meanwhile, past its 3 s lease
        asked["taken by another worker"] = await asyncio.to_thread(other.claim, 1)  # type: ignore[assignment]

        def ask() -> None:
            with db() as session:
                cancel_job(session, session.get(Job, job_id))
        await asyncio.to_thread(ask)
        asked["at"] = time.perf_counter()

    state, stall = arun(_run_watching_the_loop(runner, job_id, cancel_later))
    took = time.perf_counter() - asked["at"]
    job = _job(db, job_id)
    assert asked["taken by another worker"] == []  # the lease was renewed while the child spun
    assert state == "cancelled" and job.state == "cancelled" and job.failure_reason == "cancelled"
    assert took < 10, f"the cancel took {took:.1f} s"
    assert stall < 0.5, f"the worker's loop stalled {stall:.2f} s while the job spun"


@pytest.mark.parametrize("backend", ["sqlite"])  # the limit is the process's; the database plays no part
def test_a_job_over_its_memory_limit_fails_with_that_reason_and_is_not_retried(
        db, two_tenants, session_factory, engine_settings, arun):
    [job_id] = _enqueue(db, two_tenants[0])
    runner = _runner(session_factory, engine_settings, job_handlers.hog_memory, job_memory_mb=450)
    assert runner.claim(1) == [job_id]
    state, stall = arun(_run_watching_the_loop(runner, job_id))
    job = _job(db, job_id)
    assert state == "failed" and job.state == "failed" and job.failure_reason == "memory limit", job.error
    assert job.attempts == 1 and runner.claim(1) == []  # finished: nothing to take again
    assert stall < 0.5


@pytest.mark.parametrize("backend", ["sqlite"])  # the limit is the process's; the database plays no part
def test_a_job_over_its_cpu_time_ends_with_time_limit(db, two_tenants, session_factory, engine_settings, arun):
    [job_id] = _enqueue(db, two_tenants[0])
    runner = _runner(session_factory, engine_settings, job_handlers.spin, job_cpu_seconds=1)
    assert runner.claim(1) == [job_id]
    state, _ = arun(_run_watching_the_loop(runner, job_id))
    job = _job(db, job_id)
    assert state == "failed" and job.failure_reason == "time limit", job.error


@pytest.mark.parametrize("backend", ["postgres"])  # the limits' tests run on SQLite
def test_a_job_whose_process_dies_is_tried_again_then_fails_as_crashed(
        db, two_tenants, session_factory, engine_settings, arun):
    [job_id] = _enqueue(db, two_tenants[0])
    with db() as session:
        session.execute(update(Job).where(Job.id == job_id).values(max_attempts=2))
    runner = _runner(session_factory, engine_settings, job_handlers.die)
    states = []
    for _ in range(3):
        claimed = runner.claim(1)
        if not claimed:
            break
        states.append(arun(_run_watching_the_loop(_runner(session_factory, engine_settings, job_handlers.die),
                                                  job_id))[0])
    job = _job(db, job_id)
    assert states == ["queued", "failed"], states
    assert job.state == "failed" and job.failure_reason == "crashed" and job.attempts == 2


def test_a_job_runs_in_another_process_and_succeeds(db, two_tenants, session_factory, engine_settings, arun):
    [job_id] = _enqueue(db, two_tenants[0])
    runner = _runner(session_factory, engine_settings, job_handlers.quick)
    assert runner.claim(1) == [job_id]
    state, _ = arun(_run_watching_the_loop(runner, job_id))
    job = _job(db, job_id)
    assert state == "succeeded" and job.failure_reason is None and job.progress == 1.0
    assert job.result["pid"] != os.getpid() and job.result["tenant"] == str(two_tenants[0])


def test_claims_take_turns_across_tenants_within_each_tenants_quota(db, two_tenants, session_factory,
                                                                   engine_settings):
    a, b = two_tenants
    a_jobs = _enqueue(db, a, 6)  # older
    [b_job] = _enqueue(db, b)
    runner = JobRunner(session_factory, None, engine_settings.model_copy(update={"quota_max_concurrent_jobs": 2}),  # type: ignore[arg-type]
                       handlers={})
    first = runner.claim(2)
    assert set(first) == {a_jobs[0], b_job}  # one each, not A's two oldest
    second = runner.claim(5)
    assert second == [a_jobs[1]]  # A reaches its quota of 2 running; the rest wait
    assert runner.claim(5) == []


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_worker_without_jobs_and_a_job_runner_tick_what_their_roles_say(session_factory, engine_settings, arun):
    from app.scheduler.worker import Worker

    async def ticks(worker: Worker) -> set[str]:
        await worker.start()
        try:
            return {job.id for job in worker._scheduler.get_jobs()}  # type: ignore[union-attr]
        finally:
            await worker.stop()

    no_jobs = engine_settings.model_copy(update={"worker_runs_jobs": False})
    assert arun(ticks(Worker(no_jobs, session_factory))) == {"periods", "outbox", "calibration", "snapshots",
                                                            "retention"}
    assert arun(ticks(Worker(engine_settings, session_factory, roles=("jobs",)))) == {"jobs"}
    assert "jobs" in arun(ticks(Worker(engine_settings, session_factory)))
    with pytest.raises(ValueError, match="roles"):
        Worker(engine_settings, session_factory, roles=("sampling",))
