"""Quotas per tenant: monitors, jobs queued, outputs drawn per day and raw-output bytes kept, each a
429 over it with what the tenant has (Retry-After) and a 422 when the request alone is over it;
nothing is saved either way. Both database backends."""

from __future__ import annotations

import uuid

from app.models.monitors import Monitor
from app.quotas.service import set_quotas

BODY = {"name": "q", "epsilon": 1.0, "horizon": 50, "samples_per_period": 200, "period_seconds": 60,
        "checks": [{"x": [0.0], "x_prime": [1.0], "event": {"kind": "interval", "low": None, "high": 0.0}}]}


def _mechanism(client) -> str:
    answer = client.post("/v1/mechanisms", json={"name": f"m-{uuid.uuid4().hex[:6]}", "output_kind": "real",
                                                  "sampling_url": "http://127.0.0.1:9/laplace"})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _quota(db, tenant_id, **values) -> None:
    with db() as session:
        set_quotas(session, tenant_id, values)


def _count(db, tenant_id) -> int:
    with db() as session:
        return session.query(Monitor).filter(Monitor.tenant_id == tenant_id).count()


def _problem(answer, status: int, slug: str, quota_or_field: str) -> dict:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["type"].endswith(slug) and body["status"] == status
    assert any(quota_or_field in e["location"] for e in body["errors"]), body
    return body


def test_the_quotas_and_usage_are_shown_with_their_defaults(client, settings):
    mech = _mechanism(client)
    assert client.post("/v1/monitors", json={**BODY, "mechanism_id": mech}).status_code == 201
    body = client.get("/v1/quotas").json()
    assert body["limits"] == {"max_monitors": settings.quota_max_monitors,
                              "max_concurrent_jobs": settings.quota_max_concurrent_jobs,
                              "max_queued_jobs": settings.quota_max_queued_jobs,
                              "max_outputs_per_day": settings.quota_max_outputs_per_day,
                              "max_stored_output_bytes": settings.quota_max_stored_output_bytes}
    # 200 outputs on 2 databases, 1440 periods a day; 20 periods of 2 × 200 float32 kept.
    assert body["usage"]["monitors"] == 1 and body["usage"]["outputs_per_day"] == 200 * 2 * 1440
    assert body["usage"]["stored_output_bytes_committed"] == 20 * 200 * 2 * 4


def test_monitors_over_the_quota_are_a_429_and_nothing_is_saved(client, db, tenants):
    _quota(db, tenants[0].tenant_id, max_monitors=2)
    mech = _mechanism(client)
    for _ in range(2):
        assert client.post("/v1/monitors", json={**BODY, "mechanism_id": mech}).status_code == 201
    answer = client.post("/v1/monitors", json={**BODY, "mechanism_id": mech})
    body = _problem(answer, 429, "quota-exceeded", "max_monitors")
    assert answer.headers["retry-after"] == "60" and "quota is 2" in body["detail"]
    assert _count(db, tenants[0].tenant_id) == 2
    # the other tenant is not limited by this one's quota
    other = client.post("/v1/mechanisms", headers=tenants[1].headers, json={
        "name": "o", "output_kind": "real", "sampling_url": "http://127.0.0.1:9/x"}).json()
    assert client.post("/v1/monitors", headers=tenants[1].headers,
                       json={**BODY, "mechanism_id": other["id"]}).status_code == 201


def test_outputs_per_day_alone_is_a_422_and_with_the_rest_a_429(client, db, tenants):
    _quota(db, tenants[0].tenant_id, max_outputs_per_day=1_000_000)
    mech = _mechanism(client)
    alone = client.post("/v1/monitors", json={**BODY, "mechanism_id": mech, "samples_per_period": 1000})
    _problem(alone, 422, "quota-exceeds-limit", "samples_per_period")  # 2 × 1000 × 1440 = 2.88 M alone
    ok = {**BODY, "mechanism_id": mech, "samples_per_period": 200}  # 576,000 a day each
    assert client.post("/v1/monitors", json=ok).status_code == 201
    _problem(client.post("/v1/monitors", json=ok), 429, "quota-exceeded", "max_outputs_per_day")
    assert _count(db, tenants[0].tenant_id) == 1
    # a slower schedule fits
    assert client.post("/v1/monitors", json={**ok, "period_seconds": 600}).status_code == 201


def test_stored_raw_output_bytes_and_a_patch_that_would_go_over(client, db, tenants):
    _quota(db, tenants[0].tenant_id, max_stored_output_bytes=100_000)
    mech = _mechanism(client)
    _problem(client.post("/v1/monitors", json={**BODY, "mechanism_id": mech, "outputs_window": 100}),
             422, "quota-exceeds-limit", "outputs_window")  # 100 × 200 × 2 × 4 = 160,000 bytes
    created = client.post("/v1/monitors", json={**BODY, "mechanism_id": mech, "outputs_window": 20})
    assert created.status_code == 201  # 32,000 bytes
    patched = client.patch(f"/v1/monitors/{created.json()['id']}", json={"outputs_window": 1000})
    _problem(patched, 422, "quota-exceeds-limit", "outputs_window")
    assert client.get(f"/v1/monitors/{created.json()['id']}").json()["outputs_window"] == 20


def test_jobs_queued_over_the_quota_and_a_budget_over_a_day_of_outputs(client, db, tenants):
    _quota(db, tenants[0].tenant_id, max_queued_jobs=1, max_outputs_per_day=10_000_000)
    mech = _mechanism(client)
    body = {"pairs": [{"x": [0], "x_prime": [1]}], "budget": 1000, "first_round": 100}
    assert client.post(f"/v1/mechanisms/{mech}/discover", json=body).status_code == 202
    answer = client.post(f"/v1/mechanisms/{mech}/discover", json=body)
    _problem(answer, 429, "quota-exceeded", "max_queued_jobs")
    assert answer.headers["retry-after"] == "60"
    _quota(db, tenants[0].tenant_id, max_queued_jobs=10)
    big = client.post(f"/v1/mechanisms/{mech}/audits", json={**body, "epsilon": 1.0, "budget": 6_000_000})
    _problem(big, 422, "quota-exceeds-limit", "budget")  # 6 M per database × 2 databases
    assert len(client.get("/v1/jobs").json()["items"]) == 1
