"""A server's question in the real `carryall`: answered in `chat` under tmux, declined in `run`.

The command is the real one (a child process); the MCP server is the
scripted SDK server; the model is a scripted Anthropic server on loopback
(tests/transport/test_faults.py) that calls the server's `ask` tool and
then answers, so what the model was sent back is what is checked.
"""

from __future__ import annotations

import io
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

from rich.console import Console

from carryall._commands.mcp import ask_person
from carryall.mcp import ElicitAnswer, Elicitation
from tests.mcp.test_client_hostile import _tool_use
from tests.mcp.test_client_sdk import SERVER_FILE
from tests.support.mcp_peer import everything_server
from tests.support.scripted import ANTHROPIC, Reply, ScriptedServer, served


def _asking(tool: str = "sdk__ask") -> Reply:
    """An Anthropic answer calling the MCP tool `tool` (carryall's name for it)."""
    return _tool_use(tool)


def _config(tmp_path: Path, entries: dict[str, dict[str, object]] | None = None) -> Path:
    path = tmp_path / "mcp.json"
    entry = {"command": sys.executable, "args": [str(SERVER_FILE)]}
    path.write_text(json.dumps({"mcpServers": entries or {"sdk": entry}}))
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


def _run(
    server: ScriptedServer, config: Path, tmp_path: Path, prompt: str
) -> subprocess.CompletedProcess[str]:
    """`carryall run PROMPT` with no terminal on standard input: no person to ask."""
    return subprocess.run(
        _command(server, config, "run", prompt),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tmp_path),
    )


def _answer_sent(server: ScriptedServer) -> str:
    """The result of the `ask` call as the second request sent it to the model."""
    (result,) = server.requests[1]["body"]["messages"][2]["content"]
    assert result["type"] == "tool_result"
    content = result["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def test_a_non_interactive_run_declines_the_question(tmp_path: Path) -> None:
    with served([_asking(), Reply(sse=ANTHROPIC.ok)]) as server:
        done = _run(server, _config(tmp_path), tmp_path, "Ask me who I am.")
    assert done.returncode == 0, done.stderr
    assert _answer_sent(server) == "decline"
    assert "asks:" not in done.stderr


def test_a_non_interactive_run_tells_the_reference_server_why_it_declines(
    tmp_path: Path,
) -> None:
    reference = everything_server()
    entries = {"everything": {"command": reference.command, "args": reference.args}}
    tool = "everything__trigger-elicitation-request"
    with served([_asking(tool), Reply(sse=ANTHROPIC.ok)]) as server:
        done = _run(server, _config(tmp_path, entries), tmp_path, "Ask me who I am.")
    assert done.returncode == 0, done.stderr
    sent = _answer_sent(server)
    assert "User declined to provide the requested information" in sent
    assert "this run has no person to ask" in sent


def test_a_servers_progress_is_shown_on_stderr(tmp_path: Path) -> None:
    with served([_asking("sdk__slow"), Reply(sse=ANTHROPIC.ok)]) as server:
        done = _run(server, _config(tmp_path), tmp_path, "Go slowly.")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    for step in (1, 2, 3):
        assert f"sdk progress: {step}/3 step {step} of 3" in lines
    assert "sdk log: info: slow: starting" in lines
    assert _answer_sent(server) == "done after 3 steps"


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


_SDK_STEPS = [
    ("answer it?", "y"),
    ("Name (string, required)", "Ada"),
    ("Age (integer, required)", "thirty-six"),
    ("age takes a whole number", "36"),
]
"""The scripted server's two fields, one answer refused and asked again."""

_EVERYTHING_STEPS = [("answer it?", "y"), ("String (string, required)", "Ada")] + [
    ("", "") for _ in range(12)
]
"""The reference server's thirteen fields: a name, then every other one left at its default."""


@pytest.mark.parametrize(
    ("server", "tool", "steps", "answered"),
    [
        ("sdk", "sdk__ask", _SDK_STEPS, ["accepted: Ada is 36"]),
        (
            "everything",
            "everything__trigger-elicitation-request",
            _EVERYTHING_STEPS,
            ["User provided the requested information", "- Name: Ada", "Favorite Integer: 42"],
        ),
    ],
)
def test_a_question_is_answered_in_chat_under_tmux(
    tmp_path: Path, server: str, tool: str, steps: list[tuple[str, str]], answered: list[str]
) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed (apt-get install tmux): chat needs a terminal here")
    entries: dict[str, dict[str, object]] = {
        "sdk": {"command": sys.executable, "args": [str(SERVER_FILE)]}
    }
    if server == "everything":
        reference = everything_server()
        entries = {"everything": {"command": reference.command, "args": reference.args}}
    name = f"carryall-elicit-{os.getpid()}-{server}"
    with served([_asking(tool), Reply(sse=ANTHROPIC.ok)]) as scripted:
        env = _env(tmp_path)
        command = shlex.join(
            ["env", "-i", *(f"{k}={v}" for k, v in env.items())]
            + _command(scripted, _config(tmp_path, entries), "chat")
        )
        subprocess.run(
            [tmux, "new-session", "-d", "-s", name, "-x", "150", "-y", "50", command], check=True
        )
        pane = _Pane(tmux, name)
        try:
            pane.wait(lambda t: "/help for commands" in t, "chat's greeting")
            pane.type("Ask me who I am.")
            for shown, line in steps:
                pane.wait(lambda t, shown=shown: shown in t, repr(shown))
                pane.type(line)
            pane.wait(lambda t: ANTHROPIC.text in t, "the model's answer")
            assert f"MCP server {server} asks:" in pane.text()
            pane.type("/exit")
        finally:
            subprocess.run([tmux, "kill-session", "-t", name], check=False)
    sent = _answer_sent(scripted)
    for part in answered:
        assert part in sent, sent


def _typed(*lines: str) -> Callable[[], str]:
    """A reader giving `lines` one at a time, then end of input."""
    queue = [f"{line}\n" for line in lines]
    return lambda: queue.pop(0) if queue else ""


_QUESTION = Elicitation(
    "sdk",
    "Who are you?",
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name"],
    },
)


@pytest.mark.parametrize(
    ("lines", "answer"),
    [
        (["y", "Ada", "-1", ""], ElicitAnswer("accept", {"name": "Ada"})),
        (["", "Ada", "7"], ElicitAnswer("accept", {"name": "Ada", "age": 7})),
        (["n"], ElicitAnswer("decline", reason="declined by the person")),
        (["c"], ElicitAnswer("cancel", reason="cancelled by the person")),
        (["y", "Ada"], ElicitAnswer("cancel", reason="cancelled by the person")),
    ],
)
def test_the_person_is_asked_field_by_field_until_each_fits(
    lines: list[str], answer: ElicitAnswer
) -> None:
    err = Console(file=io.StringIO(), width=100)
    stopped: list[bool] = []
    ask = ask_person(err, read=_typed(*lines), before=lambda: stopped.append(True))
    assert ask(_QUESTION) == answer
    assert stopped == [True]
    shown = err.file.getvalue()  # type: ignore[attr-defined]
    assert "MCP server sdk asks: Who are you?" in shown
    if "-1" in lines:
        assert "age must be at least 0" in shown
