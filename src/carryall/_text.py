"""Small text rules every reader, error and printer shares: shortening, ages, JSON type names,
and making content safe to print.

One home, so an error message, a CLI line and a reader shorten the same way,
call a JSON value by the same name, and show a control character the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

__all__ = ["age", "json_printable", "json_type", "json_type_phrase", "printable", "shorten"]

# The bidirectional-text controls (embeddings and overrides U+202A-U+202E,
# isolates U+2066-U+2069, the marks U+200E, U+200F and U+061C): invisible,
# they reorder what a terminal or a page shows, so `evil.exe` can display as
# `exe.live` and a tool description can hide what follows it (Trojan Source).
_BIDI: Final = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 controls but tab and newline, DEL, the C1 controls (U+009B is a CSI on
# its own in many terminals), the bidi controls and lone surrogates (which no
# stream can encode).
_CONTROL: Final = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_JSON_UNSAFE: Final = re.compile(f"[\x7f-\x9f{_BIDI}\ud800-\udfff]")

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


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, keep: str = "\n\t") -> str:
    """`text` with every control character shown as a visible escape (`\\x1b`), `keep` kept.

    The one door between content (a model's text, a tool's output, a name
    read from a transcript) and a terminal or a page: an escape sequence in it
    could write the clipboard (OSC 52), retitle the window or forge a link,
    and a bidirectional-text control could make it read as something else,
    so each is shown (`\\u202e`), never obeyed. `keep=""` makes one line of
    any text.
    """
    if "\n" not in keep:
        text = text.replace("\n", "\\n")
    if "\t" not in keep:
        text = text.replace("\t", "\\t")
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_visible, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_printable(text: str) -> str:
    """JSON text with DEL, C1 controls, bidi controls and lone surrogates written as `\\u` escapes.

    `json.dumps(..., ensure_ascii=False)` escapes only the C0 controls; the
    rest would reach a terminal raw. The escapes decode to the same value.
    """
    return _JSON_UNSAFE.sub(_json_escape, text)
