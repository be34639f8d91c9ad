"""Every bracketed word a command's help was written with reaches the screen.

The help is drawn with console markup, where `[redact]` is a style tag to
be eaten: the config table `[redact]`, the extra `carryall[local]` and the
`[redacted]` a match becomes must be escaped to be seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer
from typer.testing import CliRunner

from carryall.cli import app

_BRACKETED = re.compile(r"\\?\[([A-Za-z][\w.-]*)\]")


def _commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    # typer's groups are its own click's, so asked by shape, not by class.
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_no_bracketed_word_in_any_help_is_lost_to_markup() -> None:
    root = typer.main.get_command(app)
    lost: list[str] = []
    for path, command in _commands(root, ()):
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        words = {m.group(1) for text in texts for m in _BRACKETED.finditer(text)}
        if not words:
            continue
        shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250"}).stdout
        lost += [f"{' '.join(path)}: [{w}]" for w in sorted(words) if f"[{w}]" not in shown]
    assert not lost, lost
