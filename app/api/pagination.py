"""Keyset pagination with opaque cursors: ``?limit=&cursor=`` → ``{"items": [...], "next_cursor": ...}``.

The cursor is the sort key of the last item returned, JSON-encoded and base64url'd. It is
opaque to clients; decoding errors are 422s that point at ``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field
from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.api.errors import InvalidInputError

T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 200

Kind = Literal["datetime", "uuid", "int", "str"]

LimitQuery = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Items per page (1–{MAX_LIMIT}).")]
CursorQuery = Annotated[
    str | None,
    Query(max_length=512, description="Opaque cursor from the previous page's `next_cursor`; omit for the first page."),
]


class Page(BaseModel, Generic[T]):
    """One page of a list. Pass ``next_cursor`` back as ``cursor`` for the next page."""

    items: list[T]
    next_cursor: str | None = Field(description="Cursor of the next page; null on the last page.")


@dataclass(frozen=True)
class SortKey:
    column: InstrumentedAttribute[Any]
    kind: Kind


def _encode_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _decode_value(value: Any, kind: Kind) -> Any:
    if kind == "datetime":
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError("naive datetime")
        return parsed
    if kind == "uuid":
        return uuid.UUID(value)
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError("not an integer")
        return value
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def encode_cursor(values: Sequence[Any]) -> str:
    raw = json.dumps([_encode_value(v) for v in values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, kinds: Sequence[Kind]) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(values, list) or len(values) != len(kinds):
            raise ValueError("wrong shape")
        return [_decode_value(v, k) for v, k in zip(values, kinds, strict=True)]
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError) as exc:
        raise InvalidInputError(
            "The cursor is not valid; pass the next_cursor of a previous page unchanged.",
            field=["query", "cursor"],
            error_type="cursor_invalid",
        ) from exc


def _after(keys: Sequence[SortKey], values: Sequence[Any]) -> Any:
    """Rows strictly after ``values`` in descending key order: (k1 < v1) or (k1 = v1 and k2 < v2)…"""
    clauses = []
    for i, key in enumerate(keys):
        equal = [keys[j].column == values[j] for j in range(i)]
        clauses.append(and_(*equal, key.column < values[i]))
    return or_(*clauses)


def paginate(
    session: Session, stmt: Select[Any], keys: Sequence[SortKey], limit: int, cursor: str | None
) -> tuple[list[Any], str | None]:
    """Newest-first page of ``stmt`` (which selects one entity), ordered by ``keys`` descending."""
    if cursor is not None:
        stmt = stmt.where(_after(keys, decode_cursor(cursor, [k.kind for k in keys])))
    stmt = stmt.order_by(*(k.column.desc() for k in keys)).limit(limit + 1)
    rows = list(session.scalars(stmt))
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    last = rows[-1]
    return rows, encode_cursor([getattr(last, k.column.key) for k in keys])
