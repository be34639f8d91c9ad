"""Continuing is faithful: `-c` goes where the run went, and every stopped run keeps its prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from carryall.blocks import Message, Text
from carryall.sessions import Store
from tests.support.agent import say
from tests.support.cli import invoke, script
from tests.support.scripted import Reply, served


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_c_goes_to_the_base_url_and_model_the_session_was_started_with(
    home: Path, workspace: Path
) -> None:
    with served([Reply(sse="openai_text.sse"), Reply(sse="openai_text.sse")]) as server:
        url = f"{server.url}/v1"
        first = invoke(
            "run", "-b", "openai", "--base-url", url, "-m", "gpt-4.1-mini",
            "--max-tokens", "77", "hello", "-w", str(workspace), "--tools", "none",
        )  # fmt: skip
        assert first.exit_code == 0, first.stderr
        again = invoke("run", "-c", "and then?", "-w", str(workspace))
        assert again.exit_code == 0, again.stderr
        assert len(server.requests) == 2
    [info] = Store(home / "sessions").list()
    assert info.meta.base_url == url and info.meta.options == {"max_tokens": 77}
    body = server.requests[1]["body"]
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 77
    assert "api key" not in again.stderr.lower()


def test_another_backend_on_the_command_line_does_not_inherit_the_sessions_url(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    Store(home / "sessions").create(
        backend="openai", model="m", base_url="http://127.0.0.1:9/v1", cwd=workspace
    )
    opened = script(monkeypatch, say("ok"))
    result = invoke("run", "-c", "-b", "anthropic", "hi", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    assert opened.setups[0].backend == "anthropic" and opened.setups[0].base_url is None


def test_ctrl_c_in_run_keeps_the_prompt_in_the_session_as_chat_does(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, KeyboardInterrupt())
    result = invoke("run", "the question I typed", "-w", str(workspace))
    assert result.exit_code == 130
    [info] = Store(home / "sessions").list()
    session = Store(home / "sessions").open(info.meta.id)
    assert [m.text() for m in session.messages()] == ["the question I typed"]
    assert info.meta.title == "the question I typed" or info.turns == 1


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["-b", "openai"], "needs an API key"),
        (["-b", "llama-server", "--base-url", "http://127.0.0.1:9"], "llama-server"),
    ],
    ids=["missing-key", "unreachable-llama-server"],
)
def test_a_run_whose_backend_cannot_open_is_recorded_failed_with_its_prompt(
    home: Path, workspace: Path, argv: list[str], reason: str
) -> None:
    result = invoke("run", *argv, "keep me", "-w", str(workspace))
    assert result.exit_code == 1 and reason in result.stderr
    [info] = Store(home / "sessions").list()
    assert info.failed is not None and reason in info.failed
    session = Store(home / "sessions").open(info.meta.id)
    assert [m.text() for m in session.messages()] == ["keep me"]


def test_chats_system_prompt_change_is_recorded_continued_saved_and_shown(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    saved = workspace.parent / "saved.md"
    opened = script(monkeypatch, say("one"), say("two"))
    typed = f"first\n/system Answer in French.\nsecond\n/save {saved}\n/exit\n"
    result = invoke("chat", "-s", "Be brief.", "-w", str(workspace), input=typed)
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert [r.system for r in opened.backend.requests] == ["Be brief.", "Answer in French."]

    store = Store(home / "sessions")
    [info] = store.list()
    session = store.open(info.meta.id)
    assert session.meta.system == "Be brief." and session.system == "Answer in French."
    [change] = session.system_changes()
    assert (change.at, change.system) == (2, "Answer in French.")
    assert "Answer in French." in saved.read_text()

    for fmt in ("text", "markdown", "html", "json"):
        shown = invoke("sessions", "show", "last", "--format", fmt)
        assert shown.exit_code == 0, shown.stderr
        assert "system prompt changed from message" in shown.stdout, fmt
        assert "Answer in French." in shown.stdout, fmt
        # Before the message it applies from, after the ones before it.
        assert shown.stdout.index("Answer in French.") > shown.stdout.index("one"), fmt

    again = script(monkeypatch, say("trois"))
    result = invoke("chat", "-c", "-w", str(workspace), input="third\n/system\n/exit\n")
    assert result.exit_code == 0, result.stderr
    assert again.backend is not None
    assert [r.system for r in again.backend.requests] == ["Answer in French."]
    assert store.open(info.meta.id).system is None  # cleared by the bare /system

    last = script(monkeypatch, say("four"))
    result = invoke("run", "-c", "fourth", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    assert last.backend is not None and last.backend.requests[0].system is None


def test_system_on_the_command_line_of_a_continued_run_is_recorded_as_a_change(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say("one"))
    assert invoke("run", "-s", "Old.", "first", "-w", str(workspace)).exit_code == 0
    script(monkeypatch, say("two"))
    assert invoke("run", "-c", "-s", "New.", "second", "-w", str(workspace)).exit_code == 0
    third = script(monkeypatch, say("three"))
    assert invoke("run", "-c", "third", "-w", str(workspace)).exit_code == 0
    assert third.backend is not None and third.backend.requests[0].system == "New."
    store = Store(home / "sessions")
    [info] = store.list()
    assert [(c.at, c.system) for c in store.open(info.meta.id).system_changes()] == [(2, "New.")]


def test_c_continues_the_session_used_last_not_the_one_created_last(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    store = Store(home / "sessions")
    older = store.create(backend="scripted", model="scripted-1", cwd=workspace)
    older.record([], [Message.user("older"), Message.assistant([Text("a")])])
    newer = store.create(backend="scripted", model="scripted-1", cwd=workspace)
    newer.record([], [Message.user("newer"), Message.assistant([Text("b")])])
    held = older.messages()
    older.record(held, [*held, Message.user("again"), Message.assistant([Text("c")])])
    opened = script(monkeypatch, say("d"))
    result = invoke("run", "-c", "go on", "-w", str(workspace))
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    assert opened.backend.requests[0].messages[0].text() == "older"
    assert [m.text() for m in store.open(older.id).messages()][-2:] == ["go on", "d"]
