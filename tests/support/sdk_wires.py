"""The SDK checks the Responses, Gemini and Bedrock wires' tests share (issue 13).

A Responses request passes only if the `openai` SDK's own
`ResponseCreateParams` type accepts it whole, every lazy iterator consumed
(`check_responses_request`). A Gemini request passes only if each part is
what the `google-genai` SDK's pydantic types accept, dumped back and
compared, so a key the SDK does not know fails rather than vanishing
(`check_gemini_request`). A Converse request passes only if botocore's own
`ParamValidator` accepts it on the `bedrock-runtime` service model's
`Converse` and `ConverseStream` input shapes, in the form boto3 is handed
(blobs as bytes, `sdk_params`), and botocore's REST-JSON serializer writes
the codec's body back exactly (`check_bedrock_request`). The codec tests,
the recorded-traffic tests, the real-server tests and the switch matrix all
call these, so each wire is held to one definition of "valid".
"""

from __future__ import annotations

import base64
import functools
import json
import re
from typing import Any

from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)
from pydantic import TypeAdapter

from tests.support.sdk_openai import _materialize

RESPONSES_NON_STREAMING = TypeAdapter(ResponseCreateParamsNonStreaming)
RESPONSES_STREAMING = TypeAdapter(ResponseCreateParamsStreaming)
RESPONSES_LLAMA_EXTRA_KEYS = ("json_schema",)
"""What llama-server reads beside the Responses body (its own constrained-output key)."""

GEMINI_BODY_KEYS = frozenset(
    {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"}
    | {"serviceTier", "store"}
)


def check_responses_request(body: dict[str, Any], *, streaming: bool = False) -> None:
    """Fail unless the official SDK's type accepts the body whole, nothing dropped."""
    plain = {k: v for k, v in body.items() if k not in RESPONSES_LLAMA_EXTRA_KEYS}
    adapter = RESPONSES_STREAMING if streaming else RESPONSES_NON_STREAMING
    validated = _materialize(adapter.validate_python(plain))
    assert validated == plain, "the SDK type dropped or changed something: an unknown key?"


def _b64(text: str) -> bytes:
    return base64.b64decode(text.replace("-", "+").replace("_", "/"))


def _bytes_normal(value: Any) -> Any:
    # The SDK holds inline data and signatures as bytes and dumps them
    # URL-safe: compare the bytes.
    if isinstance(value, dict):
        if set(value) == {"mimeType", "data"}:
            return {**value, "data": _b64(value["data"])}
        return {
            k: _b64(v) if k == "thoughtSignature" else _bytes_normal(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_bytes_normal(v) for v in value]
    return value


def _camel(value: Any) -> Any:
    # The SDK types read a field by its snake_case name as well as its camelCase alias (the
    # REST API and Vertex take both) and dump the alias: a key's spelling is no change. Both
    # sides are respelled alike, so a tool's own keys compare as they are.
    if isinstance(value, dict):
        return {_SNAKE.sub(lambda m: m.group(1).upper(), k): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


_SNAKE = re.compile(r"_([a-z0-9])")


def _same(model: Any, sent: Any) -> None:
    dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    same = _bytes_normal(_camel(dumped)) == _bytes_normal(_camel(sent))
    assert same, "the SDK type dropped or changed a key"


def check_gemini_request(body: dict[str, Any]) -> None:
    """Fail unless every part of the body is what the SDK's own types accept, nothing dropped."""
    from google.genai import types

    assert set(body) <= GEMINI_BODY_KEYS, sorted(body)
    for content in body["contents"]:
        _same(types.Content.model_validate(content), content)
    for tool in body.get("tools", ()):
        _same(types.Tool.model_validate(tool), tool)
    config = {
        **body.get("generationConfig", {}),
        **{
            k: body[k]
            for k in ("systemInstruction", "tools", "toolConfig", "serviceTier", "store")
            if k in body
        },
    }
    _same(types.GenerateContentConfig.model_validate(config), config)


BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
"""The model id a Converse body is checked for when a test names none."""


@functools.cache
def _bedrock_service() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock-runtime")


def check_bedrock_request(body: dict[str, Any], model: str = BEDROCK_MODEL) -> None:
    """Fail unless botocore validates the body on both operations and serializes it back whole."""
    from botocore.exceptions import ParamValidationError
    from botocore.serialize import create_serializer
    from botocore.validate import ParamValidator

    from carryall.transport.bedrock import sdk_params

    for operation in ("Converse", "ConverseStream"):
        op = _bedrock_service().operation_model(operation)
        params = sdk_params(body, model, op.input_shape)
        report = ParamValidator().validate(params, op.input_shape)
        if report.has_errors():
            raise ParamValidationError(report=report.generate_report())
        sent = create_serializer("rest-json").serialize_to_request(params, op)
        assert json.loads(sent["body"]) == body, "botocore's serializer changed the body"
        assert sent["url_path"].endswith("/converse" if operation == "Converse" else "-stream")
