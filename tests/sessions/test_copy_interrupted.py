"""A copy into a JSON Lines store that dies part way can be run again.

The PostgreSQL store imports a session in one transaction; the JSON Lines
store writes a file, so a process killed mid-write must leave no shorter
transcript at the session's path.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from carryall.blocks import Message, Text
from carryall.sessions import Store
from carryall.sessions.copy import copy_sessions


def test_a_copy_killed_mid_write_leaves_no_partial_session_and_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = Store(tmp_path / "from")
    session = source.create(title="long")
    history: list[Message] = []
    for i in range(50):
        grown = [*history, Message.user(f"question {i}"), Message.assistant([Text(f"answer {i}")])]
        session.record(history, grown)
        history = grown
    target = Store(tmp_path / "to")
    real_write = os.write

    def dies_half_way(fd: int, data: bytes) -> int:
        # Half the bytes reach the file, then the process is gone.
        real_write(fd, bytes(data)[: len(data) // 2])
        raise SystemExit("killed")

    monkeypatch.setattr(os, "write", dies_half_way)
    with pytest.raises(SystemExit):
        copy_sessions(source, target)
    monkeypatch.undo()
    assert target.list() == []  # no shorter session that reads as valid
    copied = copy_sessions(source, target)
    assert (copied.copied, copied.already) == (1, 0)
    assert target.open(session.id).versions() == source.open(session.id).versions()
    # What the killed write leaves is its temporary file, named as one.
    leftovers = sorted(p.name for p in (tmp_path / "to").glob(f"*{session.id}*"))
    assert len(leftovers) == 2 and leftovers[1] == f"{session.id}.jsonl"
    assert leftovers[0].startswith(f".{session.id}.jsonl.") and leftovers[0].endswith(".tmp")
