"""JSON both ways: the strict reading of model-written JSON, and a request body as bytes.

One home, imported by the prompt-mode grammars, the OpenAI codec and the
flat histories, so "is this JSON" has one answer everywhere: JSON that every
wire can carry again, read without ever raising. `body_bytes` is the one
writer of a wire body, so every codec's bytes are made the same way, once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import msgspec

__all__ = ["body_bytes", "load_json"]

_BODY: Final = msgspec.json.Encoder()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(text: str) -> tuple[bool, Any]:
    """`(True, value)` when `text` is JSON every wire can carry again, else `(False, None)`.

    The one reading of model-written JSON (tool arguments, constrained
    answers) for every codec; it never raises.
    """
    try:
        # NaN and Infinity are Python's extension, not JSON: arguments holding
        # them could not be sent on any wire again.
        return True, json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        # RecursionError: deeply nested hostile JSON is a malformed call, not a crash.
        return False, None


def body_bytes(body: Mapping[str, Any]) -> bytes:
    """`body` as the compact UTF-8 JSON a request sends: one pass of msgspec's encoder.

    The bytes a transport hands to the socket, so the SDK neither walks nor
    copies the body again. A value msgspec cannot write (a tool schema
    holding a Python object) is a `TypeError` naming its type, as the SDK's
    own serializer would raise.
    """
    return _BODY.encode(body)
