"""Structured output on every wire: where a request's `OutputSchema` lands, and how it comes back.

Each wire names the same wish its own way, and each encoder calls the one
function here for its wire after it has built its body, so the question
"where does the schema go" is answered in one module:

- Chat Completions (OpenAI, and llama-server, whose JSON-schema grammar
  holds even a tiny model to the schema): `response_format` `{type:
  json_schema, json_schema: {name, schema, strict}}`.
- Responses: `text.format` `{type: json_schema, name, schema, strict}`; on
  llama-server, which reads no `text.format` there, also the top-level
  `json_schema` it does read.
- Anthropic Messages: `output_config.format` `{type: json_schema, schema}`
  (beside any `output_config.effort`). Claude's structured outputs always
  enforce the schema; the wire has no lenient form.
- Gemini: `generationConfig.responseMimeType` `application/json` and
  `generationConfig.responseJsonSchema`, which takes JSON Schema as it is
  (`responseSchema` takes only an OpenAPI subset).
- Bedrock Converse, by forcing a tool: one more tool named as the schema
  is, whose `inputSchema` is the schema, and `toolChoice` `{tool: {name}}`
  (`{any: {}}` when the request offers tools of its own, so the model may
  still call them and answers through this one). Its input schema must be
  an object, so another schema is wrapped as the property `value` of one.
  `answered` turns that forced call back into the answer's JSON text, so
  the history holds an answer, not a tool round. Anthropic models refuse a
  forced tool with thinking on, so that pair is refused here, by name.

Prompt mode writes no tools; a plain request gets its wire's format as
any other, and constrained prompt mode puts the schema in its own
`response` branch (`prompt.response_schema`). Pure: no network, no files.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec

from carryall.blocks import Block, Downgrade, Message, Text, ToolUse
from carryall.errors import ProviderError
from carryall.providers._types import OutputSchema, Request, Response

__all__ = [
    "FORCED_TOOL_DESCRIPTION",
    "VALUE_KEY",
    "add_anthropic",
    "add_bedrock",
    "add_gemini",
    "add_openai",
    "add_responses",
    "answered",
    "checked",
    "response_format",
]

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What both OpenAI wires and Bedrock take as a schema's or tool's name."""

FORCED_TOOL_DESCRIPTION: Final = (
    "Give your final answer by calling this tool: its input is the answer, as the schema says."
)
"""The description of Bedrock's forced answer tool: what the model reads of it."""

VALUE_KEY: Final = "value"
"""The property a schema that is not an object is wrapped in, where a wire takes objects only."""


def checked(request: Request) -> OutputSchema | None:
    """The request's output schema, refused with a `ProviderError` where no wire could send it."""
    output = request.output_schema
    if output is None:
        return None
    if not isinstance(output.schema, dict):
        raise ProviderError(
            f"output schema {output.name!r}: the schema must be a JSON object, "
            f"got {type(output.schema).__name__}"
        )
    if not _NAME.fullmatch(output.name):
        raise ProviderError(
            f"output schema name {output.name!r}: the wires take 1 to 64 letters, digits, "
            "'_' or '-'"
        )
    return output


def response_format(output: OutputSchema) -> dict[str, Any]:
    """The Chat Completions `response_format` asking for JSON that matches `output`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": output.name, "schema": output.schema, "strict": output.strict},
    }


def add_openai(body: dict[str, Any], request: Request) -> None:
    """Ask a Chat Completions body (either dialect) for the request's schema, if it has one."""
    output = checked(request)
    if output is not None:
        body["response_format"] = response_format(output)


def add_responses(body: dict[str, Any], request: Request, *, llama: bool = False) -> None:
    """Ask a Responses body for the request's schema (on llama-server twice over), if any."""
    output = checked(request)
    if output is None:
        return
    text = body.setdefault("text", {})
    text["format"] = {
        "type": "json_schema",
        "name": output.name,
        "schema": output.schema,
        "strict": output.strict,
    }
    if llama:
        body["json_schema"] = output.schema


def add_anthropic(body: dict[str, Any], request: Request) -> None:
    """Ask a Messages body for the request's schema (`output_config.format`), if any."""
    output = checked(request)
    if output is not None:
        config = body.setdefault("output_config", {})
        config["format"] = {"type": "json_schema", "schema": output.schema}


def add_gemini(body: dict[str, Any], request: Request) -> None:
    """Ask a `generateContent` body for JSON matching the request's schema, if any."""
    output = checked(request)
    if output is not None:
        config = body.setdefault("generationConfig", {})
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = output.schema


def add_bedrock(body: dict[str, Any], request: Request) -> None:
    """Ask a Converse body for the request's schema by forcing a tool of that schema, if any."""
    output = checked(request)
    if output is None:
        return
    thinking = body.get("additionalModelRequestFields", {}).get("thinking")
    if thinking is not None:
        raise ProviderError(
            "Bedrock request: structured output forces a tool call, which Anthropic models "
            "refuse with thinking on; turn thinking off for a structured answer"
        )
    if any(spec.name == output.name for spec in request.tools):
        raise ProviderError(
            f"Bedrock request: the output schema's name {output.name!r} is also a tool's; "
            "name the schema otherwise"
        )
    tool = {
        "toolSpec": {
            "name": output.name,
            "description": FORCED_TOOL_DESCRIPTION,
            "inputSchema": {"json": _object_schema(output.schema)},
        }
    }
    config = body.setdefault("toolConfig", {})
    tools = config.setdefault("tools", [])
    # The cache point stays last: the answer tool is part of what it caches.
    at = len(tools) - 1 if tools and "cachePoint" in tools[-1] else len(tools)
    tools.insert(at, tool)
    own = request.tools and request.tool_choice != "none"
    config["toolChoice"] = {"any": {}} if own else {"tool": {"name": output.name}}


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as it is when it is an object schema, else as the `value` property of one."""
    if schema.get("type") == "object":
        return schema
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {VALUE_KEY: {k: v for k, v in schema.items() if k != "$defs"}},
        "required": [VALUE_KEY],
        "additionalProperties": False,
    }
    if "$defs" in schema:
        # A local `#/$defs/...` reference still finds its definition at the root.
        wrapped["$defs"] = schema["$defs"]
    return wrapped


_FORCED_TEXT: Final = "text beside the forced answer call: the answer is the call's input alone"


def answered(response: Response, output: OutputSchema | None) -> Response:
    """A Bedrock answer with its forced answer call turned back into the answer's JSON text.

    The call to the tool named as `output` is the answer: its input (its
    `value`, when the schema was wrapped) becomes the message's text, and
    when no other call is left the answer ended its turn. Text the model
    wrote beside the call is left off and named in the answer's downgrades,
    since the answer must be the JSON alone. An answer with no such call
    is given back as it is, for the caller to check.
    """
    if output is None:
        return response
    content = response.message.content
    forced = [b for b in content if isinstance(b, ToolUse) and b.name == output.name]
    if not forced:
        return response
    value = forced[0].input
    if isinstance(value, str):
        text = value  # arguments that were not JSON: their raw text, for the check to name
    else:
        wrapped = output.schema.get("type") != "object"
        if wrapped and isinstance(value, dict) and VALUE_KEY in value:
            value = value[VALUE_KEY]
        text = json.dumps(value, ensure_ascii=False)
    kept: list[Block] = []
    lost: list[Downgrade] = []
    placed = False
    for at, block in enumerate(content):
        if isinstance(block, ToolUse) and block.name == output.name:
            if not placed:
                kept.append(Text(text))
                placed = True
        elif isinstance(block, Text):
            if block.text.strip():
                lost.append(Downgrade(0, "text", _FORCED_TEXT, at))
        else:
            kept.append(block)
    others = any(isinstance(b, ToolUse) for b in kept)
    stop = response.stop_reason
    if stop == "tool_use" and not others:
        stop = "end_turn"
    return msgspec.structs.replace(
        response,
        message=Message("assistant", tuple(kept)),
        stop_reason=stop,
        downgrades=(*response.downgrades, *lost),
    )
