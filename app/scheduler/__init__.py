"""The ticker and the leases: how each process takes its share of the work."""

from __future__ import annotations

from fastapi import FastAPI

from app.settings import Settings


def attach_worker(app: FastAPI, settings: Settings) -> None:
    """Run a :class:`~app.scheduler.worker.Worker` inside the app's lifespan (``dpwatch serve``)."""
    from app.scheduler.worker import Worker

    async def start(app: FastAPI) -> None:
        worker = Worker(settings, app.state.session_factory)
        await worker.start()
        app.state.worker = worker

    async def stop(app: FastAPI) -> None:
        worker = getattr(app.state, "worker", None)
        if worker is not None:
            await worker.stop()

    app.state.on_startup_hooks.append(start)
    app.state.on_shutdown_hooks.append(stop)
