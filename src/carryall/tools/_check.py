"""Whether a model's arguments fit a tool, and every way they do not, in words it can act on.

The small schema walk below lists every problem, because a model fixes
every problem in one retry only when it is told all of them (msgspec stops
at the first); it is the whole check for a tool whose schema was written by
hand. A tool made from a function is then held by `msgspec.convert` to the
struct its schema came from, which adds what the schema cannot say (bounds
from `msgspec.Meta`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from carryall._text import json_type, shorten

__all__ = ["argument_problems", "check_arguments"]

_SHOWN_LIMIT = 200
"""How much of a non-object argument value a problem quotes."""


def argument_problems(
    arguments: Any, schema: Mapping[str, Any], struct: type[msgspec.Struct] | None = None
) -> list[str]:
    """The problems with `arguments` for a tool of this schema (and struct); empty if none."""
    if not isinstance(arguments, dict):
        shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return [
            f"arguments must be a JSON object, got {json_type(arguments)}: "
            + shorten(shown, _SHOWN_LIMIT)
        ]
    problems = check_arguments(schema, arguments)
    if problems or struct is None:
        return problems
    # The schema walk lists every problem in words a model can act on; what
    # only msgspec sees (a bound from `msgspec.Meta`) is said after it, in
    # msgspec's words at the argument's path. Lax mode, because the walk has
    # already held the types to the schema, and JSON Schema lets `3.0` be an
    # integer, as the published schema promises.
    try:
        msgspec.convert(arguments, struct, strict=False)
    except msgspec.ValidationError as exc:
        return [_msgspec_problem(exc)]
    return []


def _msgspec_problem(exc: msgspec.ValidationError) -> str:
    message, _, at = str(exc).partition(" - at `")
    path = at.removesuffix("`").removeprefix("$").removeprefix(".")
    return f"{path or 'arguments'}: {message[:1].lower()}{message[1:]}"


def _fits_type(value: Any, expected: str) -> bool:
    actual = json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == expected


def check_arguments(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """The ways `value` breaks `schema`, each naming the argument; empty when it fits.

    Covers what tool schemas built from type hints use: `type` (one or a
    list), `enum`, `anyOf`, `properties`/`required`/`additionalProperties`,
    `items` and `prefixItems`. Deliberately small: the point is an error a
    model can read and fix, not a full validator.
    """
    where = path or "arguments"
    problems: list[str] = []
    if "anyOf" in schema:
        options = schema["anyOf"]
        if not any(not check_arguments(o, value, path) for o in options):
            problems.append(f"{where}: {json_type(value)} matches none of the allowed shapes")
            return problems
    expected = schema.get("type")
    if expected is not None:
        allowed = [expected] if isinstance(expected, str) else list(expected)
        if not any(_fits_type(value, t) for t in allowed):
            problems.append(f"{where}: expected {' or '.join(allowed)}, got {json_type(value)}")
            return problems
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(json.dumps(v) for v in schema["enum"])
        problems.append(f"{where}: {json.dumps(value)} is not one of {choices}")
        return problems
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                problems.append(f"{_join(path, name)}: required argument is missing")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                problems.extend(check_arguments(props[name], item, _join(path, name)))
            elif extra is False:
                known = ", ".join(props) or "none"
                problems.append(f"{_join(path, name)}: unknown argument (known arguments: {known})")
            elif isinstance(extra, Mapping):
                problems.extend(check_arguments(extra, item, _join(path, name)))
    elif isinstance(value, list | tuple):
        prefix = schema.get("prefixItems")
        if prefix is not None:
            if len(value) != len(prefix):
                problems.append(f"{where}: expected {len(prefix)} items, got {len(value)}")
            for i, (sub, item) in enumerate(zip(prefix, value, strict=False)):
                problems.extend(check_arguments(sub, item, f"{where}[{i}]"))
        elif isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                problems.extend(check_arguments(schema["items"], item, f"{where}[{i}]"))
    return problems


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
