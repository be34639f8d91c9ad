"""`carryall chat` at a real terminal: a pseudo-terminal drives prompt_toolkit's line editor.

The child is the real `carryall chat` (its `main`, signal handling and
prompt_toolkit reading a real tty) with only the backend swapped for one
that answers from what it was sent, so a test can tell which prompt went.
Slash commands, Up recall, `/image` and Ctrl-C are typed as keys.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from carryall.sessions import Store

pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX-only")

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

CHILD = """
import sys, time
from carryall._commands import agent as commands
from carryall.blocks import Message, Text
from carryall.providers import Capabilities, Response

class Echo:
    name = "echo"
    model = "echo-1"
    capabilities = Capabilities(vision=True)
    context_window = None

    def complete(self, request, on_text=None):
        last = request.messages[-1]
        if last.text() == "slow":
            time.sleep(60)  # until Ctrl-C
        said = f"answer to: {last.text()} ({len(last.images())} image(s))"
        served = [spec.name for spec in request.tools if "__" in spec.name]
        if served:  # only with MCP servers (--mcp), so other tests read the same answer
            said += f" [{len(served)} MCP tools]"
        if on_text is not None:
            on_text(said)
        return Response(message=Message.assistant([Text(said)]), stop_reason="end_turn")

    def close(self):
        pass

commands._open_backend = lambda setup: Echo()
sys.argv = ["carryall", "chat", "-w", *sys.argv[1:]]
from carryall.cli import main
main()
"""

UP = "\x1b[A"
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()=>][A-Za-z0-9]?|\r")


class Terminal:
    """A child process on a pseudo-terminal: type keys, wait for text to appear."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # pragma: no cover - the child
            os.execve(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        self.seen = ""
        self.mark = 0

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        """Wait until `text` shows after what the last wait found (escape sequences aside)."""
        deadline = time.monotonic() + timeout
        while (found := self.screen().find(text, self.mark)) < 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} never appeared; the screen had:\n{self.screen()}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{text!r} never appeared before exit:\n{self.screen()}")
                self.seen += chunk.decode("utf-8", "replace")
        self.mark = found + len(text)

    def screen(self) -> str:
        """What was written, without the terminal's escape sequences."""
        return _ESCAPES.sub("", self.seen)

    def exit_code(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # keep the terminal drained so the child never blocks on output
                if select.select([self.fd], [], [], 0.2)[0]:
                    self.seen += os.read(self.fd, 65536).decode("utf-8", "replace")
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise AssertionError(f"the chat did not exit; the screen had:\n{self.screen()}")

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


def _env(home: Path) -> dict[str, str]:
    return {
        "CARRYALL_HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "xterm",
        "COLUMNS": "100",
        "LINES": "30",
        # No cursor-position query to answer: prompt_toolkit would wait for it.
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[tuple[Terminal, Path, Path]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "dot.png").write_bytes(PNG_1X1)
    home = tmp_path / "home"
    terminal = Terminal([sys.executable, "-c", CHILD, str(workspace)], _env(home))
    yield terminal, home, workspace
    terminal.close()


def test_chat_at_a_terminal_edits_recalls_runs_commands_and_keeps_an_interrupted_prompt(
    chat: tuple[Terminal, Path, Path],
) -> None:
    terminal, home, workspace = chat
    terminal.wait_for("you>")
    terminal.type("first\r")
    terminal.wait_for("answer to: first (0 image(s))")

    # Up brings the last line back; Enter sends it again.
    terminal.wait_for("you>")
    terminal.type(UP + "\r")
    terminal.wait_for("answer to: first (0 image(s))")

    # A slash command goes to carryall, not to the model.
    terminal.wait_for("you>")
    terminal.type("/help\r")
    terminal.wait_for("/image PATH")
    terminal.wait_for("you>")
    assert "answer to: /help" not in terminal.screen()

    terminal.type(f"/image {workspace / 'dot.png'}\r")
    terminal.wait_for("to your next prompt")
    terminal.wait_for("you>")
    terminal.type("what is it?\r")
    terminal.wait_for("answer to: what is it? (1 image(s))")

    # Line editing: a typo fixed with Backspace before sending.
    terminal.wait_for("you>")
    terminal.type("fixx\x7f\r")
    terminal.wait_for("answer to: fix (0 image(s))")

    # Ctrl-C mid-turn stops it and keeps the prompt; the chat goes on.
    terminal.wait_for("you>")
    terminal.type("slow\r")
    terminal.wait_for("thinking")  # the spinner: the request is out
    time.sleep(0.3)
    terminal.type("\x03")
    terminal.wait_for("your prompt is kept")
    terminal.wait_for("you>")
    terminal.type("/exit\r")
    assert terminal.exit_code() == 0, terminal.seen

    [info] = Store(home / "sessions").list()
    recorded = [m.text() for m in Store(home / "sessions").open(info.meta.id).messages()]
    assert recorded == [
        "first",
        "answer to: first (0 image(s))",
        "first",
        "answer to: first (0 image(s))",
        "what is it?",
        "answer to: what is it? (1 image(s))",
        "fix",
        "answer to: fix (0 image(s))",
        "slow",
    ]
    # The typed lines are kept for the next chat's Up, commands included.
    history = (home / "chat_history").read_text()
    assert "+first" in history and "+/help" in history and "+slow" in history


def test_an_unknown_slash_command_sends_nothing(chat: tuple[Terminal, Path, Path]) -> None:
    terminal, home, _ = chat
    terminal.wait_for("you>")
    terminal.type("/imag x\r")
    terminal.wait_for("unknown command /imag")
    terminal.wait_for("you>")
    terminal.type("//etc is a path\r")
    terminal.wait_for("answer to: /etc is a path")
    terminal.wait_for("you>")
    terminal.type("\x04")  # Ctrl-D leaves
    assert terminal.exit_code() == 0, terminal.seen
    [info] = Store(home / "sessions").list()
    texts = [m.text() for m in Store(home / "sessions").open(info.meta.id).messages()]
    assert texts[0] == "/etc is a path"
    assert json.dumps(texts).count("imag x") == 0


def test_chat_starts_its_mcp_servers_at_the_first_message_and_stops_them_on_sigterm(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp", reason="the MCP tests need the mcp extra")
    from tests.support.mcp_peer import HOSTILE, server_alive, server_gone

    workspace = tmp_path / "ws"
    workspace.mkdir()
    started = tmp_path / "started"  # the server writes its pid here when it starts
    config = tmp_path / "mcp.json"
    entry = {"command": HOSTILE.command, "args": HOSTILE.args}
    entry["env"] = {"HOSTILE_STARTED_FILE": str(started)}
    config.write_text(json.dumps({"mcpServers": {"hostile": entry}}))
    argv = [sys.executable, "-c", CHILD, str(workspace), "--mcp", str(config)]
    terminal = Terminal(argv, _env(tmp_path / "home"))
    try:
        terminal.wait_for("you>")
        # /tools reads the table without a request: the servers stay down.
        terminal.type("/tools\r")
        terminal.wait_for("read_file")
        terminal.wait_for("you>")
        time.sleep(1.0)  # a server started at open would have written its pid by now
        assert not started.exists(), "the MCP server started before the first message"
        assert "hostile__" not in terminal.screen()

        terminal.type("hi\r")
        # The first request already offered the server's tools.
        terminal.wait_for("answer to: hi (0 image(s)) [")
        terminal.wait_for("MCP tools]")
        (pid,) = [int(line) for line in started.read_text().split()]
        assert server_alive(pid)
        terminal.wait_for("you>")
        terminal.type("again\r")
        terminal.wait_for("answer to: again")
        terminal.wait_for("you>")
        assert started.read_text().split() == [str(pid)]  # started once, not per turn

        os.kill(terminal.pid, signal.SIGTERM)
        assert terminal.exit_code() == 128 + signal.SIGTERM, terminal.seen
        assert "Traceback" not in terminal.screen()
        assert server_gone(pid), "the MCP server outlived the chat"
    finally:
        terminal.close()
