"""``Omittable[T]``: the type of a PATCH body's field that may be left out but not sent as null.

Such a field defaults to ``None`` (left out) and pydantic validates it as plain ``T`` (pydantic
does not validate defaults), so an explicit ``null`` is a 422 and the JSON schema states ``T``
alone. Its value in Python is therefore ``T | None``: that is what the type checker sees, while
pydantic, at run time, sees ``T``, so neither the validation nor the OpenAPI document change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing import TypeAlias

    _T = TypeVar("_T")
    Omittable: TypeAlias = _T | None
else:
    class Omittable:
        """At run time ``Omittable[T]`` is ``T`` itself, which is what pydantic validates and describes."""

        def __class_getitem__(cls, item: Any) -> Any:
            return item
