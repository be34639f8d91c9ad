"""The MCP client against a scripted server on the official SDK (tests/support/mcp_sdk_server.py).

The server is real (a process on `mcp`'s own `MCPServer`, over stdio);
the model, where there is one, is a scripted backend, so what the model is
given is the thing checked.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from carryall.agent import Agent
from carryall.blocks import Message, ToolResult, ToolUse
from carryall.config import McpServer
from carryall.mcp import STDERR_TAIL_BYTES, McpToolbox, unique_tool_name
from tests.support.agent import ScriptedBackend, call, say

SERVER_FILE = Path(__file__).parents[1] / "support" / "mcp_sdk_server.py"


def sdk_server(**fields: object) -> McpServer:
    """The scripted SDK server as an `mcpServers` entry, with `fields` on top."""
    return McpServer(command=sys.executable, args=[str(SERVER_FILE)], timeout=60, **fields)  # type: ignore[arg-type]


@pytest.fixture
def box() -> Iterator[McpToolbox]:
    with McpToolbox({"sdk": sdk_server()}) as b:
        (started,) = b.start()
        assert started.error is None, started.error
        yield b


def turn(box: McpToolbox, name: str, arguments: dict[str, object]) -> list[Message]:
    """One scripted round calling `name`, then an answer; the whole history."""
    backend = ScriptedBackend(call(ToolUse("c1", name, arguments)), say("seen"))
    agent = Agent(backend, tools=box.tools)
    agent.send("go")
    return agent.messages


def test_a_suffix_that_is_itself_a_tool_name_is_counted_past() -> None:
    taken: set[str] = set()
    for tool in ("a_b_2", "a_b", "a.b", "a-b", "a b"):
        made = unique_tool_name("s", tool, taken)
        assert made not in taken
        taken.add(made)
    assert taken == {"s__a_b_2", "s__a_b", "s__a_b_3", "s__a-b", "s__a_b_4"}


def test_colliding_tools_of_one_server_and_of_two_servers_get_distinct_names() -> None:
    # "s.x" and "s_x" are one prefix once made safe: every tool of the two collides.
    servers = {"s.x": sdk_server(), "s_x": sdk_server()}
    with McpToolbox(servers, reserved=["s_x__a_b_3"]) as b:
        results = b.start()
        assert [r.error for r in results] == [None, None]
        names = [t.name for t in b.tools]
        assert len(names) == len(set(names)), names
        assert "s_x__a_b_3" not in names
        first = [t.name for t in results[0].tools]
        assert first[:3] == ["s_x__a_b_2", "s_x__a_b", "s_x__a_b_4"]
        second = [t.name for t in results[1].tools]
        assert second[:3] == ["s_x__a_b_2_2", "s_x__a_b_5", "s_x__a_b_6"]


def test_the_renamed_tool_still_calls_its_own_mcp_tool(box: McpToolbox) -> None:
    renamed = next(t for t in box.tools if t.description.startswith("Named `a.b`"))
    assert renamed.name == "sdk__a_b_3"
    (result,) = turn(box, renamed.name, {})[2].content
    assert isinstance(result, ToolResult) and result.content == "a.b"


def test_a_flooding_server_keeps_only_a_bounded_stderr_tail(box: McpToolbox) -> None:
    (result,) = turn(box, "sdk__flood", {"lines": 200_000})[2].content
    assert isinstance(result, ToolResult) and result.is_error
    assert "the last words before the crash" in result.content
    kept = box.stderr_tail("sdk")
    assert kept.endswith("sdk-test: the last words before the crash")
    assert len(kept.encode()) <= STDERR_TAIL_BYTES


def test_a_server_inherits_carryall_variables_and_its_own_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [k for k in os.environ if k.startswith("CARRYALL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path))
    monkeypatch.setenv("CARRYALL_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("SDK_TEST_NOT_GIVEN", "outside")
    server = sdk_server(env={"SDK_TEST_GIVEN": "from the entry", "CARRYALL_STORE": "entry"})
    with McpToolbox({"sdk": server}) as b:
        b.start()
        (result,) = turn(b, "sdk__environment", {})[2].content
    assert isinstance(result, ToolResult)
    seen = json.loads(result.content)
    assert seen == {
        "CARRYALL_HOME": str(tmp_path),
        "CARRYALL_STORE": "entry",
        "SDK_TEST_GIVEN": "from the entry",
    }
