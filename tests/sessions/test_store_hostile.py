"""Damaged transcripts and stores a crash, a disk or a person left: salvaged and named.

Every reader keeps each undamaged event and names the damaged lines by
number; a writer records the salvaged history whole and carries on.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Message, Text
from carryall.errors import TranscriptError
from carryall.sessions import Store


def _user(text: str) -> Message:
    return Message.user(text)


def _assistant(text: str) -> Message:
    return Message.assistant([Text(text)])


HISTORY = [_user("one"), _assistant("two"), _user("three"), _assistant("four")]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "sessions")


def _recorded(store: Store) -> tuple[str, Path]:
    """A session of four messages, appended two at a time: header, then lines 2 and 3."""
    session = store.create(backend="fake", model="m")
    session.record([], HISTORY[:2])
    session.record(HISTORY[:2], HISTORY)
    return session.id, session.path


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def _write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"\n".join(lines))


# -- NUL tails ---------------------------------------------------------------------


@pytest.mark.parametrize("tail", [b"\0" * 300, b"\0" * 300 + b"\n"], ids=["bare", "newline"])
def test_nul_byte_tail_is_a_torn_tail(store: Store, tail: bytes) -> None:
    session_id, path = _recorded(store)
    with path.open("ab") as f:
        f.write(tail)
    opened = store.open(session_id)
    assert opened.messages() == HISTORY and opened.damage == []
    opened.record(HISTORY, [*HISTORY, _user("five")])  # the writer moves the tail aside
    assert b"\0" not in path.read_bytes()
    assert store.open(session_id).messages() == [*HISTORY, _user("five")]
    assert list((store.root / "torn").iterdir())


# -- damaged lines -----------------------------------------------------------------


def test_garbage_line_is_salvaged_and_named_by_every_reader(store: Store) -> None:
    session_id, path = _recorded(store)
    lines = _lines(path)
    _write(path, [lines[0], b"\x00garbage\xff", *lines[1:]])  # now lines 2 (bad), 3, 4
    opened = store.open(session_id)
    assert opened.messages() == HISTORY
    assert [note.split(": ")[0] for note in opened.damage] == [f"{path} line 2"]
    assert opened.versions()[-1] == HISTORY


def test_bit_flip_in_message_text_fails_the_integrity_check(store: Store) -> None:
    session_id, path = _recorded(store)
    lines = _lines(path)
    assert b'"crc":"' in lines[2]
    lines[2] = lines[2].replace(b"three", b"thrEe")  # still JSON, still consistent
    _write(path, lines)
    opened = store.open(session_id)
    assert all("thrEe" not in m.text() for m in opened.messages())
    assert any("line 3: fails its integrity check" in note for note in opened.damage)


def test_lines_written_before_the_check_still_load(store: Store) -> None:
    session_id, path = _recorded(store)
    lines = _lines(path)
    for i in (1, 2):
        event = json.loads(lines[i])
        del event["crc"]
        lines[i] = json.dumps(event).encode()
    _write(path, lines)
    opened = store.open(session_id)
    assert opened.messages() == HISTORY and opened.damage == []


def test_lines_written_with_the_older_sha256_check_still_load_and_still_find_a_flip(
    store: Store,
) -> None:
    # Before the CRC field, a line ended in the first 12 hex digits of the
    # SHA-256 of the line without it; such a file is still checked that way.
    session_id, path = _recorded(store)
    lines = _lines(path)
    for i in (1, 2):
        body = lines[i][: lines[i].rindex(b',"crc"')] + b"}"
        check = hashlib.sha256(body).hexdigest()[:12].encode()
        lines[i] = body[:-1] + b',"check":"' + check + b'"}'
    _write(path, lines)
    opened = store.open(session_id)
    assert opened.messages() == HISTORY and opened.damage == []
    lines[2] = lines[2].replace(b"three", b"thrEe")
    _write(path, lines)
    opened = store.open(session_id)
    assert all("thrEe" not in m.text() for m in opened.messages())
    assert any("line 3: fails its integrity check" in note for note in opened.damage)


@pytest.mark.parametrize(
    "damage",
    ["deleted", "duplicated", "wrong count", "invalid utf-8", "broken json"],
)
def test_damaged_line_does_not_stop_the_session_opening(store: Store, damage: str) -> None:
    session_id, path = _recorded(store)
    lines = _lines(path)
    if damage == "deleted":
        del lines[1]
    elif damage == "duplicated":
        lines.insert(2, lines[2])
    elif damage == "wrong count":
        lines[2] = lines[2].replace(b'"n":4', b'"n":5')
    elif damage == "invalid utf-8":
        lines[1] = lines[1].replace(b"two", b"tw\xff")
    else:
        lines[1] = lines[1][:20] + b"}" + lines[1][21:]
    _write(path, lines)
    opened = store.open(session_id)
    assert opened.damage and all(" line " in note for note in opened.damage)
    # The undamaged line's messages are there (the count is part of what the check covers).
    kept = HISTORY[:2] if damage == "wrong count" else HISTORY[2:]
    assert opened.messages()[-2:] == kept
    assert opened.versions()  # versions() salvages too


def test_recall_catch_up_indexes_every_undamaged_line_of_a_damaged_session(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    reader = Store(root)
    writer = Store(root, recall=False)  # another machine's writer: the index catches up
    session = writer.create()
    session.record([], HISTORY[:1])
    assert len(reader.recall.search("one")) == 1  # indexed up to here
    session.record(HISTORY[:1], HISTORY[:2])
    session.record(HISTORY[:2], HISTORY[:3])
    session.record(HISTORY[:3], HISTORY)
    lines = _lines(session.path)
    lines[3] = lines[3].replace(b"three", b"thrEe")  # the catch-up's second line, damaged
    _write(session.path, lines)
    found = {w: [h.message for h in reader.recall.search(w)] for w in ("two", "three", "four")}
    # As every reader opens it: the damaged event skipped, "four" after "two".
    assert found == {"two": [1], "three": [], "four": [2]}
    assert [m.text() for m in reader.open(session.id).messages()] == ["one", "two", "four"]


def test_writer_with_a_damaged_transcript_records_after_a_marker(store: Store) -> None:
    session_id, path = _recorded(store)
    writer = store.open(session_id)
    lines = _lines(path)
    lines[1] = b"not json at all"
    _write(path, lines)
    writer.refresh()  # reads the file again: it was rewritten under the writer
    grown = [*writer.messages(), _user("five")]
    assert writer.record(writer.messages(), grown) == "rewrite"  # the marker
    writer.record(grown, [*grown, _assistant("six")])
    reopened = store.open(session_id)
    assert reopened.messages() == [*grown, _assistant("six")]
    # A later writer appends again: the rewrite settled the salvaged history.
    assert reopened.record(reopened.messages(), [*reopened.messages(), _user("x")]) == "append"


# -- stores that cannot be written --------------------------------------------------


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    commands.register(app)
    return app


def test_recall_index_path_that_is_a_directory_is_one_line(home: Path, app: typer.Typer) -> None:
    Store().create(backend="f").record([], [_user("hello")])
    index = home / "sessions" / "recall.sqlite3"
    for leftover in index.parent.glob("recall.sqlite3*"):
        leftover.unlink()
    index.mkdir()
    result = CliRunner().invoke(app, ["recall", "hello"])
    assert result.exit_code == 1 and not isinstance(result.exception, IsADirectoryError)
    assert result.stderr.startswith("error: recall index ") and "Is a directory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_read_only_store_reads_and_recall_says_why(
    home: Path, monkeypatch: pytest.MonkeyPatch, app: typer.Typer
) -> None:
    session = Store().create(backend="f")
    session.record([], [_user("hello")])
    for leftover in (home / "sessions").glob("recall.sqlite3*"):
        leftover.unlink()
    real_open = os.open

    def read_only(path: object, flags: int, *args: object) -> int:
        # What a read-only file system answers: reading works, creating does not.
        if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", read_only)
    listed = CliRunner().invoke(app, ["sessions", "list"])
    shown = CliRunner().invoke(app, ["sessions", "show", session.id])
    assert listed.exit_code == 0 and session.id in listed.stdout
    assert shown.exit_code == 0 and "hello" in shown.stdout
    result = CliRunner().invoke(app, ["recall", "hello"])
    assert result.exit_code == 1 and not isinstance(result.exception, OSError)
    assert "Read-only file system" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # A session opened on the read-only store (one open before keeps its files open).
    with pytest.raises(TranscriptError, match="Read-only file system"):
        reopened = Store().open(session.id)
        reopened.record([_user("hello")], [_user("hello"), _assistant("hi")])
