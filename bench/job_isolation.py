"""Job isolation: one tenant's heavy searches beside another tenant's monitors and jobs, two
`dpwatch worker` processes on Postgres (docs/hardening.md "Jobs in processes of their own").

What runs (all on 127.0.0.1, each a separate process group):

- a sampling server (this script with ``--serve``): ``/healthy`` answers Laplace samples at once;
  ``/vector`` reads a database of vector records and answers their sum plus Laplace noise;
  ``/empty-returns-zero`` and ``/laplace-sum`` are the search corpus's mechanisms (a bug found in
  seconds, and a correct one);
- 2 workers (``python -m app.cli worker``) with the default settings (jobs in child processes, two
  jobs per worker, two running jobs per tenant) but ``DPWATCH_JOB_MEMORY_MB`` = ``--job-memory-mb``
  (512 by default, so that the hostile search reaches it within the window);
- this script: a fresh Postgres database, tenant "heavy" (A) and tenant "victim" (B) with 4 monitors
  on ``/healthy`` (period 1 s, n = 200 per side, one check).

Phases:

1. **hostile search**: A posts the issue's search (``vector`` records of dimension 256, 1 to
   10,000 records, add/remove neighbours, ε = 0.5) on ``/vector``. For ``--duration`` seconds
   (after ``--warmup``) B's periods whose slot lies in the window are counted against the slots;
   the peak resident size of every process of the workers' trees (workers, fork servers, job
   children) is sampled every 0.5 s. The job's end (state, failure_reason, attempts) is read after
   the window, and once more ``--settle`` seconds later (not retried forever).
2. **cancel**: A posts the second hostile domain of the issue (1,000 categories of 1 KB); 4 s after
   it is running, it is cancelled; the time until its state is ``cancelled`` is measured.
3. **fair shares**: A queues ``--large`` searches of ``/laplace-sum`` (budget 20 M each), then B
   queues a small search of ``/empty-returns-zero`` (budget 200,000); B's wait until its search
   has succeeded is measured. A's searches are cancelled afterwards.

    .venv/bin/python bench/job_isolation.py [--warmup 10] [--duration 90] [--large 10]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from service_harness import DPWATCH, PG, Procs, free_port, say, scratch_service, wait_port, worker_env  # noqa: E402

HOSTILE_VECTOR = {"claim": {"epsilon": 0.5}, "domain": {"records": {"type": "vector", "dim": 256},
                                                         "size": {"min": 1, "max": 10000}, "neighbours": ["add_remove"]}}
HOSTILE_CATEGORIES = {"claim": {"epsilon": 0.5}, "domain": {
    "records": {"type": "category", "values": [f"{i:04d}" + "x" * 1020 for i in range(1000)]},
    "size": {"min": 1, "max": 10000}, "neighbours": ["add_remove"]}}


def serve(port: int) -> None:
    import numpy as np
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from app.reference.search_corpus import search_corpus

    corpus = search_corpus()
    rng = np.random.default_rng()

    def answer(values) -> Response:  # noqa: ANN001
        return Response(json.dumps({"samples": [float(v) for v in values]}), media_type="application/json")

    async def healthy(request: Request) -> Response:
        n = int(json.loads(await request.body())["n"])
        return answer(rng.laplace(0.0, 1.0, n))

    async def vector(request: Request) -> Response:
        body = json.loads(await request.body())
        database = body.get("database") or []
        total = 0.0
        for record in database:
            total += float(sum(record)) if isinstance(record, list) else float(len(str(record)) > 0)
        return answer(total + rng.laplace(0.0, 2.0, int(body["n"])))

    def corpus_route(name: str):  # noqa: ANN202
        async def route(request: Request) -> Response:
            body = json.loads(await request.body())
            return answer(corpus[name].sample(body.get("database"), int(body["n"]), rng))
        return route

    routes = [Route("/healthy", healthy, methods=["POST"]), Route("/vector", vector, methods=["POST"])]
    routes += [Route(f"/{name}", corpus_route(name), methods=["POST"]) for name in ("empty-returns-zero", "laplace-sum")]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ------------------------------------------------------------------------------------ set-up


def victim_monitors(session, tenant_id, mechanism_id, start: datetime) -> list:  # noqa: ANN001
    """The victim tenant's four monitors: one check, n = 200, a period of 1 s, starts spread over it."""
    from app.monitors.schemas import MonitorCreate
    from app.monitors.service import create_monitor

    return [create_monitor(session, tenant_id, MonitorCreate(
        name=f"victim-{i}", mechanism_id=mechanism_id, epsilon=1.0, horizon=10_000, samples_per_period=200,
        period_seconds=1, start_at=start + timedelta(seconds=i / 4),
        checks=[{"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": 0.0}}])).id for i in range(4)]


def setup(db_url: str, base: str, secret: str) -> dict:
    from app.auth.service import create_tenant
    from app.db import make_engine, make_session_factory
    from app.mechanisms.schemas import MechanismCreate
    from app.mechanisms.service import build_mechanism

    engine = make_engine(db_url)
    out: dict = {"monitors": []}
    start = datetime.now(UTC) + timedelta(seconds=5)
    with make_session_factory(engine)() as session:
        heavy, victim = create_tenant(session, "heavy"), create_tenant(session, "victim")
        session.flush()
        out["heavy"], out["victim"] = heavy.id, victim.id

        def mechanism(tenant, path: str):  # noqa: ANN001, ANN202
            m = build_mechanism(tenant.id, MechanismCreate(name=path, sampling_url=f"{base}/{path}", output_kind="real",
                                                           secret=secret, timeout_seconds=30))
            session.add(m)
            session.flush()
            return m.id

        out["vector"] = mechanism(heavy, "vector")
        out["laplace_sum"] = mechanism(heavy, "laplace-sum")
        out["empty"] = mechanism(victim, "empty-returns-zero")
        healthy = mechanism(victim, "healthy")
        out["monitors"] = victim_monitors(session, victim.id, healthy, start)
        session.commit()
    engine.dispose()
    return out


class Db:
    def __init__(self, url: str) -> None:
        from app.db import make_engine, make_session_factory

        self.engine = make_engine(url)
        self.factory = make_session_factory(self.engine)

    def enqueue(self, tenant_id: uuid.UUID, mechanism_id: uuid.UUID, body: dict) -> uuid.UUID:
        from app.jobs.service import enqueue_job
        from app.search.schemas import SearchRequest

        params = SearchRequest.model_validate(body).model_dump(mode="json", exclude_none=True)
        with self.factory() as session:
            job = enqueue_job(session, tenant_id, "search", params, mechanism_id=mechanism_id)
            session.commit()
            return job.id

    def job(self, job_id: uuid.UUID):  # noqa: ANN201
        from app.models.jobs import Job

        with self.factory() as session:
            job = session.get(Job, job_id)
            session.expunge(job)
            return job

    def cancel(self, job_id: uuid.UUID) -> None:
        from app.api.errors import ConflictError
        from app.jobs.service import cancel_job
        from app.models.jobs import Job

        with self.factory() as session:
            try:
                cancel_job(session, session.get(Job, job_id))
                session.commit()
            except ConflictError:
                pass

    def periods(self, monitors: list[uuid.UUID], w0: datetime, w1: datetime) -> tuple[int, int, int]:
        from sqlalchemy import select

        from app.models.monitors import PeriodRun

        with self.factory() as session:
            rows = session.execute(select(PeriodRun.monitor_id, PeriodRun.status).where(
                PeriodRun.monitor_id.in_(monitors), PeriodRun.scheduled_for >= w0,
                PeriodRun.scheduled_for < w1)).all()
        ok = [r for r in rows if r.status == "ok"]
        per = {m: sum(1 for r in ok if r.monitor_id == m) for m in monitors}
        return len(ok), min(per.values()), len(rows) - len(ok)


# ------------------------------------------------------------------------------------ watching


def descendants(pids: list[int]) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, frontier = set(pids), list(pids)
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in out:
                out.add(child)
                frontier.append(child)
    return out


def parent_of(pid: int) -> int:
    try:
        return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def rss_mb(pid: int) -> tuple[float, str]:
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text().splitlines()
        cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return 0.0, ""
    for line in status:
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024, cmd
    return 0.0, cmd


class Watch:
    def __init__(self, procs: Procs, workers: list) -> None:  # noqa: ANN001
        self.procs, self.workers = procs, workers
        self.peak: dict[int, tuple[float, str]] = {}
        self.role: dict[int, str] = {}

    def sample(self) -> None:
        self.procs.check_alive()
        worker_pids = [w.pid for w in self.workers]
        for pid in descendants(worker_pids):
            if pid not in self.role:  # a fork server is a worker's child; a job's process is the fork server's
                self.role[pid] = "worker" if pid in worker_pids else (
                    "fork server" if parent_of(pid) in worker_pids else "job child")
            mb, cmd = rss_mb(pid)
            if mb > self.peak.get(pid, (0.0, ""))[0]:
                self.peak[pid] = (mb, cmd)

    def wait(self, seconds: float, until=None) -> float:  # noqa: ANN001
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            self.sample()
            if until is not None and until():
                break
            time.sleep(0.5)
        return time.monotonic() - start

    def by_role(self) -> dict[str, float]:
        roles: dict[str, float] = {}
        for pid, (mb, _cmd) in self.peak.items():
            role = self.role.get(pid, "other")
            roles[role] = max(roles.get(role, 0.0), mb)
        return roles


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=90.0)
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--large", type=int, default=10)
    parser.add_argument("--job-memory-mb", type=int, default=512,
                        help="DPWATCH_JOB_MEMORY_MB of the workers (the hostile search passes 600 MB within 90 s)")
    parser.add_argument("--pg", default=PG)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    from app.sampling.protocol import generate_secret

    port = free_port()
    rows: list[tuple[str, str, str]] = []
    with scratch_service("job-isolation", pg=args.pg) as run:
        db_url, procs = run.db_url, run.procs
        say(f"sampling server on :{port} (logs in {run.log_dir})")
        procs.start("endpoints", [sys.executable, __file__, "--serve", str(port)], {"PYTHONUNBUFFERED": "1"})
        wait_port(port, 60, procs)
        ids = setup(db_url, f"http://127.0.0.1:{port}", generate_secret())
        db = Db(db_url)
        env = worker_env(db_url) | {"DPWATCH_JOB_MEMORY_MB": str(args.job_memory_mb)}
        workers = [procs.start(f"worker-{i}", [*DPWATCH, "worker"], env | {"DPWATCH_WORKER_ID": f"jobiso-{i}"})
                   for i in (1, 2)]
        watch = Watch(procs, workers)
        say(f"2 workers started; warm-up {args.warmup:g} s")
        watch.wait(args.warmup)

        # 1. the hostile search
        hostile = db.enqueue(ids["heavy"], ids["vector"], HOSTILE_VECTOR)
        say("hostile search queued (vector dim 256, up to 10,000 records)")
        w0 = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        watch.wait((w0 - datetime.now(UTC)).total_seconds() + args.duration)
        w1 = w0 + timedelta(seconds=int(args.duration))
        watch.wait(3.0)
        kept, worst, failed = db.periods(ids["monitors"], w0, w1)
        expected = 4 * int(args.duration)
        job = db.job(hostile)
        rows.append(("victim's periods during the hostile search", f"{kept}/{expected} = {kept / expected:.1%} "
                     f"(worst monitor {worst}/{int(args.duration)}, {failed} failed)", "≥ 95%"))
        rows.append(("hostile search after the window", f"{job.state}, failure_reason {job.failure_reason}, "
                     f"attempts {job.attempts}", ""))
        if job.state in ("queued", "running"):
            t0 = time.monotonic()
            db.cancel(hostile)
            took = watch.wait(30, until=lambda: db.job(hostile).state in ("cancelled", "failed", "succeeded"))
            rows.append(("cancel of the hostile search", f"{took:.1f} s → {db.job(hostile).state}", "< 10 s"))
        watch.wait(args.settle)
        job = db.job(hostile)
        rows.append((f"hostile search {args.settle:g} s later", f"{job.state}, failure_reason {job.failure_reason}, "
                     f"attempts {job.attempts}/{job.max_attempts}: {(job.error or '')[:80]}", "not retried forever"))

        # 2. cancel a running hostile search (1,000 categories of 1 KB)
        second = db.enqueue(ids["heavy"], ids["vector"], HOSTILE_CATEGORIES)
        watch.wait(60, until=lambda: db.job(second).state != "queued")
        watch.wait(4.0)
        before = db.job(second)
        t0 = time.monotonic()
        db.cancel(second)
        took = watch.wait(60, until=lambda: db.job(second).state in ("cancelled", "failed", "succeeded"))
        after = db.job(second)
        rows.append(("cancel of a running search (1,000 categories of 1 KB)",
                     f"{took:.1f} s (was {before.state}, now {after.state}, {after.failure_reason})", "< 10 s"))

        # 3. fair shares: A's large searches, then B's small one
        from app.reference.search_corpus import search_corpus

        corpus = search_corpus()
        large = [db.enqueue(ids["heavy"], ids["laplace_sum"], {"claim": {"epsilon": 1.0}, "budget": 20_000_000, "seed": i,
                                                                "domain": corpus["laplace-sum"].domain})
                 for i in range(args.large)]
        time.sleep(0.5)
        small = db.enqueue(ids["victim"], ids["empty"], {"claim": {"epsilon": 1.0}, "budget": 200_000, "candidates": 40,
                                                          "domain": corpus["empty-returns-zero"].domain})
        t0 = time.monotonic()
        watch.wait(180, until=lambda: db.job(small).state in ("succeeded", "failed", "cancelled"))
        waited = time.monotonic() - t0
        job = db.job(small)
        running_a = sum(1 for j in large if db.job(j).state == "running")
        rows.append((f"victim's small search beside {args.large} large searches of the heavy tenant",
                     f"{job.state} in {waited:.1f} s (certified: {(job.result or {}).get('certified')}); heavy tenant "
                     f"running {running_a} of {args.large}", "≤ 60 s"))
        for j in large:
            db.cancel(j)
        watch.wait(5)
        roles = watch.by_role()
        rows.append(("peak resident size (VmHWM), per role", ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(roles.items())),
                     "< 1024 MB"))
        db.engine.dispose()
    print(f"\nJob isolation: 2 workers (default settings but DPWATCH_JOB_MEMORY_MB={args.job_memory_mb}), the victim's "
          f"4 monitors (period 1 s, n = 200), window {args.duration:g} s after {args.warmup:g} s; "
          f"load average at the end: {os.getloadavg()[0]:.1f}\n")
    print("| measure | value | goal |")
    print("|---|---|---|")
    for name, value, goal in rows:
        print(f"| {name} | {value} | {goal} |")


if __name__ == "__main__":
    main()
