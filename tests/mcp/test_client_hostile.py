"""MCP servers that misbehave: each case ends as an error or a named refusal, and the run goes on.

The server is real (tests/fixtures/mcp_hostile_server.py, on the `mcp`
SDK, over stdio); the model is a scripted backend, so what the model is
given is the thing checked. The image cases go through the real Anthropic
transport to a loopback server instead, since fitting an image is the
transport's: what is checked there is the body sent and the session kept.
"""

from __future__ import annotations

import base64
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from PIL import Image as Pil
from pydantic import TypeAdapter

from carryall.agent import Agent
from carryall.blocks import Image, ToolResult, ToolUse
from carryall.config import McpServer
from carryall.imagefit import RECOMMENDED_EDGE
from carryall.mcp import McpToolbox
from carryall.mcp._results import MAX_CONTENT_ITEMS
from carryall.providers import Capabilities, anthropic
from carryall.sessions import Session, SessionStore
from carryall.sessions.redact import Redactor
from carryall.tools.builtin import builtin_tools
from tests.support.agent import ScriptedBackend, call, say
from tests.support.scripted import ANTHROPIC, Reply, served

FIXTURE = Path(__file__).parent.parent / "fixtures" / "mcp_hostile_server.py"


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


def _png(width: int, height: int) -> bytes:
    """The fixture server's image, made the same way: Pillow writes the same bytes for it."""
    out = io.BytesIO()
    Pil.new("RGB", (width, height), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


def _tool_use(name: str) -> Reply:
    """An Anthropic answer calling one tool (the scripted server's JSON form of a message)."""
    return Reply(
        body={
            "id": "msg_01H",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "tool_use", "id": "toolu_01", "name": name, "input": {}}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 40, "output_tokens": 12},
        }
    )


def _wire_round(
    box: McpToolbox, tmp_path: Path, tool: str
) -> tuple[Session, list[dict[str, Any]], dict[str, Any]]:
    """One round calling `tool` through the real Anthropic transport to a loopback server.

    The model's call, then its answer; gives the session as recorded, the
    parts of the message that carried the round's results as the second
    request sent them, and the first result as the agent holds it.
    """
    store = SessionStore(tmp_path / "sessions", redactor=Redactor((), builtin=False))
    session = store.create(backend="anthropic", model="claude-sonnet-4-6")
    with served([_tool_use(tool), Reply(sse=ANTHROPIC.ok)]) as server:
        backend = ANTHROPIC.open(server.url, model="claude-sonnet-4-6")
        agent = Agent(backend, tools=box.tools, session=session, tool_timeout=20)
        assert agent.send("go").message.text() == ANTHROPIC.text  # the run reached its answer
    sent = server.requests[1]["body"]["messages"][2]
    assert sent["role"] == "user"
    (result,) = agent.messages[2].tool_results_in()
    return store.open(session.id), sent["content"], {"content": result.content}


def test_a_huge_image_keeps_its_bytes_in_the_session_and_goes_fitted_on_the_wire(
    box: McpToolbox, tmp_path: Path
) -> None:
    session, sent, result = _wire_round(box, tmp_path, "hostile__huge_image")
    assert result["content"].split("\n") == [
        "a wide chart:",
        "[image: hostile/huge_image image 1 (image/png)] (shown after the results)",
    ]
    # The session holds the server's bytes as it sent them, 9000 px wide.
    (kept,) = session.messages()[2].images()
    original = _png(9000, 1200)
    assert kept.to_bytes() == original
    # The wire got the fitted copy: Anthropic's recommended long edge, aspect kept.
    assert [part["type"] for part in sent] == ["tool_result", "image"]
    wired = base64.b64decode(sent[1]["source"]["data"])
    with Pil.open(io.BytesIO(wired)) as arrived:
        assert arrived.size == (RECOMMENDED_EDGE, 209)
    assert sent[1]["source"]["media_type"] == "image/png"
    [downgrade] = session.downgrades()
    assert (downgrade.index, downgrade.kind) == (2, "image")
    assert downgrade.reason.startswith(
        f"resized from 9000x1200 ({len(original)} bytes) to 1568x209"
    )


@pytest.mark.parametrize(
    "tool",
    [
        "hostile__corrupt_image",  # a PNG signature, then junk
        "hostile__garbage_body",  # a whole signature and size header, then junk
    ],
)
def test_a_corrupt_image_is_kept_and_goes_as_its_placeholder_with_the_reason(
    box: McpToolbox, tmp_path: Path, tool: str
) -> None:
    session, sent, _ = _wire_round(box, tmp_path, tool)
    (kept,) = session.messages()[2].images()
    assert kept.to_bytes().startswith(b"\x89PNG\r\n\x1a\n")  # the server's bytes, unfitted
    assert [part["type"] for part in sent] == ["tool_result", "text"]
    assert sent[1]["text"].startswith(
        f"[image: hostile/{tool.removeprefix('hostile__')} image 1 (image/png)] "
        "(not shown: its bytes do not decode as image/png"
    )
    [downgrade] = session.downgrades()
    assert (downgrade.index, downgrade.kind) == (2, "image")
    assert downgrade.reason.startswith("sent as its placeholder: its bytes do not decode as")


@pytest.mark.parametrize(
    ("tool", "reason"),
    [
        ("hostile__bad_base64", "not canonical base64"),
        ("hostile__lying_media_type", "its bytes are image/png but the URI says image/jpeg"),
    ],
)
def test_an_image_the_loader_refuses_is_its_placeholder_with_the_reason(
    box: McpToolbox, tmp_path: Path, tool: str, reason: str
) -> None:
    session, sent, result = _wire_round(box, tmp_path, tool)
    assert session.messages()[2].images() == []
    assert [part["type"] for part in sent] == ["tool_result"]
    assert "[image: hostile/" in result["content"]
    assert "not shown: " in result["content"] and reason in result["content"]
    assert session.downgrades() == []  # refused when the result was read, not at the wire


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
