"""A broken config file does not stop a person from asking where it is or reading sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from carryall.blocks import Message, Text
from carryall.cli import app
from carryall.sessions import Store


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CARRYALL_HOME", str(home))
    monkeypatch.delenv("CARRYALL_STORE", raising=False)
    session = Store(home / "sessions").create(backend="fake", model="m", title="kept")
    session.record([], [Message.user("kept"), Message.assistant([Text("yes")])])
    (home / "config.toml").write_text("backend = [oops\n")
    return home / "config.toml"


@pytest.mark.parametrize(
    "argv",
    [
        ["paths"],
        ["sessions", "list"],
        ["sessions", "show", "last"],
        ["sessions", "export", "last", "-f", "markdown"],
        ["recall", "kept"],
        ["--help"],
        ["--version"],
    ],
)
def test_showing_commands_work_and_name_the_file_to_fix(broken: Path, argv: list[str]) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    if argv[0] not in ("--help", "--version"):
        assert f"config file {broken}" in result.stderr and "fix that file" in result.stderr


def test_a_command_that_sends_still_refuses_the_broken_file(broken: Path) -> None:
    result = CliRunner().invoke(app, ["run", "hi", "--no-record"])
    assert result.exit_code == 1 and f"config file {broken}" in result.stderr
