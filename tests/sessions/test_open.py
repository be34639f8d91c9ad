"""`open_store`: one function names the session store, for every command alike."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Message
from carryall.errors import TranscriptError
from carryall.sessions import default_root, open_store


def test_a_folder_path_or_a_file_url_opens_the_jsonl_store(home: Path) -> None:
    folder = home / "elsewhere"
    assert open_store(folder).root == folder
    assert open_store(str(folder)).root == folder
    assert open_store(folder.as_uri()).root == folder
    assert open_store("file://localhost" + str(folder)).root == folder


def test_without_a_location_the_variable_then_the_config_then_the_default(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert open_store().root == default_root()
    (home / "config.toml").write_text(f'store = "{home / "configured"}"\n')
    assert open_store().root == home / "configured"
    monkeypatch.setenv("CARRYALL_STORE", (home / "from-env").as_uri())
    assert open_store().root == home / "from-env"
    assert open_store(home / "given").root == home / "given"


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("mysql://db.example/carryall", "unknown kind of store 'mysql:'"),
        ("file://fileserver/share", "must name a local folder, not one on host 'fileserver'"),
        ("  ", "location is empty"),
    ],
)
def test_a_location_it_cannot_open_is_a_clear_error(home: Path, location: str, reason: str) -> None:
    with pytest.raises(TranscriptError, match=reason):
        open_store(location)


def _app() -> typer.Typer:
    app = typer.Typer()
    commands.register(app)
    return app


def test_every_sessions_command_takes_store_and_the_variable(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = home / "other"
    session = open_store(other).create(title="over there")
    session.record([], [Message.user("tamarind paste")])
    runner = CliRunner()
    assert "over there" not in runner.invoke(_app(), ["sessions", "list"]).stdout
    result = runner.invoke(_app(), ["sessions", "list", "--store", str(other)])
    assert result.exit_code == 0 and "over there" in result.stdout
    result = runner.invoke(_app(), ["sessions", "show", session.id, "--store", other.as_uri()])
    assert result.exit_code == 0 and "tamarind paste" in result.stdout
    monkeypatch.setenv("CARRYALL_STORE", str(other))
    result = runner.invoke(_app(), ["recall", "tamarind"])
    assert result.exit_code == 0 and session.id in result.stdout
    for command in (["sessions", s] for s in ("list", "show", "export", "import", "rm")):
        assert "--store" in runner.invoke(_app(), [*command, "--help"]).stdout
    for command in (["sessions", "redact"], ["sessions", "gc"], ["recall"], ["tui"]):
        assert "--store" in runner.invoke(_app(), [*command, "--help"]).stdout


def test_cli_unknown_store_is_one_clear_line(home: Path) -> None:
    result = CliRunner().invoke(_app(), ["sessions", "list", "--store", "mysql://x/y"])
    assert result.exit_code == 1
    assert "unknown kind of store" in result.stderr
    assert "Traceback" not in result.output


def test_a_postgresql_url_without_psycopg_names_the_extra(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    with pytest.raises(TranscriptError, match=r"pip install 'carryall\[postgres\]'"):
        open_store("postgresql://db.example/carryall")
