"""Screenshots of the dashboard's pages, desktop (1400 px) and phone (390 px), taken in headless
Chromium against the demo.

Runs ``dpwatch demo``'s app (scenarios (a)–(h), the mechanisms changing at period 10, one period
a second) on a free loopback port, pauses one monitor for a few seconds so that a stretch without
periods shows, waits until the harmful changes have raised alarms and their snapshots are done,
acknowledges one alarm, silences another monitor through the alarm page's form, submits the new
monitor form once with mistakes (to show the API's errors beside the fields), opens a contract
alarm and a monitor created a moment before, and saves PNGs into ``docs/screenshots/``
(``*-phone.png`` at 390 px; ``monitor-phone-first-screen.png`` is the first 844 px only).

    .venv/bin/python bench/screenshots.py            # about 1-2 minutes
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import sampling_server  # noqa: E402
from tests.support.web_browser import browser, demo_service, sign_in, wait_until  # noqa: E402

# The demo's app takes longer than the tests' 10 s to start on a busy machine.
sampling_server.ASGIThread.start.__defaults__ = (120.0,)


def _post(api: httpx.Client, url: str, **kwargs: object) -> httpx.Response:
    """POST, sent again (up to 5 times, 2 s apart) while the demo answers 503: its SQLite database
    is locked now and then on a busy machine."""
    for _ in range(5):
        response = api.post(url, **kwargs)  # type: ignore[arg-type]
        if response.status_code != 503:
            break
        time.sleep(2)
    return response.raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--periods", type=int, default=40, help="run the demo at least this long (seconds)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dpwatch-shots-") as tmp, \
            demo_service(Path(tmp), scenarios="abcdefgh", change_period=10) as svc, browser() as chrome:
        api = httpx.Client(base_url=svc.base, headers={"Authorization": f"Bearer {svc.key}"}, timeout=60)
        by_name = {name: mid for mid, name in svc.names.items()}
        rnm = next(mid for name, mid in by_name.items() if name.startswith("(c)"))
        benign = next(mid for name, mid in by_name.items() if name.startswith("(h)"))
        time.sleep(4)
        _post(api, f"/v1/monitors/{benign}/pause")
        time.sleep(5)
        _post(api, f"/v1/monitors/{benign}/resume")

        def alarms_with_evidence() -> bool:
            items = api.get("/v1/alarms", params={"limit": 50}).json()["items"]
            done = {a["monitor_id"] for a in items if (a.get("evidence") or {}).get("snapshot")}
            return rnm in done and len(done) >= 3 and time.monotonic() - started > args.periods

        if not wait_until(alarms_with_evidence, timeout=240, interval=2):
            raise SystemExit("the demo did not raise its alarms in time")
        context = chrome.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
        page = context.new_page()

        def shot(name: str, url: str, *, full: bool = True, wait_for: str | None = None) -> None:
            page.goto(f"{svc.base}{url}")
            if wait_for:
                page.wait_for_selector(wait_for)
            page.wait_for_timeout(400)
            page.screenshot(path=str(args.out / f"{name}.png"), full_page=full)
            print(f"{args.out / f'{name}.png'}  <- {url}")

        shot("login", "/ui/login", full=False)
        sign_in(page, svc.base, svc.key)
        shot("monitors", "/ui/monitors")
        shot("monitor", f"/ui/monitors/{rnm}", wait_for=".chart-p canvas")
        shot("monitor-paused-benign", f"/ui/monitors/{benign}", wait_for=".chart-p canvas")
        alarm = next(a for a in api.get("/v1/alarms", params={"monitor_id": rnm}).json()["items"])
        snapshot_id = (alarm["evidence"].get("snapshot") or {}).get("snapshot_id") or alarm["evidence"].get("snapshot_id")
        shot("snapshot", f"/ui/snapshots/{snapshot_id}", wait_for="#snapshot-charts canvas")
        shot("alarm", f"/ui/alarms/{alarm['id']}")
        page.fill("form.ack input[name=note]", "Known: release 4.2 reports the noisy maximum; rolled back.")
        page.click("form.ack button[type=submit]")
        page.wait_for_selector(".flash-ok")
        shot("alarms", "/ui/alarms")
        hook = api.get("/v1/webhooks").json()["items"][0]
        shot("webhook-deliveries", f"/ui/webhooks/{hook['id']}", full=False)
        shot("api-docs", "/docs", full=False, wait_for=".swagger-ui .info .title")
        # A silence through an alarm's form, a key through /ui/keys, the monitor form with mistakes.
        other = next(a for a in api.get("/v1/alarms", params={"limit": 50}).json()["items"]
                     if a["monitor_id"] != rnm)
        page.goto(f"{svc.base}/ui/alarms/{other['id']}")
        page.fill("#f-comment", "Rolling out release 4.3 of this mechanism; expected to alarm until the rollback.")
        page.click("form.silence-form button[type=submit]")
        page.wait_for_selector(".flash-ok")
        shot("silences", "/ui/silences")
        page.goto(f"{svc.base}/ui/keys")
        page.fill("#f-name", "ci-pipeline")
        page.click("#new-key-form button[type=submit]")
        page.wait_for_selector("#new-key")
        page.screenshot(path=str(args.out / "keys.png"), full_page=True)
        print(args.out / "keys.png")
        shot("mechanisms", "/ui/mechanisms")
        listed = api.get("/v1/alarms", params={"limit": 100}).json()["items"]
        contract = next(a for a in listed if a["kind"] == "contract")
        shot("alarm-contract", f"/ui/alarms/{contract['id']}")
        model = api.get(f"/v1/monitors/{rnm}").json()
        fresh = _post(api, "/v1/monitors", json={
            "name": "(c) again, just created", "mechanism_id": model["mechanism_id"], "epsilon": 1.0, "horizon": 100,
            "samples_per_period": 200, "period_seconds": 3600,
            "checks": [{k: model["checks"][0][k] for k in ("x", "x_prime", "event")}]}).json()
        shot("monitor-new", f"/ui/monitors/{fresh['id']}", wait_for=".chart-note")
        page.goto(f"{svc.base}/ui/monitors/new")
        page.fill("#f-name", "count, release 4.3")
        page.select_option("#f-mechanism_id", index=1)
        page.fill("#f-x", "[1, 1, 0")
        page.fill("#f-alpha", "1.5")
        page.click("form button[type=submit].primary")
        page.wait_for_selector(".field.has-error")
        page.screenshot(path=str(args.out / "monitor-form-errors.png"), full_page=True)
        print(args.out / "monitor-form-errors.png")

        phone = chrome.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1)
        page = phone.new_page()
        sign_in(page, svc.base, svc.key)
        for name, url, wait in (("monitors-phone", "/ui/monitors", None),
                                ("monitor-phone", f"/ui/monitors/{rnm}", ".chart-p canvas"),
                                ("alarm-phone", f"/ui/alarms/{alarm['id']}", None),
                                ("snapshot-phone", f"/ui/snapshots/{snapshot_id}",
                                 "#snapshot-charts canvas"),
                                ("alarms-phone", "/ui/alarms", None),
                                ("alarm-contract-phone", f"/ui/alarms/{contract['id']}", None),
                                ("monitor-new-phone", f"/ui/monitors/{fresh['id']}", ".chart-note"),
                                ("silences-phone", "/ui/silences", None)):
            shot(name, url, wait_for=wait)
        # The first screen of the monitor page on a phone (what is seen before scrolling).
        shot("monitor-phone-first-screen", f"/ui/monitors/{rnm}", full=False, wait_for=".chart-p canvas")
    print(f"done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
