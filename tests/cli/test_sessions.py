"""The `carryall sessions ...`, `carryall recall` and `carryall tui` commands."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Image, Message, Text, Thinking, ToolResult, ToolUse, image_placeholder
from carryall.sessions import Store
from tests.support.spelling import unspelled

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
B64 = base64.b64encode(PNG).decode()
PLACEHOLDER = image_placeholder("image/png", "diagram.png")


@pytest.fixture
def app() -> typer.Typer:
    # Only this module's commands, so the test does not depend on other areas.
    app = typer.Typer()
    commands.register(app)
    return app


def _run(app: typer.Typer, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def _session(home: Path, title_text: str = "draw the diagram") -> str:
    session = Store().create(backend="fake", model="tiny", cwd=str(home))
    session.record(
        [],
        [
            Message.user(title_text, [Image.from_bytes("image/png", PNG, "diagram.png")]),
            Message.assistant(
                [Thinking("think first"), Text("Calling."), ToolUse("c1", "draw", {"shape": "box"})]
            ),
            Message.tool_results([ToolResult("c1", "drawn OK")]),
        ],
    )
    return session.id


def test_list_shows_id_when_backend_turns_title_newest_first(home: Path, app: typer.Typer) -> None:
    old = _session(home, "older one")
    new = _session(home, "newer one")
    code, out, _ = _run(app, "sessions", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "AGE", "TURNS", "BACKEND", "TITLE"]
    assert lines[1].startswith(new) and lines[2].startswith(old)
    assert "fake/tiny" in lines[1] and " 3  " in lines[1] and lines[1].endswith("newer one")


def test_list_json(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    code, out, _ = _run(app, "sessions", "list", "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["id"] == session_id
    assert row["turns"] == 3
    assert row["backend"] == "fake" and row["model"] == "tiny"
    assert row["title"] == "draw the diagram"
    assert row["created"].endswith("Z")


def test_list_with_no_sessions(home: Path, app: typer.Typer) -> None:
    code, out, err = _run(app, "sessions", "list")
    assert code == 0 and out == "" and "no sessions" in err
    assert json.loads(_run(app, "sessions", "list", "--json")[1]) == []


@pytest.mark.parametrize("fmt", ["text", "markdown", "json", "html"])
def test_show_says_placeholder_and_never_base64(home: Path, app: typer.Typer, fmt: str) -> None:
    session_id = _session(home)
    code, out, _ = _run(app, "sessions", "show", session_id, "--format", fmt)
    assert code == 0
    # The HTML page is self-contained: the picture's bytes are in it, as its
    # image's data: URI and nowhere else.
    shown = out.replace(f'src="data:image/png;base64,{B64}"', "") if fmt == "html" else out
    assert B64[:24] not in shown
    expected = PLACEHOLDER if fmt != "json" else json.dumps(PLACEHOLDER)[1:-1]
    assert expected in out
    assert "drawn OK" in out and "think first" in out and "box" in out


def test_show_html_is_self_contained_and_embeds_its_images(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    _, page, _ = _run(app, "sessions", "show", session_id, "-f", "html")
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert f'src="data:image/png;base64,{B64}"' in page
    assert PLACEHOLDER in page  # still named, as alt text and caption
    _, embedded, _ = _run(app, "sessions", "show", session_id, "-f", "html", "--embed-images")
    assert embedded == page


def test_show_by_prefix_and_unknown_id_is_one_clear_line(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    assert _run(app, "sessions", "show", session_id[:-2])[0] == 0
    code, out, err = _run(app, "sessions", "show", "nosuchsession")
    assert code == 1
    assert err.strip().count("\n") == 0 and "no session 'nosuchsession'" in err
    assert "Traceback" not in err + out


def test_export_then_import_round_trips_with_images_from_the_store(
    home: Path, app: typer.Typer, tmp_path: Path
) -> None:
    session_id = _session(home)
    target = tmp_path / "out.json"
    code, _, _ = _run(app, "sessions", "export", session_id, "-o", str(target))
    assert code == 0
    assert B64[:24] not in target.read_text()
    code, out, _ = _run(app, "sessions", "import", str(target))
    assert code == 0
    new_id = out.strip()
    assert new_id != session_id
    store = Store()
    assert store.open(new_id).messages() == store.open(session_id).messages()
    assert store.open(new_id).meta.title == "draw the diagram"


def test_export_with_embedded_images_restores_them_anywhere(
    home: Path, app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = _session(home)
    target = tmp_path / "full.json"
    _run(app, "sessions", "export", session_id, "-o", str(target), "--embed-images")
    original = Store().open(session_id).messages()
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path / "elsewhere"))
    code, out, _ = _run(app, "sessions", "import", str(target))
    assert code == 0
    assert Store().open(out.strip()).messages() == original


def test_import_of_export_without_images_elsewhere_keeps_the_placeholder(
    home: Path, app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = _session(home)
    target = tmp_path / "light.json"
    _run(app, "sessions", "export", session_id, "-o", str(target))
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path / "elsewhere"))
    code, out, _ = _run(app, "sessions", "import", str(target))
    assert code == 0
    first = Store().open(out.strip()).messages()[0]
    assert first.content[1] == Text(PLACEHOLDER)


_needs_openai = pytest.mark.skipif(
    importlib.util.find_spec("carryall.providers.openai") is None,
    reason="the OpenAI codec's importer is not there yet",
)
_needs_anthropic = pytest.mark.skipif(
    importlib.util.find_spec("carryall.providers.anthropic") is None,
    reason="the Anthropic codec's importer is not there yet",
)

OPENAI_FILE = {
    "model": "gpt-test",
    "messages": [
        {"role": "system", "content": "be terse"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is in the picture"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "zoom", "arguments": '{"factor": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "zoomed"},
        {"role": "assistant", "content": "a cat"},
    ],
}

ANTHROPIC_FILE = {
    "system": "be terse",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is in the picture"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": B64},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_1", "name": "zoom", "input": {"factor": 2}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "zoomed"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "a cat"}]},
    ],
}


def _check_imported(session_id: str) -> None:
    session = Store().open(session_id)
    messages = session.messages()
    assert session.meta.system == "be terse"
    assert session.meta.title == "what is in the picture"
    assert messages[0].images()[0].to_bytes() == PNG
    assert messages[1].tool_uses()[0].input == {"factor": 2}
    assert messages[2].tool_results_in()[0].content == "zoomed"
    assert messages[3].text() == "a cat"


@_needs_openai
def test_import_openai_messages(home: Path, app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "openai.json"
    path.write_text(json.dumps(OPENAI_FILE))
    code, out, err = _run(app, "sessions", "import", str(path))
    assert code == 0, err
    assert "(openai)" in err
    _check_imported(out.strip())
    assert Store().open(out.strip()).meta.model == "gpt-test"


@_needs_anthropic
def test_import_anthropic_messages(home: Path, app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps(ANTHROPIC_FILE))
    code, out, err = _run(app, "sessions", "import", str(path), "--model", "claude-x")
    assert code == 0, err
    assert "(anthropic)" in err
    _check_imported(out.strip())


@_needs_openai
def test_import_bare_list_and_forced_format(home: Path, app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(json.dumps([{"role": "user", "content": "hello"}]))
    code, out, err = _run(app, "sessions", "import", str(path), "--format", "anthropic")
    assert code == 0, err
    assert Store().open(out.strip()).messages() == [Message.user("hello")]


def test_import_of_bad_file_is_one_clear_line(home: Path, app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    code, _, err = _run(app, "sessions", "import", str(path))
    assert code == 1 and "is not JSON" in err and str(path) in err
    assert Store().list() == []


def test_import_of_json_nested_too_deep_is_one_clear_line(
    home: Path, app: typer.Typer, tmp_path: Path
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    code, _, err = _run(app, "sessions", "import", str(path))
    assert code == 1 and "nested too deeply" in err and str(path) in err
    assert Store().list() == []


def test_rm_asks_first(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    code, _, _ = _run(app, "sessions", "rm", session_id, input="n\n")
    assert code == 1
    assert [i.meta.id for i in Store().list()] == [session_id]
    code, _, err = _run(app, "sessions", "rm", session_id, input="y\n")
    assert code == 0 and "removed" in err
    assert Store().list() == []


def test_rm_yes_skips_the_question(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    assert _run(app, "sessions", "rm", session_id, "--yes")[0] == 0
    assert Store().list() == []


def test_recall_prints_ranked_snippets(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    code, out, _ = _run(app, "recall", "drawn")
    assert code == 0
    assert session_id in out and "#2" in out and "drawn OK" in out


def test_recall_json_hits(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    code, out, _ = _run(app, "recall", "diagram", "--json")
    assert code == 0
    hits = json.loads(out)
    assert hits and {"session", "message", "role", "time", "snippet"} <= set(hits[0])
    assert hits[0]["session"] == session_id and hits[0]["message"] == 0
    assert hits[0]["role"] == "user"
    assert all(B64[:24] not in h["snippet"] for h in hits)


def test_recall_filters_and_odd_queries(home: Path, app: typer.Typer) -> None:
    session_id = _session(home)
    _session(home, "another diagram")
    assert json.loads(_run(app, "recall", "draw", "--role", "assistant", "--json")[1])
    only = json.loads(_run(app, "recall", "diagram", "--session", session_id, "--json")[1])
    assert {h["session"] for h in only} == {session_id}
    assert json.loads(_run(app, "recall", "diagram", "--since", "1h", "--json")[1])
    assert json.loads(_run(app, "recall", "diagram", "--since", "2999-01-01", "--json")[1]) == []
    for odd in ("C++", '"', "AND OR", "123e4567-e89b-12d3-a456-426614174000"):
        code, _, err = _run(app, "recall", odd)
        assert code == 0, err
    code, _, err = _run(app, "recall", "x", "--since", "yesterday-ish")
    assert code == 2 and "--since" in err


def test_recall_reindex(home: Path, app: typer.Typer) -> None:
    _session(home)
    code, _, err = _run(app, "recall", "--reindex")
    assert code == 0 and "reindexed 3 messages" in err


def test_help_texts_explain_the_commands(app: typer.Typer) -> None:
    _, out, _ = _run(app, "sessions", "--help")
    for word in ("list", "show", "export", "import", "rm", "CARRYALL_HOME"):
        assert word in out
    _, out, _ = _run(app, "recall", "--help")
    for word in ("--since", "--role", "--session", "--json", "--reindex"):
        assert word in out
    _, out, _ = _run(app, "tui", "--help")
    assert "recall" in out and "sessions" in out


def test_readers_keep_hostile_text_inert(home: Path, app: typer.Typer) -> None:
    session = Store().create()
    session.record(
        [],
        [
            Message.user("<script>alert(1)</script> and ``` fences"),
            Message.assistant([ToolUse("c1", "run", {"cmd": "echo ```"})]),
            Message.tool_results([ToolResult("c1", "```\nnot the end of the block\n````")]),
        ],
    )
    _, html_out, _ = _run(app, "sessions", "show", session.id, "-f", "html")
    assert "<script>" not in html_out and "&lt;script&gt;" in html_out
    _, markdown, _ = _run(app, "sessions", "show", session.id, "-f", "markdown")
    # The result's own backtick runs sit inside a longer fence.
    assert "`````\n```\nnot the end of the block\n````\n`````" in markdown


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_export_as_wire_messages_imports_back(
    home: Path, app: typer.Typer, tmp_path: Path, dialect: str
) -> None:
    session_id = _session(home)
    out = tmp_path / f"{dialect}.json"
    code, _, err = _run(app, "sessions", "export", session_id, "-f", dialect, "-o", str(out))
    assert code == 0, err
    document = json.loads(out.read_text())
    assert isinstance(document["messages"], list)
    code, _, err = _run(app, "sessions", "import", str(out))
    assert code == 0, err
    original = Store().open(session_id).messages()
    imported = next(i for i in Store().list() if i.meta.id != session_id)
    back = Store().open(imported.meta.id).messages()
    # What the wire does not carry: an image's file name, and (on OpenAI)
    # thinking; everything else comes back as it was.
    expected = [
        Message(
            m.role,
            [
                Image(b.media_type, b.data) if isinstance(b, Image) else b
                for b in m.content
                if dialect == "anthropic" or not isinstance(b, Thinking)
            ],
        )
        for m in original
    ]
    if dialect == "anthropic":
        # Unsigned thinking stays off the Anthropic wire too.
        expected = [
            Message(m.role, [b for b in m.content if not isinstance(b, Thinking) or b.signature])
            for m in expected
        ]
    # A call's argument text as the file wrote it rides along on its block (`Spelling`).
    assert [unspelled(m) for m in back] == expected
