"""Tools: plain Python functions a model may call, described by their own type hints.

A tool is a function. Its JSON schema comes from its signature (the type
hints say the types, a default makes a parameter optional) and its docstring
(the first paragraph describes the tool, an `Args:` section or `:param x:`
lines describe the parameters), so the description a model reads and the
code that runs can never drift apart. A tool returns text, or text and images:
the images ride after the round's results in the user message (§1), never
inside a result.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, Union, get_args, get_origin, overload

import msgspec

from carryall.blocks import Image
from carryall.errors import ToolError
from carryall.providers import ToolSpec

__all__ = [
    "Tool",
    "ToolFunction",
    "ToolOutput",
    "check_arguments",
    "schema_for_function",
    "tool",
    "tool_output",
]

ToolFunction: TypeAlias = Callable[..., Any]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every dialect accepts as a tool name (Anthropic's and OpenAI's shared subset)."""


class ToolOutput(msgspec.Struct, frozen=True):
    """What a tool gives back: its text, the images it made, and whether it failed.

    A function may return a plain `str` or a `(str, [Image, ...])` pair
    instead; `tool_output` turns any of them into this one shape.
    """

    text: str
    images: tuple[Image, ...] = ()
    is_error: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.images, tuple):
            msgspec.structs.force_setattr(self, "images", tuple(self.images))


def tool_output(value: Any) -> ToolOutput:
    """Normalise what a tool function returned into a `ToolOutput`.

    Accepts a `str`, a `ToolOutput`, a `(str, images)` pair, or `None` (a tool
    run for its effect says nothing). Anything else is a `ToolError` that says
    what came back, so the model is told and the author sees the mistake.
    """
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput(value)
    if value is None:
        return ToolOutput("")
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], Iterable)
        and not isinstance(value[1], str | bytes)
    ):
        images = tuple(value[1])
        bad = [type(i).__name__ for i in images if not isinstance(i, Image)]
        if bad:
            raise ToolError(
                f"tool returned a (text, images) pair whose images include {', '.join(bad)}; "
                "every item must be a carryall Image"
            )
        return ToolOutput(value[0], images)
    raise ToolError(
        f"tool returned {type(value).__name__}; expected str, ToolOutput or (str, list[Image])"
    )


class Tool:
    """A callable the model may use: name, description, input schema and the function.

    Build one with `Tool.from_function` (or the `@tool` decorator); construct
    it directly only to wrap a function whose schema you write by hand.
    """

    __slots__ = ("description", "function", "input_schema", "name")

    def __init__(
        self,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        function: ToolFunction,
    ) -> None:
        if not _TOOL_NAME.match(name):
            raise ToolError(
                f"tool name {name!r} must be 1-64 letters, digits, '_' or '-' "
                "(the names every backend accepts)"
            )
        if input_schema.get("type") != "object":
            raise ToolError(f"tool {name!r}: input schema must be a JSON object schema")
        self.name = name
        self.description = description
        self.input_schema: dict[str, Any] = dict(input_schema)
        self.function = function

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    @classmethod
    def from_function(
        cls, function: ToolFunction, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool from a plain function: schema from its type hints and docstring.

        `name` defaults to the function's name, `description` to the first
        paragraph of its docstring. A parameter without a type hint, or with
        a type no JSON schema can say, is a `ToolError` naming it.
        """
        tool_name = name or str(getattr(function, "__name__", ""))
        doc = inspect.getdoc(function) or ""
        summary, param_docs = _parse_docstring(doc)
        schema = schema_for_function(function, param_docs, tool_name=tool_name)
        return cls(tool_name, description or summary or tool_name, schema, function)

    @property
    def spec(self) -> ToolSpec:
        """How a model is told of this tool."""
        return ToolSpec(self.name, self.description, self.input_schema)

    def check(self, arguments: Any) -> list[str]:
        """The problems with `arguments` against this tool's schema; empty when they fit."""
        if not isinstance(arguments, dict):
            shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
            if len(shown) > 200:
                shown = shown[:197] + "..."
            return [f"arguments must be a JSON object, got {_json_type(arguments)}: {shown}"]
        return check_arguments(self.input_schema, arguments)

    def invoke(self, arguments: Any) -> ToolOutput:
        """Check `arguments`, call the function, and normalise what it returned.

        Invalid arguments are a `ToolError` listing every problem, so the
        model can fix them all in one retry; whatever the function raises
        propagates for the caller to turn into an error result.
        """
        problems = self.check(arguments)
        if problems:
            raise ToolError(f"invalid arguments for {self.name}: " + "; ".join(problems))
        result = self.function(**arguments)
        if inspect.isawaitable(result):
            # A coroutine tool runs on its own loop in the calling worker
            # thread, so async and plain tools share one concurrency model.
            result = asyncio.run(_awaited(result))
        return tool_output(result)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@overload
def tool(function: ToolFunction, /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[ToolFunction], Tool]: ...
def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Decorator form of `Tool.from_function`: `@tool` or `@tool(name="...")`."""
    if function is not None:
        return Tool.from_function(function)

    def wrap(fn: ToolFunction) -> Tool:
        return Tool.from_function(fn, name=name, description=description)

    return wrap


# -- schema from type hints ---------------------------------------------------


def schema_for_function(
    function: ToolFunction,
    param_docs: Mapping[str, str] | None = None,
    *,
    tool_name: str | None = None,
) -> dict[str, Any]:
    """The JSON object schema of a function's keyword arguments.

    A parameter with a default is optional; every other one is required.
    `additionalProperties` is false so a model's misspelt argument is
    reported instead of silently ignored.
    """
    where = tool_name or getattr(function, "__name__", repr(function))
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"tool {where!r}: cannot read its signature: {exc}") from None
    try:
        hints = typing.get_type_hints(function)
    except Exception as exc:
        raise ToolError(f"tool {where!r}: cannot resolve its type hints: {exc}") from None
    docs = param_docs or {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolError(
                f"tool {where!r}: parameter {pname!r} is *args/**kwargs; "
                "a tool takes named parameters only"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolError(
                f"tool {where!r}: parameter {pname!r} is positional-only; "
                "a tool is called with keyword arguments"
            )
        if pname not in hints:
            raise ToolError(f"tool {where!r}: parameter {pname!r} has no type hint")
        try:
            prop = _schema_for_type(hints[pname])
        except ToolError as exc:
            raise ToolError(f"tool {where!r}: parameter {pname!r}: {exc}") from None
        if pname in docs:
            prop = {**prop, "description": docs[pname]}
        if param.default is param.empty:
            required.append(pname)
        elif _json_safe(param.default):
            prop = {**prop, "default": param.default}
        properties[pname] = prop
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return schema


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_for_type(hint: Any) -> dict[str, Any]:
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is Any:
        return {}
    if hint is type(None):
        return {"type": "null"}
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is typing.Annotated:
        return _schema_for_type(args[0])
    if origin is Literal:
        values = list(args)
        schema: dict[str, Any] = {"enum": values}
        kinds = {_json_type(v) for v in values}
        if len(kinds) == 1 and None not in values:
            schema = {"type": kinds.pop(), "enum": values}
        return schema
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        if len(members) == 1:
            inner = _schema_for_type(members[0])
        else:
            inner = {"anyOf": [_schema_for_type(m) for m in members]}
        if not nullable:
            return inner
        if set(inner) == {"type"} and isinstance(inner["type"], str):
            return {"type": [inner["type"], "null"]}
        return {"anyOf": [inner, {"type": "null"}]}
    if hint in (list, tuple, set, frozenset) or origin in (list, set, frozenset, Sequence):
        item = args[0] if args else Any
        return {"type": "array", "items": _schema_for_type(item)}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema_for_type(args[0])}
        return {
            "type": "array",
            "prefixItems": [_schema_for_type(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if hint is dict or origin in (dict, Mapping):
        if args and args[0] is not str:
            raise ToolError(f"a JSON object's keys are strings, not {args[0]!r}")
        value = args[1] if args else Any
        value_schema = _schema_for_type(value)
        out: dict[str, Any] = {"type": "object"}
        if value_schema:
            out["additionalProperties"] = value_schema
        return out
    raise ToolError(f"type {hint!r} has no JSON schema a tool can use")


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# -- docstrings ---------------------------------------------------------------

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|"
    r"Notes?|See Also|Attributes)\s*:\s*$",
    re.IGNORECASE,
)
_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args"})
_GOOGLE_PARAM = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_SPHINX_FIELD = re.compile(r"^:\w+")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (first paragraph) and per-parameter descriptions of a docstring.

    Reads Google style (`Args:` then `name (type): text` with indented
    continuation lines) and Sphinx style (`:param name: text`). Anything
    else after the first paragraph is for humans reading the code.
    """
    lines = doc.expandtabs().splitlines()
    summary_lines: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or _SECTION.match(stripped) or _SPHINX_FIELD.match(stripped):
            break
        summary_lines.append(stripped)

    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    section_indent = 0
    param_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        heading = _SECTION.match(stripped)
        if heading:
            in_args = heading.group(1).lower() in _ARG_SECTIONS
            section_indent, param_indent, current = indent, None, None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            in_args, current = False, sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if _SPHINX_FIELD.match(stripped):
            current = None
            continue
        if in_args:
            if indent <= section_indent:
                in_args, current = False, None
                continue
            if param_indent is None:
                param_indent = indent
            google = _GOOGLE_PARAM.match(stripped)
            if indent <= param_indent and google:
                current = google.group(1)
                params[current] = google.group(2).strip()
                continue
        if current is not None and (in_args or indent > 0):
            params[current] = f"{params[current]} {stripped}".strip()
        else:
            current = None
    return " ".join(summary_lines), {k: v for k, v in params.items() if v}


# -- argument checking ----------------------------------------------------------


def _json_type(value: Any) -> str:
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
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _fits_type(value: Any, expected: str) -> bool:
    actual = _json_type(value)
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
            problems.append(f"{where}: {_json_type(value)} matches none of the allowed shapes")
            return problems
    expected = schema.get("type")
    if expected is not None:
        allowed = [expected] if isinstance(expected, str) else list(expected)
        if not any(_fits_type(value, t) for t in allowed):
            problems.append(f"{where}: expected {' or '.join(allowed)}, got {_json_type(value)}")
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
