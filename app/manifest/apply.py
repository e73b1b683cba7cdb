"""``dpwatch apply`` and ``dpwatch export``: a running dpwatch's configuration as a YAML file,
through its REST API (the SDK's client) with an API key.

Apply reads and validates the whole file first (the API's own models), reads the tenant's current
mechanisms, monitors and webhooks, prints the plan (app/manifest/plan.py), and, unless
``--dry-run``, carries it out in dependency order: mechanisms, webhooks, monitors (updated in place
by PATCH when only fields that leave the running test alone changed; a replaced monitor's successor
is created before it is deleted, and only with ``--allow-replace``: without it a plan that replaces a
monitor changes nothing), then the destroys of ``--prune``. A failing
step stops the run; what was done before it stays done, and applying again completes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from app.manifest.plan import Change, ManifestError, Plan, make_plan, mechanism_entry, monitor_entry, webhook_entry
from app.manifest.probe import ProbeFailed, probe_mechanisms
from app.manifest.safe_yaml import load_yaml_file
from app.manifest.schema import Manifest

__all__ = ["export_manifest", "load_manifest", "run_apply", "run_export"]

Echo = Callable[[str], Any]

HEADER = ("# dpwatch manifest: `dpwatch apply -f FILE` makes the service match it (docs/sdk.md).\n"
          "# JSON Schema for editors: schemas/dpwatch-manifest.schema.json in the dpwatch repository, e.g.\n"
          "# yaml-language-server: $schema=https://dpwatch.dev/schemas/dpwatch-manifest.schema.json\n")


def load_manifest(path: Path) -> Manifest:
    """The file, read within limits (size, nesting, aliases: app/manifest/safe_yaml.py) and
    validated; ManifestError says what is wrong and where."""
    data = load_yaml_file(path)
    try:
        return Manifest.model_validate(data or {})
    except ValidationError as exc:
        lines = [f"{path} does not follow the manifest's schema:"]
        for error in exc.errors(include_url=False):
            where = ".".join(str(p) for p in error["loc"]) or "(top level)"
            lines.append(f"  {where}: {error['msg']}")
        raise ManifestError("\n".join(lines)) from None
    except (RecursionError, MemoryError) as exc:
        raise ManifestError(f"{path} cannot be validated within this process's limits ({type(exc).__name__})") from None


def _client(url: str | None, api_key: str | None) -> Any:
    from dpwatch_sdk import Client

    try:
        return Client(url, api_key)
    except ValueError as exc:
        raise ManifestError(f"{exc} (flags --url/--api-key or DPWATCH_URL/DPWATCH_API_KEY)") from None


def _current(client: Any) -> tuple[list[Any], list[Any], list[Any]]:
    return list(client.mechanisms.list()), list(client.monitors.list()), list(client.webhooks.list())


def _create_body(spec: Any, exclude: set[str]) -> dict[str, Any]:
    return spec.model_dump(mode="json", exclude_unset=True, exclude=exclude)


def _secret(change: Change) -> str | None:
    name = change.desired.secret_env
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise ManifestError(f'mechanism "{change.key}": the environment variable {name} (secret_env) is not set')
    return value


def _execute(client: Any, plan: Plan, mechanism_ids: dict[str, str], echo: Echo, err: Echo, probe: bool = True) -> None:
    """Carry the plan out; ``mechanism_ids`` (name → id of the registered ones) grows with the
    mechanisms it creates. With ``probe``, the mechanisms are probed before the first monitor is
    created (app/manifest/probe.py)."""
    ordered = ([c for c in plan.changes if c.kind == "mechanism" and c.action in ("create", "update")]
               + [c for c in plan.changes if c.kind == "webhook" and c.action in ("create", "update")]
               + [c for c in plan.changes if c.kind == "monitor" and c.action in ("create", "update", "replace")]
               + [c for kind in ("monitor", "webhook", "mechanism") for c in plan.changes
                  if c.kind == kind and c.action == "destroy"])
    probed = not probe
    for change in ordered:
        if not probed and change.kind == "monitor" and change.action in ("create", "replace"):
            probe_mechanisms(client, plan, mechanism_ids, echo)  # before the first monitor (app/manifest/probe.py)
            probed = True
        echo(f"{change.action} {change.kind} {change.key} …")
        if change.kind == "mechanism":
            if change.action == "create":
                body = _create_body(change.desired, {"secret_env", "secret"})
                secret = _secret(change)
                if secret is not None:
                    body["secret"] = secret
                made = client.mechanisms.create(body)
                mechanism_ids[change.key] = made["id"]
                if secret is None:
                    err(f'mechanism "{change.key}": its generated signing secret, shown once (configure the '
                        f"endpoint with it, or name a variable in secret_env): {made['secret']}")
            elif change.action == "update":
                client.mechanisms.update(change.existing["id"], change.body)
            else:
                client.mechanisms.delete(change.existing["id"])
        elif change.kind == "webhook":
            if change.action == "create":
                made = client.webhooks.create(_create_body(change.desired, {"enabled"}))
                if not change.desired.enabled:
                    client.webhooks.update(made, {"enabled": False})
                err(f"webhook {change.key}: its signing secret, shown once: {made['secret']}")
            elif change.action == "update":
                client.webhooks.update(change.existing["id"], change.body)
            else:
                client.webhooks.delete(change.existing["id"])
        else:
            spec = change.desired
            if change.action in ("create", "replace"):
                body = _create_body(spec, {"mechanism", "paused", "mechanism_id"})
                body["mechanism_id"] = mechanism_ids[spec.mechanism]
                made = client.monitors.create(body)
                if spec.paused:
                    client.monitors.pause(made)
                if change.action == "replace":
                    client.monitors.delete(change.existing["id"])
            elif change.action == "update":
                monitor_id = change.existing["id"]
                if change.body:
                    client.monitors.update(monitor_id, change.body)
                if spec.paused != (change.existing["state"] == "paused"):
                    (client.monitors.pause if spec.paused else client.monitors.resume)(monitor_id)
            else:
                client.monitors.delete(change.existing["id"])
    if not probed:
        probe_mechanisms(client, plan, mechanism_ids, echo)  # the mechanisms it created or changed


def _guarded(work: Callable[[], int], err: Echo) -> int:
    """Run a command's work: a bad file or usage is exit code 2, a refusal of the service 1."""
    from dpwatch_sdk.errors import ApiError

    try:
        return work()
    except ManifestError as exc:
        err(f"error: {exc}")
        return 2
    except ApiError as exc:
        err(f"error: the service refused: {exc}")
        return 1


def run_apply(path: Path, *, url: str | None, api_key: str | None, dry_run: bool = False, prune: bool = False,
              allow_replace: bool = False, echo: Echo = print, err: Echo = print, probe: bool = True) -> int:
    """Exit code: 0 done (or nothing to do), 1 when the API refused a step, 2 for a bad file or
    usage, including a plan that replaces a monitor without ``allow_replace`` (then nothing is
    changed)."""
    from dpwatch_sdk.errors import ApiError

    def work() -> int:
        manifest = load_manifest(path)
        with _client(url, api_key) as client:
            mechanisms, monitors, webhooks = _current(client)
            plan = make_plan(manifest, mechanisms, monitors, webhooks, prune=prune)
            echo(plan.render())
            if dry_run:
                echo("Dry run: nothing was changed.")
                return 0
            if plan.empty:
                echo("Nothing to do.")
                return 0
            replaced = [c.key for c in plan.of("replace")]
            if replaced and not allow_replace:
                err(f"error: the plan replaces {len(replaced)} monitor{'s' if len(replaced) > 1 else ''} ("
                    + ", ".join(f'"{k}"' for k in replaced) + "): a field that defines its test changed, so it "
                    "would be deleted with its periods and history and created again. Nothing was changed. Pass "
                    "--allow-replace to do it, or change only fields that update in place (docs/sdk.md).")
                return 2
            try:
                _execute(client, plan, {m["name"]: m["id"] for m in mechanisms}, echo, err, probe)
            except ProbeFailed as exc:
                err(f"error: {exc}\nNo monitor was created; the steps before the probe are done. Fix the endpoint "
                    "(or its sampling_url) and apply again.")
                return 1
            except ApiError as exc:
                err(f"error: the service refused the step above: {exc}\nThe steps before it are done; fix the "
                    "file and apply again to finish.")
                return 1
        echo("Applied.")
        return 0

    return _guarded(work, err)


def export_manifest(client: Any) -> dict[str, Any]:
    """The tenant's current configuration as a manifest (secrets are never included)."""
    mechanisms, monitors, webhooks = _current(client)
    names = {str(m["id"]): m["name"] for m in mechanisms}
    return {"version": 1,
            "mechanisms": [mechanism_entry(m) for m in sorted(mechanisms, key=lambda m: m["name"])],
            "monitors": [monitor_entry(m, names) for m in sorted(monitors, key=lambda m: m["name"])],
            "webhooks": [webhook_entry(w) for w in sorted(webhooks, key=lambda w: w["url"])]}


def run_export(output: Path | None, *, url: str | None, api_key: str | None, echo: Echo = print,
               err: Echo = print) -> int:
    def work() -> int:
        with _client(url, api_key) as client:
            data = export_manifest(client)
        text = HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
        if output is None:
            echo(text.rstrip("\n"))
        else:
            output.write_text(text)
            err(f"wrote {output}: {len(data['mechanisms'])} mechanisms, {len(data['monitors'])} monitors, "
                f"{len(data['webhooks'])} webhooks (secrets are not exported: add secret_env to the mechanisms)")
        return 0

    return _guarded(work, err)
