"""The recall index keeps SQLite's locks: two stores on one root in one process lose no row."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from carryall.blocks import Message, Text
from carryall.sessions import Store

_CHILD_WRITES = textwrap.dedent(
    """
    import sys
    from carryall.blocks import Message, Text
    from carryall.sessions import Store

    store = Store(sys.argv[1], recall=True)
    session = store.create(backend="local")
    session.record([], [Message.user("child wombat"), Message.assistant([Text("ok")])])
    store.recall.close()
    """
)

_CHILD_COUNTS = textwrap.dedent(
    """
    import sqlite3, sys

    conn = sqlite3.connect(sys.argv[1], timeout=30)
    print(conn.execute("SELECT count(*) FROM docs").fetchone()[0])
    """
)


def _child(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
        check=True,
    )
    return done.stdout.strip()


def _turns(count: int, word: str) -> list[Message]:
    history: list[Message] = []
    for n in range(count):
        history += [Message.user(f"{word} question {n}"), Message.assistant([Text(f"answer {n}")])]
    return history


def test_a_second_store_on_the_same_root_leaves_every_indexed_row_to_other_processes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    first = Store(root, recall=True)
    first.create(backend="local").record([], _turns(3, "otter"))
    first.recall.flush()

    # Another store on the same root, opened in its own thread (as a server
    # handling requests in threads does): its index opens the same file.
    def second_store() -> None:
        Store(root).recall.search("otter", sync=False)

    opener = threading.Thread(target=second_store)
    opener.start()
    opener.join()
    # Another process writes and closes its connection: were this process's
    # locks on the file gone, it would take itself for the last reader and
    # remove the write-ahead log the first store still writes to.
    _child(_CHILD_WRITES, str(root))
    first.create(backend="local").record([], _turns(4, "heron"))
    first.recall.flush()

    # A fresh process sees every row the index committed, without catching
    # up from the transcripts.
    counted = int(_child(_CHILD_COUNTS, str(first.recall.path)))
    assert counted == 6 + 2 + 8
    first.recall.close()
    assert first.recall.path.stat().st_mode & 0o077 == 0  # owner-only, as the transcripts
    assert {h.session for h in Store(root).recall.search("heron", sync=False)}
