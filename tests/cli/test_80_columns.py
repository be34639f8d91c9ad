"""At 80 columns the help and the tables lose no text: snapshots under `COLUMNS=80`.

A snapshot is the exact screen a person reads; `CARRYALL_UPDATE_SNAPSHOTS=1`
rewrites them after a deliberate change (then read the diff).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from carryall._commands.chat import COMMANDS
from carryall._commands.sessions import _sessions_table
from carryall.cli import app
from carryall.sessions import SessionInfo, SessionMeta

SNAPSHOTS = Path(__file__).parent / "snapshots"


def _matches(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("CARRYALL_UPDATE_SNAPSHOTS"):
        path.write_text(text)
    assert text == path.read_text(), f"differs from {path} (CARRYALL_UPDATE_SNAPSHOTS=1 rewrites)"


def _fits(text: str) -> None:
    for line in text.splitlines():
        assert len(line) <= 80, line


def test_run_help_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    _fits(result.stdout)
    # No range hint beside an option squeezes the descriptions into a narrow column.
    assert "[x>=" not in result.stdout
    _matches("run_help_80.txt", result.stdout)


def test_models_help_at_80_columns() -> None:
    result = CliRunner().invoke(app, ["models", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    _fits(result.stdout)
    _matches("models_help_80.txt", result.stdout)


def _info(session_id: str, model: str, title: str, minutes: int) -> SessionInfo:
    now = datetime.now(UTC)
    meta = SessionMeta(
        id=session_id, created=now - timedelta(hours=1), backend="local", model=model, title=title
    )
    return SessionInfo(meta=meta, turns=6, updated=now - timedelta(minutes=minutes))


def _infos() -> list[SessionInfo]:
    return [
        _info(
            "20261205-001617-75569d",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "Use the list_dir tool to list the files in the workspace.",
            3,
        ),
        _info("20261204-231500-0a1b2c", "tiny", "Summarise notes.txt", 70),
    ]


def test_sessions_list_at_80_columns_cuts_neither_model_nor_id() -> None:
    infos = _infos()
    table = _sessions_table(infos, 80)
    _fits(table)
    assert "local/SmolLM2-135M-Instruct.Q4_1.gguf" in table
    assert all(info.meta.id in table for info in infos)
    _matches("sessions_list_80.txt", table + "\n")


def test_sessions_list_at_60_columns_still_keeps_every_id_whole() -> None:
    infos = _infos()
    table = _sessions_table(infos, 60)
    for line in table.splitlines():
        assert len(line) <= 60, line
    assert all(info.meta.id in table for info in infos)


def test_local_install_progress_at_80_columns_folds_its_messages_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from carryall import local
    from carryall._commands import local as local_commands

    message = (
        "downloaded SmolLM2-135M-Instruct.Q4_1.gguf from the carryall-model wheel, "
        "checked against its pinned sha256 digest"
    )

    def fake_install(progress: Any, **_: Any) -> None:
        progress(local.InstallProgress("download-model", "start", "fetching"))
        progress(local.InstallProgress("download-model", "done", message))

    monkeypatch.setattr(local_commands.local, "install", fake_install)
    monkeypatch.setattr(local_commands, "_print_status", lambda console, result: None)
    result = CliRunner().invoke(app, ["local", "install"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    _fits(result.stdout)
    # The last frame printed holds the message whole, folded within its column.
    words = " ".join(result.stdout.split())
    assert all(word in words for word in message.split()), result.stdout


def _chat_screen(command: str, tools: list[Any]) -> list[str]:
    import io

    from rich.console import Console

    from carryall._commands.chat import _Chat
    from carryall.agent import Agent
    from tests.support.agent import ScriptedBackend

    err = Console(file=io.StringIO(), width=80, color_system=None, highlight=False)
    chat = _Chat(Agent(ScriptedBackend(), tools=tools), None, err, err)  # type: ignore[arg-type]
    chat.command(command)
    return err.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_chat_help_keeps_every_wrapped_line_indented_at_80_columns() -> None:
    lines = _chat_screen("/help", [])
    _fits("\n".join(lines))
    assert len(lines) > len(COMMANDS)
    for line in lines:
        assert line.startswith("  "), line


def test_chat_tools_wraps_a_long_description_in_its_column() -> None:
    def look_around(path: str) -> str:
        """Look around the given path and report, in plain words, every file and folder found
        there together with its size, its kind and when it was last changed."""
        return path

    lines = _chat_screen("/tools", [look_around])
    _fits("\n".join(lines))
    assert len(lines) >= 2, lines
    column = lines[0].index("Look around")
    for line in lines[1:]:
        assert line[:column].strip() == "" and line[column] != " ", line


def test_mcp_list_at_80_columns_wraps_each_description_in_its_column(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from tests.support.mcp_peer import HOSTILE

    pytest.importorskip("mcp")
    config = tmp_path / "mcp.json"
    server = {"command": HOSTILE.command, "args": HOSTILE.args}
    config.write_text(json.dumps({"mcpServers": {"hostile": server}}))
    env = {"CARRYALL_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "carryall", "mcp", "list", "--mcp", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    _fits(done.stdout)
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    # A wrapped description goes on under itself, never back at the first column.
    assert all(line.startswith("  ") for line in lines if line not in lines[:1] + ["resources"])
    _matches("mcp_list_80.txt", "\n".join(lines) + "\n")
