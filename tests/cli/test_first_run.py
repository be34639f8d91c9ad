"""The first run on the embedded `local` backend says, once, that its model is a demonstration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from carryall._commands import agent as agent_commands
from tests.test_agent import ScriptedBackend, say
from tests.test_cli_agent import invoke


def _local(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    def fake_open(setup: Any) -> ScriptedBackend:
        backend = ScriptedBackend(say("ok"))
        backend.name = name
        return backend

    monkeypatch.setattr(agent_commands, "_open_backend", fake_open)


def test_the_first_local_run_names_the_135m_model_and_how_to_use_a_real_one_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path / "home"))
    _local(monkeypatch, "local")
    first = invoke("run", "hi", "-w", str(tmp_path), "--tools", "none")
    assert first.exit_code == 0, first.stderr
    [note] = [line for line in first.stderr.splitlines() if "135M" in line]
    assert "demonstration" in note and "OPENAI_API_KEY" in note and "--base-url" in note
    second = invoke("run", "hi", "-w", str(tmp_path), "--tools", "none")
    assert second.exit_code == 0 and "135M" not in second.stderr


def test_another_backend_hears_no_such_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path / "home"))
    _local(monkeypatch, "openai")
    result = invoke("run", "hi", "-w", str(tmp_path), "--tools", "none")
    assert result.exit_code == 0 and "135M" not in result.stderr
