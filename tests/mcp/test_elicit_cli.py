"""A server's question in the real `carryall`: answered in `chat` under tmux, declined in `run`.

The command is the real one (a child process); the MCP server is the
scripted SDK server; the model is a scripted Anthropic server on loopback
(tests/test_transport_faults.py) that calls the server's `ask` tool and
then answers, so what the model was sent back is what is checked.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from tests.mcp.test_client_sdk import SERVER_FILE
from tests.test_transport_faults import ANTHROPIC, Reply, ScriptedServer, served


def _asking() -> Reply:
    """An Anthropic answer calling the scripted server's `ask` tool."""
    return Reply(
        body={
            "id": "msg_01A",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "tool_use", "id": "toolu_01", "name": "sdk__ask", "input": {}}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 40, "output_tokens": 12},
        }
    )


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    entry = {"command": sys.executable, "args": [str(SERVER_FILE)]}
    path.write_text(json.dumps({"mcpServers": {"sdk": entry}}))
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARRYALL_", "ANTHROPIC_"))}
    env |= {"CARRYALL_HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": "test", "NO_COLOR": "1"}
    return env


def _command(server: ScriptedServer, config: Path, *rest: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "carryall",
        *rest,
        "-b",
        "anthropic",
        "--base-url",
        server.url,
        "-m",
        "claude-sonnet-4-6",
        "-t",
        "none",
        "--mcp",
        str(config),
    ]


def _answer_sent(server: ScriptedServer) -> str:
    """The result of the `ask` call as the second request sent it to the model."""
    (result,) = server.requests[1]["body"]["messages"][2]["content"]
    assert result["type"] == "tool_result"
    content = result["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def test_a_non_interactive_run_declines_the_question(tmp_path: Path) -> None:
    with served([_asking(), Reply(sse=ANTHROPIC.ok)]) as server:
        done = subprocess.run(
            _command(server, _config(tmp_path), "run", "Ask me who I am."),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(tmp_path),
        )
    assert done.returncode == 0, done.stderr
    assert _answer_sent(server) == "decline"
    assert "asks:" not in done.stderr


class _Pane:
    """A tmux session running one command, read and typed into as a person would."""

    def __init__(self, tmux: str, name: str) -> None:
        self.tmux = tmux
        self.name = name

    def text(self) -> str:
        done = subprocess.run(
            [self.tmux, "capture-pane", "-p", "-J", "-t", self.name, "-S", "-200"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout

    def type(self, line: str) -> None:
        subprocess.run([self.tmux, "send-keys", "-t", self.name, "-l", line], check=True)
        subprocess.run([self.tmux, "send-keys", "-t", self.name, "Enter"], check=True)

    def wait(self, seen: Callable[[str], bool], what: str, within: float = 90.0) -> str:
        deadline = time.monotonic() + within
        while True:
            text = self.text()
            if seen(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"the pane never showed {what}:\n{text}")
            time.sleep(0.2)


def test_a_question_is_answered_in_chat_under_tmux(tmp_path: Path) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed (apt-get install tmux): chat needs a terminal here")
    name = f"carryall-elicit-{os.getpid()}"
    with served([_asking(), Reply(sse=ANTHROPIC.ok)]) as server:
        env = _env(tmp_path)
        command = shlex.join(
            ["env", "-i", *(f"{k}={v}" for k, v in env.items())]
            + _command(server, _config(tmp_path), "chat")
        )
        subprocess.run(
            [tmux, "new-session", "-d", "-s", name, "-x", "150", "-y", "50", command], check=True
        )
        pane = _Pane(tmux, name)
        try:
            pane.wait(lambda t: "/help for commands" in t, "chat's greeting")
            pane.type("Ask me who I am.")
            asked = pane.wait(lambda t: "answer it?" in t, "the server's question")
            assert "MCP server sdk asks: Who are you?" in asked
            pane.type("y")
            pane.wait(lambda t: "Name (string, required)" in t, "the name field")
            pane.type("Ada")
            pane.wait(lambda t: "Age (integer, required)" in t, "the age field")
            pane.type("thirty-six")
            pane.wait(lambda t: "age takes a whole number" in t, "the age refused")
            pane.type("36")
            pane.wait(lambda t: ANTHROPIC.text in t, "the model's answer")
            pane.type("/exit")
        finally:
            subprocess.run([tmux, "kill-session", "-t", name], check=False)
    assert _answer_sent(server) == "accepted: Ada is 36"
