"""What the OpenAPI description states beyond FastAPI's defaults: every status, and links.

``complete_openapi(schema)`` is applied once to the generated description (app.main):

* every operation with a request body documents 413 (the body-size limit) and 422 (malformed
  JSON, NaN/Infinity/NUL, failed validation), which ``app.api.limits`` answers before routing;
* every operation under ``/v1`` documents 401 (no or bad key) and 503 (database timeouts), and
  every operation documents 422 for a NUL or non-finite number in its query string;
* OpenAPI ``links`` from each creation to what can be done with the created resource
  (mechanism → monitor → its status, periods, alarms, snapshots; webhook → deliveries; job), so
  that a stateful client or fuzzer (schemathesis) can chain calls.
"""

from __future__ import annotations

from typing import Any

from app.api.errors import PROBLEM_MEDIA_TYPE, problem_responses

_METHODS = ("get", "post", "put", "patch", "delete")

# (source path, source method, status) → [(link name, target path, target method, parameters, body)]
_LINKS: list[tuple[str, str, str, list[tuple[str, str, str, dict[str, str], dict[str, str] | None]]]] = [
    ("/v1/mechanisms", "post", "201", [
        ("GetMechanism", "/v1/mechanisms/{mechanism_id}", "get", {"mechanism_id": "$response.body#/id"}, None),
        ("UpdateMechanism", "/v1/mechanisms/{mechanism_id}", "patch", {"mechanism_id": "$response.body#/id"}, None),
        ("ValidateMechanism", "/v1/mechanisms/{mechanism_id}/validate", "post",
         {"mechanism_id": "$response.body#/id"}, None),
        ("CreateMonitor", "/v1/monitors", "post", {}, {"mechanism_id": "$response.body#/id"}),
        ("ListMonitorsOfMechanism", "/v1/monitors", "get", {"mechanism_id": "$response.body#/id"}, None),
        ("DiscoverEvents", "/v1/mechanisms/{mechanism_id}/discover", "post",
         {"mechanism_id": "$response.body#/id"}, None),
        ("AuditMechanism", "/v1/mechanisms/{mechanism_id}/audits", "post",
         {"mechanism_id": "$response.body#/id"}, None),
        ("DeleteMechanism", "/v1/mechanisms/{mechanism_id}", "delete", {"mechanism_id": "$response.body#/id"}, None),
    ]),
    ("/v1/monitors", "post", "201", [
        ("GetMonitor", "/v1/monitors/{monitor_id}", "get", {"monitor_id": "$response.body#/id"}, None),
        ("GetMonitorStatus", "/v1/monitors/{monitor_id}/status", "get", {"monitor_id": "$response.body#/id"}, None),
        ("ListPeriods", "/v1/monitors/{monitor_id}/periods", "get", {"monitor_id": "$response.body#/id"}, None),
        ("ListAlarmsOfMonitor", "/v1/alarms", "get", {"monitor_id": "$response.body#/id"}, None),
        ("PauseMonitor", "/v1/monitors/{monitor_id}/pause", "post", {"monitor_id": "$response.body#/id"}, None),
        ("ResumeMonitor", "/v1/monitors/{monitor_id}/resume", "post", {"monitor_id": "$response.body#/id"}, None),
        ("ResetMonitor", "/v1/monitors/{monitor_id}/reset", "post", {"monitor_id": "$response.body#/id"}, None),
        ("ValidateMonitor", "/v1/monitors/{monitor_id}/validate", "post", {"monitor_id": "$response.body#/id"}, None),
        ("ListSnapshots", "/v1/monitors/{monitor_id}/snapshots", "get", {"monitor_id": "$response.body#/id"}, None),
        ("DeleteMonitor", "/v1/monitors/{monitor_id}", "delete", {"monitor_id": "$response.body#/id"}, None),
        ("GetMechanismOfMonitor", "/v1/mechanisms/{mechanism_id}", "get",
         {"mechanism_id": "$response.body#/mechanism_id"}, None),
    ]),
    ("/v1/alarms", "get", "200", [
        ("GetAlarm", "/v1/alarms/{alarm_id}", "get", {"alarm_id": "$response.body#/items/0/id"}, None),
        ("AcknowledgeAlarm", "/v1/alarms/{alarm_id}/acknowledge", "post",
         {"alarm_id": "$response.body#/items/0/id"}, None),
    ]),
    ("/v1/webhooks", "post", "201", [
        ("GetWebhook", "/v1/webhooks/{webhook_id}", "get", {"webhook_id": "$response.body#/id"}, None),
        ("UpdateWebhook", "/v1/webhooks/{webhook_id}", "patch", {"webhook_id": "$response.body#/id"}, None),
        ("TestWebhook", "/v1/webhooks/{webhook_id}/test", "post", {"webhook_id": "$response.body#/id"}, None),
        ("ListDeliveries", "/v1/webhooks/{webhook_id}/deliveries", "get", {"webhook_id": "$response.body#/id"}, None),
        ("DeleteWebhook", "/v1/webhooks/{webhook_id}", "delete", {"webhook_id": "$response.body#/id"}, None),
    ]),
    ("/v1/mechanisms/{mechanism_id}/discover", "post", "202", [
        ("GetJob", "/v1/jobs/{job_id}", "get", {"job_id": "$response.body#/id"}, None),
        ("CancelJob", "/v1/jobs/{job_id}/cancel", "post", {"job_id": "$response.body#/id"}, None),
    ]),
    ("/v1/mechanisms/{mechanism_id}/audits", "post", "202", [
        ("GetAuditJob", "/v1/jobs/{job_id}", "get", {"job_id": "$response.body#/id"}, None),
    ]),
    ("/v1/monitors/{monitor_id}/snapshots", "post", "202", [
        ("GetSnapshot", "/v1/snapshots/{snapshot_id}", "get", {"snapshot_id": "$response.body#/id"}, None),
    ]),
]


def _add_responses(operation: dict[str, Any], statuses: tuple[int, ...], problem_ref: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    for status, entry in problem_responses(*statuses).items():
        key = str(status)
        if key in responses:
            continue
        responses[key] = {"description": entry["description"], "content": {PROBLEM_MEDIA_TYPE: {"schema": problem_ref}}}
        if status == 503:
            responses[key]["headers"] = {
                "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
            }


def complete_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    problem_ref = {"$ref": "#/components/schemas/Problem"}
    paths: dict[str, Any] = schema.get("paths", {})
    for path, item in paths.items():
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            statuses: tuple[int, ...] = ()
            if "requestBody" in operation:
                statuses += (400, 413, 422)
            if any(p.get("in") == "query" for p in operation.get("parameters", [])):
                statuses += (422,)
            if path.startswith("/v1/"):
                statuses += (401, 503)
            _add_responses(operation, statuses, problem_ref)
            if path.startswith("/v1/") and "503" in operation["responses"]:
                operation["responses"]["503"].setdefault("headers", {
                    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
                })
    for source_path, source_method, status, links in _LINKS:
        source = paths.get(source_path, {}).get(source_method)
        if source is None or status not in source.get("responses", {}):
            continue
        out = source["responses"][status].setdefault("links", {})
        for name, target_path, target_method, parameters, body in links:
            target = paths.get(target_path, {}).get(target_method)
            if target is None or "operationId" not in target:
                continue
            link: dict[str, Any] = {"operationId": target["operationId"]}
            if parameters:
                link["parameters"] = dict(parameters)
            if body is not None:
                link["requestBody"] = dict(body)
            out[name] = link
    return schema
