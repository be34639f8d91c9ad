"""Small text rules every reader, error and printer shares: shortening, ages, JSON type names.

One home, so an error message, a CLI line and a reader shorten the same way
and call a JSON value by the same name.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

__all__ = ["age", "json_type", "json_type_phrase", "shorten"]

_PHRASES: Final = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "a number",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


def shorten(text: str, limit: int, *, ellipsis: str = "...") -> str:
    """`text` if it fits in `limit` characters, else its start and `ellipsis`, `limit` in all."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(ellipsis), 0)] + ellipsis


def age(moment: datetime, now: datetime) -> str:
    """How long ago, in the largest whole unit: `now`, `42s`, `5m`, `3h`, `2d`, `6w`."""
    seconds = int((now - moment).total_seconds())
    if seconds < 1:
        return "now"
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value, else its Python type's name.

    `bool` is tested before `int` because it is one in Python and never in JSON.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def json_type_phrase(value: Any) -> str:
    """How an error sentence names a JSON value's type: "a string", "an object", "null"."""
    name = json_type(value)
    return _PHRASES.get(name, name)
