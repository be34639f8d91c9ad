"""Structured output in the API: a schema from a type or a dict, and the answer checked against it.

A caller names the answer it wants as a JSON Schema `dict`, a
`msgspec.Struct`, a `TypedDict`, a dataclass, a pydantic model (pydantic is
never imported here: a model is known by its `model_json_schema`), or any
other type msgspec can describe. `output_schema` turns that into the
`OutputSchema` a request carries; `parse` reads an answer back and checks
it, giving the value as the caller's own type (an instance of the Struct,
dataclass or model; a dict for a TypedDict or a schema dict).

One check per kind of spec, each by the library made for it: a schema dict
by `jsonschema` (the draft its `$schema` names, else 2020-12), a pydantic
model by pydantic, every other type by `msgspec.convert`. Whichever it is,
a mismatch is one `StructuredOutputError` naming the first place that is
wrong by its JSON path (`$.items[0].qty`) and why.

A schema made from a type is sent closed when `strict` (every object's
properties all required, no others allowed, no `default`s): what the wires
that enforce a schema while generating (OpenAI's strict mode, Anthropic)
insist on. The type itself still decides what is accepted on receipt, so a
field with a default may be absent from an answer a lenient wire gave.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final, TypeAlias, TypeVar

import msgspec

from carryall._text import shorten
from carryall.errors import CarryallError, StructuredOutputError
from carryall.providers import OutputSchema, Response

__all__ = [
    "SchemaSpec",
    "StructuredOutputError",
    "answer_text",
    "output_schema",
    "parse",
    "schema_of",
]

SchemaSpec: TypeAlias = "dict[str, Any] | OutputSchema | type[Any]"
"""What a caller may name an answer's shape by (see the module)."""

T = TypeVar("T")

_FENCED: Final = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)
_MSGSPEC_AT: Final = " - at `"


def _is_pydantic(spec: Any) -> bool:
    return isinstance(spec, type) and callable(getattr(spec, "model_json_schema", None))


def schema_of(spec: SchemaSpec) -> dict[str, Any]:
    """The JSON Schema of `spec` as given or as its type describes it (not yet closed).

    A reference at the root (msgspec describes a Struct as `$ref` into
    `$defs`) is written out in place, the definitions kept beside it, since
    several wires want an object at the root.
    """
    if isinstance(spec, OutputSchema):
        return spec.schema
    if isinstance(spec, Mapping):
        return dict(spec)
    if _is_pydantic(spec):
        schema: dict[str, Any] = spec.model_json_schema()
    else:
        try:
            schema = msgspec.json.schema(spec)
        except TypeError as exc:
            raise CarryallError(
                f"cannot describe {_named(spec)} as a JSON Schema: {exc}; give a schema dict, "
                "a msgspec Struct, a TypedDict, a dataclass or a pydantic model"
            ) from None
    return _root_inlined(schema)


def output_schema(
    spec: SchemaSpec, *, name: str | None = None, strict: bool = True
) -> OutputSchema:
    """The `OutputSchema` a request carries for `spec`.

    `name` defaults to the type's name (`answer` for a dict). A schema
    dict is checked against its draft's meta-schema here, before anything
    is sent; a type's schema is closed when `strict` (see the module).
    """
    if isinstance(spec, OutputSchema):
        return spec if name is None else msgspec.structs.replace(spec, name=name)
    schema = schema_of(spec)
    if isinstance(spec, Mapping):
        _check_schema(schema)
        return OutputSchema(schema, name or "answer", strict)
    if strict:
        schema = _closed(schema)
    return OutputSchema(schema, name or _wire_name(getattr(spec, "__name__", "answer")), strict)


def answer_text(answer: str | Response) -> str:
    """The JSON text of an answer: its text, without one Markdown code fence around it.

    Refused with a `StructuredOutputError` when the answer is a refusal or
    ended in tool calls: it is not an answer to check.
    """
    if isinstance(answer, str):
        text = answer
    else:
        if answer.refusal:
            raise StructuredOutputError("$", f"the model refused: {answer.refusal}", "")
        if answer.message.tool_uses():
            raise StructuredOutputError(
                "$",
                f"the turn ended on tool calls (stop reason {answer.stop_reason}), not on an "
                "answer",
                answer.message.text(),
            )
        text = answer.message.text()
    fenced = _FENCED.match(text)
    return fenced.group(1) if fenced else text


def parse(answer: str | Response, spec: SchemaSpec) -> Any:
    """The answer's JSON checked against `spec`, as the caller's type; else `StructuredOutputError`.

    A Struct, dataclass or pydantic model gives an instance, a TypedDict or
    a schema dict the decoded JSON. The error names the first mismatch by
    its JSON path; an answer cut off at the output limit says so.
    """
    text = answer_text(answer)
    cut = isinstance(answer, Response) and answer.stop_reason == "max_tokens"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = f"not JSON ({exc})"
        if cut:
            why += "; the answer was cut off at the output limit (raise max_tokens)"
        raise StructuredOutputError("$", why, text) from None
    if isinstance(spec, OutputSchema | Mapping):
        _validate(value, schema_of(spec), text)
        return value
    if _is_pydantic(spec):
        return _pydantic(value, spec, text)
    try:
        return msgspec.convert(value, spec)
    except msgspec.ValidationError as exc:
        message = str(exc)
        reason, _, path = message.partition(_MSGSPEC_AT)
        raise StructuredOutputError(path.rstrip("`") or "$", reason, text) from None


# -- each library's own check --------------------------------------------------


def _validator(schema: dict[str, Any]) -> Any:
    try:
        from jsonschema.validators import validator_for
    except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
        raise CarryallError(
            "checking an answer against a JSON Schema needs the jsonschema package: "
            "pip install jsonschema"
        ) from None
    return validator_for(schema)


def _check_schema(schema: dict[str, Any]) -> None:
    from jsonschema.exceptions import SchemaError

    try:
        _validator(schema).check_schema(schema)
    except SchemaError as exc:
        where = _json_path(exc.absolute_path)
        raise CarryallError(
            f"the output schema is not a valid JSON Schema: at {where}: {shorten(exc.message, 200)}"
        ) from None


def _validate(value: Any, schema: dict[str, Any], text: str) -> None:
    from jsonschema.exceptions import best_match

    validator = _validator(schema)(schema)
    error = best_match(validator.iter_errors(value))
    if error is not None:
        raise StructuredOutputError(error.json_path, shorten(error.message, 300), text)


def _pydantic(value: Any, spec: type[T], text: str) -> T:
    try:
        result: T = spec.model_validate(value)  # type: ignore[attr-defined]
        return result
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        if not callable(errors):
            raise
        first = errors()[0]
        path = _json_path(first.get("loc", ()))
        raise StructuredOutputError(path, str(first.get("msg", exc)), text) from None


def _json_path(steps: Any) -> str:
    out = "$"
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


# -- schemas from types ----------------------------------------------------------


def _root_inlined(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if not isinstance(ref, str) or not isinstance(defs, dict) or not ref.startswith("#/$defs/"):
        return schema
    root = defs.get(ref.removeprefix("#/$defs/"))
    if not isinstance(root, dict):
        return schema
    # Every definition stays, the root's own too: a recursive type refers to it.
    referenced = _refers(defs, ref)
    rest = {k: v for k, v in defs.items() if referenced or f"#/$defs/{k}" != ref}
    out = dict(root)
    if rest:
        out["$defs"] = rest
    return out


def _refers(node: Any, ref: str) -> bool:
    if isinstance(node, dict):
        return node.get("$ref") == ref or any(_refers(v, ref) for v in node.values())
    if isinstance(node, list):
        return any(_refers(v, ref) for v in node)
    return False


_SCHEMA_MAPS: Final = ("properties", "patternProperties", "$defs", "definitions")
"""Keywords whose value maps names to schemas (a property called `default` is a name)."""
_DATA_KEYWORDS: Final = ("enum", "const", "examples")
"""Keywords whose value is data, not schemas: kept as it is."""


def _closed(node: Any) -> Any:
    """A schema with every object closed and all its properties required, defaults dropped."""
    if isinstance(node, list):
        return [_closed(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "default":
            continue
        if key in _DATA_KEYWORDS:
            out[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _closed(schema) for name, schema in value.items()}
        else:
            out[key] = _closed(value)
    properties = node.get("properties")
    if isinstance(properties, dict):
        out["required"] = list(properties)
        out.setdefault("additionalProperties", False)
    return out


def _wire_name(name: str) -> str:
    """A type's name as the wires take a schema's name (letters, digits, `_`, `-`; 64 at most)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
    return cleaned or "answer"


def _named(spec: Any) -> str:
    return getattr(spec, "__qualname__", None) or repr(spec)
