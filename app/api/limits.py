"""Request limits at the ASGI edge, before FastAPI parses anything.

:class:`RequestLimitsMiddleware` is a pure ASGI middleware (no ``BaseHTTPMiddleware``, so it
neither buffers responses nor breaks streaming) that, for every HTTP request:

* answers **413** when the body is larger than ``max_body_bytes``. A ``Content-Length`` above the
  limit is refused before a byte is read; a chunked body is counted as it streams and refused as
  soon as the count passes the limit. Nothing larger than the limit is ever held in memory.
* for JSON bodies (``application/json``, ``*+json`` or no content type, which FastAPI reads as
  JSON), answers **422** (``json_invalid``) when the body is not valid UTF-8 JSON, and **422** when it
  holds a value
  that JSON does not have but Python's parser accepts: ``NaN``, ``Infinity``, ``-Infinity``,
  a number that overflows a double (``1e999``), or a ``\\u0000`` in any string or key.
  Postgres refuses the last two, and none of them is a meaningful input anywhere in the API.
* answers **422** when a query parameter's name or value holds a NUL or another control character
  (``%01``-``%1F``, ``%7F``), or a value spells a non-finite number (``nan``, ``inf``, ``1e999``...).
  This runs for every route, ``/healthz`` included.

The body is then replayed unchanged to the application, which parses it again: the JSON check
costs one extra parse of at most ``max_body_bytes`` (1 MiB by default).

Each refusal is one problem+json answer; the access log line written by
``RequestContextMiddleware`` is the only log line for it (no error is logged twice).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import PROBLEM_MEDIA_TYPE, PROBLEM_TYPE_BASE, ProblemError, field_problem

_NON_FINITE_TEXT = re.compile(r"^\s*[+-]?(nan|inf|infinity)\s*$", re.IGNORECASE)
#: C0 controls and DEL: no query value of the API carries them, and some (\x1c-\x1f) count as
#: whitespace to Python's regular expressions but not to float(), which once made ``?x=3%1D`` a 500.
_CONTROL = re.compile(r"[\x01-\x1f\x7f]")
_NUMBER_TEXT = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")
_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class _NonFinite:
    """What ``json.loads`` gives for ``NaN``/``Infinity``/``-Infinity`` in our parse."""

    def __init__(self, text: str) -> None:
        self.text = text


def _escape(part: str | int) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def find_bad_json_value(value: Any, path: tuple[str | int, ...] = ()) -> tuple[tuple[str | int, ...], str] | None:
    """The path to, and a description of, the first value JSON cannot carry safely, or None."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, _NonFinite):
            return where, f"{item.text} is not a JSON number; numbers must be finite"
        if isinstance(item, float) and not math.isfinite(item):
            return where, "the number is too large (it overflows a double); numbers must be finite"
        if isinstance(item, str):
            if "\x00" in item:
                return where, "the string contains a NUL character (\\u0000), which is not allowed"
        elif isinstance(item, dict):
            for key, sub in reversed(list(item.items())):
                if "\x00" in key:
                    return (*where, key), "the key contains a NUL character (\\u0000), which is not allowed"
                stack.append(((*where, key), sub))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append(((*where, index), item[index]))
    return None


def parse_strict_json(body: bytes) -> Any:
    """``json.loads`` that keeps NaN/Infinity as markers (found by :func:`find_bad_json_value`)."""
    return json.loads(body.decode("utf-8"), parse_constant=_NonFinite)


def _query_problem(query_string: bytes) -> dict[str, Any] | None:
    try:
        text = query_string.decode("latin-1")
        pairs = parse_qsl(text, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return field_problem(["query"], "the query string is not valid percent-encoded UTF-8", "query_invalid")
    for name, value in pairs:
        if "\x00" in name or "\x00" in value:
            return field_problem(["query", name.replace("\x00", "")], "a NUL character (%00) is not allowed",
                                 "string_nul")
        if _CONTROL.search(name) or _CONTROL.search(value):
            return field_problem(["query", _CONTROL.sub("", name)],
                                 "control characters (%01-%1F, %7F) are not allowed in a query string",
                                 "string_control_character")
        if _NON_FINITE_TEXT.match(value) or (_NUMBER_TEXT.match(value) and not math.isfinite(_as_float(value))):
            return field_problem(["query", name], f"{value!r} is not a finite number", "finite_number")
    return None


def _as_float(text: str) -> float:
    """``float(text)`` for text that looks like a number; 0.0 when Python does not read it as one
    (the route's own validation then answers)."""
    try:
        return float(text)
    except ValueError:
        return 0.0


def _is_json(content_type: str | None) -> bool:
    if content_type is None:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json") or media == ""


async def _problem(send: Send, scope: Scope, status: int, title: str, slug: str, detail: str,
                   errors: list[dict[str, Any]] | None = None) -> None:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": scope.get("path", ""),
    }
    if errors is not None:
        body["errors"] = errors
    payload = json.dumps(body).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", PROBLEM_MEDIA_TYPE.encode()), (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close")] if status == 413 else
                   [(b"content-type", PROBLEM_MEDIA_TYPE.encode()), (b"content-length", str(len(payload)).encode())],
    })
    await send({"type": "http.response.body", "body": payload})


class RequestLimitsMiddleware:
    """Body-size limit, strict JSON bodies and sane query strings (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = _query_problem(scope.get("query_string", b""))
        if problem is not None:
            await _problem(send, scope, 422, "Unprocessable Content", "validation-error",
                           f"The request has 1 invalid input: {problem['pointer']}: {problem['message']}", [problem])
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        limit = self.max_body_bytes
        too_large = f"The request body is larger than {limit} bytes (DPWATCH_MAX_BODY_BYTES)."
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                await _problem(send, scope, 400, "Bad Request", "bad-request", "Content-Length is not a number.")
                return
            if length > limit:
                await _problem(send, scope, 413, "Content Too Large", "body-too-large", too_large)
                return
        if scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return

        # Read the whole (bounded) body, counting streamed bytes for chunked requests.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _problem(send, scope, 413, "Content Too Large", "body-too-large", too_large)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)

        content_type = headers.get(b"content-type")
        if body.strip() and _is_json(content_type.decode("latin-1") if content_type is not None else None):
            try:
                parsed = parse_strict_json(body)
            except (UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as exc:
                if isinstance(exc, json.JSONDecodeError):
                    reason = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
                elif isinstance(exc, UnicodeDecodeError):
                    reason = "it is not UTF-8"
                else:
                    reason = "a value cannot be read (too deep, or an integer with too many digits)"
                message_text = f"The body is not valid JSON: {reason}."
                error = field_problem(["body"], message_text, "json_invalid")
                await _problem(send, scope, 422, "Unprocessable Content", "validation-error",
                               f"The request has 1 invalid input: #/: {message_text}", [error])
                return
            scope.setdefault("state", {})[JSON_BODY_STATE] = parsed  # for refuse_booleans_for_numbers
            bad = find_bad_json_value(parsed)
            if bad is not None:
                where, message_text = bad
                error = field_problem(["body", *where], message_text, "json_value_not_allowed")
                await _problem(send, scope, 422, "Unprocessable Content", "validation-error",
                               f"The request has 1 invalid input: {error['pointer']}: {message_text}", [error])
                return

        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# --------------------------------------------------------------------------------- booleans

#: Where the middleware leaves the parsed JSON body for :func:`refuse_booleans_for_numbers`.
JSON_BODY_STATE = "dpwatch_json_body"


def _resolve(schema: Any, components: dict[str, Any]) -> Any:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 32:
        schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
        seen += 1
    return schema if isinstance(schema, dict) else {}


_COMBINATORS = ("anyOf", "oneOf", "allOf")
_DESCRIBING = ("type", "properties", "items", "prefixItems", "additionalProperties", "const", "enum")


def _branches(schema: Any, components: dict[str, Any], top: bool = True) -> list[dict[str, Any]]:
    """The schemas a value may follow: the schema's own keywords, and the branches of its
    ``anyOf``/``oneOf``/``allOf`` (flattened, resolved). Branches that only constrain (``required``,
    ``not``) say nothing about types and are left out; ``[{}]`` (anything) when nothing describes."""
    schema = _resolve(schema, components)
    own = {k: v for k, v in schema.items() if k not in _COMBINATORS}
    out = [own] if any(k in own for k in _DESCRIBING) else []
    for key in _COMBINATORS:
        for part in schema.get(key, []):
            out.extend(_branches(part, components, top=False))
    return out if out or not top else [{}]


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null",
               list: "array", dict: "object"}


def _admitted(schema: dict[str, Any]) -> set[str] | None:
    """The JSON types one (resolved, flat) schema admits; None when it does not say."""
    if "type" in schema:
        kinds = schema["type"]
        return set(kinds) if isinstance(kinds, list) else {kinds}
    if "const" in schema:
        return {_JSON_TYPES.get(type(schema["const"]), "string")}
    if "enum" in schema:
        return {_JSON_TYPES.get(type(v), "string") for v in schema["enum"]}
    return None


def _children(schemas: list[dict[str, Any]], key: str | int, components: dict[str, Any]) -> list[Any]:
    """The schemas a member or item may follow, from every branch that describes it."""
    out: list[Any] = []
    for schema in schemas:
        admitted = _admitted(schema)
        if admitted is not None and ("array" if isinstance(key, int) else "object") not in admitted:
            continue  # a branch of another type (null, a number...) says nothing about members
        if isinstance(key, int):
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list) and key < len(prefix):
                out.append(prefix[key])
            elif isinstance(schema.get("items"), dict):
                out.append(schema["items"])
            elif "items" not in schema and "prefixItems" not in schema:
                out.append({})
        else:
            props = schema.get("properties") or {}
            if key in props:
                out.append(props[key])
            elif isinstance(schema.get("additionalProperties"), dict):
                out.append(schema["additionalProperties"])
            elif "properties" not in schema and schema.get("additionalProperties") is not False:
                out.append({})
    return out


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), "string")


def _type_admitted(value: Any, kinds: set[str]) -> bool:
    kind = _json_type(value)
    if kind in kinds:
        return True
    if kind == "integer":
        return "number" in kinds
    if kind == "number":  # 2.0 is an integer to JSON Schema
        return "integer" in kinds and float(value).is_integer()
    return False


def find_type_mismatch(value: Any, schema: Any, components: dict[str, Any],
                       path: tuple[str | int, ...] = ()) -> tuple[tuple[str | int, ...], str, set[str]] | None:
    """The first scalar (boolean, number, string, null) whose JSON type no branch of its schema
    admits, as (path, its type, the types admitted), or None. pydantic's lax mode reads ``false``
    as 0, ``0`` as false and ``"5"`` as 5; the published schema admits none of them."""
    stack: list[tuple[tuple[str | int, ...], Any, list[Any]]] = [(path, value, [schema])]
    while stack:
        where, item, candidates = stack.pop()
        flat = [b for c in candidates for b in _branches(c, components)]
        if isinstance(item, dict):
            for key in reversed(list(item)):
                children = _children(flat, key, components)
                if children:
                    stack.append(((*where, key), item[key], children))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                children = _children(flat, index, components)
                if children:
                    stack.append(((*where, index), item[index], children))
        else:
            kinds: set[str] = set()
            for branch in flat:
                admitted = _admitted(branch)
                if admitted is None:
                    break
                kinds |= admitted
            else:
                if kinds and not _type_admitted(item, kinds):
                    return where, _json_type(item), kinds
    return None


async def refuse_booleans_for_numbers(request: Request) -> None:
    """A route dependency: 422 when a scalar of the JSON body has a JSON type its place in the
    operation's published schema does not admit: ``true``/``false`` where a number is due
    (``"delta": false`` was read as 0), a number where a boolean is due (``"enabled": 0``), a
    string where a number is due (``"5"``). Checked against the OpenAPI document, so every body
    schema is covered without a strict type on each field; constraints stay pydantic's."""
    body = request.scope.get("state", {}).get(JSON_BODY_STATE)
    if body is None:
        return
    document = request.app.openapi()
    operation = _operation(document, request.url.path, request.method.lower())
    schema = (operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema"))
    if schema is None:
        return
    found = find_type_mismatch(body, schema, document.get("components", {}).get("schemas", {}))
    if found is not None:
        where, kind, kinds = found
        expected = " or ".join(sorted(kinds))
        message = f"{'a ' if kind != 'null' else ''}{kind} is not allowed here; expected {expected}"
        error = field_problem(["body", *where], message, "type_mismatch")
        raise ProblemError(f"The request has 1 invalid input: {error['pointer']}: {message}", status=422,
                           slug="validation-error", errors=[error])


_TEMPLATES: dict[int, list[tuple[re.Pattern[str], str]]] = {}


def _operation(document: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    """The OpenAPI operation of ``method path`` (templates matched as the router matches them)."""
    templates = _TEMPLATES.get(id(document))
    if templates is None:
        templates = [(re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(t)) + "$"), t)
                     for t in document.get("paths", {})]
        # Literal paths before templated ones (/v1/monitors/validate before /v1/monitors/{id}).
        templates.sort(key=lambda pair: pair[1].count("{"))
        _TEMPLATES.clear()
        _TEMPLATES[id(document)] = templates
    for pattern, template in templates:
        if pattern.match(path):
            operation: dict[str, Any] | None = document["paths"][template].get(method)
            if operation is not None:
                return operation
    return {}


# --------------------------------------------------------------------------------- headers

#: Browser features no dpwatch page uses, all denied.
PERMISSIONS_POLICY = ("accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), "
                      "microphone=(), payment=(), usb=(), interest-cohort=()")
HSTS = "max-age=31536000; includeSubDomains"


class SecurityHeadersMiddleware:
    """``Permissions-Policy`` on every answer, and ``Strict-Transport-Security`` outside
    development (a browser that saw it would refuse plain http to localhost for a year)."""

    def __init__(self, app: ASGIApp, *, hsts: bool) -> None:
        self.app = app
        self.headers = [(b"permissions-policy", PERMISSIONS_POLICY.encode())]
        if hsts:
            self.headers.append((b"strict-transport-security", HSTS.encode()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.headers if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
