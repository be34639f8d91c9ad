"""What an MCP server asks of its client: a person's answer, the model's completion, the roots.

Pure values and checks, no I/O: the toolbox (`carryall.mcp._client`) calls
these from its loop, and the command line supplies the one part that
talks to a person (`carryall._commands.mcp.ask_person`).

- **Elicitation** (`elicitation/create`): an `Elicitation` is put to an
  `Asker`; with none (a non-interactive run) it is declined, and the
  server is told why. An answer is checked against the fields the server
  asked for (`field_value`, `answer_problem`) before it is sent.
- **Sampling** (`sampling/createMessage`): only for a server whose entry
  says `"sampling": true`, through the agent's own backend, within the
  entry's `samplingTokens` (output tokens over the whole run); each
  completion is noted in the result of the tool call it happened in, so
  the session records it.
- **Progress and log** notifications become `McpNotice`s for the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import msgspec

from carryall.blocks import Message, Text

__all__ = [
    "NOT_INTERACTIVE",
    "Asker",
    "ElicitAnswer",
    "Elicitation",
    "McpNotice",
    "answer_problem",
    "field_value",
    "sampling_messages",
]

NOT_INTERACTIVE: Final = (
    "declined by carryall: this run has no person to ask (it is not interactive); "
    "run it in `carryall chat` or in a terminal to answer"
)
"""The reason a non-interactive run gives a server for declining its question."""

_EMAIL: Final = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_DATE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_URI: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")
_YES: Final = frozenset({"y", "yes", "true", "1"})
_NO: Final = frozenset({"n", "no", "false", "0"})


class Elicitation(msgspec.Struct, frozen=True):
    """A server's question for the person: its message and the fields it wants (flat schema)."""

    server: str
    message: str
    schema: dict[str, Any]


class ElicitAnswer(msgspec.Struct, frozen=True):
    """The person's answer: `accept` with the fields' values, or `decline`/`cancel` and why."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    reason: str | None = None


Asker = Callable[[Elicitation], ElicitAnswer]
"""Puts an `Elicitation` to a person and returns the answer; it may block (it runs in a thread)."""


class McpNotice(msgspec.Struct, frozen=True):
    """A progress or log notification from a server, one line to show."""

    server: str
    kind: Literal["progress", "log"]
    text: str


def field_value(name: str, spec: Mapping[str, Any], raw: str, required: bool) -> Any:
    """The value typed for field `name` (`raw`), converted to its schema type, or a `ValueError`.

    Empty text is the field's default, else no value (None) when it is
    optional; the error names the field and what it takes.
    """
    text = raw.strip()
    if not text:
        if "default" in spec:
            return spec["default"]
        if required:
            raise ValueError(f"{name} is required")
        return None
    kind = spec.get("type")
    if kind == "boolean":
        if text.lower() in _YES:
            return True
        if text.lower() in _NO:
            return False
        raise ValueError(f"{name} takes yes or no")
    if kind in ("integer", "number"):
        try:
            number: int | float = int(text) if kind == "integer" else float(text)
        except ValueError:
            whole = "a whole number" if kind == "integer" else "a number"
            raise ValueError(f"{name} takes {whole}") from None
        low, high = spec.get("minimum"), spec.get("maximum")
        if low is not None and high is not None and not low <= number <= high:
            raise ValueError(f"{name} must be between {low} and {high}")
        if low is not None and number < low:
            raise ValueError(f"{name} must be at least {low}")
        if high is not None and number > high:
            raise ValueError(f"{name} must be at most {high}")
        return number
    if kind == "array":
        items = [part.strip() for part in text.split(",") if part.strip()]
        allowed = _choices(spec.get("items") or {})
        wrong = [item for item in items if allowed and item not in allowed]
        if wrong:
            raise ValueError(f"{name} takes some of {', '.join(allowed)} (comma-separated)")
        return items
    allowed = _choices(spec)
    if allowed and text not in allowed:
        raise ValueError(f"{name} takes one of {', '.join(allowed)}")
    problem = _format_problem(spec.get("format"), text)
    if problem:
        raise ValueError(f"{name} {problem}")
    if len(text) > int(spec.get("maxLength", 10_000)) or len(text) < int(spec.get("minLength", 0)):
        raise ValueError(f"{name} has the wrong length")
    return text


def answer_problem(schema: Mapping[str, Any], content: Mapping[str, Any]) -> str | None:
    """What is wrong with an answer for `schema` (a field missing or not its type), or None."""
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if content.get(name) is None:
            return f"{name} is required"
    for name, value in content.items():
        spec = properties.get(name)
        if spec is None:
            return f"{name} was not asked for"
        if value is None:
            continue
        kind = spec.get("type")
        expected = {"string": str, "boolean": bool, "array": list}.get(kind)
        if kind in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"{name} is not a number"
        elif expected is not None and not isinstance(value, expected):
            return f"{name} is not a {kind}"
    return None


def sampling_messages(messages: list[Any]) -> list[Message]:
    """A sampling request's messages as carryall's, or a `ValueError`: text only, roles kept."""
    made: list[Message] = []
    for at, message in enumerate(messages):
        content = message.content if isinstance(message.content, list) else [message.content]
        texts = []
        for item in content:
            if getattr(item, "type", None) != "text":
                raise ValueError(
                    f"message {at} holds {getattr(item, 'type', 'unknown')} content: "
                    "carryall samples text only"
                )
            texts.append(Text(item.text))
        made.append(Message(message.role, tuple(texts)))
    if not made or made[-1].role != "user":
        raise ValueError("a sampling request must end with a user message")
    return made


def _choices(spec: Mapping[str, Any]) -> list[str]:
    """The values an enum field takes (`enum`, or `oneOf`/`anyOf` of `const`s)."""
    if isinstance(spec.get("enum"), list):
        return [str(v) for v in spec["enum"]]
    options = spec.get("oneOf") or spec.get("anyOf") or []
    return [str(o["const"]) for o in options if isinstance(o, dict) and "const" in o]


def _format_problem(fmt: Any, text: str) -> str | None:
    if fmt == "email" and not _EMAIL.match(text):
        return "takes an email address"
    if fmt == "date" and not _DATE.match(text):
        return "takes a date (YYYY-MM-DD)"
    if fmt == "uri" and not _URI.match(text):
        return "takes a URI"
    return None
