"""Keyset pagination with opaque cursors: ``?limit=&cursor=`` → ``{"items": [...], "next_cursor": ...}``.

The cursor is the sort key of the last item returned (see ``cursor_pattern``). Clients treat it
as opaque; the OpenAPI schema states its exact pattern, and anything else is a 422 that points
at ``cursor``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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

# A cursor is the sort key of the last item, one part per key joined by `~`: a timestamp as
# microseconds since 1970 (UTC), a UUID as 32 hex digits, an integer in decimal, a string of
# [A-Za-z0-9_]. Every string that matches a list's pattern decodes, so the OpenAPI pattern is the
# exact check (a cursor past the end simply gives an empty page).
_KIND_PATTERNS: dict[str, str] = {
    "datetime": "[0-9]{1,16}",
    "uuid": "[0-9a-f]{32}",
    "int": "[0-9]{1,18}",
    "str": "[A-Za-z0-9_]{1,64}",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def cursor_pattern(kinds: Sequence[Kind]) -> str:
    return "^" + "~".join(_KIND_PATTERNS[k] for k in kinds) + "$"


def _cursor_query(kinds: tuple[Kind, ...]) -> Any:
    return Annotated[
        str | None,
        Query(
            max_length=200,
            pattern=cursor_pattern(kinds),
            description="Cursor from the previous page's `next_cursor`; omit for the first page.",
        ),
    ]


#: Lists ordered by (created_at, id).
CursorQuery = _cursor_query(("datetime", "uuid"))
#: Lists ordered by an integer sequence (a monitor's periods).
SeqCursorQuery = _cursor_query(("int",))
#: Lists ordered by (created_at, a string id) (a webhook's deliveries).
MessageCursorQuery = _cursor_query(("datetime", "str"))


class Page(BaseModel, Generic[T]):
    """One page of a list. Pass ``next_cursor`` back as ``cursor`` for the next page."""

    items: list[T]
    next_cursor: str | None = Field(description="Cursor of the next page; null on the last page.")


@dataclass(frozen=True)
class SortKey:
    column: InstrumentedAttribute[Any]
    kind: Kind


def _encode_value(value: Any) -> str:
    if isinstance(value, datetime):
        return str((value.astimezone(UTC) - _EPOCH) // timedelta(microseconds=1))
    if isinstance(value, uuid.UUID):
        return value.hex
    return str(value)


def _decode_value(value: str, kind: Kind) -> Any:
    if kind == "datetime":
        return _EPOCH + timedelta(microseconds=int(value))
    if kind == "uuid":
        return uuid.UUID(hex=value)
    if kind == "int":
        return int(value)
    return value


def encode_cursor(values: Sequence[Any]) -> str:
    return "~".join(_encode_value(v) for v in values)


def decode_cursor(cursor: str, kinds: Sequence[Kind]) -> list[Any]:
    """The sort key in ``cursor``; 422 pointing at ``cursor`` unless it matches the list's pattern."""
    if re.fullmatch(cursor_pattern(kinds)[1:-1], cursor) is None:
        raise InvalidInputError(
            "The cursor is not valid; pass the next_cursor of a previous page unchanged.",
            field=["query", "cursor"],
            error_type="cursor_invalid",
        )
    return [_decode_value(part, kind) for part, kind in zip(cursor.split("~"), kinds, strict=True)]


def _after(keys: Sequence[SortKey], values: Sequence[Any]) -> Any:
    """Rows strictly after ``values`` in descending key order: (k1 < v1) or (k1 = v1 and k2 < v2)…"""
    clauses = []
    for i, key in enumerate(keys):
        equal = [keys[j].column == values[j] for j in range(i)]
        clauses.append(and_(*equal, key.column < values[i]))
    return or_(*clauses)


def paginate(
    session: Session, stmt: Select[Any], keys: Sequence[SortKey], limit: int, cursor: str | None,
    *, as_rows: bool = False,
) -> tuple[list[Any], str | None]:
    """Newest-first page of ``stmt``, ordered by ``keys`` descending. ``stmt`` selects one entity,
    or, with ``as_rows``, columns that include each key's (the page is then a list of rows)."""
    if cursor is not None:
        stmt = stmt.where(_after(keys, decode_cursor(cursor, [k.kind for k in keys])))
    stmt = stmt.order_by(*(k.column.desc() for k in keys)).limit(limit + 1)
    rows = list(session.execute(stmt).all() if as_rows else session.scalars(stmt))
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    last = rows[-1]
    return rows, encode_cursor([getattr(last, k.column.key) for k in keys])
