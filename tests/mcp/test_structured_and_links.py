"""Structured results kept as structure, and resource links the model can read.

Real servers (the scripted SDK server and the pinned reference server),
a scripted model; the request bodies are checked against the SDKs' own
request types (google-genai, botocore), so "an object" means an object
the provider's SDK takes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from carryall.agent import Agent
from carryall.blocks import Image, Message, ToolResult, ToolUse
from carryall.mcp import READ_RESOURCE_TOOL, McpToolbox
from carryall.providers import Capabilities, Request, bedrock, gemini, openai
from carryall.sessions import open_store
from tests.mcp.test_client_sdk import sdk_server
from tests.support.agent import ScriptedBackend, call, say
from tests.support.mcp_peer import everything_server
from tests.support.mcp_sdk_server import PNG_1X1, README
from tests.support.sdk_wires import check_bedrock_request, check_gemini_request

WEATHER = {"city": "Oslo", "temperature": 21.5, "conditions": "clear"}


@pytest.fixture(scope="module")
def box() -> Iterator[McpToolbox]:
    with McpToolbox({"sdk": sdk_server()}) as b:
        (started,) = b.start()
        assert started.error is None, started.error
        yield b


def _rounds(box: McpToolbox, *uses: ToolUse) -> list[Message]:
    """One round per call, then an answer; the whole history."""
    backend = ScriptedBackend(*(call(use) for use in uses), say("seen"))
    agent = Agent(backend, tools=box.tools)
    agent.send("go")
    return agent.messages


def _request(history: list[Message], box: McpToolbox) -> Request:
    return Request(model="m", messages=tuple(history), tools=tuple(t.spec for t in box.tools))


def test_structured_content_stays_structured_and_reads_in_schema_order(box: McpToolbox) -> None:
    (result,) = _rounds(box, ToolUse("c1", "sdk__weather", {"city": "Oslo"}))[2].content
    assert isinstance(result, ToolResult) and not result.is_error
    assert result.structured == WEATHER
    assert result.content == json.dumps(WEATHER)
    assert list(json.loads(result.content)) == ["city", "temperature", "conditions"]


def test_a_structured_result_reaches_gemini_and_bedrock_as_an_object(box: McpToolbox) -> None:
    history = _rounds(box, ToolUse("c1", "sdk__weather", {"city": "Oslo"}))
    request = _request(history[:3], box)

    body = gemini.encode_request(request, Capabilities(vision=True))
    check_gemini_request(body)
    (part,) = body["contents"][2]["parts"]
    assert part["functionResponse"]["response"] == {"output": WEATHER}

    body = bedrock.encode_request(request, Capabilities(vision=True))
    check_bedrock_request(body)
    (block,) = body["messages"][2]["content"]
    assert block["toolResult"]["content"] == [{"json": WEATHER}]

    body = openai.encode_request(request, Capabilities(vision=True), "openai")
    tool_message = body["messages"][2]
    assert tool_message["role"] == "tool" and json.loads(tool_message["content"]) == WEATHER


def test_a_structured_result_survives_the_session_store(box: McpToolbox, tmp_path: Path) -> None:
    history = _rounds(box, ToolUse("c1", "sdk__weather", {"city": "Oslo"}))
    store = open_store(tmp_path / "sessions")
    session = store.create(backend="fake", model="m", cwd=str(tmp_path))
    session.record([], history)
    (result,) = store.open(session.id).messages()[2].content
    assert isinstance(result, ToolResult) and result.structured == WEATHER


def test_the_reference_servers_structured_result_reaches_gemini_as_an_object() -> None:
    with McpToolbox({"everything": everything_server()}) as b:
        b.start()
        history = _rounds(
            b, ToolUse("c1", "everything__get-structured-content", {"location": "Chicago"})
        )
        body = gemini.encode_request(_request(history[:3], b), Capabilities(vision=True))
    check_gemini_request(body)
    (part,) = body["contents"][2]["parts"]
    output = part["functionResponse"]["response"]["output"]
    assert isinstance(output, dict) and output["conditions"]


def _read(uri: str) -> ToolUse:
    return ToolUse(f"r-{uri}", READ_RESOURCE_TOOL, {"server": "sdk", "uri": uri})


def test_a_linked_resource_is_read_by_the_models_tool_call(box: McpToolbox) -> None:
    reader = next(t for t in box.tools if t.name == READ_RESOURCE_TOOL)
    assert reader.input_schema["properties"]["server"]["enum"] == ["sdk"]
    history = _rounds(
        box,
        ToolUse("c1", "sdk__links", {}),
        _read("test://notes/readme"),
        _read("test://pictures/dot.png"),
    )
    (links,) = history[2].content
    assert isinstance(links, ToolResult)
    assert (
        f"[resource link readme: test://notes/readme (text/plain); "
        f"{READ_RESOURCE_TOOL} reads it with server 'sdk']"
    ) in links.content.split("\n")

    (text,) = history[4].content
    assert isinstance(text, ToolResult) and not text.is_error
    assert text.content.split("\n") == ["[resource test://notes/readme (text/plain)]", README]

    result, image = history[6].content
    assert isinstance(result, ToolResult) and not result.is_error
    assert isinstance(image, Image) and image.to_bytes() == PNG_1X1


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("test://archive/data.bin", "not read: carryall reads text, images and PDFs"),
        ("test://notes/huge", "not read: "),
        ("test://nowhere", "reading sdk test://nowhere"),
    ],
)
def test_a_resource_outside_the_attachment_limits_is_refused_with_why(
    box: McpToolbox, uri: str, reason: str
) -> None:
    (result,) = _rounds(box, _read(uri))[2].content
    assert isinstance(result, ToolResult) and result.is_error
    assert reason in result.content
    assert "y" * 1000 not in result.content


def test_the_reference_servers_linked_text_resource_is_read() -> None:
    with McpToolbox({"everything": everything_server()}) as b:
        b.start()
        use = ToolUse(
            "r1",
            READ_RESOURCE_TOOL,
            {"server": "everything", "uri": "demo://resource/dynamic/text/2"},
        )
        history = _rounds(b, ToolUse("c1", "everything__get-resource-links", {"count": 2}), use)
    (links,) = history[2].content
    assert isinstance(links, ToolResult) and "demo://resource/dynamic/text/2" in links.content
    (read,) = history[4].content
    assert isinstance(read, ToolResult) and not read.is_error
    assert "Resource 2: This is a plaintext resource" in read.content
