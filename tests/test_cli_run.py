"""`carryall run` for scripts and follow-ups: --json, -c/--session, piped input, --version, -h.

Over the scripted backend of test_cli_agent, so what is pinned is what the
command passes on and prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carryall.blocks import Message, Text, ToolUse
from carryall.sessions import Store
from tests.test_agent import ScriptedBackend, call, say
from tests.test_cli_agent import PNG_1X1, invoke, script


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\n")
    (root / "dot.png").write_bytes(PNG_1X1)
    return root


# -- --version, -h ---------------------------------------------------------------


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"carryall {version('carryall')}\n"


@pytest.mark.parametrize("argv", [["-h"], ["run", "-h"], ["sessions", "rm", "-h"]])
def test_dash_h_is_help_everywhere(argv: list[str]) -> None:
    result = invoke(*argv)
    assert result.exit_code == 0
    assert "Usage:" in result.stdout and "Example:" in result.stdout


# -- --json -----------------------------------------------------------------------


def test_run_json_is_one_object_with_answer_calls_usage_and_session(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, call(ToolUse("c1", "read_file", {"path": "notes.txt"})), say("Two."))
    result = invoke("run", "how many lines?", "-w", str(workspace), "--json")
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    [info] = Store(home / "sessions").list()
    assert printed == {
        "answer": "Two.",
        "stop_reason": "end_turn",
        "tool_calls": [
            {
                "id": "c1",
                "name": "read_file",
                "input": {"path": "notes.txt"},
                "result": "alpha\nbeta\n",
                "is_error": False,
            }
        ],
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "model": "scripted-1",
        "session": info.meta.id,
        "downgrades": [],
    }


def test_run_json_without_recording_has_no_session(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say("ok"))
    result = invoke("run", "hi", "-w", str(workspace), "--json", "--no-record")
    assert json.loads(result.stdout)["session"] is None


def test_an_image_sent_to_a_model_without_eyes_is_noted_and_reported(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    from carryall._commands import agent as agent_commands

    blind = ScriptedBackend(say("I cannot see it."), vision=False)
    monkeypatch.setattr(agent_commands, "_open_backend", lambda setup: blind)
    image = str(workspace / "dot.png")
    result = invoke("run", "what is this?", "-i", image, "-w", str(workspace), "--json")
    assert result.exit_code == 0, result.stderr
    [downgrade] = json.loads(result.stdout)["downgrades"]
    assert (downgrade["index"], downgrade["kind"]) == (0, "image")
    assert "[image: " in downgrade["reason"] and "cannot see images" in downgrade["reason"]
    assert "note:" in result.stderr and "reached the model only as that line" in result.stderr


# -- piped standard input -----------------------------------------------------------


def test_piped_input_joins_the_prompt(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("A summary."))
    result = invoke(
        "run", "Summarise this", "-w", str(workspace), "--no-record", input="line one\nline two\n"
    )
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    sent = opened.backend.requests[0].messages[0]
    assert sent == Message.user("line one\nline two\n\nSummarise this")


def test_piped_input_alone_is_the_prompt(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("ok"))
    invoke("run", "-w", str(workspace), "--no-record", input="only this\n")
    assert opened.backend is not None
    assert opened.backend.requests[0].messages[0] == Message.user("only this\n")


def test_no_prompt_and_nothing_piped_is_a_clear_error(home: Path, workspace: Path) -> None:
    result = invoke("run", "-w", str(workspace), input="")
    assert result.exit_code == 1
    assert "error: the prompt is empty" in result.stderr


# -- -c / --session / last -----------------------------------------------------------


def _recorded(home: Path, workspace: Path, said: str) -> str:
    session = Store(home / "sessions").create(backend="scripted", model="m-1", cwd=workspace)
    session.record([], [Message.user(said), Message.assistant([Text(f"re: {said}")])])
    return session.id


def test_run_c_continues_the_latest_session(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    _recorded(home, workspace, "older")
    latest = _recorded(home, workspace, "newer")
    opened = script(monkeypatch, say("still here"))
    result = invoke("run", "-c", "and then?", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert [m.text() for m in opened.backend.requests[0].messages] == [
        "newer",
        "re: newer",
        "and then?",
    ]
    assert opened.setups[0].backend == "scripted" and opened.setups[0].model == "m-1"
    assert len(Store(home / "sessions").open(latest).messages()) == 4
    assert len(Store(home / "sessions").list()) == 2


def test_run_session_continues_the_one_named(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    older = _recorded(home, workspace, "older")
    _recorded(home, workspace, "newer")
    opened = script(monkeypatch, say("ok"))
    result = invoke("run", "--session", older[:-2], "again", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert opened.backend.requests[0].messages[0].text() == "older"


def test_chat_c_continues_the_latest_session(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    latest = _recorded(home, workspace, "hello")
    opened = script(monkeypatch, say("back again"))
    result = invoke("chat", "-c", "-w", str(workspace), input="more\n")
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert opened.backend.requests[0].messages[0].text() == "hello"
    assert len(Store(home / "sessions").open(latest).messages()) == 4


def test_c_with_no_session_yet_is_a_clear_error(home: Path, workspace: Path) -> None:
    result = invoke("run", "-c", "hi", "-w", str(workspace))
    assert result.exit_code == 1
    assert "error: no session yet in" in result.stderr


def test_c_and_session_together_are_refused(home: Path, workspace: Path) -> None:
    result = invoke("run", "-c", "--session", "x", "hi", "-w", str(workspace))
    assert result.exit_code == 2
    assert "not both" in result.stderr


# -- a failed first request --------------------------------------------------------


def test_a_failed_first_request_keeps_the_prompt_and_the_error(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    from carryall.errors import ProviderError

    script(monkeypatch, ProviderError("invalid x-api-key", status=401))
    result = invoke("run", "summarise the notes", "-w", str(workspace))
    assert result.exit_code == 1
    assert "error: [401] invalid x-api-key" in result.stderr
    store = Store(home / "sessions")
    [info] = store.list()
    assert info.failed == "[401] invalid x-api-key"
    assert info.meta.title == "summarise the notes" and info.turns == 1
    assert [m.text() for m in store.open(info.meta.id).messages()] == ["summarise the notes"]
    listed = json.loads(invoke("sessions", "list", "--json").stdout)
    assert listed[0]["failed"] == "[401] invalid x-api-key"
    assert "(failed) summarise the notes" in invoke("sessions", "list").stdout

    # Continuing it sends the kept prompt along and clears the mark.
    opened = script(monkeypatch, say("Done."))
    result = invoke("run", "-c", "try again", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert [m.text() for m in opened.backend.requests[0].messages] == [
        "summarise the notes",
        "try again",
    ]
    assert store.list()[0].failed is None


def test_rm_failed_removes_only_the_failed_sessions(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    from carryall.errors import ProviderError

    kept = _recorded(home, workspace, "fine")
    script(monkeypatch, ProviderError("connection refused"))
    invoke("run", "lost?", "-w", str(workspace))
    assert len(Store(home / "sessions").list()) == 2
    result = invoke("sessions", "rm", "--failed", "-y")
    assert result.exit_code == 0, result.stderr
    assert [i.meta.id for i in Store(home / "sessions").list()] == [kept]


# -- chat's commands, from a pipe ------------------------------------------------------


def test_chat_commands_change_the_next_turn_and_save_writes_markdown(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    opened = script(monkeypatch, say("one"), say("two"))
    saved = tmp_path / "chat.md"
    lines = [
        "/tools",
        "/system Answer in French.",
        "/model other-2",
        "first line \\",
        "second line",
        f"/image {workspace / 'dot.png'}",
        "look",
        f"/save {saved}",
        "/exit",
    ]
    result = invoke("chat", "-w", str(workspace), input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.stderr
    assert "read_file" in result.stderr and "list_dir" in result.stderr
    assert opened.backend is not None
    first, second = opened.backend.requests
    assert first.system == "Answer in French." and first.model == "other-2"
    assert first.messages[-1] == Message.user("first line \nsecond line")
    assert len(second.messages[-1].images()) == 1 and second.messages[-1].text() == "look"
    text = saved.read_text()
    assert "first line" in text and "two" in text and "Answer in French." in text


def test_chat_image_option_goes_with_the_first_prompt(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("a dot"))
    image = str(workspace / "dot.png")
    result = invoke("chat", "-i", image, "-w", str(workspace), input="what is it?\n")
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert len(opened.backend.requests[0].messages[0].images()) == 1


def test_resume_offers_the_session_tools_again(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say("ok"))
    invoke("run", "hi", "-w", str(workspace), "--tools", "read_file")
    opened = script(monkeypatch, say("again"))
    result = invoke("run", "-c", "more", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert [t.name for t in opened.backend.requests[0].tools] == ["read_file"]
    # The command line still wins.
    opened = script(monkeypatch, say("once more"))
    invoke("run", "-c", "more", "-w", str(workspace), "--tools", "list_dir")
    assert opened.backend is not None
    assert [t.name for t in opened.backend.requests[0].tools] == ["list_dir"]


def test_image_by_url_is_fetched_from_the_host_named(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Serve(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = PNG_1X1 if self.path == "/dot.png" else b"nope"
            self.send_response(200 if self.path == "/dot.png" else 404)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Serve)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        opened = script(monkeypatch, say("a dot"))
        result = invoke("run", "what?", "-i", f"{url}/dot.png", "-w", str(workspace))
        assert result.exit_code == 0, result.stderr
        assert opened.backend is not None
        [image] = opened.backend.requests[0].messages[0].images()
        assert (image.media_type, image.source) == ("image/png", "dot.png")
        result = invoke("run", "what?", "-i", f"{url}/gone.png", "-w", str(workspace))
        assert result.exit_code == 1 and "error:" in result.stderr and "gone.png" in result.stderr
    finally:
        server.shutdown()
        server.server_close()
