"""Every command's `--help` is enough to use it: a summary, its options and an example."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from carryall.cli import app


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    children = getattr(command, "commands", None)
    if children is None:
        yield path
        return
    for name, child in children.items():
        yield from _commands(child, (*path, name))


COMMANDS = sorted(_commands(typer.main.get_command(app)))


def test_every_command_is_walked() -> None:
    assert ("run",) in COMMANDS and ("sessions", "rm") in COMMANDS and ("paths",) in COMMANDS
    assert len(COMMANDS) >= 15


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_help_has_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    example = next(line for line in result.stdout.splitlines() if "Example:" in line)
    assert f"carryall {path[0]}" in example, example
