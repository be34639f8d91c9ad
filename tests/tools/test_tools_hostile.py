"""Issue 18, workspace tools: what a model (or a process racing it) could make the tools do.

The race tests swap a directory for a symlink out of the workspace thousands
of times while a tool runs against it; each stops after a few seconds or a
few thousand calls, whichever comes first, once the swapper has swapped a
few hundred times (a loaded machine can starve it; the race then runs
longer). Before the tools opened through the loader's walk, the write landed
outside and the read leaked the outside file within a few hundred tries.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from carryall.errors import ToolError
from carryall.tools import Tool
from carryall.tools.builtin import builtin_tools
from tests.support.blocking import bounded

SECONDS = 3.0
CALLS = 4000
# On a loaded machine the swapper thread can lose the GIL and the cores for
# most of the calls; the race goes on (to a longer limit) until it has swapped
# this often, so a slow swapper makes the test slower rather than failing it.
SWAPS = 300
PATIENCE = 20.0
OUTSIDE = "OUTSIDE-SECRET"


def _tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in builtin_tools(root, allow_write=True)}


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace holding `d/` (a real directory) and, beside it, an outside directory."""
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(OUTSIDE)
    (outside / "leak-marker").write_text("x")
    return root, outside


@contextlib.contextmanager
def _swapping(root: Path, outside: Path) -> Iterator[list[int]]:
    """`root/d` flips between the real directory and a symlink to `outside` until the block ends."""
    stop = threading.Event()
    swaps = [0]
    d, saved = root / "d", root / "d.saved"

    def swap() -> None:
        # Each step on its own: a write may recreate `d` as a real directory
        # meanwhile (its parents are created), which the next turn clears.
        while not stop.is_set():
            with contextlib.suppress(OSError):
                os.rename(d, saved)
            with contextlib.suppress(OSError):
                os.symlink(outside, d)
            swaps[0] += 1
            try:
                os.unlink(d)
            except IsADirectoryError:
                shutil.rmtree(d, ignore_errors=True)
            except OSError:
                pass
            with contextlib.suppress(OSError):
                os.rename(saved, d)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join(5)
        if d.is_symlink():
            os.unlink(d)
        if saved.exists():
            shutil.rmtree(d, ignore_errors=True)
            os.rename(saved, d)


def _raced_enough(calls: int, swaps: int, elapsed: float) -> bool:
    if elapsed >= PATIENCE:
        return True
    return swaps >= SWAPS and (calls >= CALLS or elapsed >= SECONDS)


def _race(call: Callable[[], str | None], root: Path, outside: Path) -> tuple[int, int, list[str]]:
    """Run `call` against the swapping directory; returns (calls, swaps, what leaked).

    A refusal (`ToolError`) is the right answer to a swap; anything else that
    escapes is a traceback the model would have been shown, checked after
    the leaks so a leak is what a failure names first.
    """
    leaks: list[str] = []
    crashes: list[OSError] = []
    calls = 0
    with _swapping(root, outside) as swaps:
        start = time.monotonic()
        while not _raced_enough(calls, swaps[0], time.monotonic() - start):
            calls += 1
            try:
                seen = call()
            except ToolError:
                continue
            except OSError as exc:
                crashes.append(exc)
                continue
            if seen:
                leaks.append(seen)
        if (outside / "f.txt").read_text() != OUTSIDE:
            leaks.append("the outside file was written")
    assert leaks == [], f"{len(leaks)} leaks in {calls} calls ({swaps[0]} swaps): {leaks[:1]}"
    assert crashes == [], f"{len(crashes)} tracebacks in {calls} calls: {crashes[:1]}"
    return calls, swaps[0], leaks


def test_write_file_race_with_a_swapped_symlink_never_writes_outside(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    write = _tools(root)["write_file"]

    def call() -> str | None:
        write.invoke({"path": "d/f.txt", "content": "PWNED-BY-MODEL"})
        return None

    calls, swaps, _ = _race(call, root, outside)
    assert swaps > 100, f"the swapper barely ran ({swaps} swaps in {calls} calls)"
    assert (outside / "f.txt").read_text() == OUTSIDE, f"written outside ({calls} calls)"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt", "leak-marker"]


def test_read_file_race_with_a_swapped_symlink_never_reads_outside(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    read = _tools(root)["read_file"]

    def call() -> str | None:
        text = read.invoke({"path": "d/f.txt"}).text
        return text if OUTSIDE in text else None

    calls, swaps, leaks = _race(call, root, outside)
    assert swaps > 100, f"the swapper barely ran ({swaps} swaps in {calls} calls)"
    assert leaks == [], f"the outside file leaked {len(leaks)} times in {calls} calls"


def test_list_dir_race_with_a_swapped_symlink_never_lists_outside(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    listing = _tools(root)["list_dir"]

    def call() -> str | None:
        text = listing.invoke({"path": "d"}).text
        return text if "leak-marker" in text else None

    calls, swaps, leaks = _race(call, root, outside)
    assert swaps > 100, f"the swapper barely ran ({swaps} swaps in {calls} calls)"
    assert leaks == [], f"the outside directory was listed {len(leaks)} times in {calls} calls"


def test_list_dir_does_not_report_the_size_of_a_symlink_target_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("x" * 12345)
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "up")
    text = _tools(root)["list_dir"].invoke({}).text
    assert "12345" not in text
    assert text.splitlines() == ["link.txt (symlink)", "up (symlink)"]


def _open_other_end(fifo: Path, flags: int) -> Callable[[], None]:
    def unblock() -> None:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, flags | os.O_NONBLOCK))

    return unblock


def test_write_file_onto_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    os.mkfifo(root / "pipe")
    write = _tools(root)["write_file"]
    got = bounded(
        lambda: write.invoke({"path": "pipe", "content": "x"}),
        _open_other_end(root / "pipe", os.O_RDONLY),
        "write_file onto a FIFO",
    )
    assert isinstance(got, ToolError)
    assert "FIFO" in str(got) or "not a regular file" in str(got)


def test_read_file_on_a_fifo_swapped_in_after_the_check_never_blocks(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f.real").write_text("inside")
    os.mkfifo(root / "f.fifo")
    target, real, fifo = root / "f", root / "f.real", root / "f.fifo"
    os.link(real, target)
    read = _tools(root)["read_file"]
    stop = threading.Event()

    def swap() -> None:
        # Hard links, so `f` is always one of the two and never missing.
        while not stop.is_set():
            with contextlib.suppress(OSError):
                os.link(fifo, root / "f.tmp")
                os.replace(root / "f.tmp", target)
                os.link(real, root / "f.tmp")
                os.replace(root / "f.tmp", target)

    def reads() -> int:
        calls = 0
        end = time.monotonic() + SECONDS
        while calls < CALLS and time.monotonic() < end:
            calls += 1
            with contextlib.suppress(ToolError):
                read.invoke({"path": "f"})
        return calls

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        got = bounded(reads, _open_other_end(fifo, os.O_WRONLY), "read_file on a FIFO")
    finally:
        stop.set()
        swapper.join(5)
    assert isinstance(got, int) and got > 0


def test_list_dir_names_that_are_not_utf8_give_an_encodable_result(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with open(os.fsencode(root) + b"/bad\xff\xfe.txt", "wb") as fh:
        fh.write(b"hi")
    text = _tools(root)["list_dir"].invoke({}).text
    json.dumps(text, ensure_ascii=False).encode("utf-8")  # what the request body must hold
    assert text == "bad\\xff\\xfe.txt (2 bytes)"


def test_read_file_refuses_an_over_long_path_up_front(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    read = _tools(root)["read_file"]
    with pytest.raises(ToolError, match="longer than the 4095-byte limit"):
        read.invoke({"path": "a/" * 40_000})
    with pytest.raises(ToolError, match="component is longer than the 255-byte limit"):
        read.invoke({"path": "x" * 300})
