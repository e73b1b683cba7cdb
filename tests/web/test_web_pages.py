"""The dashboard's pages through the ASGI app: sign-in and its cookie, CSRF on every form, tenant
isolation, the actions, the chart data, and that no page asks another host for anything."""

from __future__ import annotations

import re
import uuid
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from app.web.session import CSRF_COOKIE, SESSION_COOKIE
from tests.support.api_helpers import (
    create_mechanism,
    create_monitor,
    create_webhook,
    record_period,
)

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
BOTH_BACKENDS = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """The pages' logic is the same on both backends: SQLite here, and the tests marked
    ``BOTH_BACKENDS`` (the dashboard's own queries) on Postgres too."""
    return request.param


def csrf(html: str) -> str:
    match = TOKEN.search(html)
    assert match, "the page has no CSRF token"
    return match.group(1)


def web_client(app) -> TestClient:  # noqa: ANN001
    return TestClient(app, follow_redirects=False)


def sign_in(client: TestClient, key: str) -> None:
    page = client.get("/ui/login")
    assert page.status_code == 200
    response = client.post("/ui/login", data={"csrf_token": csrf(page.text), "api_key": key, "next": "/ui/monitors"})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/ui/monitors"


@pytest.fixture
def monitor_with_alarm(client, db, settings):  # noqa: ANN001, ANN201
    """A monitor of the first tenant with 30 periods, one failed, and an alarm at t = 25."""
    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        for i in range(30):
            if i == 10:
                record_period(session, monitor["id"], failed=True)
            record_period(session, monitor["id"], statistic=3.0 if i == 24 else 0.05 * i, settings=settings)
    return monitor


@pytest.fixture
def web(app, tenants):  # noqa: ANN001, ANN201
    with web_client(app) as c:
        sign_in(c, tenants[0].key)
        yield c


# ------------------------------------------------------------------------------------ sign-in


def test_pages_redirect_to_sign_in_and_data_answers_401(app, tenants, monitor_with_alarm):  # noqa: ANN001
    with web_client(app) as c:
        response = c.get(f"/ui/monitors/{monitor_with_alarm['id']}")
        assert response.status_code == 303
        assert response.headers["location"].startswith("/ui/login?next=%2Fui%2Fmonitors%2F")
        check_id = monitor_with_alarm["checks"][0]["id"]
        data = c.get(f"/ui/data/monitors/{monitor_with_alarm['id']}/checks/{check_id}/series")
        assert data.status_code == 401
        assert data.headers["content-type"].startswith("application/problem+json")
        assert c.get("/").headers["location"] == "/ui/monitors"


def test_sign_in_sets_a_signed_http_only_cookie_without_the_key(app, tenants):  # noqa: ANN001
    with web_client(app) as c:
        page = c.get("/ui/login")
        assert "HttpOnly" in page.headers["set-cookie"] and CSRF_COOKIE in page.headers["set-cookie"]
        response = c.post("/ui/login", data={"csrf_token": csrf(page.text), "api_key": tenants[0].key})
        assert response.status_code == 303
        cookies = response.headers.get_list("set-cookie")
        session_cookie = next(v for v in cookies if v.startswith(SESSION_COOKIE + "="))
        assert "HttpOnly" in session_cookie and "SameSite=lax" in session_cookie and "Path=/ui" in session_cookie
        assert "Secure" not in session_cookie  # development settings: plain http in tests
        assert tenants[0].key not in session_cookie and tenants[0].key[4:20] not in session_cookie
        assert c.get("/ui/monitors").status_code == 200


def test_cookies_are_secure_outside_development(settings, session_factory, tenants):  # noqa: ANN001
    from app.main import create_app

    for overrides, secure in (({"env": "production"}, True), ({"cookie_secure": True}, True),
                              ({"env": "production", "cookie_secure": False}, False)):
        app = create_app(settings.model_copy(update=overrides), session_factory=session_factory)
        with web_client(app) as c:
            page = c.get("/ui/login")
            assert ("Secure" in page.headers["set-cookie"]) is secure
            assert ("the browser will not keep it" in page.text) is secure  # plain http to "testserver"
            response = c.post("https://testserver/ui/login",
                              data={"csrf_token": csrf(page.text), "api_key": tenants[0].key})
            session_cookie = next(v for v in response.headers.get_list("set-cookie") if v.startswith(SESSION_COOKIE))
            assert ("Secure" in session_cookie) is secure
        with web_client(app) as c:
            behind_proxy = c.get("/ui/login", headers={"X-Forwarded-Proto": "https"})
            assert "the browser will not keep it" not in behind_proxy.text


def test_wrong_key_is_refused_and_sign_out_ends_the_session(app, tenants):  # noqa: ANN001
    with web_client(app) as c:
        page = c.get("/ui/login")
        bad = c.post("/ui/login", data={"csrf_token": csrf(page.text), "api_key": "dpw_" + "x" * 43})
        assert bad.status_code == 401 and "unknown or has been revoked" in bad.text
        sign_in(c, tenants[0].key)
        monitors = c.get("/ui/monitors")
        out = c.post("/ui/logout", data={"csrf_token": csrf(monitors.text)})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
        assert c.get("/ui/monitors").status_code == 303


def test_revoking_the_key_ends_its_sessions(app, tenants, db):  # noqa: ANN001
    from app.auth.service import authenticate, revoke_api_key

    with web_client(app) as c:
        sign_in(c, tenants[0].key)
        assert c.get("/ui/monitors").status_code == 200
        with db() as session:
            revoke_api_key(session, authenticate(session, tenants[0].key).api_key_id, allow_last_admin=True)
        assert c.get("/ui/monitors").status_code == 303


def test_a_tampered_session_cookie_is_ignored(app, tenants):  # noqa: ANN001
    with web_client(app) as c:
        sign_in(c, tenants[0].key)
        value = c.cookies.get(SESSION_COOKIE)
        c.cookies.set(SESSION_COOKIE, value[:-3] + ("AAA" if not value.endswith("AAA") else "BBB"), path="/ui")
        assert c.get("/ui/monitors").status_code == 303


def test_next_only_goes_to_dashboard_paths(app, tenants):  # noqa: ANN001
    with web_client(app) as c:
        page = c.get("/ui/login")
        for target, expected in (("https://evil.example/", "/ui/monitors"), ("//evil.example", "/ui/monitors"),
                                 ("/ui/alarms", "/ui/alarms")):
            response = c.post("/ui/login", data={"csrf_token": csrf(page.text), "api_key": tenants[0].key,
                                                 "next": target})
            assert response.headers["location"] == expected
            c.cookies.clear()
            page = c.get("/ui/login")


# ------------------------------------------------------------------------------------ CSRF


def test_every_form_needs_a_valid_csrf_token(app, web, tenants, monitor_with_alarm, db):  # noqa: ANN001
    from app.models.alarms import Alarm

    with db() as session:
        alarm_id = session.query(Alarm.id).filter(Alarm.monitor_id == uuid.UUID(monitor_with_alarm["id"])).scalar()
    monitor_id = monitor_with_alarm["id"]
    forms = [f"/ui/monitors/{monitor_id}/{a}" for a in ("pause", "resume", "reset", "snapshot")]
    forms += [f"/ui/alarms/{alarm_id}/acknowledge", "/ui/logout"]
    # The create/change forms (each with a body that would succeed with a valid token).
    forms += ["/ui/mechanisms", "/ui/monitors/new", "/ui/webhooks", "/ui/keys", "/ui/silences",
              f"/ui/keys/{uuid.uuid4()}/revoke", f"/ui/silences/{uuid.uuid4()}/expire",
              f"/ui/webhooks/{uuid.uuid4()}/deliveries/msg_x/redeliver"]
    # A token of another session (another browser signed in with another key).
    with web_client(app) as other:
        sign_in(other, tenants[1].key)
        foreign = csrf(other.get("/ui/monitors").text)
    for url in forms:
        for data in ({}, {"csrf_token": "forged"}, {"csrf_token": foreign}):
            data = {**data, "name": "csrf-made", "scope": "read", "url": "https://hooks.example.org/x",
                    "sampling_url": "https://dp.example.org/x", "kind": "privacy", "comment": "x",
                    "ends_at": "2099-01-01T00:00"}
            response = web.post(url, data=data)
            assert response.status_code == 403, (url, data, response.status_code)
    # The right token but posted from another origin.
    token = csrf(web.get("/ui/monitors").text)
    response = web.post(forms[0], data={"csrf_token": token}, headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    # Nothing changed, and the session still works.
    assert "csrf-made" not in web.get("/ui/keys").text and "csrf-made" not in web.get("/ui/mechanisms").text
    status = web.get(f"/ui/monitors/{monitor_id}")
    assert status.status_code == 200 and "▲ Alarm at period 25" in status.text
    # The sign-in form is protected too (login CSRF).
    with web_client(app) as fresh:
        assert fresh.post("/ui/login", data={"api_key": tenants[0].key}).status_code == 403


# ------------------------------------------------------------------------------------ pages


@BOTH_BACKENDS
def test_monitor_list_filters_and_shows_sparklines(web, client, monitor_with_alarm):  # noqa: ANN001
    mechanism = create_mechanism(client, name="other-mechanism")
    create_monitor(client, mechanism["id"], name="quiet monitor")
    page = web.get("/ui/monitors")
    assert page.status_code == 200
    assert "count neighbours" in page.text and "quiet monitor" in page.text
    assert page.text.count('<svg class="spark"') == 2
    assert "ε = 1" in page.text and "30 / 100" in page.text
    alarm_only = web.get("/ui/monitors", params={"state": "alarm"})
    assert "count neighbours" in alarm_only.text and "quiet monitor" not in alarm_only.text
    by_mechanism = web.get("/ui/monitors", params={"mechanism": mechanism["id"]})
    assert "quiet monitor" in by_mechanism.text and "count neighbours" not in by_mechanism.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")


@BOTH_BACKENDS
def test_monitor_page_and_series_keep_the_alarm_point(web, monitor_with_alarm):  # noqa: ANN001
    monitor_id = monitor_with_alarm["id"]
    check_id = monitor_with_alarm["checks"][0]["id"]
    page = web.get(f"/ui/monitors/{monitor_id}")
    assert page.status_code == 200
    for text in ("▲ Alarm at period 25", "Acknowledge", "Pause", "Reset", f"checks/{check_id}/series", "Configuration",
                 "Detection power:"):  # each check's power (method.md §13.11), or why it has none yet
        assert text in page.text
    data = web.get(f"/ui/data/monitors/{monitor_id}/checks/{check_id}/series", params={"buckets": 10}).json()
    assert data["periods"] == 30 and data["points"] < 30
    assert data["alarm"]["t"] == 25 and data["alarm"]["x"] in data["x"]
    assert data["statistic"][data["x"].index(data["alarm"]["x"])] == 3.0
    assert data["failed"]["count"] == 1 and data["failed"]["marks"][0][1] == "timeout"
    assert data["claim"] == "ε = 1"
    assert len(data["boundary"]) == data["points"]
    # the ε = 1 region's upper edge: p ≤ e·q and, from the complement, p ≤ 1 − (1 − q)/e
    assert all(abs(b - min(2.718281828 * q, 1 - (1 - q) / 2.718281828)) < 1e-5
               for b, q in zip(data["boundary"], data["q_hat"]))


def test_monitor_page_says_why_a_calibration_gave_up(web, client, db):  # noqa: ANN001
    from app.models.monitors import Monitor

    monitor = create_monitor(client, create_mechanism(client)["id"])
    assert "Calibration" not in web.get(f"/ui/monitors/{monitor['id']}").text
    with db() as session:
        row = session.get(Monitor, uuid.UUID(monitor["id"]))
        row.state, row.paused_from_state, row.calibration_attempts = "paused", "calibrating", 1
        row.calibration_error = "memory limit: the computation went over its memory limit (attempt 1 of 3; …)"
    page = web.get(f"/ui/monitors/{monitor['id']}").text
    assert "! Calibration gave up" in page and "memory limit: the computation went over its memory limit" in page


def test_every_form_on_a_page_carries_its_token(web, monitor_with_alarm):  # noqa: ANN001
    page = web.get(f"/ui/monitors/{monitor_with_alarm['id']}").text
    forms = re.findall(r'<form method="post".*?</form>', page, re.S)
    assert len(forms) >= 5  # sign out, pause, reset, snapshot, acknowledge
    for form in forms:
        assert csrf(form) == csrf(page), form


def test_actions_pause_resume_reset_and_acknowledge(web, monitor_with_alarm):  # noqa: ANN001
    monitor_id = monitor_with_alarm["id"]
    url = f"/ui/monitors/{monitor_id}"
    page = web.get(url)
    ack = re.search(r'action="(/ui/alarms/[^"]+/acknowledge)"', page.text).group(1)
    response = web.post(ack, data={"csrf_token": csrf(page.text), "note": "rolled back", "next": url})
    assert response.status_code == 303 and response.headers["location"] == url
    page = web.get(url)
    assert "acknowledged" in page.text and "Acknowledge</button>" not in page.text
    again = web.post(ack, data={"csrf_token": csrf(page.text), "next": url})
    assert "already acknowledged" in web.get(again.headers["location"]).text
    web.post(f"{url}/pause", data={"csrf_token": csrf(page.text)})
    page = web.get(url)
    assert "Monitor paused" in page.text and "state-paused" in page.text and "Resume" in page.text
    web.post(f"{url}/resume", data={"csrf_token": csrf(page.text)})
    page = web.get(url)
    assert "Monitor resumed (alarm)" in page.text
    web.post(f"{url}/reset", data={"csrf_token": csrf(page.text)})
    page = web.get(url)
    assert "horizon 2 started" in page.text and "▲ Alarm at period" not in page.text
    snap = web.post(f"{url}/snapshot", data={"csrf_token": csrf(page.text), "extra_samples": "1000"})
    assert snap.headers["location"].startswith("/ui/snapshots/")
    pending = web.get(snap.headers["location"]).text
    assert "not finished this snapshot yet" in pending and 'http-equiv="refresh"' in pending


@BOTH_BACKENDS
def test_another_tenants_resources_are_not_found(app, tenants, monitor_with_alarm, client, db):  # noqa: ANN001
    from app.models.alarms import Alarm

    hook = create_webhook(client)
    with db() as session:
        alarm_id = session.query(Alarm.id).filter(Alarm.monitor_id == uuid.UUID(monitor_with_alarm["id"])).scalar()
    monitor_id = monitor_with_alarm["id"]
    check_id = monitor_with_alarm["checks"][0]["id"]
    with web_client(app) as other:
        sign_in(other, tenants[1].key)
        listing = other.get("/ui/monitors")
        assert "count neighbours" not in listing.text
        token = csrf(listing.text)
        for url in (f"/ui/monitors/{monitor_id}", f"/ui/alarms/{alarm_id}", f"/ui/webhooks/{hook['id']}"):
            response = other.get(url)
            assert response.status_code == 404 and "Not found" in response.text, url
        assert other.get(f"/ui/data/monitors/{monitor_id}/checks/{check_id}/series").status_code == 404
        assert "count neighbours" not in other.get("/ui/alarms").text
        for url in (f"/ui/monitors/{monitor_id}/pause", f"/ui/alarms/{alarm_id}/acknowledge"):
            assert other.post(url, data={"csrf_token": token}).status_code == 404
        # The forms: another tenant's monitor, mechanism, key, silence or webhook is not found.
        mechanism_id = client.get(f"/v1/monitors/{monitor_id}").json()["mechanism_id"]
        key_id = client.get("/v1/keys").json()["items"][0]["id"]
        from datetime import UTC, datetime, timedelta

        tomorrow = datetime.now(UTC) + timedelta(days=1)
        silence = client.post("/v1/silences", json={"monitor_id": monitor_id, "comment": "mine",
                                                    "ends_at": tomorrow.isoformat()}).json()
        message = client.post(f"/v1/webhooks/{hook['id']}/test").json()["id"]
        for url in (f"/ui/keys/{key_id}/revoke", f"/ui/silences/{silence['id']}/expire",
                    f"/ui/webhooks/{hook['id']}/deliveries/{message}/redeliver"):
            assert other.post(url, data={"csrf_token": token}).status_code == 404, url
        silenced = other.post("/ui/silences", data={"csrf_token": token, "monitor_id": monitor_id, "comment": "x",
                                                    "ends_at": tomorrow.strftime("%Y-%m-%dT%H:%M")})
        assert silenced.status_code == 422 and "not found" in silenced.text
        made = other.post("/ui/monitors/new", data={"csrf_token": token, "name": "stolen", "mechanism_id": mechanism_id,
                                                    "epsilon": "1", "x": "[1]", "x_prime": "[0]",
                                                    "event": '{"kind": "auto"}', "horizon": "100",
                                                    "samples_per_period": "100", "period_seconds": "60"})
        assert made.status_code == 422 and "not found" in made.text
        for url in ("/ui/keys", "/ui/silences", "/ui/mechanisms", "/ui/webhooks", "/ui/monitors/new"):
            page = other.get(url).text
            assert "acme-key" not in page and "mine" not in page and "laplace-count" not in page, url
            assert "<code>https://hooks.example.org" not in page, url
    with db() as session:
        assert session.get(Alarm, alarm_id).acknowledged_at is None
    assert client.get(f"/v1/silences/{silence['id']}").json()["state"] == "active"
    assert all(k["revoked_at"] is None for k in client.get("/v1/keys").json()["items"])


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "action", "data-url", "data-series-url", "srcset") and value:
                self.refs.append(value)


def test_no_page_references_an_external_host(app, web, client, monitor_with_alarm, db):  # noqa: ANN001
    from app.models.alarms import Alarm
    from app.models.snapshots import Snapshot

    hook = create_webhook(client)
    with db() as session:
        alarm = session.query(Alarm).filter(Alarm.monitor_id == uuid.UUID(monitor_with_alarm["id"])).one()
        snap = Snapshot(tenant_id=alarm.tenant_id, monitor_id=alarm.monitor_id, trigger="on_demand", status="done",
                        params={}, result={"epsilon_hat": 1.2, "lower_bound": 0.4, "alpha": 0.05,
                                           "exceeds_claim": False,
                                           "statement": "no privacy loss is established", "t_hat": 0.5,
                                           "chosen_pair": 0, "pairs": []})
        session.add(snap)
        session.flush()
        alarm_id, snap_id = alarm.id, snap.id
    pages = ["/ui/monitors", f"/ui/monitors/{monitor_with_alarm['id']}", f"/ui/snapshots/{snap_id}",
             "/ui/alarms", f"/ui/alarms/{alarm_id}", "/ui/webhooks", f"/ui/webhooks/{hook['id']}", "/docs", "/redoc",
             "/ui/keys", "/ui/silences", "/ui/mechanisms", "/ui/monitors/new"]
    assets: set[str] = set()
    with web_client(app) as anonymous:
        responses = {"/ui/login": anonymous.get("/ui/login")}
    responses.update({url: web.get(url) for url in pages})
    for url, response in responses.items():
        assert response.status_code == 200, url
        parser = _Refs()
        parser.feed(response.text)
        for ref in parser.refs + re.findall(r"""(?:url|src)\s*[:=(]\s*['"]([^'"]+)['"]""", response.text):
            parts = urlsplit(ref)
            assert not parts.netloc and parts.scheme in ("", "data"), f"{url} references {ref}"
            if ref.endswith((".js", ".css", ".png", ".svg")):
                assets.add(ref)
    assert {"/ui/static/vendor/uplot/uPlot.iife.min.js", "/docs-assets/swagger-ui-bundle.js",
            "/docs-assets/redoc.standalone.js"} <= assets
    for asset in assets:
        assert web.get(asset).status_code == 200, asset
    css = web.get("/ui/static/dashboard.css").text + web.get("/ui/static/vendor/uplot/uPlot.min.css").text
    assert "@import" not in css and "http" not in css


@BOTH_BACKENDS
def test_metrics_per_monitor_and_check(client, monitor_with_alarm, app):  # noqa: ANN001
    text = client.get("/metrics").text
    labels = re.search(r'dpwatch_monitor_statistic\{([^}]*)\}', text).group(1)
    assert f'monitor="{monitor_with_alarm["id"]}"' in labels and 'check="0"' in labels and "tenant=" in labels
    threshold = client.get(f"/v1/monitors/{monitor_with_alarm['id']}").json()["threshold"]  # the table's q(T, γ, α)
    assert 2.3 < threshold < 2.5
    for name, value in (("statistic", 1.45), ("threshold", threshold), ("alarm", 1.0), ("period", 30.0)):
        line = re.search(rf"^dpwatch_monitor_{name}\{{[^}}]*\}} (\S+)$", text, re.M)
        assert line and abs(float(line.group(1)) - value) < 1e-3, name
    assert 'name="count neighbours"' in text and 'state="alarm"' in text


def test_metrics_text_parses_and_escapes_names(client, db) -> None:  # noqa: ANN001
    from prometheus_client.parser import text_string_to_metric_families

    from app.metrics.monitors import render_monitor_metrics

    mechanism = create_mechanism(client, name='quote " and \\ back')
    create_monitor(client, mechanism["id"], name='say "hi"\nthere')
    with db() as session:
        text = render_monitor_metrics(session).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    info = families["dpwatch_monitor_info"].samples[0].labels
    assert info["name"] == 'say "hi"\nthere' and info["mechanism"] == 'quote " and \\ back'
    assert families["dpwatch_monitor_alarm"].samples[0].value == 0.0
    assert "dpwatch_monitor_statistic" in families and not families["dpwatch_monitor_statistic"].samples


# ------------------------------------------------------------------------------------ the verdict


def test_alarm_page_reads_the_window_bound_as_descriptive(web, monitor_with_alarm, db):  # noqa: ANN001
    """An e-detector's alarm whose window bound (1.33) exceeds the claimed 1 while the anytime-valid
    bound (0.86) does not: the page says "Detected, not refuted", labels the window bounds
    descriptive, and never states the window bound "at 95% confidence"."""
    from app.models.alarms import Alarm
    from tests.alarms.test_verdict import new_check

    with db() as session:
        alarm = session.query(Alarm).filter(Alarm.monitor_id == uuid.UUID(monitor_with_alarm["id"])).one()
        alarm.evidence = {"kind": "privacy", "statement": "…", "contract": None, "snapshot": None,
                          "confirmation": None, "check": new_check("e-detector")}
        alarm_id = alarm.id
    page = web.get(f"/ui/alarms/{alarm_id}").text
    sentence = re.search(r'<p class="verdict-sentence">(.*?)</p>', page, re.S).group(1)
    assert sentence.startswith("Detected, not refuted:") and "ARL ≥ 400" in sentence
    assert "95% confidence" not in sentence and "1.33" not in sentence
    assert 'data-refutes="false"' in page and 'data-refutes="true"' not in page
    assert "Window bound (the detector&#39;s last periods; descriptive)" in page
    assert page.count('<span class="estimator-verdict">descriptive</span>') == 2
    assert '<span class="estimator-verdict">a detection, not a refutation</span>' in page
    facts = re.sub(r"<details.*?</details>", "", page, flags=re.S)
    assert "Window bound on ε (descriptive)</th><td>1.327" in facts and "Anytime-valid 95% lower bound on ε" in facts
    assert not re.search(r"95(\.0)?% lower bound on ε</th><td[^>]*>1\.3", facts)  # the window bound is never "95%"
