"""Faults on Postgres with real worker processes:

- a worker SIGKILLed in the middle of a period, beside a second worker: no period is lost or
  counted twice (seq and t contiguous per monitor, one detector step per period, one row per slot);
- a webhook receiver that is down, then back: the alarm's webhook is retried and delivered once it
  is up, with a valid signature.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid

import pytest
from fastapi import FastAPI, Request, Response
from sqlalchemy import func, select
from standardwebhooks import Webhook

from app.models.alarms import WebhookAttempt, WebhookMessage
from app.models.monitors import Check, Monitor, PeriodRun
from app.reference.mechanisms import Laplace
from app.reference.server import endpoint_router
from app.settings import Settings
from tests.support.api_helpers import create_webhook, record_period
from tests.support.sampling_server import ASGIThread, serve_app
from tests.worker.test_workers_postgres import SECRET, _stop, _wait, _worker, api, pg  # noqa: F401

pytestmark = pytest.mark.postgres

CHECK = {"event": {"kind": "interval", "high": 0.0}}


def _gated_endpoint(gate: dict) -> FastAPI:
    """Laplace on a sum. Period 3 of the monitor whose databases have two entries waits at the gate."""
    laplace = Laplace(epsilon=1.0)

    def sample(database, n, rng, period=0):
        if len(database) == 2 and period == 3 and not gate["arrived"].is_set():
            gate["arrived"].set()
            gate["release"].wait(30)
        return laplace.sample(database, n, rng)

    app = FastAPI()
    app.include_router(endpoint_router({"/laplace": (sample, "real")}, secret=SECRET))
    return app


def test_sigkill_of_one_of_two_workers_mid_period_loses_and_doubles_nothing(pg, api):  # noqa: F811
    url, factory = pg
    gate = {"arrived": threading.Event(), "release": threading.Event()}
    with serve_app(_gated_endpoint(gate)) as base:
        mech = api.post("/v1/mechanisms", json={"name": "laplace", "sampling_url": f"{base}/laplace",
                                                "output_kind": "real", "secret": SECRET, "timeout_seconds": 20})
        assert mech.status_code == 201, mech.text
        ids = []
        for i in range(6):
            x, xp = ([0.0, 0.0], [0.0, 1.0]) if i == 0 else ([0.0], [1.0])
            mon = api.post("/v1/monitors", json={
                "name": f"m{i}", "mechanism_id": mech.json()["id"], "epsilon": 1.0, "horizon": 200,
                "samples_per_period": 100, "period_seconds": 1, "checks": [{"x": x, "x_prime": xp, **CHECK}]})
            assert mon.status_code == 201, mon.text
            ids.append(uuid.UUID(mon.json()["id"]))
        gated = ids[0]
        workers = {"w1": _worker(url, "w1", lease_seconds=3), "w2": _worker(url, "w2", lease_seconds=3)}
        try:
            assert gate["arrived"].wait(30), "period 3 of the gated monitor never started"
            with factory() as session:
                victim = session.get(Monitor, gated).lease_owner
            assert victim in workers
            _stop(workers[victim], signal.SIGKILL)  # while it samples period 3
            survivor = next(w for w in workers if w != victim)
            with factory() as session:  # nothing of period 3 was written: the lease is all that is left
                m = session.get(Monitor, gated)
                assert (m.t, m.lease_owner) == (2, victim)
                assert session.scalar(select(func.count()).select_from(PeriodRun)
                                      .where(PeriodRun.monitor_id == gated)) == 2
                assert session.scalars(select(Check).where(Check.monitor_id == gated)).one().detector_state["t"] == 2

            def redone() -> bool:  # the survivor takes over once the lease expires
                with factory() as session:
                    return session.get(Monitor, gated).t >= 4
            assert _wait(redone, 25), "the surviving worker did not take over the gated monitor"
        finally:
            gate["release"].set()
            errors = {name: _stop(proc) for name, proc in workers.items()}
    with factory() as session:
        runs = session.scalars(select(PeriodRun)).all()
        assert runs and all(r.status == "ok" for r in runs), errors
        for mid in ids:
            monitor = session.get(Monitor, mid)
            mine = [r for r in runs if r.monitor_id == mid]
            assert sorted(r.seq for r in mine) == list(range(1, len(mine) + 1)), mid  # contiguous, no duplicate
            assert sorted(r.t for r in mine) == list(range(1, monitor.t + 1)), mid  # no period lost or doubled
            assert len({r.scheduled_for for r in mine}) == len(mine)  # one row per slot
            check = session.scalars(select(Check).where(Check.monitor_id == mid)).one()
            assert check.detector_state["t"] == monitor.t  # one detector step per period
        third = next(r for r in runs if r.monitor_id == gated and r.t == 3)
        assert third.worker_id == survivor  # the killed worker's period 3 was redone by the other, once
        assert monitor.lease_owner in (None, survivor)


def test_a_webhook_receiver_down_then_back_gets_the_alarm_once_signed(pg, api):  # noqa: F811
    url, factory = pg
    received: list[dict] = []
    receiver = FastAPI()
    # Its port is bound but not listening until start(): connections are refused, the receiver is down.
    server = ASGIThread(receiver)
    hook = create_webhook(api, url=f"{server.base_url}/hooks", event_types=["alarm.firing"])
    mech = api.post("/v1/mechanisms", json={"name": "m", "sampling_url": "http://127.0.0.1:9/x", "output_kind": "real",
                                            "secret": SECRET})
    mon = api.post("/v1/monitors", json={
        "name": "m", "mechanism_id": mech.json()["id"], "epsilon": 1.0, "horizon": 100, "samples_per_period": 100,
        "period_seconds": 3600, "checks": [{"x": [0.0], "x_prime": [1.0], **CHECK}]})
    assert mon.status_code == 201, mon.text
    with factory() as session:  # the period that raises the alarm, written as the runner writes it
        record_period(session, mon.json()["id"], statistic=50.0,
                      settings=Settings(_env_file=None, public_url="http://dpwatch.test"))  # type: ignore[call-arg]
        session.commit()
        message = session.scalars(select(WebhookMessage)).one()

    @receiver.post("/hooks")
    async def hooks(request: Request) -> Response:
        body = await request.body()
        Webhook(hook["secret"]).verify(body, dict(request.headers))  # raises (500) if the signature is bad
        received.append({"id": request.headers["webhook-id"], "body": json.loads(body)})
        return Response(status_code=204)

    worker = _worker(url, "deliverer")
    try:
        def tried() -> bool:
            with factory() as session:
                return session.scalar(select(func.count()).select_from(WebhookAttempt)) >= 1
        assert _wait(tried, 20), "the deliverer never tried"
        with factory() as session:
            attempt = session.scalars(select(WebhookAttempt)).one()
            assert attempt.status_code is None and attempt.error  # connection refused
            assert session.get(WebhookMessage, message.id).status == "pending"  # kept for a retry
        server.start()  # back up; the retry comes about 5 s (±20%) after the first try

        def delivered() -> bool:
            with factory() as session:
                return session.get(WebhookMessage, message.id).status == "delivered"
        assert _wait(delivered, 15), "not delivered after the receiver came back"
        time.sleep(1.0)  # a second copy would arrive now
    finally:
        errors = _stop(worker)
        if server.server.started:
            server.stop()
    assert len(received) == 1, (received, errors)
    assert received[0]["id"] == str(message.id) and received[0]["body"]["type"] == "alarm.firing"
    with factory() as session:
        attempts = session.scalars(select(WebhookAttempt).order_by(WebhookAttempt.attempted_at)).all()
        assert [a.status_code for a in attempts] == [None, 204], attempts
