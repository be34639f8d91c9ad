"""Deleting for real: rm takes the blobs only it referred to, gc the orphans, show survives."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Image, Message, Text, image_placeholder
from carryall.errors import TranscriptError
from carryall.sessions import Store

SHARED = b"\x89PNG\r\n\x1a\n" + b"shared" * 40
OWN = b"\x89PNG\r\n\x1a\n" + b"own" * 40


def _png(data: bytes, name: str) -> Image:
    return Image.from_bytes("image/png", data, name)


def _blobs(store: Store) -> set[str]:
    return {p.name for p in (store.root / "blobs").rglob("*") if p.is_file()}


def _with_images(store: Store, *images: Image) -> str:
    session = store.create()
    session.record([], [Message.user("look", list(images))])
    return session.id


def test_rm_removes_the_blobs_only_that_session_referred_to(home: Path) -> None:
    store = Store()
    gone = _with_images(store, _png(SHARED, "a.png"), _png(OWN, "b.png"))
    kept = _with_images(store, _png(SHARED, "c.png"))
    shared, own = store.put_blob(SHARED), store.put_blob(OWN)
    os.utime(store.blob_path(shared), (1, 1))
    os.utime(store.blob_path(own), (1, 1))
    assert store.remove(gone) == [own]
    assert _blobs(store) == {shared}
    assert store.open(kept).messages()[0].content[1] == _png(SHARED, "c.png")


def test_a_blob_an_earlier_version_refers_to_is_kept(home: Path) -> None:
    store = Store()
    session = store.create()
    first = [Message.user("look", [_png(OWN, "b.png")])]
    session.record([], first)
    session.record(first, [Message.user("never mind")])  # a rewrite: the image only in v1
    other = _with_images(store, _png(SHARED, "a.png"))
    os.utime(store.blob_path(store.put_blob(SHARED)), (1, 1))
    store.remove(other)
    assert store.blob_path(store.put_blob(OWN)).exists()
    assert store.open(session.id).versions()[0] == first


def test_gc_collects_orphans_and_stale_temporary_files_only(home: Path) -> None:
    store = Store()
    _with_images(store, _png(SHARED, "a.png"))
    orphan = store.put_blob(b"nobody refers to this")
    fresh = store.put_blob(b"a writer is about to refer to this")
    os.utime(store.blob_path(orphan), (1, 1))
    stale = store.blob_path(orphan).with_name(f".{orphan}.1.x.tmp")
    stale.write_bytes(b"half")
    os.utime(stale, (1, 1))
    started = store.blob_path(fresh).stat().st_mtime  # fresh is not older than that
    assert store.collect_blobs(started=started) == [orphan]
    assert _blobs(store) == {store.put_blob(SHARED), fresh}


def test_reusing_a_blob_refreshes_its_time_so_a_running_gc_keeps_it(home: Path) -> None:
    store = Store()
    sha = store.put_blob(OWN)
    os.utime(store.blob_path(sha), (1, 1))
    started = time.time() - 1
    store.put_blob(OWN)
    assert store.collect_blobs(started=started) == []


def test_gc_refuses_when_a_transcript_cannot_be_read(home: Path) -> None:
    store = Store()
    session_id = _with_images(store, _png(OWN, "b.png"))
    orphan = store.put_blob(b"orphan")
    os.utime(store.blob_path(orphan), (1, 1))
    with store.path(session_id).open("ab") as f:
        f.write(b'{"event": "append", "image"\n')
    with pytest.raises(TranscriptError, match="line 3: invalid event"):
        store.collect_blobs()
    assert store.blob_path(orphan).exists()


def test_a_missing_blob_reads_as_its_placeholder_with_a_note(home: Path) -> None:
    store = Store()
    session_id = _with_images(store, _png(OWN, "b.png"))
    store.blob_path(store.put_blob(OWN)).unlink()
    message = store.open(session_id).messages()[0]
    note = (
        f"{image_placeholder('image/png', 'b.png')} (its bytes are missing from the session store)"
    )
    assert message.content[1] == Text(note)
    app = typer.Typer()
    commands.register(app)
    result = CliRunner().invoke(app, ["sessions", "show", session_id])
    assert result.exit_code == 0, result.output
    assert note in result.stdout


def test_cli_rm_and_gc_say_what_they_removed(home: Path) -> None:
    store = Store()
    session_id = _with_images(store, _png(OWN, "b.png"))
    os.utime(store.blob_path(store.put_blob(OWN)), (1, 1))
    orphan = store.put_blob(b"orphan")
    os.utime(store.blob_path(orphan), (1, 1))
    app = typer.Typer()
    commands.register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["sessions", "rm", session_id, "-y"])
    assert result.exit_code == 0
    assert "and 1 image blob(s) only it referred to" in result.stderr
    result = runner.invoke(app, ["sessions", "gc"])
    assert result.exit_code == 0
    assert "removed 1 unreferenced image blob(s)" in result.stderr
    assert _blobs(store) == set()
