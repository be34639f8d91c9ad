"""The first run on the embedded `local` backend says, once, that its model is a demonstration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from carryall._commands import agent as agent_commands
from tests.support.agent import ScriptedBackend, say
from tests.support.cli import invoke


def _local(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    def fake_open(setup: Any) -> ScriptedBackend:
        backend = ScriptedBackend(say("ok"))
        backend.name = name
        return backend

    monkeypatch.setattr(agent_commands, "_open_backend", fake_open)


def test_the_first_local_run_names_the_135m_model_and_how_to_use_a_real_one_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, home: Path
) -> None:
    _local(monkeypatch, "local")
    first = invoke("run", "hi", "-w", str(tmp_path), "--tools", "none")
    assert first.exit_code == 0, first.stderr
    [note] = [line for line in first.stderr.splitlines() if "135M" in line]
    assert "demonstration" in note and "OPENAI_API_KEY" in note and "--base-url" in note
    second = invoke("run", "hi", "-w", str(tmp_path), "--tools", "none")
    assert second.exit_code == 0 and "135M" not in second.stderr


def test_another_backend_hears_no_such_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, home: Path
) -> None:
    _local(monkeypatch, "openai")
    result = invoke("run", "hi", "-w", str(tmp_path), "--tools", "none")
    assert result.exit_code == 0 and "135M" not in result.stderr


def test_a_model_that_cannot_see_is_not_offered_view_image_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, home: Path
) -> None:
    opened: list[ScriptedBackend] = []

    def fake_open(setup: Any) -> ScriptedBackend:
        opened.append(ScriptedBackend(say("ok"), say("ok"), vision=False))
        return opened[-1]

    monkeypatch.setattr(agent_commands, "_open_backend", fake_open)
    assert invoke("run", "hi", "-w", str(tmp_path)).exit_code == 0
    assert [t.name for t in opened[-1].requests[0].tools] == ["read_file", "list_dir"]
    # Asked for by name, it is offered: the person knows what they asked.
    assert invoke("run", "hi", "-w", str(tmp_path), "-t", "view_image").exit_code == 0
    assert [t.name for t in opened[-1].requests[0].tools] == ["view_image"]
