"""The ticker and the leases: how each process takes its share of the work."""

from __future__ import annotations

from fastapi import FastAPI

from app.settings import Settings


def attach_worker(app: FastAPI, settings: Settings) -> None:
    """Run a :class:`~app.scheduler.worker.Worker` inside the app's lifespan (``dpwatch serve``)."""
    from app.scheduler.worker import Worker

    async def start(app: FastAPI) -> None:
        factory = app.state.session_factory
        if app.state.timeouts_at_connect:
            # The API's engine bounds every statement by the requests' timeouts (app.main); the
            # worker's statements are not, as with `dpwatch worker`: its own engine.
            from app.db import make_engine, make_session_factory

            app.state.worker_engine = make_engine(settings.database_url, ping_after_idle=1.0)
            factory = make_session_factory(app.state.worker_engine)
        worker = Worker(settings, factory)
        await worker.start()
        app.state.worker = worker

    async def stop(app: FastAPI) -> None:
        worker = getattr(app.state, "worker", None)
        if worker is not None:
            await worker.stop()
        engine = getattr(app.state, "worker_engine", None)
        if engine is not None:
            engine.dispose()
            app.state.worker_engine = None

    app.state.on_startup_hooks.append(start)
    app.state.on_shutdown_hooks.append(stop)
