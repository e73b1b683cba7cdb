"""/v1/mechanisms on SQLite and Postgres."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.mechanisms.router import get_prober
from app.mechanisms.service import ProbeResult
from app.reference.server import endpoint_app
from tests.support.api_helpers import MECHANISM, MONITOR, create_mechanism, create_monitor
from tests.support.sampling_server import serve_app


def test_create_returns_secret_once(client: TestClient) -> None:
    created = create_mechanism(client)
    assert created["secret"].startswith("whsec_")
    assert created["name"] == MECHANISM["name"]
    assert created["max_batch"] == 10_000 and created["timeout_seconds"] == 10 and created["prefer_binary"] is False
    assert created["validation"] is None

    fetched = client.get(f"/v1/mechanisms/{created['id']}")
    assert fetched.status_code == 200
    assert "secret" not in fetched.json()
    listed = client.get("/v1/mechanisms").json()["items"]
    assert [m["id"] for m in listed] == [created["id"]]
    assert all("secret" not in m for m in listed)
    patched = client.patch(f"/v1/mechanisms/{created['id']}", json={"max_batch": 500})
    assert "secret" not in patched.json()


def test_secrets_differ_between_mechanisms(client: TestClient) -> None:
    first = create_mechanism(client, name="a")
    second = create_mechanism(client, name="b")
    assert first["secret"] != second["secret"]


def test_vector_mechanism_needs_dim(client: TestClient) -> None:
    response = client.post("/v1/mechanisms", json={**MECHANISM, "output_kind": "vector"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert "dim is required" in response.json()["errors"][0]["message"]

    created = create_mechanism(client, output_kind="vector", dim=4)
    assert created["dim"] == 4

    response = client.post("/v1/mechanisms", json={**MECHANISM, "name": "x", "dim": 3})
    assert response.status_code == 422
    assert "dim must be null" in response.json()["errors"][0]["message"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.org/x", "must start with http:// or https://"),
        ("https://user:pw@example.org/x", "must not contain credentials"),
        ("https:///nohost", "must name a host"),
        ("https://example.org/x#frag", "must not contain a #fragment"),
        ("https://example.org:99999/x", "invalid port"),
        ("https://exa mple.org/", "whitespace"),
        ("https://10.1.2.3/sample", "private, loopback, link-local or reserved"),
        ("http://169.254.169.254/latest/meta-data", "private, loopback, link-local or reserved"),
    ],
)
def test_sampling_url_is_validated(client: TestClient, url: str, message: str) -> None:
    response = client.post("/v1/mechanisms", json={**MECHANISM, "sampling_url": url})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["status"] == 422 and problem["title"] == "Unprocessable Content"  # RFC 9110
    assert problem["errors"][0]["pointer"] == "#/sampling_url"
    assert message in problem["errors"][0]["message"]


def test_loopback_allowed_through_allow_networks(client: TestClient) -> None:
    # The test settings allow 127.0.0.0/8 (as demos do); 10/8 stays refused (above).
    created = create_mechanism(client, sampling_url="http://127.0.0.1:9/sample")
    assert created["sampling_url"] == "http://127.0.0.1:9/sample"


def test_unknown_fields_and_bad_types_are_explained(client: TestClient) -> None:
    response = client.post("/v1/mechanisms", json={**MECHANISM, "max_batch": 0, "colour": "red"})
    assert response.status_code == 422
    errors = {e["pointer"]: e for e in response.json()["errors"]}
    assert errors["#/max_batch"]["message"] == "Input should be greater than or equal to 1"
    assert errors["#/colour"]["message"] == "This field is not allowed here (unknown field)."
    assert errors["#/colour"]["location"] == ["body", "colour"]


def test_malformed_json_body(client: TestClient) -> None:
    response = client.post("/v1/mechanisms", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["type"] == "json_invalid"
    assert response.json()["errors"][0]["message"].startswith("The body is not valid JSON")


def test_name_is_unique_per_tenant(client: TestClient, other_headers: dict[str, str]) -> None:
    create_mechanism(client)
    response = client.post("/v1/mechanisms", json=MECHANISM)
    assert response.status_code == 409
    assert response.json()["type"].endswith("/conflict")
    assert "already exists" in response.json()["detail"]
    # Another tenant may use the same name.
    assert client.post("/v1/mechanisms", json=MECHANISM, headers=other_headers).status_code == 201


def test_patch(client: TestClient) -> None:
    created = create_mechanism(client)
    other = create_mechanism(client, name="other")
    response = client.patch(f"/v1/mechanisms/{created['id']}", json={"timeout_seconds": 20, "prefer_binary": True})
    assert response.status_code == 200
    body = response.json()
    assert body["timeout_seconds"] == 20 and body["prefer_binary"] is True and body["name"] == MECHANISM["name"]
    assert body["updated_at"] >= created["updated_at"]
    assert client.get(f"/v1/mechanisms/{created['id']}").json()["timeout_seconds"] == 20

    assert client.patch(f"/v1/mechanisms/{created['id']}", json={"name": "other"}).status_code == 409
    assert client.patch(f"/v1/mechanisms/{created['id']}", json={"name": None}).status_code == 422
    bad_url = client.patch(f"/v1/mechanisms/{created['id']}", json={"sampling_url": "http://192.168.1.1/"})
    assert bad_url.status_code == 422 and bad_url.json()["errors"][0]["pointer"] == "#/sampling_url"
    to_vector = client.patch(f"/v1/mechanisms/{created['id']}", json={"output_kind": "vector"})
    assert to_vector.status_code == 422 and "dim is required" in to_vector.json()["detail"]
    ok = client.patch(f"/v1/mechanisms/{other['id']}", json={"output_kind": "vector", "dim": 3})
    assert ok.status_code == 200 and ok.json()["dim"] == 3
    back = client.patch(f"/v1/mechanisms/{other['id']}", json={"output_kind": "discrete"})
    assert back.status_code == 200 and back.json()["dim"] is None


def test_output_kind_frozen_while_monitors_exist(client: TestClient) -> None:
    mechanism = create_mechanism(client)
    create_monitor(client, mechanism["id"])
    response = client.patch(f"/v1/mechanisms/{mechanism['id']}", json={"output_kind": "discrete"})
    assert response.status_code == 409
    assert "1 monitor(s)" in response.json()["detail"]


def test_delete_cascades_to_monitors(client: TestClient) -> None:
    mechanism = create_mechanism(client)
    monitor = create_monitor(client, mechanism["id"])
    refused = client.delete(f"/v1/mechanisms/{mechanism['id']}")
    assert refused.status_code == 409 and refused.headers["content-type"] == "application/problem+json"
    assert "?cascade=true" in refused.json()["detail"]
    assert client.get(f"/v1/monitors/{monitor['id']}").status_code == 200
    assert client.delete(f"/v1/mechanisms/{mechanism['id']}?cascade=true").status_code == 204
    assert client.get(f"/v1/mechanisms/{mechanism['id']}").status_code == 404
    assert client.get(f"/v1/monitors/{monitor['id']}").status_code == 404
    assert client.delete(f"/v1/mechanisms/{mechanism['id']}").status_code == 404


def test_pagination(client: TestClient) -> None:
    ids = [create_mechanism(client, name=f"m{i}")["id"] for i in range(5)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.get("/v1/mechanisms", params=params).json()
        pages += 1
        assert len(page["items"]) <= 2
        seen += [m["id"] for m in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(ids))  # newest first, each exactly once


def test_bad_cursor_and_limit(client: TestClient) -> None:
    response = client.get("/v1/mechanisms", params={"cursor": "garbage!"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "query:cursor"
    response = client.get("/v1/mechanisms", params={"limit": 0})
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "query:limit"
    assert client.get("/v1/mechanisms", params={"limit": 201}).status_code == 422


def test_malformed_id_is_422(client: TestClient) -> None:
    response = client.get("/v1/mechanisms/not-a-uuid")
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "path:mechanism_id"


def _prober(result: ProbeResult, calls: list[dict]):  # noqa: ANN202
    async def probe(mechanism, settings, *, database=None, n=10):  # noqa: ANN001, ANN202
        calls.append({"url": mechanism.sampling_url, "database": database, "n": n, "allow": settings.allow_networks})
        return result

    return probe


def test_validate_on_create_refuses_a_bad_endpoint(client: TestClient) -> None:
    calls: list[dict] = []
    bad = ProbeResult(ok=False, problems=["expected 10 samples, got 9"], reason="wrong_count", outputs_received=0)
    client.app.dependency_overrides[get_prober] = lambda: _prober(bad, calls)
    response = client.post("/v1/mechanisms?validate=true", json={**MECHANISM, "probe_database": [1, 0]})
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"].endswith("/endpoint-validation-failed")
    assert problem["errors"] == [
        {
            "pointer": "#/sampling_url",
            "location": ["body", "sampling_url"],
            "message": "expected 10 samples, got 9",
            "type": "endpoint_wrong_count",
        }
    ]
    assert calls and calls[0]["url"] == MECHANISM["sampling_url"] and calls[0]["database"] == [1, 0]
    assert client.get("/v1/mechanisms").json()["items"] == []  # nothing saved


def test_validate_on_create_and_patch_with_a_good_endpoint(client: TestClient) -> None:
    calls: list[dict] = []
    good = ProbeResult(ok=True, outputs_received=10, elapsed_seconds=0.01, preview=[0.5, 1.5])
    client.app.dependency_overrides[get_prober] = lambda: _prober(good, calls)
    response = client.post("/v1/mechanisms?validate=true", json={**MECHANISM, "probe_database": [3, 1]})
    assert response.status_code == 201
    assert response.json()["validation"]["ok"] is True and response.json()["validation"]["preview"] == [0.5, 1.5]
    assert response.json()["validation"]["database"] == [3, 1] and response.json()["probe_database"] == [3, 1]
    mechanism_id = response.json()["id"]
    patched = client.patch(
        f"/v1/mechanisms/{mechanism_id}?validate=true", json={"sampling_url": "https://dp.example.org/v2"}
    )
    assert patched.status_code == 200
    assert calls[-1]["url"] == "https://dp.example.org/v2"  # the new URL is probed before saving
    assert calls[-1]["database"] == [3, 1]  # on the stored probe database
    assert patched.json()["sampling_url"] == "https://dp.example.org/v2"
    # Without ?validate the endpoint is not called.
    client.patch(f"/v1/mechanisms/{mechanism_id}", json={"max_batch": 10})
    assert len(calls) == 2


def test_validate_on_patch_failure_keeps_old_values(client: TestClient) -> None:
    mechanism = create_mechanism(client)
    bad = ProbeResult(ok=False, problems=["connection refused"], reason="connection_error")
    client.app.dependency_overrides[get_prober] = lambda: _prober(bad, [])
    response = client.patch(
        f"/v1/mechanisms/{mechanism['id']}?validate=true",
        json={"sampling_url": "https://new.example.org/", "probe_database": [0]},
    )
    assert response.status_code == 422
    assert client.get(f"/v1/mechanisms/{mechanism['id']}").json()["sampling_url"] == MECHANISM["sampling_url"]


def test_validate_endpoint_passes_database_and_n(client: TestClient) -> None:
    mechanism = create_mechanism(client)
    calls: list[dict] = []
    bad = ProbeResult(ok=False, problems=["the outputs contain NaN or infinity"], reason="non_finite")
    client.app.dependency_overrides[get_prober] = lambda: _prober(bad, calls)
    response = client.post(f"/v1/mechanisms/{mechanism['id']}/validate", json={"database": [1, 2], "n": 5})
    assert response.status_code == 200
    assert response.json() == {
        "ok": False,
        "reason": "non_finite",
        "problems": ["the outputs contain NaN or infinity"],
        "outputs_received": 0,
        "elapsed_seconds": 0.0,
        "preview": [],
        "database": [1, 2],
    }
    assert calls == [{"url": MECHANISM["sampling_url"], "database": [1, 2], "n": 5, "allow": ["127.0.0.0/8"]}]
    assert client.post(f"/v1/mechanisms/{uuid.uuid4()}/validate").status_code == 404


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_validate_against_a_live_endpoint(client: TestClient) -> None:
    """The real probe: signed request through the safe client to an endpoint on loopback."""
    mechanism = create_mechanism(client, sampling_url="http://127.0.0.1:9/placeholder")

    def noisy_count(database, n, rng):  # noqa: ANN001, ANN202
        return sum(database) + rng.laplace(0.0, 1.0, size=n)

    sampler_app = endpoint_app({"/sample": (noisy_count, "real")}, secret=mechanism["secret"])
    with serve_app(sampler_app) as base_url:
        client.patch(f"/v1/mechanisms/{mechanism['id']}", json={"sampling_url": f"{base_url}/sample"})
        response = client.post(f"/v1/mechanisms/{mechanism['id']}/validate", json={"database": [1, 0, 1], "n": 7})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["ok"] is True, report
    assert report["outputs_received"] == 7 and report["problems"] == []
    assert len(report["preview"]) == 5 and all(isinstance(v, float) for v in report["preview"])


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_validate_reports_a_wrong_answer_from_a_live_endpoint(client: TestClient) -> None:
    async def short_answer(request: Request) -> JSONResponse:
        return JSONResponse({"samples": [1.0, 2.0]})

    endpoint_app = Starlette(routes=[Route("/sample", short_answer, methods=["POST"])])
    with serve_app(endpoint_app) as base_url:
        response = client.post("/v1/mechanisms?validate=true",
                               json={**MECHANISM, "sampling_url": f"{base_url}/sample", "probe_database": [1]})
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["type"] == "endpoint_wrong_count"
    assert "2" in error["message"]
    assert client.get("/v1/mechanisms").json()["items"] == []


def test_client_supplied_secret_is_used_and_validated(client):
    from app.sampling.protocol import generate_secret

    secret = generate_secret()
    created = client.post("/v1/mechanisms", json={"name": "own-secret", "sampling_url": "https://dp.example.org/s",
                                                  "output_kind": "real", "secret": secret})
    assert created.status_code == 201, created.text
    assert created.json()["secret"] == secret
    assert "secret" not in client.get(f"/v1/mechanisms/{created.json()['id']}").json()
    bad = client.post("/v1/mechanisms", json={"name": "bad-secret", "sampling_url": "https://dp.example.org/s",
                                              "output_kind": "real", "secret": "hunter2"})
    assert bad.status_code == 422
    assert "whsec_" in bad.text


def test_probes_never_guess_an_input(client: TestClient) -> None:
    """Validation probes use a database the user gives, or the monitors' own, never `[]`."""
    calls: list[dict] = []
    good = ProbeResult(ok=True, outputs_received=10, elapsed_seconds=0.01, preview=[0.5])
    client.app.dependency_overrides[get_prober] = lambda: _prober(good, calls)
    refused = client.post("/v1/mechanisms?validate=true", json=MECHANISM)
    assert refused.status_code == 422 and refused.json()["errors"][0]["type"] == "no_probe_database"
    assert "probe_database" in refused.json()["detail"] and calls == []
    mechanism = create_mechanism(client)
    assert client.post(f"/v1/mechanisms/{mechanism['id']}/validate").status_code == 422
    assert client.patch(f"/v1/mechanisms/{mechanism['id']}?validate=true", json={"max_batch": 5}).status_code == 422
    # With a monitor, the probe uses its checks' databases.
    create_monitor(client, mechanism["id"])
    report = client.post(f"/v1/mechanisms/{mechanism['id']}/validate").json()
    assert report["ok"] is True and calls[-1]["database"] == MONITOR["checks"][0]["x"] == report["database"]
    # A stored probe database comes first.
    client.patch(f"/v1/mechanisms/{mechanism['id']}", json={"probe_database": {"rows": [1]}})
    client.post(f"/v1/mechanisms/{mechanism['id']}/validate")
    assert calls[-1]["database"] == {"rows": [1]}


def test_monitor_validation_probes_each_database_of_its_checks(client: TestClient) -> None:
    calls: list[dict] = []

    async def probe(mechanism, settings, *, database=None, n=10):  # noqa: ANN001, ANN202
        calls.append(database)
        if database == [9, 9]:
            return ProbeResult(ok=False, problems=["the endpoint refused this input"], reason="http_status")
        return ProbeResult(ok=True, outputs_received=n, preview=[0.1])

    client.app.dependency_overrides[get_prober] = lambda: probe
    mechanism = create_mechanism(client)
    checks = [{"x": [1, 1], "x_prime": [1, 0], "event": {"kind": "interval", "low": 1.5}},
              {"x": [1, 1], "x_prime": [9, 9], "event": {"kind": "interval", "low": 1.5}}]
    refused = client.post("/v1/monitors?validate=true",
                          json={**MONITOR, "mechanism_id": mechanism["id"], "checks": checks})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["location"] == ["body", "checks", 1, "x"]
    assert calls == [[1, 1], [1, 0], [9, 9]]  # each distinct database once
    assert client.get("/v1/monitors").json()["items"] == []
    created = client.post("/v1/monitors?validate=true",
                          json={**MONITOR, "mechanism_id": mechanism["id"], "checks": checks[:1]})
    assert created.status_code == 201 and created.json()["validation"]["ok"] is True
    assert [p["database"] for p in created.json()["validation"]["probes"]] == [[1, 1], [1, 0]]
    again = client.post(f"/v1/monitors/{created.json()['id']}/validate").json()
    assert again["ok"] is True and again["probes"][0]["checks"] == [0]


def test_a_declared_output_shape_is_stored_and_must_agree_with_the_kind(client: TestClient) -> None:
    shape = {"container": "vector", "length": 3, "values": "integer"}
    created = create_mechanism(client, output_kind="vector", dim=3, output_shape=shape)
    assert created["output_shape"] == shape and created["output_shape_source"] == "declared"
    wrong = client.post("/v1/mechanisms", json={**MECHANISM, "name": "w", "output_kind": "vector", "dim": 4,
                                                "output_shape": shape})
    assert wrong.status_code == 422 and "length" in wrong.text
    plain = create_mechanism(client, name="plain")
    assert plain["output_shape"] is None and plain["output_shape_source"] is None
    patched = client.patch(f"/v1/mechanisms/{plain['id']}", json={"output_shape": {"values": "integer"}})
    assert patched.json()["output_shape"] == {"values": "integer"}
    forgot = client.patch(f"/v1/mechanisms/{plain['id']}", json={"output_shape": None})
    assert forgot.json()["output_shape"] is None
