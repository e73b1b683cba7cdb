"""The dashboard in headless Chromium (Debian's package, driven by Playwright), against the
demo: sign in, open the demo's monitors, see an alarm appear on the monitor whose mechanism
changes, open its snapshot and acknowledge the alarm; then /docs and /redoc with every request to
another host blocked. Skips without Chromium, except under CI, where it fails."""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.web_browser import OfflineGuard, browser, chromium_problem, demo_service, sign_in, wait_until


@pytest.fixture
def chromium() -> None:
    problem = chromium_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{problem} (CI is set: the browser tests must run; .ci/run installs Chromium)")
        pytest.skip(problem)


def test_sign_in_watch_an_alarm_open_its_snapshot_and_acknowledge(tmp_path, chromium) -> None:  # noqa: ANN001
    started = time.monotonic()
    with demo_service(tmp_path, scenarios="eg", change_period=3) as svc, browser() as chrome:
        context = chrome.new_context(viewport={"width": 1280, "height": 900})
        guard = OfflineGuard(urlsplit(svc.base).netloc)
        guard.attach(context)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        sign_in(page, svc.base, svc.key)
        rows = page.locator("table.monitors tbody tr")
        assert rows.count() == 2
        assert "SVT 2: change to SVT 5" in page.inner_text("table.monitors")
        (harmful,) = svc.harmful

        page.click("text=(e) SVT 2: change to SVT 5")
        page.wait_for_url(f"**/ui/monitors/{harmful}")
        page.wait_for_selector(".chart-stat canvas")  # uPlot drew the chart from the JSON endpoint

        def alarm_shown() -> bool:
            page.reload()
            return page.locator(".alarm-banner").count() > 0

        assert wait_until(alarm_shown, timeout=90, interval=1), "no alarm appeared on the changed mechanism"
        assert page.locator("h1 .state-alarm").count() == 1

        def evidence_shown() -> bool:
            page.reload()
            return page.locator("text=open the snapshot").count() > 0

        assert wait_until(evidence_shown, timeout=90, interval=1), "the alarm's snapshot did not finish"
        page.click("text=open the snapshot")
        page.wait_for_url("**/ui/snapshots/**")
        page.wait_for_selector("#snapshot-charts canvas")
        assert "MPL snapshot" in page.inner_text(".statement")

        page.go_back()
        page.wait_for_url(f"**/ui/monitors/{harmful}")
        page.fill("form.ack input[name=note]", "seen in the browser test")
        page.click("form.ack button[type=submit]")
        page.wait_for_selector(".flash-ok")
        assert "acknowledged" in page.inner_text(".flash-ok")
        alarms = httpx.get(f"{svc.base}/v1/alarms", headers={"Authorization": f"Bearer {svc.key}"}).json()["items"]
        assert alarms[0]["acknowledged_note"] == "seen in the browser test"

        # The API docs work with every other host cut off.
        page.goto(f"{svc.base}/docs")
        page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
        assert "dpwatch" in page.inner_text(".swagger-ui .info .title")
        page.goto(f"{svc.base}/redoc")
        page.wait_for_selector("h1:has-text('dpwatch')", timeout=30_000)
        assert page.locator("text=Register a mechanism").count() >= 1
        assert guard.blocked == [], guard.blocked
        assert errors == [], errors
    assert time.monotonic() - started < 170
