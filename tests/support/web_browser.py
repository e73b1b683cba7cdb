"""Headless Chromium for the dashboard's browser tests and screenshots.

Chromium comes from Debian's package (``/usr/bin/chromium``; ``.ci/run`` installs it when it is
missing) and is driven by Playwright, which is pointed at it: Playwright's own browser download
does not work here. Under ``CI`` a missing Chromium fails the tests instead of skipping them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHROMIUM = os.environ.get("DPWATCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


def chromium_problem() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    return None


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium browser (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield instance
        finally:
            instance.close()


@dataclass
class OfflineGuard:
    """Aborts every request of a page to a host other than the service's, and records it."""

    allowed_netloc: str
    blocked: list[str] = field(default_factory=list)

    def attach(self, context: Any) -> None:
        def handle(route: Any) -> None:
            url = route.request.url
            parts = urlsplit(url)
            if parts.scheme in ("data", "blob", "about") or parts.netloc == self.allowed_netloc:
                route.continue_()
            else:
                self.blocked.append(url)
                route.abort()

        context.route("**/*", handle)


def sign_in(page: Any, base: str, key: str) -> None:
    page.goto(f"{base}/ui/monitors")
    page.wait_for_url("**/ui/login**")
    page.fill("#api_key", key)
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/monitors**")


@dataclass
class DemoService:
    base: str
    key: str
    names: dict[str, str]
    harmful: set[str]
    app: Any


@contextlib.contextmanager
def demo_service(tmp_path: Path, *, scenarios: str = "eg", change_period: int = 3,
                 samples_per_period: int = 200) -> Iterator[DemoService]:
    """``dpwatch demo``'s app (service, worker, reference mechanisms, webhook receiver) on a free
    loopback port, with its monitors registered through the API, as the demo does."""
    import httpx

    from app.demo import DemoOptions, Receiver, _create_key, build_demo_app, register_demo
    from app.sampling.protocol import generate_secret
    from tests.support.sampling_server import serve_app

    opts = DemoOptions(port=0, scenarios=scenarios, change_period=change_period, period_seconds=1,
                       samples_per_period=samples_per_period, data_dir=tmp_path)
    receiver = Receiver()
    secret = generate_secret()
    app, settings = build_demo_app(opts, receiver, secret)
    with serve_app(app, lifespan="on") as base:
        settings.public_url = base  # the port is known only now; links in webhooks use it
        key = asyncio.run(_create_key(settings))

        async def register() -> tuple[dict[str, str], set[str]]:
            async with httpx.AsyncClient(base_url=base, timeout=10,
                                         headers={"Authorization": f"Bearer {key}"}) as http:
                return await register_demo(http, opts, receiver, secret, base=base)

        names, harmful = asyncio.run(register())
        # The worker stops in the app's shutdown hook, when serve_app ends.
        yield DemoService(base, key, names, harmful, app)


def wait_until(predicate: Any, timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
