"""The plan of ``dpwatch apply``: what the manifest wants against what the service has.

Entries are matched by key (a mechanism's and a monitor's ``name``, a webhook's ``url``) and
compared in one canonical form, reached the same way from both sides: the desired entry is read by
the manifest's models, and the current resource is first turned back into a manifest entry
(:func:`mechanism_entry`, :func:`monitor_entry`, :func:`webhook_entry`, which ``dpwatch export``
also writes) and then read by the same models. So an exported file applies as "unchanged".

Actions: ``create``; ``update`` (in place: mechanisms and webhooks by PATCH; a monitor by
``PATCH /v1/monitors/{id}`` when only fields that do not change its running test differ (n, the
schedule, snapshot and discovery sizes: ``IN_PLACE_FIELDS``), and its ``paused`` by pause/resume,
so that it keeps its id, periods and detectors); ``replace`` (a monitor whose test changed: checks,
claim, α, γ, T, detector, …, or its mechanism: a new one is created and the old one deleted with
its periods, its alarms archived; carried out only with ``--allow-replace``); ``unchanged``;
``destroy`` (only with ``--prune``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app.manifest.schema import Manifest, MechanismSpec, MonitorSpec, WebhookSpec
from app.stats.shapes import OutputShape

__all__ = ["Change", "ManifestError", "Plan", "make_plan", "mechanism_entry", "monitor_entry", "webhook_entry"]

Action = Literal["create", "update", "replace", "unchanged", "destroy"]
Kind = Literal["mechanism", "monitor", "webhook"]

MECHANISM_FIELDS = ("sampling_url", "output_kind", "dim", "max_batch", "timeout_seconds", "prefer_binary",
                    "output_shape", "probe_database")
MONITOR_FIELDS = ("alpha", "gamma", "detector", "horizon", "samples_per_period", "period_seconds", "cron",
                  "variance", "kappa", "symmetric", "renew", "outputs_window", "snapshot_every",
                  "alarm_snapshot_samples", "rediscover_every", "discovery_samples", "discovery_fresh_samples",
                  "search_every", "search_budget")
#: Monitor fields ``PATCH /v1/monitors/{id}`` changes in place (app/monitors/schemas.py ``SAFE_FIELDS``):
#: the others define the test, and a change to them replaces the monitor. ``rediscover_every`` and
#: ``search_every`` are in place only between positive values (0 ↔ K changes the α split).
IN_PLACE_FIELDS = ("samples_per_period", "period_seconds", "cron", "outputs_window", "snapshot_every",
                   "alarm_snapshot_samples", "discovery_samples", "discovery_fresh_samples", "rediscover_every",
                   "search_every", "search_budget")
TOGGLES = ("rediscover_every", "search_every")
#: Fields the service fills in when they are left out (a default it computes): compared only when
#: the manifest gives them.
SERVER_DEFAULTS = ("horizon", "rediscover_every", "discovery_samples", "discovery_fresh_samples")


class ManifestError(ValueError):
    """The manifest cannot be applied as it stands (an unknown mechanism, an ambiguous name)."""


@dataclass
class Change:
    kind: Kind
    key: str
    action: Action
    details: list[str] = field(default_factory=list)
    desired: Any = None
    current: Mapping[str, Any] | None = None
    body: dict[str, Any] | None = None

    @property
    def existing(self) -> Mapping[str, Any]:
        """The service's read body of the resource: an update, a replace and a destroy always have one."""
        if self.current is None:
            raise ValueError(f"{self.action} of {self.kind} {self.key!r} without its current state")
        return self.current

    def describe(self) -> str:
        label = f'{self.kind} "{self.key}"' if self.kind != "webhook" else f"webhook {self.key}"
        line = f"  {self.action:<9} {label}"
        if self.details:
            line += f": {'; '.join(self.details)}"
        return line


@dataclass
class Plan:
    changes: list[Change]

    def of(self, *actions: Action) -> list[Change]:
        return [c for c in self.changes if c.action in actions]

    def summary(self) -> str:
        counts = {a: len(self.of(a)) for a in ("create", "update", "replace", "destroy", "unchanged")}
        return (f"Plan: {counts['create']} to create, {counts['update']} to update, {counts['replace']} to replace, "
                f"{counts['destroy']} to destroy, {counts['unchanged']} unchanged.")

    def render(self) -> str:
        return "\n".join([*(c.describe() for c in self.changes), self.summary()])

    @property
    def empty(self) -> bool:
        return not self.of("create", "update", "replace", "destroy")


# --------------------------------------------------------------------------- current -> manifest entries


def _shape(shape: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if shape is None else OutputShape.model_validate(shape).model_dump(mode="json", exclude_defaults=True)


def mechanism_entry(read: Mapping[str, Any]) -> dict[str, Any]:
    """A registered mechanism as a manifest entry (its secret is never part of it)."""
    entry: dict[str, Any] = {"name": read["name"]}
    for key in MECHANISM_FIELDS:
        value = read.get(key)
        if key == "output_shape":
            value = _shape(value) if read.get("output_shape_source") == "declared" else None
        entry[key] = value
    return MechanismSpec.model_validate(entry).model_dump(mode="json", exclude_defaults=True, exclude={"secret"})


def monitor_entry(read: Mapping[str, Any], mechanism_names: Mapping[str, str]) -> dict[str, Any]:
    """A monitor as a manifest entry: its mechanism by name, the checks it was given (not the
    reversed copies of ``symmetric`` nor those re-discovery added), ``auto`` for discovered events,
    a check's claim only when it is not the monitor's."""
    claim = read.get("claim")
    checks = []
    for check in sorted(read.get("checks", []), key=lambda c: c["position"]):
        if check.get("reversed") or check.get("origin") == "rediscovery":
            continue
        item: dict[str, Any] = {"x": check["x"], "x_prime": check["x_prime"],
                                "event": {"kind": "auto"} if check.get("origin") == "auto" else check["event"]}
        if check.get("claim") and check["claim"] != claim:
            item["claim"] = check["claim"]
        checks.append(item)
    mechanism_id = str(read["mechanism_id"])
    entry: dict[str, Any] = {"name": read["name"], "mechanism": mechanism_names.get(mechanism_id, mechanism_id),
                             "checks": checks}
    if claim is not None:
        entry["claim"] = claim
    for key in MONITOR_FIELDS:
        entry[key] = read.get(key)
    if read.get("detector") == "e-process":
        # its horizon is the one it was created with, whose design its checks run, or none (the stored
        # default is unused)
        entry["horizon"] = read.get("design_horizon")
    if not any(c["event"] == {"kind": "auto"} for c in checks):
        entry.pop("rediscover_every", None)
    entry["paused"] = read.get("state") == "paused"
    spec = MonitorSpec.model_validate(entry)
    out = spec.model_dump(mode="json", exclude_defaults=True, exclude={"mechanism_id"})
    out["checks"] = [_check_dump(c) for c in spec.checks]
    return {"name": out.pop("name"), "mechanism": out.pop("mechanism"), **out}


def _check_dump(check: Any) -> dict[str, Any]:
    item = {"x": check.x, "x_prime": check.x_prime, "event": check.event.model_dump(mode="json", exclude_defaults=True)}
    item["event"]["kind"] = check.event.kind
    if check.claim is not None:
        item["claim"] = check.claim.to_dict()
    return item


def webhook_entry(read: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": read["url"], "event_types": list(read["event_types"])}
    if not read.get("enabled", True):
        entry["enabled"] = False
    return entry


# --------------------------------------------------------------------------- canonical forms


def _mechanism_canon(spec: MechanismSpec) -> dict[str, Any]:
    out = {key: getattr(spec, key) for key in MECHANISM_FIELDS}
    out["output_shape"] = None if spec.output_shape is None else _shape(spec.output_shape.model_dump(mode="json"))
    return json.loads(json.dumps(out, default=str))


def _monitor_canon(spec: MonitorSpec) -> dict[str, Any]:
    claim = spec.claim.to_dict() if spec.claim is not None else (
        {"epsilon": spec.epsilon} if spec.epsilon is not None else None)
    out: dict[str, Any] = {key: getattr(spec, key) for key in MONITOR_FIELDS}
    if spec.detector != "aggregator" or not any(c.event.kind == "auto" for c in spec.checks):
        out["rediscover_every"] = None  # the service ignores it (stores 0) without auto events
    out["claim"] = claim
    out["checks"] = [{"x": c.x, "x_prime": c.x_prime, "event": c.event.model_dump(mode="json"),
                      "claim": c.claim.to_dict() if c.claim is not None else claim} for c in spec.checks]
    return json.loads(json.dumps(out))


def _webhook_canon(spec: WebhookSpec) -> dict[str, Any]:
    return {"event_types": sorted(spec.event_types), "enabled": spec.enabled}


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "…"


def _changed(desired: Mapping[str, Any], current: Mapping[str, Any], *, lazy: Sequence[str] = ()) -> list[str]:
    """The keys whose desired value differs from the current one (``lazy`` keys only when given)."""
    return [key for key, want in desired.items()
            if not (key in lazy and want is None) and want != current.get(key)]


def _describe(keys: Sequence[str], desired: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    return [f"{key} changed" if key == "checks" else f"{key}: {_show(current.get(key))} → {_show(desired[key])}"
            for key in keys]


def _differences(desired: Mapping[str, Any], current: Mapping[str, Any], *, lazy: Sequence[str] = ()) -> list[str]:
    return _describe(_changed(desired, current, lazy=lazy), desired, current)


def _in_place(key: str, want: Mapping[str, Any], have: Mapping[str, Any]) -> bool:
    """Whether PATCH can change ``key`` without touching the monitor's running test."""
    if key not in IN_PLACE_FIELDS:
        return False
    return key not in TOGGLES or bool(want[key]) == bool(have.get(key))


# --------------------------------------------------------------------------- the plan


def make_plan(manifest: Manifest, mechanisms: Sequence[Mapping[str, Any]], monitors: Sequence[Mapping[str, Any]],
              webhooks: Sequence[Mapping[str, Any]], *, prune: bool = False) -> Plan:
    """Compare the manifest with the service's current resources (API read bodies)."""
    changes: list[Change] = []
    current_mechanisms = {m["name"]: m for m in mechanisms}
    names = {str(m["id"]): m["name"] for m in mechanisms}
    for spec in manifest.mechanisms:
        current = current_mechanisms.get(spec.name)
        if current is None:
            changes.append(Change("mechanism", spec.name, "create", desired=spec))
            continue
        want = _mechanism_canon(spec)
        have = _mechanism_canon(MechanismSpec.model_validate(mechanism_entry(current)))
        diff = _differences(want, have)
        body = {k: want[k] for k in want if want[k] != have[k]}
        if "output_shape" in body and spec.output_shape is not None:  # want's canonical shape is None iff it is
            body["output_shape"] = spec.output_shape.model_dump(mode="json")
        changes.append(Change("mechanism", spec.name, "update" if diff else "unchanged", diff, spec, current,
                              body or None))

    in_file = {m.name for m in manifest.mechanisms}
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for monitor in monitors:
        by_name.setdefault(monitor["name"], []).append(monitor)
    for spec in manifest.monitors:
        if spec.mechanism not in in_file and spec.mechanism not in current_mechanisms:
            raise ManifestError(f'monitor "{spec.name}": no mechanism named "{spec.mechanism}" in the file or '
                                "registered")
        if prune and spec.mechanism not in in_file:
            raise ManifestError(f'monitor "{spec.name}": with --prune its mechanism "{spec.mechanism}" must be in '
                                "the file (it would be destroyed)")
        found = by_name.get(spec.name, [])
        if len(found) > 1:
            raise ManifestError(f'{len(found)} monitors are named "{spec.name}"; apply matches monitors by name: '
                                "rename or delete the extra ones")
        if not found:
            changes.append(Change("monitor", spec.name, "create", desired=spec))
            continue
        current = found[0]
        want = _monitor_canon(spec)
        have = _monitor_canon(MonitorSpec.model_validate(monitor_entry(current, names)))
        keys = _changed(want, have, lazy=SERVER_DEFAULTS)
        unsafe = [key for key in keys if not _in_place(key, want, have)]
        diff = _describe(keys, want, have)
        if names.get(str(current["mechanism_id"])) != spec.mechanism:
            diff.insert(0, f"mechanism: {_show(names.get(str(current['mechanism_id'])))} → {spec.mechanism}")
            unsafe.insert(0, "mechanism")
        paused = current.get("state") == "paused"
        if spec.paused != paused:
            diff.append(f"paused: {_show(paused)} → {_show(spec.paused)}")
        if unsafe:
            changes.append(Change("monitor", spec.name, "replace", [
                *diff, f"{', '.join(unsafe)} define{'s' if len(unsafe) == 1 else ''} the running test, which cannot "
                "change in place: a new monitor is created, then this one is deleted with its periods and history "
                "(its alarms are archived); needs --allow-replace"], spec, current))
        elif diff:
            body = {key: want[key] for key in keys}
            if "period_seconds" in body or "cron" in body:  # one schedule replaces the other
                body.update(period_seconds=want["period_seconds"], cron=want["cron"])
            changes.append(Change("monitor", spec.name, "update", diff, spec, current, body or None))
        else:
            changes.append(Change("monitor", spec.name, "unchanged", desired=spec, current=current))

    current_webhooks = {w["url"]: w for w in webhooks}
    for spec in manifest.webhooks:
        current = current_webhooks.get(spec.url)
        if current is None:
            changes.append(Change("webhook", spec.url, "create", desired=spec))
            continue
        want, have = _webhook_canon(spec), _webhook_canon(WebhookSpec.model_validate(webhook_entry(current)))
        diff = _differences(want, have)
        body = {k: (list(spec.event_types) if k == "event_types" else want[k]) for k in want if want[k] != have[k]}
        changes.append(Change("webhook", spec.url, "update" if diff else "unchanged", diff, spec, current,
                              body or None))

    if prune:
        wanted_monitors = {m.name for m in manifest.monitors}
        for monitor in monitors:
            if monitor["name"] not in wanted_monitors:
                changes.append(Change("monitor", monitor["name"], "destroy", ["not in the file (--prune)"],
                                      current=monitor))
        wanted_urls = {w.url for w in manifest.webhooks}
        for hook in webhooks:
            if hook["url"] not in wanted_urls:
                changes.append(Change("webhook", hook["url"], "destroy", ["not in the file (--prune)"], current=hook))
        for mechanism in mechanisms:
            if mechanism["name"] not in in_file:
                changes.append(Change("mechanism", mechanism["name"], "destroy", ["not in the file (--prune)"],
                                      current=mechanism))
    return Plan(changes)
