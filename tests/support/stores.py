"""Writers in other processes, for the store tests that race them."""

from __future__ import annotations

import subprocess
import sys

# A writer: appends COUNT one-message events, printing each index once the
# store acknowledged it. On a TranscriptError it prints "ERROR <message>".
WRITER = r"""
import sys
from carryall.blocks import Message
from carryall.errors import TranscriptError
from carryall.sessions import open_store

location, session_id, tag = sys.argv[1:4]
count, pad = int(sys.argv[4]), int(sys.argv[5])
session = open_store(location).open(session_id)
filler = "x" * pad
for i in range(count):
    try:
        session.append([Message.user(f"{tag} {i} {filler}")])
    except TranscriptError as exc:
        print("ERROR", exc, flush=True)
        break
    print(i, flush=True)
"""


def spawn_writer(
    location: str, session_id: str, tag: str, count: int, pad: int = 0, **kwargs: object
) -> subprocess.Popen[str]:
    """A writer process appending `count` events to one session of the store at `location`."""
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", WRITER, location, session_id, tag, str(count), str(pad)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def finish(child: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """A writer's remaining stdout and its stderr once it has exited.

    After `readline`, part of the output may already sit in the stdout
    buffer; `communicate` reads the pipe itself and would lose it. The
    writers print a few KB at most, so waiting first cannot fill a pipe.
    """
    assert child.stdout is not None and child.stderr is not None
    child.wait(timeout=timeout)
    return child.stdout.read(), child.stderr.read()
