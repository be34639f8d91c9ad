"""What a function says about itself as a tool: its arguments' schema and its docstring.

The type hints become a `msgspec` struct (`defstruct`), and the tool's input
schema is msgspec's JSON schema of that struct, so the schema a model reads
and the check its arguments pass (`msgspec.convert` against the same struct)
are one answer. `docstring_parser` reads the description and the argument
descriptions. What is left here is only what msgspec cannot know: which
hints a tool may use, the order a `Literal` was written in, and the few
spellings the codecs and llama-server's grammar read today.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import docstring_parser
import msgspec

from carryall._text import json_type
from carryall.errors import ToolError

__all__ = ["Arguments", "arguments_of", "read_docstring", "schema_for_function"]

_SCALARS: tuple[Any, ...] = (str, int, float, bool, type(None))
_ARRAYS: tuple[Any, ...] = (list, tuple, set, frozenset, Sequence)
_OBJECTS: tuple[Any, ...] = (dict, Mapping)
_BARE: tuple[Any, ...] = (list, tuple, set, frozenset, dict)
_LAST = ("minItems", "maxItems", "description", "default")
"""Keys msgspec writes earlier than tool schemas always had them: the JSON keeps its order."""


class Arguments(msgspec.Struct, frozen=True):
    """A function's arguments as a tool: the struct that checks them, the schema a model reads."""

    struct: type[msgspec.Struct]
    schema: dict[str, Any]


def schema_for_function(
    function: Callable[..., Any],
    param_docs: Mapping[str, str] | None = None,
    *,
    tool_name: str | None = None,
) -> dict[str, Any]:
    """The JSON object schema of a function's keyword arguments.

    A parameter with a default is optional; every other one is required.
    `additionalProperties` is false so a model's misspelt argument is
    reported instead of silently ignored.
    """
    return arguments_of(function, param_docs, tool_name=tool_name).schema


def arguments_of(
    function: Callable[..., Any],
    param_docs: Mapping[str, str] | None = None,
    *,
    tool_name: str | None = None,
) -> Arguments:
    """The struct and schema of a function's keyword arguments; a `ToolError` says what is not."""
    where = tool_name or getattr(function, "__name__", repr(function))
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"tool {where!r}: cannot read its signature: {exc}") from None
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:
        raise ToolError(f"tool {where!r}: cannot resolve its type hints: {exc}") from None
    docs = param_docs or {}
    literals: dict[frozenset[tuple[type, Any]], list[Any]] = {}
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    names: dict[str, str] = {}
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
        hint = hints[pname]
        try:
            _admit(hint, literals)
        except ToolError as exc:
            raise ToolError(f"tool {where!r}: parameter {pname!r}: {exc}") from None
        if pname in docs:
            hint = Annotated[hint, msgspec.Meta(description=docs[pname])]
        # Fields get plain names of their own and `rename` gives them the
        # parameter's, so a name a class cannot hold (`__x`) is still one.
        field = f"p{len(fields)}"
        names[field] = pname
        if param.default is param.empty:
            fields.append((field, hint))
        else:
            fields.append((field, hint, _field_default(param.default)))
    # kw_only: a required parameter may follow an optional one in a signature.
    try:
        struct = msgspec.defstruct(
            "Arguments", fields, kw_only=True, forbid_unknown_fields=True, frozen=True, rename=names
        )
        wrapped = msgspec.json.schema(struct)
    except (TypeError, ValueError) as exc:
        # A `msgspec.Meta` in an `Annotated` hint that does not fit its type.
        raise ToolError(f"tool {where!r}: {exc}") from None
    # Only the struct itself is a definition (`_admit` lets no other in), so
    # the schema is its one entry, inlined, without the title.
    schema = dict(wrapped["$defs"][wrapped["$ref"].rsplit("/", 1)[-1]])
    schema.pop("title", None)
    return Arguments(struct, _shape(schema, literals))


def _admit(hint: Any, literals: dict[frozenset[tuple[type, Any]], list[Any]]) -> None:
    """Refuse a hint JSON cannot carry; note each `Literal` in the order it was written.

    msgspec can describe more (datetimes, structs, enums), but a tool is
    called with the decoded JSON itself, so a hint whose value is not plain
    JSON would hand the function something other than what it declared.
    """
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any or hint in _SCALARS:
        return
    if origin is Literal:
        if not all(v is None or isinstance(v, str | int) for v in args):
            raise ToolError(f"type {hint!r} has no JSON schema a tool can use")
        # msgspec sorts an enum's values; the model should read them as written.
        literals[_enum_key(args)] = list(args)
        return
    if origin is Annotated:
        members: Sequence[Any] = args[:1]
    elif origin in (Union, types.UnionType) or origin in _ARRAYS:
        members = [a for a in args if a is not Ellipsis]
    elif hint in _BARE:
        members = ()
    elif origin in _OBJECTS:
        if args and args[0] is not str:
            raise ToolError(f"a JSON object's keys are strings, not {args[0]!r}")
        members = args[1:]
    else:
        raise ToolError(f"type {hint!r} has no JSON schema a tool can use")
    for member in members:
        _admit(member, literals)


def _enum_key(values: Sequence[Any]) -> frozenset[tuple[type, Any]]:
    # The type is part of the key because True == 1 in a Python set.
    return frozenset((type(v), v) for v in values)


def _field_default(value: Any) -> Any:
    """A parameter's default as the struct's: the schema shows it when JSON can say it."""
    if isinstance(value, list) and value:
        # msgspec will not share a non-empty mutable default; a tuple is the
        # same JSON array, and the struct only checks, it is never filled in.
        value = tuple(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return msgspec.field(default_factory=lambda: value)
    if isinstance(value, dict) and value:
        return msgspec.field(default_factory=lambda: value)
    return value


def _shape(
    schema: dict[str, Any], literals: Mapping[frozenset[tuple[type, Any]], list[Any]]
) -> dict[str, Any]:
    """msgspec's schema in the spellings the providers' tool schemas use.

    Walks only the keys that hold schemas, so a parameter named `enum` or
    `items` is never mistaken for the keyword.
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            value = {name: _shape(sub, literals) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = _shape(value, literals)
        elif key in ("anyOf", "prefixItems"):
            value = [_shape(sub, literals) for sub in value]
        elif key == "enum":
            value = literals.get(_enum_key(value), value)
        out[key] = value
    if "enum" in out and "type" not in out:
        kinds = {json_type(v) for v in out["enum"]}
        if len(kinds) == 1 and "null" not in kinds:
            out = {"type": kinds.pop(), **out}
    if "prefixItems" in out and out.get("items") is False:
        # llama-server's grammar reads `items` before `prefixItems`, and
        # the length bounds already say there is nothing after them.
        del out["items"]
    options = out.get("anyOf", ())
    if len(options) == 2 and options[1] == {"type": "null"} and list(options[0]) == ["type"]:
        # `float | None` is a list of types, not a choice of two schemas.
        del out["anyOf"]
        out = {"type": [options[0]["type"], "null"], **out}
    for key in _LAST:
        if key in out:
            out[key] = out.pop(key)
    return out


def read_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (first paragraph) and per-parameter descriptions of a docstring.

    `docstring_parser` reads the Google, NumPy and reST (`:param x:`) styles.
    Each text is rejoined onto one line: a model reads the schema, not the
    source's line breaks.
    """
    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        return _one_line(doc.split("\n\n", 1)[0]), {}
    summary = parsed.short_description or ""
    if parsed.long_description and not parsed.blank_after_short_description:
        # The parser's summary is the first line; a first paragraph that
        # wraps goes on in the long description.
        summary += "\n" + parsed.long_description.split("\n\n", 1)[0]
    params = {
        p.arg_name: _one_line(p.description)
        for p in parsed.params
        if p.description and p.args[0] != "attribute"
    }
    return _one_line(summary), params


def _one_line(text: str) -> str:
    return " ".join(text.split())
