"""`carryall run` for scripts and follow-ups: --json, -c/--session, piped input, --version, -h.

Over the scripted backend of test_cli_agent, so what is pinned is what the
command passes on and prints.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest

from carryall.blocks import Image, Message, Origin, Text, Thinking, ToolUse
from carryall.sessions import Store
from tests.support.agent import call, say
from tests.support.cli import PNG_1X1, invoke, script
from tests.support.scripted import Reply, ScriptedServer, served


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
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "reasoning_tokens": 0,
        },
        "cost": "—",
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


FOREIGN_THINKING = Thinking(
    "The user wants a greeting.",
    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
    Origin("anthropic", "api.anthropic.com", "claude-sonnet-4-6"),
)


def openai_run(server: ScriptedServer, *argv: str) -> list[str]:
    """`carryall run` argv for the OpenAI wire against the scripted server."""
    return ["run", *argv, "--backend", "openai", "--base-url", f"{server.url}/v1", "-m", "gpt-t"]


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")


def test_run_json_downgrades_are_the_codecs_report_not_only_images(
    home: Path, workspace: Path, keys: None
) -> None:
    # A session made on Anthropic, continued on OpenAI: its signed thinking
    # cannot go to the other wire, and the turn says so.
    store = Store(home / "sessions")
    earlier = store.create(backend="anthropic", model="claude-sonnet-4-6")
    earlier.record([], [Message.user("hi"), Message.assistant([FOREIGN_THINKING, Text("Hello.")])])
    with served([Reply(sse="openai_text.sse")]) as server:
        result = invoke(*openai_run(server, "and again?", "-c", "-w", str(workspace), "--json"))
    assert result.exit_code == 0, result.stderr
    [downgrade] = json.loads(result.stdout)["downgrades"]
    assert (downgrade["index"], downgrade["kind"]) == (1, "thinking")
    assert downgrade["reason"] == "this wire takes no reasoning back"
    # What went on the wire agrees: no thinking, the answer text kept.
    [sent] = server.requests
    assert "The user wants a greeting." not in json.dumps(sent["body"])
    note = f"note: message 1 (thinking): {downgrade['reason']}"
    assert note in " ".join(result.stderr.split())
    # And the session recorded the same downgrade (issue 12's report).
    recorded = [msgspec.to_builtins(d) for d in store.open(earlier.id).downgrades()]
    assert recorded == [downgrade]


def test_an_image_sent_to_a_model_without_eyes_is_noted_and_reported(
    home: Path, workspace: Path, keys: None
) -> None:
    image = str(workspace / "dot.png")
    with served([Reply(sse="openai_text.sse")]) as server:
        argv = openai_run(server, "what is this?", "-i", image, "--no-vision", "--json")
        result = invoke(*argv, "--no-record", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    [downgrade] = json.loads(result.stdout)["downgrades"]
    assert (downgrade["index"], downgrade["kind"]) == (0, "image")
    assert "cannot see" in downgrade["reason"]
    assert "note: message 0 (image):" in " ".join(result.stderr.split())
    [sent] = server.requests
    assert "image_url" not in json.dumps(sent["body"])  # its placeholder line went instead


def test_run_json_with_nothing_lost_reports_no_downgrades(
    home: Path, workspace: Path, keys: None
) -> None:
    with served([Reply(sse="openai_text.sse")]) as server:
        result = invoke(*openai_run(server, "hi", "-w", str(workspace), "--json"))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["downgrades"] == []
    assert "note:" not in result.stderr


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


def test_chat_save_writes_the_copy_redacted_as_the_session_is(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    key = "AKIAZ7Q3MX5LP2RT8WKN"
    script(monkeypatch, say(f"noted {key}"))
    saved = tmp_path / "chat.md"
    lines = [f"/system use {key}", f"my key is {key}", f"/save {saved}", "/exit"]
    result = invoke("chat", "-w", str(workspace), input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.stderr
    text = saved.read_text()
    assert "my key is [redacted]" in text and "noted [redacted]" in text
    assert key not in text


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


@contextmanager
def image_host() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server with `/dot.png`: its URL and the paths fetched from it."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    fetched: list[str] = []

    class Serve(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            served = {"/dot.png": ("image/png", PNG_1X1), "/paper.pdf": ("application/pdf", PDF)}
            kind, body = served.get(self.path, ("image/png", b"nope"))
            self.send_response(200 if self.path in served else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Serve)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", fetched
    finally:
        server.shutdown()
        server.server_close()


def test_image_by_url_is_fetched_from_the_host_named(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    # The scripted backend cannot say what its wire takes: the bytes are fetched.
    with image_host() as (url, fetched):
        opened = script(monkeypatch, say("a dot"))
        result = invoke("run", "what?", "-i", f"{url}/dot.png", "-w", str(workspace))
        assert result.exit_code == 0, result.stderr
        assert opened.backend is not None
        [image] = opened.backend.requests[0].messages[0].images()
        assert (image.media_type, image.source) == ("image/png", "dot.png")
        assert fetched == ["/dot.png"]
        result = invoke("run", "what?", "-i", f"{url}/gone.png", "-w", str(workspace))
        assert result.exit_code == 1 and "error:" in result.stderr and "gone.png" in result.stderr


@pytest.mark.parametrize(
    ("backend", "stream", "part"),
    [
        ("anthropic", "anthropic_text.sse", lambda url: {"type": "url", "url": url}),
        ("openai", "openai_text.sse", lambda url: {"url": url}),
    ],
)
def test_an_image_url_goes_as_a_url_to_a_wire_that_takes_urls_and_is_never_fetched(
    backend: str,
    stream: str,
    part: Callable[[str], dict[str, str]],
    home: Path,
    workspace: Path,
    keys: None,
) -> None:
    with image_host() as (url, fetched), served([Reply(sse=stream)]) as server:
        base = server.url if backend == "anthropic" else f"{server.url}/v1"
        argv = ["run", "what?", "-i", f"{url}/dot.png", "-b", backend, "--base-url", base]
        result = invoke(*argv, "-m", "m-test", "-w", str(workspace), "--json")
    assert result.exit_code == 0, result.stderr
    assert fetched == []
    [sent] = server.requests
    content = sent["body"]["messages"][0]["content"]
    images = [p.get("source") or p.get("image_url") for p in content if "text" not in p]
    assert images == [part(f"{url}/dot.png")]
    assert json.loads(result.stdout)["downgrades"] == []
    # The session holds the image by its URL, as it was sent.
    [info] = Store(home / "sessions").list()
    [image] = Store(home / "sessions").open(info.meta.id).messages()[0].images()
    assert (image.url, image.data) == (f"{url}/dot.png", "")


def test_an_image_url_is_fetched_for_a_wire_that_needs_the_bytes(
    home: Path, workspace: Path
) -> None:
    # llama-server takes images as data: URLs only.
    props = {
        "model_alias": "vision.gguf",
        "modalities": {"vision": True, "audio": False},
        "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
    }
    with image_host() as (url, fetched), served([Reply(sse="openai_text.sse")], props) as server:
        argv = ["run", "what?", "-i", f"{url}/dot.png", "-b", "llama-server"]
        result = invoke(*argv, "--base-url", server.url, "-w", str(workspace), "--json")
    assert result.exit_code == 0, result.stderr
    assert fetched == ["/dot.png"]
    [sent] = server.requests
    assert f"data:image/png;base64,{base64.b64encode(PNG_1X1).decode()}" in json.dumps(sent["body"])
    assert url not in json.dumps(sent["body"])


def test_chat_slash_image_url_goes_as_a_url_where_the_wire_takes_one(
    home: Path, workspace: Path, keys: None
) -> None:
    with image_host() as (url, fetched), served([Reply(sse="openai_text.sse")]) as server:
        argv = ["chat", "-b", "openai", "--base-url", f"{server.url}/v1", "-m", "m-test"]
        lines = f"/image {url}/dot.png\nwhat is it?\n/exit\n"
        result = invoke(*argv, "-w", str(workspace), input=lines)
    assert result.exit_code == 0, result.stderr
    assert fetched == []
    [sent] = server.requests
    assert sent["body"]["messages"][0]["content"][1]["image_url"]["url"] == f"{url}/dot.png"


def test_an_image_url_with_no_host_is_refused_before_anything_opens(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("never"))
    result = invoke("run", "what?", "-i", "https:///dot.png", "-w", str(workspace))
    assert result.exit_code == 1
    assert "error:" in result.stderr and "the URL names no host" in result.stderr
    assert opened.backend is None


PDF = b"%PDF-1.4\n%a paper\n"


@pytest.mark.parametrize(
    ("backend", "stream"), [("anthropic", "anthropic_text.sse"), ("openai", "openai_text.sse")]
)
def test_a_document_file_is_handed_over_as_a_document(
    backend: str, stream: str, home: Path, workspace: Path, keys: None
) -> None:
    (workspace / "paper.pdf").write_bytes(PDF)
    with served([Reply(sse=stream)]) as server:
        base = server.url if backend == "anthropic" else f"{server.url}/v1"
        argv = ["run", "read it", "-i", str(workspace / "paper.pdf"), "-b", backend]
        result = invoke(*argv, "--base-url", base, "-m", "m-test", "-w", str(workspace), "--json")
    assert result.exit_code == 0, result.stderr
    [sent] = server.requests
    [part] = [p for p in sent["body"]["messages"][0]["content"] if p["type"] != "text"]
    data = base64.b64encode(PDF).decode()
    if backend == "anthropic":
        # The last block of the history: the moving breakpoint of `--cache auto`.
        assert part == {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": data},
            "cache_control": {"type": "ephemeral"},
        }
    else:
        file = {"file_data": f"data:application/pdf;base64,{data}", "filename": "paper.pdf"}
        assert part == {"type": "file", "file": file}
    assert json.loads(result.stdout)["downgrades"] == []


def test_a_document_url_goes_as_a_url_to_anthropic_and_is_fetched_for_openai(
    home: Path, workspace: Path, keys: None
) -> None:
    with image_host() as (url, fetched):
        with served([Reply(sse="anthropic_text.sse")]) as server:
            argv = ["run", "read it", "-i", f"{url}/paper.pdf", "-b", "anthropic"]
            result = invoke(*argv, "--base-url", server.url, "-m", "m", "-w", str(workspace))
        assert result.exit_code == 0, result.stderr
        assert fetched == []
        [sent] = server.requests
        source = {"type": "url", "url": f"{url}/paper.pdf"}
        marked = {"cache_control": {"type": "ephemeral"}}  # the moving breakpoint
        document = {"type": "document", "source": source, **marked}
        assert document in sent["body"]["messages"][0]["content"]
        # OpenAI takes no document URL: the bytes are fetched from the host named.
        with served([Reply(sse="openai_text.sse")]) as server:
            argv = ["run", "read it", "-i", f"{url}/paper.pdf", "-b", "openai"]
            result = invoke(
                *argv, "--base-url", f"{server.url}/v1", "-m", "m", "-w", str(workspace)
            )
        assert result.exit_code == 0, result.stderr
        assert fetched == ["/paper.pdf"]
        [sent] = server.requests
        [part] = [p for p in sent["body"]["messages"][0]["content"] if p["type"] == "file"]
        assert (
            part["file"]["file_data"]
            == f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"
        )


@pytest.mark.parametrize("allowed", [True, False])
def test_a_resumed_remote_image_is_fetched_for_llama_server_only_from_an_allowed_host(
    allowed: bool, home: Path, workspace: Path
) -> None:
    props = {
        "model_alias": "vision.gguf",
        "modalities": {"vision": True, "audio": False},
        "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
    }
    with image_host() as (url, fetched), served([Reply(sse="openai_text.sse")], props) as server:
        home.mkdir(parents=True, exist_ok=True)
        if allowed:
            (home / "config.toml").write_text('[attachments]\nallow_hosts = ["127.0.0.1"]\n')
        session = Store(home / "sessions").create()
        remote = Image.from_url(f"{url}/dot.png")
        session.record([], [Message.user("what is it?", [remote]), Message.assistant([Text("?")])])
        argv = ["run", "and now?", "--session", session.id, "-b", "llama-server", "-t", "none"]
        result = invoke(*argv, "--base-url", server.url, "-w", str(workspace), "--json")
    assert result.exit_code == 0, result.stderr
    [sent] = server.requests
    body = json.dumps(sent["body"])
    if allowed:
        assert fetched == ["/dot.png"]
        assert f"data:image/png;base64,{base64.b64encode(PNG_1X1).decode()}" in body
        assert json.loads(result.stdout)["downgrades"] == []
    else:
        # Not allowed: never fetched, sent as its placeholder line, and the loss reported.
        assert fetched == []
        assert f"[image: {url}/dot.png (image/png)]" in body
        [downgrade] = json.loads(result.stdout)["downgrades"]
        assert downgrade["kind"] == "image" and "allow_hosts" in downgrade["reason"]
