"""The dashboard's create/change forms read through the API's own schemas and services.

A form's fields become the API's request model (the same pydantic class the JSON route takes);
the model's validation errors, and the :class:`app.api.errors.ProblemError` a service raises with
its ``errors``, become messages keyed by field, which the templates show beside each field
(``field`` in ``_macros.html``). Nothing is validated twice in two ways: the page shows exactly what
the API would have answered.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from app.api.errors import ProblemError, _clean_message
from app.db import utcnow

M = TypeVar("M", bound=BaseModel)
#: The key of an error that belongs to no one field (shown above the form).
GENERAL = "__all__"

Errors = dict[str, list[str]]


def _key(location: list[Any] | tuple[Any, ...]) -> str:
    parts = [str(p) for p in location if p != "body"]
    return ".".join(parts) if parts else GENERAL


def validation_errors(exc: ValidationError) -> Errors:
    out: Errors = {}
    for error in exc.errors():
        out.setdefault(_key(error.get("loc", ())), []).append(_clean_message(dict(error)))
    return out


def problem_errors(exc: ProblemError) -> Errors:
    """A service's problem as messages by field; one without fields goes above the form."""
    out: Errors = {}
    for error in exc.errors or []:
        out.setdefault(_key(error.get("location") or []), []).append(str(error.get("message")))
    if not out:
        out[GENERAL] = [exc.detail]
    return out


def parse(model: type[M], data: dict[str, Any]) -> tuple[M | None, Errors]:
    try:
        return model.model_validate(data), {}
    except ValidationError as exc:
        return None, validation_errors(exc)


def rename(errors: Errors, mapping: dict[str, str]) -> Errors:
    """Errors of nested API fields (``checks.0.x``) under the form's own field names (``x``)."""
    out: Errors = {}
    for key, messages in errors.items():
        target = mapping.get(key)
        if target is None:
            target = next((v for k, v in mapping.items() if key.startswith(k + ".")), key)
        out.setdefault(target, []).extend(messages)
    return out


def orphaned(errors: Errors, fields: set[str]) -> Errors:
    """Errors whose key is no field of the form go above it (with their API name), so none is lost."""
    out: Errors = {}
    for key, messages in errors.items():
        if key in fields or key == GENERAL:
            out.setdefault(key, []).extend(messages)
        else:
            out.setdefault(GENERAL, []).extend(f"{key}: {m}" for m in messages)
    return out


def blank_to_none(value: str | None) -> str | None:
    return None if value is None or not value.strip() else value.strip()


def json_field(values: dict[str, str], name: str, errors: Errors, *, default: Any = None) -> Any:
    """A JSON field of a form (a database, an event); a parse error is that field's error."""
    text = blank_to_none(values.get(name))
    if text is None:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        errors.setdefault(name, []).append(f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).")
        return default


def utc_field(value: str | None) -> str | None:
    """An ``<input type="datetime-local">`` value, read as UTC (the dashboard's times are UTC)."""
    text = blank_to_none(value)
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return text  # the API's own error ("Input should be a valid datetime") goes beside the field
    return text if parsed.tzinfo is not None else text + ("" if text.endswith("Z") else "+00:00")


def silence_defaults(**preset: Any) -> dict[str, Any]:
    """A new silence's form values: from now for two hours, with the matchers given (e.g. an alarm's
    monitor)."""
    return {"starts_at": "", "ends_at": (utcnow() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"), **preset}
