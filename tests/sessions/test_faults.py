"""Faults of the JSON Lines store alone: a full disk, a file size limit.

A writer killed mid-append and two writers at once are promises of every
store, so they are in the conformance suite (`test_store_conformance.py`).
Each test runs real writer processes and every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from carryall.sessions import Store

# A writer: appends COUNT one-message events, printing each index once the
# event is synced (an acknowledgement). On a TranscriptError it prints
# "ERROR <message>" and, for the disk test, then tries an image too.
WRITER = r"""
import sys
from carryall.blocks import Image, Message
from carryall.errors import TranscriptError
from carryall.sessions import Store

root, session_id, tag = sys.argv[1:4]
count, pad = int(sys.argv[4]), int(sys.argv[5])
session = Store(root).open(session_id)
filler = "x" * pad
for i in range(count):
    try:
        session.append([Message.user(f"{tag} {i} {filler}")])
    except TranscriptError as exc:
        print("ERROR", exc, flush=True)
        try:
            image = Image.from_bytes("image/png", bytes(range(256)) * 512, "big.png")
            session.append([Message.user("an image", [image])])
        except TranscriptError as exc2:
            print("IMAGE-ERROR", exc2, flush=True)
        else:
            print("IMAGE-OK", flush=True)
        break
    print(i, flush=True)
"""


def _spawn(
    root: Path, session_id: str, tag: str, count: int, pad: int = 0, **kwargs: object
) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", WRITER, str(root), session_id, tag, str(count), str(pad)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _texts(store: Store, session_id: str) -> list[str]:
    return [m.text() for m in store.open(session_id).messages()]


@contextlib.contextmanager
def _small_disk() -> Iterator[Path | None]:
    """A 512 KiB tmpfs folder, or None when this sandbox may not mount one."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        yield None
        return
    where = Path(tempfile.mkdtemp(prefix="carryall-full-disk-"))
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    try:
        yield where if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", str(where)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            where.rmdir()


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (96 * 1024, 96 * 1024))


def _fill_and_check(root: Path, expected: str, **limit: object) -> None:
    """Append until the disk refuses; the error is clear and the transcript intact."""
    store = Store(root)
    session = store.create()
    child = _spawn(root, session.id, "fill", 1000, pad=2000, **limit)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    lines = out.splitlines()
    acks = [line for line in lines if line.isdigit()]
    errors = [line for line in lines if line.startswith("ERROR ")]
    assert len(errors) == 1, out
    assert expected in errors[0]
    assert "keeps every earlier event" in errors[0]
    assert session.id in errors[0]
    assert any(line.startswith("IMAGE-ERROR") for line in lines), out
    # Intact: loads, holds every acknowledged event, ends on a whole line.
    assert session.path.read_bytes().endswith(b"\n")
    texts = _texts(store, session.id)
    assert len(texts) == len(acks) > 0
    assert texts == [f"fill {i} {'x' * 2000}" for i in range(len(acks))]


def test_full_disk_gives_a_clear_error_and_an_intact_transcript() -> None:
    with _small_disk() as disk:
        if disk is None:
            pytest.skip(
                "cannot mount a small tmpfs here (needs Linux and root); "
                "test_file_size_limit_* covers the same path with RLIMIT_FSIZE"
            )
        _fill_and_check(disk / "sessions", "No space left on device")


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no RLIMIT_FSIZE here")
def test_file_size_limit_gives_a_clear_error_and_an_intact_transcript(tmp_path: Path) -> None:
    # The fallback for a sandbox that may not mount: writes fail with EFBIG.
    _fill_and_check(tmp_path / "sessions", "File too large", preexec_fn=_limit_file_size)
