"""`sessions list` over many sessions: the table read cheaply, a tall one paged on a terminal."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from carryall._commands.sessions import list_sessions
from carryall.blocks import Message, Text
from carryall.sessions import Store


def _sessions(root: Path, count: int) -> list[str]:
    store = Store(root, recall=False)
    ids = []
    for n in range(count):
        session = store.create(backend="local", model="tiny", title=f"question {n} 日本")
        session.record([], [Message.user(f"q{n}"), Message.assistant([Text("a")])])
        ids.append(session.id)
    return ids


def _terminal(monkeypatch: pytest.MonkeyPatch, lines: int) -> None:
    """A person at a terminal `lines` tall (the pager asks of stdin and stdout alike)."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    size = os.terminal_size((100, lines))
    monkeypatch.setattr(shutil, "get_terminal_size", lambda *args: size)


def test_a_list_taller_than_the_terminal_goes_through_the_pager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    ids = _sessions(tmp_path, 6)
    _terminal(monkeypatch, lines=5)
    monkeypatch.setenv("PAGER", "sed s/^/paged:/")
    list_sessions(as_json=False, limit=None, location=str(tmp_path))
    out = capfd.readouterr().out.splitlines()
    assert len(out) == 7 and all(line.startswith("paged:") for line in out)
    assert out[0].split()[:2] == ["paged:ID", "AGE"]
    assert {line.split()[0].removeprefix("paged:") for line in out[1:]} == set(ids)


def test_a_list_that_fits_the_terminal_is_printed_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _sessions(tmp_path, 3)
    _terminal(monkeypatch, lines=40)
    monkeypatch.setenv("PAGER", "sed s/^/paged:/")
    list_sessions(as_json=False, limit=None, location=str(tmp_path))
    out = capfd.readouterr().out.splitlines()
    assert len(out) == 4 and not any("paged:" in line for line in out)
    assert out[1].endswith("question 2 日本")  # the newest first, its title whole
