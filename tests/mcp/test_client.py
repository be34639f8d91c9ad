"""The MCP client against the real reference server, `@modelcontextprotocol/server-everything`.

No mocks: the server is the npm package `.ci/run` installs (tests/support/mcp_peer.py);
the model is a scripted backend where only the loop is under test, and the
real local llama-server where the wire is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from pydantic import TypeAdapter

from carryall.agent import Agent
from carryall.blocks import Image, Message, ToolResult, ToolUse
from carryall.mcp import McpToolbox, tool_name
from carryall.providers import Capabilities, Request, anthropic, openai, prompt
from carryall.transport._images import WIRE_IMAGE_LIMITS, fit_request_images
from tests.support.agent import ScriptedBackend, call, say
from tests.support.mcp_peer import everything_server
from tests.support.sdk_openai import check_openai_request

pytestmark = pytest.mark.slow

_ANTHROPIC = TypeAdapter(MessageCreateParamsNonStreaming)


@pytest.fixture(scope="module")
def everything() -> Iterator[McpToolbox]:
    with McpToolbox({"everything": everything_server()}) as box:
        (started,) = box.start()
        assert started.error is None, started.error
        yield box


def _turn(box: McpToolbox, name: str, arguments: dict[str, Any]) -> list[Message]:
    backend = ScriptedBackend(call(ToolUse("c1", name, arguments)), say("seen"))
    agent = Agent(backend, tools=box.tools)
    agent.send("go")
    return agent.messages


def test_every_tool_is_offered_under_its_server_prefix(everything: McpToolbox) -> None:
    names = {t.name for t in everything.tools}
    assert {"everything__echo", "everything__get-tiny-image", "everything__get-sum"} <= names
    echo = next(t for t in everything.tools if t.name == "everything__echo")
    assert echo.description == "Echoes back the input string"
    assert echo.input_schema["properties"]["message"]["type"] == "string"
    assert "$schema" not in echo.input_schema


def test_the_tiny_image_arrives_as_an_image_after_the_results(everything: McpToolbox) -> None:
    history = _turn(everything, "everything__get-tiny-image", {})
    carrying = history[2]
    assert carrying.role == "user"
    result, image = carrying.content
    assert isinstance(result, ToolResult) and not result.is_error
    assert isinstance(image, Image) and image.media_type == "image/png"
    assert image.to_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert result.content.split("\n") == [
        "Here's the image you requested:",
        f"{image.placeholder()} (shown after the results)",
        "The image above is the MCP logo.",
    ]


def _image_parts(content: Any) -> list[str]:
    return [p["type"] for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def test_the_image_rides_the_user_turn_after_the_results_on_every_wire(
    everything: McpToolbox,
) -> None:
    history = _turn(everything, "everything__get-tiny-image", {})
    (image,) = history[2].images()
    request = Request(
        model="m", messages=tuple(history[:3]), tools=tuple(t.spec for t in everything.tools)
    )
    vision = Capabilities(vision=True)

    body = anthropic.encode_request(request, vision)
    _ANTHROPIC.validate_python(body)
    turn = body["messages"][2]
    assert turn["role"] == "user"
    assert [p["type"] for p in turn["content"]] == ["tool_result", "image"]
    assert turn["content"][1]["source"]["data"] == image.data

    for dialect in ("openai", "llama-server"):
        body = openai.encode_request(request, vision, dialect)
        check_openai_request(body)
        roles = [m["role"] for m in body["messages"]]
        assert roles[2:] == ["tool", "user"]
        after = body["messages"][3]["content"]
        assert "image_url" in _image_parts(after)
        assert any(image.data in p.get("image_url", {}).get("url", "") for p in after)

    body = prompt.encode_request(request, Capabilities(vision=True, native_tools=False))
    check_openai_request(body)
    last = body["messages"][-1]
    assert last["role"] == "user" and "image_url" in _image_parts(last["content"])
    texts = [p["text"] for p in last["content"] if p.get("type") == "text"]
    assert any("Here's the image you requested:" in t for t in texts)


def test_the_reference_servers_image_goes_to_every_wire_byte_for_byte(
    everything: McpToolbox,
) -> None:
    # Its logo has a bad checksum on an ancillary chunk (iCCP), which every
    # model takes: the transport's check of a body must take it too.
    history = _turn(everything, "everything__get-tiny-image", {})
    request = Request(model="m", messages=tuple(history[:3]))
    for wire, limits in WIRE_IMAGE_LIMITS.items():
        assert fit_request_images(request, limits) == (request, []), wire


def test_an_annotated_text_and_image_result_keeps_its_order(everything: McpToolbox) -> None:
    history = _turn(
        everything,
        "everything__get-annotated-message",
        {"messageType": "error", "includeImage": True},
    )
    result, image = history[2].content
    assert isinstance(result, ToolResult) and isinstance(image, Image)
    assert result.content.split("\n") == [
        "Error: Operation failed",
        f"{image.placeholder()} (shown after the results)",
    ]


def test_structured_content_and_resources_reach_the_text(everything: McpToolbox) -> None:
    (structured,) = _turn(
        everything, "everything__get-structured-content", {"location": "Chicago"}
    )[2].content
    assert isinstance(structured, ToolResult)
    assert json.loads(structured.content)["conditions"]

    (text_resource,) = _turn(
        everything, "everything__get-resource-reference", {"resourceType": "Text", "resourceId": 1}
    )[2].content
    assert isinstance(text_resource, ToolResult)
    lines = text_resource.content.split("\n")
    at = lines.index("[resource demo://resource/dynamic/text/1]")
    assert lines[at + 1].startswith("Resource 1: This is a plaintext resource")
    (blob,) = _turn(
        everything, "everything__get-resource-reference", {"resourceType": "Blob", "resourceId": 2}
    )[2].content
    assert isinstance(blob, ToolResult)
    # The blob says when it was made (`toLocaleTimeString`): "1:05:09 PM" is a
    # character shorter than "12:59:03 PM", so its size is 55 or 56 bytes.
    size = re.search(r"\(text/plain, (\d+) bytes\): not shown to the model\]", blob.content)
    assert size is not None and int(size.group(1)) in {55, 56}, blob.content


def test_bad_arguments_are_an_error_result_before_the_server_is_asked(
    everything: McpToolbox,
) -> None:
    (result,) = _turn(everything, "everything__get-sum", {"a": "one"})[2].content
    assert isinstance(result, ToolResult) and result.is_error
    assert "invalid arguments for everything__get-sum" in result.content


def test_names_are_prefixed_made_safe_and_kept_under_64_characters() -> None:
    assert tool_name("files", "read") == "files__read"
    assert tool_name("my server", "get.thing") == "my_server__get_thing"
    long = tool_name("s", "x" * 100)
    assert len(long) == 64 and long.startswith("s__xxx")
    assert long != tool_name("s", "x" * 99)
