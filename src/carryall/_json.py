"""The strict reading of model-written JSON: tool arguments, constrained answers, header fields.

One home, imported by the prompt-mode grammars, the OpenAI codec and the
flat histories, so "is this JSON" has one answer everywhere: JSON that every
wire can carry again, read without ever raising.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["load_json"]


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
