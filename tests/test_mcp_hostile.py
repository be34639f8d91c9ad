"""MCP servers that misbehave: each case ends as an error or a named refusal, and the run goes on.

The server is real (tests/fixtures/mcp_hostile_server.py, on the `mcp`
SDK, over stdio); the model is a scripted backend, so what the model is
given is the thing checked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from pydantic import TypeAdapter

from carryall.agent import Agent
from carryall.blocks import Image, ToolResult, ToolUse
from carryall.config import McpServer
from carryall.imagefit import MAX_EDGE
from carryall.mcp import McpToolbox
from carryall.mcp._results import MAX_CONTENT_ITEMS
from carryall.providers import Capabilities, anthropic
from carryall.tools.builtin import builtin_tools
from tests.test_agent import ScriptedBackend, call, say

FIXTURE = Path(__file__).parent / "fixtures" / "mcp_hostile_server.py"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpToolbox]:
    """One server for the module: each case must leave it usable for the next, or restart it."""
    server = McpServer(command=sys.executable, args=[str(FIXTURE)], timeout=3)
    builtin = [t.name for t in builtin_tools(tmp_path_factory.mktemp("workspace"))]
    with McpToolbox({"hostile": server}, reserved=builtin) as b:
        (started,) = b.start()
        assert started.error is None, started.error
        yield b


def _round(box: McpToolbox, tmp_path: Path, *names: str) -> tuple[list[ToolResult], list[Image]]:
    """One round calling `names`, then a final answer: the run must reach the answer."""
    uses = [ToolUse(f"c{i}", name, {}) for i, name in enumerate(names)]
    backend = ScriptedBackend(call(*uses), say("done"))
    agent = Agent(backend, tools=[*builtin_tools(tmp_path), *box.tools], tool_timeout=20)
    response = agent.send("go")
    assert response.message.text() == "done"
    round_message = agent.messages[2]
    return round_message.tool_results_in(), round_message.images()


def test_a_huge_image_is_scaled_under_the_edge_limit(box: McpToolbox, tmp_path: Path) -> None:
    (result,), (image,) = _round(box, tmp_path, "hostile__huge_image")
    assert not result.is_error
    assert "resized from 9000x1200" in result.content
    import io

    from PIL import Image as Pil

    with Pil.open(io.BytesIO(image.to_bytes())) as opened:
        assert max(opened.size) <= MAX_EDGE
        assert opened.size == (8000, 1067)
    assert image.media_type == "image/png"


@pytest.mark.parametrize(
    ("tool", "reason"),
    [
        ("hostile__bad_base64", "not canonical base64"),
        ("hostile__lying_media_type", "its bytes are image/png but the URI says image/jpeg"),
        ("hostile__corrupt_image", "do not decode as image/png"),
    ],
)
def test_a_bad_image_is_its_placeholder_with_the_reason(
    box: McpToolbox, tmp_path: Path, tool: str, reason: str
) -> None:
    (result,), images = _round(box, tmp_path, tool)
    assert images == []
    assert "[image: hostile/" in result.content
    assert "not shown: " in result.content and reason in result.content


def test_a_crash_mid_call_is_an_error_and_the_next_call_restarts_the_server(
    box: McpToolbox, tmp_path: Path
) -> None:
    (first,), _ = _round(box, tmp_path, "hostile__pid")
    (crashed,), _ = _round(box, tmp_path, "hostile__crash")
    assert crashed.is_error
    assert "hostile/crash: the server exited during the call" in crashed.content
    assert "crashing on purpose" in crashed.content  # its last words, from its stderr
    (again,), _ = _round(box, tmp_path, "hostile__pid")
    assert not again.is_error and again.content.isdigit()
    assert again.content != first.content  # a fresh process


def test_a_hang_times_out_as_an_error_and_other_calls_still_answer(
    box: McpToolbox, tmp_path: Path
) -> None:
    (hung, other), _ = _round(box, tmp_path, "hostile__hang", "hostile__pid")
    assert hung.is_error and "did not answer within 3s" in hung.content
    assert not other.is_error and other.content.isdigit()


def test_ten_thousand_items_are_cut_with_a_count(box: McpToolbox, tmp_path: Path) -> None:
    (result,), _ = _round(box, tmp_path, "hostile__many_items")
    assert not result.is_error
    lines = result.content.split("\n")
    assert lines[0] == "item 0" and lines[MAX_CONTENT_ITEMS - 1] == f"item {MAX_CONTENT_ITEMS - 1}"
    assert lines[-1] == f"[{10_000 - MAX_CONTENT_ITEMS} more content items not shown]"


def test_a_tool_named_like_a_builtin_is_prefixed_and_the_builtin_stays(
    box: McpToolbox, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the real file\n")
    names = [t.name for t in box.tools]
    assert "hostile__read_file" in names and "read_file" not in names
    uses = [
        ToolUse("a", "read_file", {"path": "notes.txt"}),
        ToolUse("b", "hostile__read_file", {"path": "notes.txt"}),
    ]
    backend = ScriptedBackend(call(*uses), say("done"))
    agent = Agent(backend, tools=[*builtin_tools(tmp_path), *box.tools])
    agent.send("go")
    builtin, served = agent.messages[2].tool_results_in()
    assert "the real file" in builtin.content
    assert served.content == "the hostile server's read_file was called with notes.txt"


def test_closing_the_toolbox_stops_the_server(tmp_path: Path) -> None:
    server = McpServer(command=sys.executable, args=[str(FIXTURE)])
    with McpToolbox({"hostile": server}) as b:
        b.start()
        pid_tool = next(t for t in b.tools if t.name == "hostile__pid")
        pid = int(pid_tool.invoke({}).text)
        os.kill(pid, 0)  # alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_tool_list_change_is_offered_from_the_next_request(
    box: McpToolbox, tmp_path: Path
) -> None:
    uses = [ToolUse("a", "hostile__grow", {})]
    backend = ScriptedBackend(call(*uses), call(ToolUse("b", "hostile__grown", {})), say("done"))
    agent = Agent(backend, tools=box.tools)
    agent.on_event = lambda event: box.update(agent.tools)
    agent.send("go")
    offered = [[spec.name for spec in request.tools] for request in backend.requests]
    assert "hostile__grown" not in offered[0]
    assert "hostile__grown" in offered[1]
    (result,) = agent.messages[4].tool_results_in()
    assert result.content == "grown here" and not result.is_error


def test_a_pdf_blob_is_a_document_after_the_results(box: McpToolbox, tmp_path: Path) -> None:
    uses = [ToolUse("a", "hostile__report", {}), ToolUse("b", "hostile__fake_pdf", {})]
    backend = ScriptedBackend(call(*uses), say("done"))
    agent = Agent(backend, tools=box.tools)
    agent.send("go")
    carrying = agent.messages[2]
    report, fake = carrying.tool_results_in()
    (document,) = carrying.documents()
    assert carrying.content[-1] == document
    assert document.media_type == "application/pdf"
    assert document.to_bytes().startswith(b"%PDF-1.4")
    assert report.content.split("\n") == [
        "the report:",
        f"{document.placeholder()} (shown after the results)",
        "end of report",
    ]
    assert "not shown: its bytes are not a PDF" in fake.content
    # The next request carried it, and the Anthropic wire sends it as a
    # document block after the results, in a body the SDK's type accepts.
    request = backend.requests[1]
    assert request.messages[2].documents() == [document]
    body = anthropic.encode(request, Capabilities(vision=True)).body
    TypeAdapter(MessageCreateParamsNonStreaming).validate_python(body)
    kinds = [part["type"] for part in body["messages"][2]["content"]]
    assert kinds == ["tool_result", "tool_result", "document"]
