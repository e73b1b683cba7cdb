"""The dashboard's forms: create and change from the UI with the API's own errors beside each
field, silences (API and UI), one verdict per alarm and snapshot, no raw JSON until details are
opened, contract alarms with their real fields, and charts indexed by period with their events."""

from __future__ import annotations

import html
import re
import uuid
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest
from sqlalchemy import select

from tests.support.api_helpers import (
    create_mechanism,
    create_monitor,
    create_webhook,
    record_period,
)
from tests.web.test_web_pages import csrf, sign_in, web_client


@pytest.fixture
def web(app, tenants):  # noqa: ANN001, ANN201
    with web_client(app) as c:
        sign_in(c, tenants[0].key)
        yield c


@pytest.fixture
def alarmed(client, db, settings):  # noqa: ANN001, ANN201
    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        for i in range(30):
            record_period(session, monitor["id"], statistic=3.0 if i == 24 else 0.05 * i, settings=settings)
    return monitor


def field_error(html: str, name: str) -> str:
    """The error shown beside the field ``name`` (inside its label), or ''."""
    match = re.search(rf'<label class="field has-error[^"]*" for="f-{name}">(.*?)</label>', html, re.S)
    if not match:
        return ""
    error = re.search(r'<span class="error"[^>]*>(.*?)</span>', match.group(1), re.S)
    return error.group(1) if error else ""


# ------------------------------------------------------------------------------------ forms


def test_mechanism_form_shows_the_api_errors_beside_fields_and_probes(app, web):  # noqa: ANN001
    from app.mechanisms.router import get_prober

    page = web.get("/ui/mechanisms")
    token = csrf(page.text)
    bad = web.post("/ui/mechanisms", data={"csrf_token": token, "name": "", "sampling_url": "not a url",
                                           "output_kind": "real", "max_batch": "0", "probe_database": "[1, 2"})
    assert bad.status_code == 422
    assert "at least 1 character" in field_error(bad.text, "name")
    assert "URL" in field_error(bad.text, "sampling_url")
    assert "greater than or equal to 1" in field_error(bad.text, "max_batch")
    assert "Not valid JSON" in field_error(bad.text, "probe_database")

    calls = []

    async def prober(mechanism, settings, *, database, n):  # noqa: ANN001, ANN202
        calls.append(database)
        return {"ok": False, "reason": "wrong_type", "problems": ["outputs are strings, not numbers"],
                "outputs_received": 3, "elapsed_seconds": 0.01, "preview": ["a", "b"]}

    app.dependency_overrides[get_prober] = lambda: prober
    try:
        refused = web.post("/ui/mechanisms", data={"csrf_token": token, "name": "noisy count",
                                                   "sampling_url": "https://dp.example.org/s", "output_kind": "real",
                                                   "probe_database": "[1, 0, 1]", "validate": "true"})
        assert refused.status_code == 422 and calls == [[1, 0, 1]]
        assert "outputs are strings, not numbers" in field_error(refused.text, "sampling_url")
        assert "noisy count" not in web.get("/ui/monitors/new").text  # nothing saved

        async def good(mechanism, settings, *, database, n):  # noqa: ANN001, ANN202
            return {"ok": True, "reason": None, "problems": [], "outputs_received": 10, "elapsed_seconds": 0.02,
                    "preview": [0.5, 1.5]}

        app.dependency_overrides[get_prober] = lambda: good
        made = web.post("/ui/mechanisms", data={"csrf_token": token, "name": "noisy count",
                                                "sampling_url": "https://dp.example.org/s", "output_kind": "real",
                                                "probe_database": "[1, 0, 1]", "validate": "true"})
    finally:
        app.dependency_overrides.pop(get_prober, None)
    assert made.status_code == 201
    assert re.search(r'<code class="secret">whsec_', made.text) and "answered 10 outputs" in made.text
    again = web.get("/ui/mechanisms")
    assert "noisy count" in again.text and "whsec_" not in again.text  # the secret is shown once


def test_monitor_form_creates_a_monitor_and_maps_nested_errors(web, client):  # noqa: ANN001
    mechanism = create_mechanism(client)
    page = web.get("/ui/monitors/new")
    token = csrf(page.text)
    base = {"csrf_token": token, "name": "from the form", "mechanism_id": mechanism["id"], "epsilon": "1",
            "x": "[1, 1, 0]", "x_prime": "[1, 1, 1]", "event": '{"kind": "interval", "low": 2.5, "high": null}',
            "alpha": "0.05", "gamma": "0.25", "horizon": "100", "samples_per_period": "1000", "period_seconds": "60"}
    bad = web.post("/ui/monitors/new", data={**base, "x": "", "alpha": "2", "event": '{"kind": "nope"}'})
    assert bad.status_code == 422
    assert "required" in field_error(bad.text, "x")
    assert "less than" in field_error(bad.text, "alpha")
    assert field_error(bad.text, "event")
    made = web.post("/ui/monitors/new", data=base)
    assert made.status_code == 303 and made.headers["location"].startswith("/ui/monitors/")
    shown = web.get(made.headers["location"])
    assert "from the form" in shown.text and "Monitor created" in shown.text
    monitor = client.get(f"/v1/monitors/{made.headers['location'].rsplit('/', 1)[1]}").json()
    assert monitor["checks"][0]["x"] == [1, 1, 0] and monitor["epsilon"] == 1.0


def test_webhook_and_key_forms(web, client):  # noqa: ANN001
    token = csrf(web.get("/ui/webhooks").text)
    bad = web.post("/ui/webhooks", data={"csrf_token": token, "url": "ftp://x"})
    assert bad.status_code == 422 and field_error(bad.text, "url")
    assert "at least 1 item" in bad.text  # no event chosen: the API's own message, beside the events
    made = web.post("/ui/webhooks", data={"csrf_token": token, "url": "https://hooks.example.org/a",
                                          "event_types": ["alarm.firing", "monitor.degraded"]})
    assert made.status_code == 201 and '<code class="secret">whsec_' in made.text
    (hook,) = client.get("/v1/webhooks").json()["items"]
    assert hook["event_types"] == ["alarm.firing", "monitor.degraded"]

    page = web.get("/ui/keys")
    assert page.status_code == 200 and "acme-key" in page.text and "this session" in page.text
    bad = web.post("/ui/keys", data={"csrf_token": token, "name": "", "scope": "root"})
    assert bad.status_code == 422 and field_error(bad.text, "name") and field_error(bad.text, "scope")
    made = web.post("/ui/keys", data={"csrf_token": token, "name": "ci", "scope": "read"})
    assert made.status_code == 201
    key = re.search(r'<code class="secret" id="new-key">(dpw_[^<]+)</code>', made.text).group(1)
    assert client.get("/v1/monitors", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert key not in web.get("/ui/keys").text
    key_id = next(k["id"] for k in client.get("/v1/keys").json()["items"] if k["name"] == "ci")
    revoked = web.post(f"/ui/keys/{key_id}/revoke", data={"csrf_token": token})
    assert revoked.status_code == 303 and "revoked" in web.get("/ui/keys").text
    assert client.get("/v1/monitors", headers={"Authorization": f"Bearer {key}"}).status_code == 401
    own = next(k["id"] for k in client.get("/v1/keys").json()["items"] if k["name"] == "acme-key")
    last = web.post(f"/ui/keys/{own}/revoke", data={"csrf_token": token})
    assert "last" in web.get(last.headers["location"]).text  # the tenant's last admin key stays


def test_a_read_key_sees_no_form_and_may_not_post(app, tenants, client, db):  # noqa: ANN001
    from app.auth.service import create_api_key

    with db() as session:
        _, read_key = create_api_key(session, tenants[0].tenant_id, "viewer", "read")
    with web_client(app) as c:
        sign_in(c, read_key)
        for url in ("/ui/mechanisms", "/ui/webhooks", "/ui/keys", "/ui/silences"):
            page = c.get(url)
            assert page.status_code == 200 and 'class="form-grid"' not in page.text, url
        token = csrf(c.get("/ui/keys").text)
        for url in ("/ui/mechanisms", "/ui/monitors/new", "/ui/webhooks", "/ui/keys", "/ui/silences"):
            assert c.post(url, data={"csrf_token": token, "name": "x"}).status_code == 403, url


# ------------------------------------------------------------------------------------ silences


def test_silences_api(client, other_headers, alarmed):  # noqa: ANN001
    ends = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert client.post("/v1/silences", json={"ends_at": ends, "comment": "x"}).status_code == 422
    past = client.post("/v1/silences", json={"kind": "privacy", "ends_at": "2020-01-01T00:00:00Z", "comment": "x"})
    assert past.status_code == 422 and past.json()["errors"][0]["pointer"] == "#/ends_at"
    made = client.post("/v1/silences", json={"monitor_id": alarmed["id"], "ends_at": ends, "comment": "deploy 4.2"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["state"] == "active" and body["created_by"].startswith("acme-key")
    foreign = client.post("/v1/silences", json={"monitor_id": alarmed["id"], "ends_at": ends, "comment": "x"},
                          headers=other_headers)
    assert foreign.status_code == 422 and foreign.json()["errors"][0]["pointer"] == "#/monitor_id"
    assert client.get(f"/v1/silences/{body['id']}", headers=other_headers).status_code == 404
    assert client.delete(f"/v1/silences/{body['id']}", headers=other_headers).status_code == 404
    assert [s["id"] for s in client.get("/v1/silences", params={"state": "active"}).json()["items"]] == [body["id"]]
    expired = client.delete(f"/v1/silences/{body['id']}")
    assert expired.status_code == 200 and expired.json()["state"] == "expired"
    assert client.get("/v1/silences", params={"state": "active"}).json()["items"] == []


def test_a_silenced_alarm_is_recorded_but_sends_no_webhook(web, client, db, settings):  # noqa: ANN001
    from app.models.alarms import Alarm, WebhookMessage

    create_webhook(client)
    mechanism = create_mechanism(client)
    loud = create_monitor(client, mechanism["id"], name="loud")
    quiet = create_monitor(client, mechanism["id"], name="quiet")
    token = csrf(web.get("/ui/silences").text)
    ends = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    bad = web.post("/ui/silences", data={"csrf_token": token, "kind": "privacy", "ends_at": ends, "comment": ""})
    assert bad.status_code == 422 and field_error(bad.text, "comment")
    bad = web.post("/ui/silences", data={"csrf_token": token, "ends_at": ends, "comment": "why"})
    assert bad.status_code == 422 and "at least one matcher" in bad.text
    made = web.post("/ui/silences", data={"csrf_token": token, "monitor_id": quiet["id"], "kind": "privacy",
                                          "ends_at": ends, "comment": "maintenance"})
    assert made.status_code == 303
    with db() as session:
        for monitor in (loud, quiet):
            record_period(session, monitor["id"], statistic=5.0, settings=settings)
    with db() as session:
        alarms = {str(a.monitor_id): a.id for a in session.scalars(select(Alarm))}
        messages = list(session.scalars(select(WebhookMessage).where(WebhookMessage.event_type == "alarm.firing")))
    assert set(alarms) == {loud["id"], quiet["id"]}  # both recorded
    assert [m.payload["data"]["labels"]["monitor"] for m in messages] == ["loud"]  # one sent
    page = web.get(f"/ui/alarms/{alarms[quiet['id']]}")
    assert "silenced" in page.text and "webhook messages were not sent" in page.text
    assert "silenced" not in web.get(f"/ui/alarms/{alarms[loud['id']]}").text
    assert web.get("/ui/alarms").text.count('<span class="badge silenced"') == 1
    listing = web.get("/ui/silences")
    expire = re.search(r'action="(/ui/silences/[^"]+/expire)"', listing.text).group(1)
    assert web.post(expire, data={"csrf_token": token}).status_code == 303
    assert "expired" in web.get("/ui/silences").text


# ------------------------------------------------------------------------------------ the verdict


class _Verdict(HTMLParser):
    """The verdict block: its data-refutes, its sentence, each estimator's data-refutes and label."""

    def __init__(self) -> None:
        super().__init__()
        self.refutes: str | None = None
        self.sentence = ""
        self.estimators: list[list[str]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("id") == "verdict":
            self.refutes = a.get("data-refutes")
        elif tag == "p" and "verdict-sentence" in (a.get("class") or "") and self.refutes is not None \
                and not self.sentence:
            self._in = "sentence"
        elif tag == "li" and a.get("data-refutes") is not None and self.refutes is not None:
            self.estimators.append([a["data-refutes"], ""])
        elif tag == "span" and a.get("class") == "estimator-verdict":
            self._in = "label"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("p", "span"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "sentence":
            self.sentence += data
        elif self._in == "label":
            self.estimators[-1][1] += data


def assert_one_consistent_verdict(html: str) -> _Verdict:
    assert html.count('id="verdict"') == 1
    v = _Verdict()
    v.feed(html)
    assert v.refutes in ("true", "false") and v.sentence and v.estimators
    refutes = v.refutes == "true"
    if "output contract" not in v.sentence:
        assert v.sentence.startswith("Refuted:" if refutes else ("Not refuted:", "Detected, not refuted:")), v.sentence
    assert any(e[0] == "true" for e in v.estimators) is refutes
    for flag, label in v.estimators:
        # a refuting estimator says so; a broken output contract says that instead (it is not a test of the claim)
        assert (label in ("refutes the claim", "the output breaks the declared contract")) is (flag == "true"), (flag, label)
        assert flag == "true" or label in ("weaker estimator", "does not refute", "not a test", "descriptive",
                                           "a detection, not a refutation"), label
        if refutes and flag == "false":
            # never "does not refute" beside a refutation
            assert label in ("weaker estimator", "not a test", "descriptive", "a detection, not a refutation"), label
    return v


def _visible_pre(html: str) -> list[str]:
    """<pre> blocks not inside a <details> (raw JSON a person sees without opening anything)."""
    outside = re.sub(r"<details.*?</details>", "", html, flags=re.S)
    return re.findall(r"<pre>.*?</pre>", outside, re.S)


def test_alarm_page_states_one_verdict_and_hides_raw_json(web, alarmed, db):  # noqa: ANN001
    from app.models.alarms import Alarm

    with db() as session:
        alarm = session.scalar(select(Alarm))
        alarm.evidence = {
            "kind": "privacy", "statement": "THE STATEMENT", "contract": None,
            "check": {"window": {"lag": 2, "from_t": 24, "to_t": 25}, "counts": {"a": 800, "b": 600, "n": 2000},
                      "p_hat": 0.4, "q_hat": 0.3, "parameter": "ε", "lower_bound": 0.602, "method": "score",
                      "exact": {"lower_bound": 0.55}, "confidence": 0.95, "claim_description": "1-DP",
                      "exceeds_claim": False},
            "snapshot": {"snapshot_id": str(uuid.uuid4()), "lower_bound": 0.4, "epsilon_hat": 1.2, "confidence": 0.95,
                         "verdict": "weaker_estimator",
                         "claim_terms": {"refutes": True, "delta_hat": 0.05, "delta_lower_bound": 0.0392,
                                         "statement": "the outputs contradict 1-DP at 95% confidence",
                                         "description": "1-DP"}}}
        alarm_id = alarm.id
    page = web.get(f"/ui/alarms/{alarm_id}").text
    v = assert_one_consistent_verdict(page)
    assert v.refutes == "true" and "window bound" not in v.sentence
    readings = dict(zip((html.unescape(t) for t in re.findall(r'<li data-refutes="\w+">\s*<span class="estimator-label[^"]*">. ([^:<]+):', page)),
                        (e[1] for e in v.estimators)))
    assert readings["Window bound (the detector's last periods; descriptive)"] == "descriptive"
    assert readings["Claim terms and trade-off curve"] == "refutes the claim"
    assert readings["Sequential detector (the alarm's own test)"] == "refutes the claim"
    assert page.count("THE STATEMENT") <= 1 and "THE STATEMENT" not in re.sub(r"<details.*?</details>", "", page,
                                                                            flags=re.S)
    assert _visible_pre(page) == []
    assert "<details class=\"raw\"><summary>Raw evidence (JSON)" in page  # closed: no "open" attribute
    monitor_page = web.get(f"/ui/monitors/{alarmed['id']}").text
    assert "Refuted:" in monitor_page


def test_contract_alarm_shows_its_real_fields(web, client, db, settings):  # noqa: ANN001
    from app.alarms.service import fire_contract_alarm
    from app.models.alarms import Alarm
    from app.models.monitors import Monitor

    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    with db() as session:
        run = record_period(session, monitor["id"], statistic=0.1)
        m = session.get(Monitor, uuid.UUID(monitor["id"]))
        fire_contract_alarm(session, m, run, {"breach": "type", "detail": "output 3 is a string, not a number",
                                              "index": 3, "sample": "oops", "database": [1, 0],
                                              "expected_shape": {"container": "scalar", "values": "real"},
                                              "observed_shape": {"container": "scalar", "values": "label"},
                                              "period": 1}, settings)
        alarm_id = session.scalar(select(Alarm.id).where(Alarm.kind == "contract"))
    page = web.get(f"/ui/alarms/{alarm_id}").text
    for wrong in ("None vs None", "n = None", "check ?", "None"):
        assert wrong not in re.sub(r"<details.*?</details>", "", page, flags=re.S), wrong
    for right in ("Contract breach at period 1", "output 3 is a string, not a number", "oops", "scalar of real",
                  "scalar of label"):
        assert right in page, right
    v = assert_one_consistent_verdict(page)
    assert v.refutes == "true" and "broke the mechanism's output contract" in v.sentence  # the contract, not ε
    assert [label for _, label in v.estimators] == ["the output breaks the declared contract"]
    listing = web.get("/ui/alarms", params={"kind": "contract"}).text
    assert "output 3 is a string" in listing and "None" not in re.sub(r"<option.*?</option>", "", listing)


def test_snapshot_page_one_verdict_plots_the_tradeoff_and_relative_previous(web, alarmed, db):  # noqa: ANN001
    from app.models.snapshots import Snapshot

    with db() as session:
        from app.models.monitors import Monitor

        m = session.get(Monitor, uuid.UUID(alarmed["id"]))
        t0 = datetime.now(UTC) - timedelta(hours=3)
        terms = {"refutes": True, "delta_hat": 0.05, "delta_lower_bound": 0.0392, "description": "1-DP",
                 "statement": "the outputs contradict 1-DP at 95% confidence; δ(1) ≥ 0.0392",
                 "tradeoff": {"alpha": [0.1, 0.2, 0.3], "beta": [0.5, 0.3, 0.2], "f": [0.6, 0.4, 0.3]}}
        pair = {"position": 0, "epsilon_hat": 1.2, "lower_bound": 0.602, "t_hat": 0.5, "claim_terms": terms,
                "samples": {"choose": [1000, 1000], "bound": 1000}, "privacy_profile": {"epsilons": [0, 1],
                                                                                      "delta": [0.3, 0.05]},
                "loss_curve": {"grid": [[0.0, 1.0, 2.0]], "loss": [0.1, 0.5, 1.2]}}
        result = {"epsilon_hat": 1.2, "lower_bound": 0.602, "alpha": 0.05, "exceeds_claim": False, "t_hat": 0.5,
                  "statement": "s", "chosen_pair": 0, "claim_terms": {k: v for k, v in terms.items() if k != "tradeoff"},
                  "pairs": [pair]}
        old = Snapshot(tenant_id=m.tenant_id, monitor_id=m.id, trigger="on_demand", status="done", params={},
                       result={**result, "epsilon_hat": 0.9}, created_at=t0)
        new = Snapshot(tenant_id=m.tenant_id, monitor_id=m.id, trigger="on_demand", status="done",
                       params={"extra_samples": 1000}, result=result, created_at=t0 + timedelta(minutes=12))
        session.add_all([old, new])
        session.flush()
        snap_id = new.id
    page = web.get(f"/ui/snapshots/{snap_id}").text
    v = assert_one_consistent_verdict(page)
    assert v.refutes == "true" and sorted(e[0] for e in v.estimators)[-1] == "true"
    assert any(e[1] == "weaker estimator" for e in v.estimators)  # the MPL bound below the claim
    assert "LB does not exceed the claim" not in page
    assert "12 min before this one" in page
    assert _visible_pre(page) == []
    data = web.get(f"/ui/data/snapshots/{snap_id}").json()
    assert data["pairs"][0]["tradeoff"]["beta"] == [0.5, 0.3, 0.2] and data["pairs"][0]["refutes"] is True


# ------------------------------------------------------------------------------------ charts and lists


def test_series_is_indexed_by_period_with_events(web, client, alarmed, db):  # noqa: ANN001
    from app.models.mechanisms import Mechanism
    from app.models.monitors import Monitor

    check_id = alarmed["checks"][0]["id"]
    url = f"/ui/data/monitors/{alarmed['id']}/checks/{check_id}/series"
    data = web.get(url).json()
    assert data["t"] == list(range(1, 31)) and data["alarm"]["t"] == 25
    assert data["events"] == []
    with db() as session:  # the deployment changes after period 10
        m = session.get(Monitor, uuid.UUID(alarmed["id"]))
        mech = session.get(Mechanism, m.mechanism_id)
        mech.updated_at = datetime.fromtimestamp(data["x"][9] + 1, UTC)
    data = web.get(url).json()
    assert data["events"] == [{"t": 10.5, "kind": "change", "label": "mechanism updated",
                               "time": round(data["x"][9] + 1, 3)}]
    assert web.get(url, params={"range": "1h"}).json()["periods"] == 30  # slots from now on, an hour apart
    from app.models.monitors import Check
    from app.web.data import check_series

    with db() as session:
        m = session.get(Monitor, uuid.UUID(alarmed["id"]))
        since = datetime.fromtimestamp(data["x"][19] - 1, UTC)
        part = check_series(session, m, session.get(Check, uuid.UUID(check_id)), horizon_index=1, since=since)
    assert part["t"] == list(range(20, 31)) and part["alarm"]["t"] == 25


def test_alarm_filters_group_by_mechanism(web, client, alarmed, db, settings):  # noqa: ANN001
    other = create_mechanism(client, name="second-mechanism")
    second = create_monitor(client, other["id"], name="second monitor")
    with db() as session:
        record_period(session, second["id"], statistic=5.0, settings=settings)
    page = web.get("/ui/alarms").text
    assert "Mechanism laplace-count" in page and "Mechanism second-mechanism" in page
    only = web.get("/ui/alarms", params={"monitor": second["id"]}).text
    assert "second monitor" in only and "Mechanism laplace-count" not in only
    assert "No alarm" in web.get("/ui/alarms", params={"acknowledged": "yes"}).text
    assert "count neighbours" in web.get("/ui/alarms", params={"acknowledged": "no", "since": "24h"}).text
    assert "No alarm" in web.get("/ui/alarms", params={"kind": "contract"}).text


def test_no_uppercase_on_math_and_no_underscores_in_labels(web, alarmed):  # noqa: ANN001
    css = web.get("/ui/static/dashboard.css").text
    assert "uppercase" not in css
    for url in ("/ui/monitors", f"/ui/monitors/{alarmed['id']}", "/ui/alarms"):
        text = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style|details).*?</\1>", "", web.get(url).text, flags=re.S))
        assert "M_t" not in text and "z_t" not in text, url


def test_next_run_of_an_alarmed_monitor(web, alarmed):  # noqa: ANN001
    page = web.get(f"/ui/monitors/{alarmed['id']}").text
    assert "no next period: in alarm until reset" in page and "next " not in re.findall(
        r'<span class="hint">([^<]*)</span>', page)[3]


def test_redeliver_a_message_through_the_api_and_the_ui(web, client, other_headers):  # noqa: ANN001
    hook = create_webhook(client)
    first = client.post(f"/v1/webhooks/{hook['id']}/test").json()
    again = client.post(f"/v1/webhooks/{hook['id']}/deliveries/{first['id']}/redeliver")
    assert again.status_code == 202 and again.json()["id"] != first["id"] and again.json()["status"] == "pending"
    assert client.post(f"/v1/webhooks/{hook['id']}/deliveries/msg_nope/redeliver").status_code == 404
    assert client.post(f"/v1/webhooks/{hook['id']}/deliveries/{first['id']}/redeliver",
                       headers=other_headers).status_code == 404
    page = web.get(f"/ui/webhooks/{hook['id']}")
    form = re.search(r'action="(/ui/webhooks/[^"]+/redeliver)"', page.text).group(1)
    done = web.post(form, data={"csrf_token": csrf(page.text)})
    assert done.status_code == 303 and "Queued again" in web.get(done.headers["location"]).text
    bodies = [d["event_type"] for d in client.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]]
    assert bodies == ["webhook.test"] * 3
    client.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": False})
    assert client.post(f"/v1/webhooks/{hook['id']}/deliveries/{first['id']}/redeliver").status_code == 409


def test_no_inline_style_or_script_in_templates() -> None:
    """The pages' Content-Security-Policy forbids inline styles and scripts: none may be written."""
    from pathlib import Path

    for template in (Path(__file__).resolve().parents[2] / "app" / "web" / "templates").glob("*.html"):
        text = template.read_text()
        assert 'style="' not in text and "<style" not in text, template.name
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), template.name


def test_a_pause_is_drawn_between_the_periods_it_fell_between() -> None:
    """A stretch without periods maps to the periods around it, whichever way the chart data's
    millisecond rounding goes (it once ran to the end of the chart)."""
    import numpy as np

    from app.web.data import _t_at

    stamps = np.array([100.0, 101.0, 102.0, 109.0004, 110.0])
    ts = np.array([1, 2, 3, 4, 5])
    for end in (109.0, 109.001):  # the rounded time of period 4, below and above the stored one
        assert _t_at(stamps, ts, 103.0) == 3.5 and _t_at(stamps, ts, end) == 4.0
    assert _t_at(stamps, ts, 99.0) == 0.5 and _t_at(stamps, ts, 120.0) == 5.5


def test_an_e_process_monitor_page_says_what_its_horizon_does(web, client):  # noqa: ANN001
    mechanism = create_mechanism(client)
    tuned = create_monitor(client, mechanism["id"], detector="e-process", horizon=200)
    plain = create_monitor(client, mechanism["id"], detector="e-process", horizon=None)
    assert "e-process: tuned to 200 periods, valid for ever" in web.get(f"/ui/monitors/{tuned['id']}").text
    assert "e-process: no horizon" in web.get(f"/ui/monitors/{plain['id']}").text
