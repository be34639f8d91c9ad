"""`carryall run` / `carryall chat` output, options and recording, over a scripted backend.

These pin what the commands print and pass on; the real local server is
driven through the same commands in test_e2e_local.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Message, Text, ToolResult, ToolUse
from carryall.errors import ProviderError
from carryall.providers import Request
from carryall.sessions import Store
from tests.support.agent import ScriptedBackend, call, say
from tests.support.cli import PNG_1X1, invoke, script


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\n")
    (root / "dot.png").write_bytes(PNG_1X1)
    return root


# -- help -----------------------------------------------------------------------------


def test_top_level_help_lists_run_and_chat() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "run" in result.stdout and "chat" in result.stdout


@pytest.mark.parametrize("command", ["run", "chat"])
def test_subcommand_help_names_every_override(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    for option in (
        "--backend",
        "--model",
        "--system",
        "--tools",
        "--workspace",
        "--max-steps",
        "--no-vision",
        "--allow-write",
        "--no-record",
    ):
        assert option in result.stdout, option


def test_python_dash_m_carryall_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "carryall", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "--max-steps" in done.stdout


# -- run --------------------------------------------------------------------------------


def test_run_streams_the_answer_to_stdout(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say("The answer is 42."))
    result = invoke("run", "what is it?", "--workspace", str(workspace), "--no-record")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "The answer is 42.\n"


def test_an_answer_that_was_not_streamed_is_still_printed(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say("Whole at once."))
    original = ScriptedBackend.complete

    def silent(self: ScriptedBackend, request: Request, on_text: Any = None) -> Any:
        return original(self, request, None)

    monkeypatch.setattr(ScriptedBackend, "complete", silent)
    result = invoke("run", "hi", "-w", str(workspace), "--no-record")
    assert result.stdout == "Whole at once.\n"


def test_run_shows_tool_calls_and_clipped_results_on_stderr(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(
        monkeypatch,
        call(ToolUse("c1", "read_file", {"path": "notes.txt"})),
        say("It lists Greek letters."),
    )
    result = invoke("run", "read notes.txt", "-w", str(workspace), "--no-record")
    assert result.exit_code == 0, result.stderr
    assert '→ read_file(path="notes.txt")' in result.stderr
    assert "← alpha" in result.stderr
    assert "… 2 more line(s)" in result.stderr
    assert "epsilon" not in result.stderr
    assert result.stdout == "It lists Greek letters.\n"
    assert opened.backend is not None
    sent = opened.backend.requests[1].messages[2]
    assert sent.tool_results_in()[0].content.startswith("alpha\nbeta")


def test_run_shows_a_tool_image_as_its_placeholder(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, call(ToolUse("c1", "view_image", {"path": "dot.png"})), say("A dot."))
    result = invoke("run", "look at dot.png", "-w", str(workspace), "--no-record")
    assert result.exit_code == 0, result.stderr
    assert "[image: dot.png (image/png)]" in result.stderr
    assert "iVBOR" not in result.stderr + result.stdout


def test_run_shows_a_failed_call_as_an_error_result(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, call(ToolUse("c1", "read_file", {"path": "../x"})), say("Sorry."))
    result = invoke("run", "read ../x", "-w", str(workspace), "--no-record")
    assert result.exit_code == 0
    assert "✗ path '../x' is outside the workspace" in result.stderr


def test_provider_error_is_one_line_and_exit_code_1(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, ProviderError("connection refused", status=None))
    result = invoke("run", "hi", "-w", str(workspace), "--no-record")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == "error: connection refused"


def test_step_limit_is_reported(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, call(ToolUse("c1", "list_dir", {})), say("Two files."))
    result = invoke("run", "go", "-w", str(workspace), "--max-steps", "1", "--no-record")
    assert result.exit_code == 0
    assert "step limit: 1 tool round(s) run" in result.stderr
    assert result.stdout == "Two files.\n"


def test_ctrl_c_stops_the_run_with_exit_code_130(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, KeyboardInterrupt())
    result = invoke("run", "hi", "-w", str(workspace), "--no-record")
    assert result.exit_code == 130
    assert "interrupted" in result.stderr


def test_tools_option_chooses_the_builtins(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("ok"), say("ok"), say("ok"))
    invoke("run", "x", "-w", str(workspace), "--tools", "list_dir", "--no-record")
    assert opened.backend is not None
    assert [t.name for t in opened.backend.requests[0].tools] == ["list_dir"]
    invoke("run", "x", "-w", str(workspace), "--tools", "none", "--no-record")
    assert opened.backend.requests[0].tools == ()
    invoke("run", "x", "-w", str(workspace), "--allow-write", "--no-record")
    assert [t.name for t in opened.backend.requests[0].tools] == [
        "read_file",
        "list_dir",
        "view_image",
        "write_file",
    ]


def test_unknown_tool_name_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch)
    result = invoke("run", "x", "-w", str(workspace), "--tools", "shell")
    assert result.exit_code == 1
    assert "error: unknown built-in tool(s) shell" in result.stderr


def test_options_reach_the_backend_and_the_request(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    prompt_file = tmp_path / "system.txt"
    prompt_file.write_text("You are terse.")
    opened = script(monkeypatch, say("ok"))
    result = invoke(
        "run",
        "x",
        "-w",
        str(workspace),
        "--backend",
        "local",
        "--model",
        "tiny",
        "--no-vision",
        "--system",
        f"@{prompt_file}",
        "--max-tokens",
        "99",
        "--no-record",
    )
    assert result.exit_code == 0, result.stderr
    setup = opened.setups[0]
    assert (setup.backend, setup.model, setup.no_vision) == ("local", "tiny", True)
    assert opened.backend is not None
    request: Request = opened.backend.requests[0]
    assert (request.system, request.max_tokens) == ("You are terse.", 99)
    assert opened.backend.closed


def test_prompt_from_stdin(monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path) -> None:
    opened = script(monkeypatch, say("ok"))
    invoke("run", "-", "-w", str(workspace), "--no-record", input="from a pipe\n")
    assert opened.backend is not None
    assert opened.backend.requests[0].messages[0] == Message.user("from a pipe\n")


# -- recording --------------------------------------------------------------------------


def test_run_is_recorded_as_a_session(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, call(ToolUse("c1", "list_dir", {})), say("Two files."))
    result = invoke("run", "what is here?", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    [info] = Store(home / "sessions").list()
    assert f"session {info.meta.id}" in result.stderr
    messages = Store(home / "sessions").open(info.meta.id).messages()
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[2].tool_results_in()[0] == ToolResult(
        "c1", "dot.png (70 bytes)\nnotes.txt (36 bytes)"
    )


def test_no_record_leaves_no_session(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say("ok"))
    invoke("run", "hi", "-w", str(workspace), "--no-record")
    assert Store(home / "sessions").list() == []


def test_a_failed_run_still_records_its_whole_messages(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, call(ToolUse("c1", "list_dir", {})), ProviderError("gone"))
    result = invoke("run", "hi", "-w", str(workspace))
    assert result.exit_code == 1
    [info] = Store(home / "sessions").list()
    messages = Store(home / "sessions").open(info.meta.id).messages()
    assert [m.role for m in messages] == ["user", "assistant", "user"]


# -- chat -------------------------------------------------------------------------------


def test_chat_takes_turns_until_exit(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("Hello!"), say("Bye!"))
    result = invoke("chat", "-w", str(workspace), input="hi\n\nsee you\n/exit\n")
    assert result.exit_code == 0, result.stderr
    assert "Hello!" in result.stdout and "Bye!" in result.stdout
    assert opened.backend is not None
    assert [m.text() for m in opened.backend.requests[1].messages] == ["hi", "Hello!", "see you"]


def test_chat_keeps_going_after_an_error(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, ProviderError("overloaded", status=529), say("Here now."))
    result = invoke("chat", "-w", str(workspace), "--no-record", input="hi\nhi again\n")
    assert result.exit_code == 0
    assert "error: [529] overloaded" in result.stderr
    assert opened.backend is not None
    assert opened.backend.requests[1].messages == (Message.user("hi again"),)


def test_chat_keeps_the_conversation_and_the_interrupted_prompt_after_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("one"), KeyboardInterrupt(), say("three"))
    result = invoke("chat", "-w", str(workspace), input="a\nb\nc\n")
    assert result.exit_code == 0
    assert "interrupted" in result.stderr and "your prompt is kept" in result.stderr
    assert opened.backend is not None
    # The prompt the interrupted turn took back is kept, in the conversation and the session.
    assert [m.text() for m in opened.backend.requests[2].messages] == ["a", "one", "b", "c"]
    [info] = Store(home / "sessions").list()
    recorded = Store(home / "sessions").open(info.meta.id).messages()
    assert [m.text() for m in recorded] == ["a", "one", "b", "c", "three"]


def test_chat_resume_continues_a_recorded_session(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    store = Store(home / "sessions")
    session = store.create(backend="scripted", model="m-1", cwd=workspace, system="Be kind.")
    earlier = [Message.user("first"), Message.assistant([Text("noted")])]
    session.record([], earlier)
    opened = script(monkeypatch, say("still here"))
    result = invoke("chat", "-w", str(workspace), "--resume", session.id, input="again\n")
    assert result.exit_code == 0, result.stderr
    assert opened.setups[0].backend == "scripted" and opened.setups[0].model == "m-1"
    assert opened.backend is not None
    request = opened.backend.requests[0]
    assert request.system == "Be kind."
    assert request.messages[:2] == tuple(earlier)
    assert len(store.open(session.id).messages()) == 4
    assert len(store.list()) == 1


def test_local_backend_not_installed_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    from carryall.local import server as local_server

    # A fresh, empty cache and no shared server from an earlier test: the
    # real open_backend must find nothing to start.
    monkeypatch.setenv("CARRYALL_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(local_server, "_singleton", None)
    result = invoke("run", "hi", "--backend", "local", "-w", str(workspace), "--no-record")
    assert result.exit_code == 1
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert "carryall local install" in line
    assert "Traceback" not in result.stderr


def test_run_hands_over_an_image_named_with_image(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("A dot."))
    result = invoke(
        "run", "what is this?", "-i", str(workspace / "dot.png"), "--no-record", "-t", "none"
    )
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    first = opened.backend.requests[0].messages[0]
    assert first.text() == "what is this?"
    assert [(i.media_type, i.source, i.to_bytes()) for i in first.images()] == [
        ("image/png", "dot.png", PNG_1X1)
    ]


def test_run_refuses_a_named_file_that_is_not_an_image(home: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake.png"
    fake.write_text("#!/bin/sh\necho not an image\n")
    result = invoke("run", "x", "--image", str(fake), "--no-record")
    assert result.exit_code == 1
    assert "fake.png" in result.stderr and "not a PNG" in result.stderr


def test_run_records_into_the_store_named_by_store(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    script(monkeypatch, say("ok"))
    other = tmp_path / "shared-store"
    result = invoke("run", "hi", "-w", str(workspace), "--store", other.as_uri())
    assert result.exit_code == 0, result.stderr
    assert Store(home / "sessions").list() == []
    [info] = Store(other).list()
    assert [m.role for m in Store(other).open(info.meta.id).messages()] == ["user", "assistant"]
    assert "--store" in invoke("chat", "--help").stdout


# -- MCP servers ------------------------------------------------------------------------


def _hostile_config(tmp_path: Path) -> tuple[Path, Path]:
    """An mcp.json naming the in-repo hostile server, and the file it writes its pid to on start."""
    pytest.importorskip("mcp", reason="the MCP tests need the mcp extra")
    from tests.support.mcp_peer import HOSTILE

    started = tmp_path / "started"
    entry = {"command": HOSTILE.command, "args": HOSTILE.args}
    entry["env"] = {"HOSTILE_STARTED_FILE": str(started)}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"hostile": entry}}))
    return config, started


def test_run_starts_its_mcp_servers_for_the_first_request_and_stops_them_after(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    config, started = _hostile_config(tmp_path)

    def first(request: Request) -> Any:
        # Started by now, once, and the first request already offers its tools.
        assert len(started.read_text().split()) == 1
        assert "hostile__pid" in [spec.name for spec in request.tools]
        return call(ToolUse("c1", "hostile__pid", {}))

    opened = script(monkeypatch, first, say("done"))
    result = invoke("run", "what is your pid?", "-w", str(workspace), "--mcp", str(config))
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    (pid,) = started.read_text().split()
    [answered] = opened.backend.requests[1].messages[2].tool_results_in()
    assert answered.content == pid and not answered.is_error
    from tests.support.mcp_peer import server_gone

    assert server_gone(int(pid)), "the MCP server outlived the run"


def test_chat_that_sends_nothing_starts_no_mcp_server(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    config, started = _hostile_config(tmp_path)
    script(monkeypatch)
    result = invoke("chat", "-w", str(workspace), "--mcp", str(config), input="/tools\n/exit\n")
    assert result.exit_code == 0, result.stderr
    assert "read_file" in result.stderr and "hostile__" not in result.stderr
    assert not started.exists()


def test_a_server_that_fails_to_start_is_one_warning_at_the_first_request(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    pytest.importorskip("mcp", reason="the MCP tests need the mcp extra")
    config = tmp_path / "mcp.json"
    missing = tmp_path / "no-such-server"
    config.write_text(json.dumps({"mcpServers": {"gone": {"command": str(missing)}}}))
    opened = script(monkeypatch, say("fine without it"))
    result = invoke("run", "hi", "-w", str(workspace), "--no-record", "--mcp", str(config))
    assert result.exit_code == 0, result.stderr
    assert "fine without it" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: MCP server gone left out: cannot start it: No such file or directory: {missing}"
    ]
    assert opened.backend is not None
    assert [spec.name for spec in opened.backend.requests[0].tools] == [
        "read_file",
        "list_dir",
        "view_image",
    ]
