"""Two writers on one session never hide each other's turns, on every store.

Four processes each record 150 turns onto one session the way `run -c`
does: read the session, then `record(started, started + new)`. Between the
read and the record the others write, so every outcome of
`carryall.sessions.protocol.plan_record` is met: a plain append, a merge
after another writer's finished turn, and a conflict when the other writer
left a turn unfinished (every tenth turn here is a lone question).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from carryall.agent import Agent, SessionMerged
from carryall.blocks import Message, Text, validate_history
from carryall.providers import Capabilities, Request, Response
from carryall.sessions import open_store

# Prints one JSON line per turn: the texts acknowledged, or the texts a
# conflict error handed back as not recorded.
WRITER = r"""
import json, sys
from carryall.blocks import Message, Text
from carryall.errors import TranscriptError
from carryall.sessions import open_store

location, session_id, tag, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
session = open_store(location).open(session_id)
for i in range(count):
    session.refresh()
    started = session.messages()
    new = [Message.user(f"{tag}-{i}-q")]
    if i % 10 != 9:
        new.append(Message.assistant([Text(f"{tag}-{i}-a")]))
    try:
        kind = session.record(started, started + new)
    except TranscriptError as exc:
        unrecorded = [m.text() for m in getattr(exc, "unrecorded", [])]
        print(json.dumps({"conflict": unrecorded, "error": str(exc)}), flush=True)
        continue
    print(json.dumps({"acked": [m.text() for m in new], "kind": kind}), flush=True)
"""

WRITERS, TURNS = 4, 150


def test_concurrent_writers_keep_every_acknowledged_message_once(store_location: str) -> None:
    store = open_store(store_location)
    session = store.create()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, store_location, session.id, f"w{w}", str(TURNS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    acked: list[str] = []
    refused: list[str] = []
    kinds: Counter[str] = Counter()
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        rows = [json.loads(line) for line in out.splitlines()]
        assert len(rows) == TURNS, err
        for row in rows:
            if "acked" in row:
                acked += row["acked"]
                kinds[row["kind"]] += 1
            else:
                # A conflict names the versions and hands back what it refused.
                assert row["conflict"] and "version" in row["error"], row
                refused += row["conflict"]
                kinds["conflict"] += 1
    history = open_store(store_location).open(session.id).messages()
    texts = [m.text() for m in history]
    doubled = [t for t, n in Counter(texts).items() if n > 1]
    assert doubled == []
    missing = set(acked) - set(texts)
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages lost ({kinds})"
    assert set(texts) == set(acked), "a message nobody acknowledged is in the history"
    assert not set(refused) & set(texts), "a refused message was recorded after all"
    for w in range(WRITERS):
        own = [t for t in texts if t.startswith(f"w{w}-")]
        assert own == [t for t in acked if t.startswith(f"w{w}-")], f"writer {w} out of order"
    validate_history(history)
    assert len(store.open(session.id).versions()) == 1  # nothing was rewritten


class _Answers:
    """A backend that answers every request with one fixed line (no server: the loop is tested)."""

    name = "scripted"
    model = "scripted-1"
    context_window: int | None = None

    def __init__(self, text: str) -> None:
        self.text = text
        self.capabilities = Capabilities()

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        return Response(message=Message.assistant([Text(self.text)]), stop_reason="end_turn")

    def close(self) -> None:
        pass


def test_two_agents_on_one_session_are_told_of_each_merge(tmp_path: Path) -> None:
    location = str(tmp_path / "sessions")
    session_id = open_store(location).create().id
    events: dict[str, list[object]] = {"a": [], "b": []}
    agents = {
        name: Agent(
            _Answers(f"answer {name}"),
            session=open_store(location).open(session_id),
            on_event=events[name].append,
        )
        for name in ("a", "b")
    }
    agents["a"].send("first")
    agents["b"].send("second")  # b opened the session before a's turn
    agents["a"].send("third")
    merged = {
        name: [e for e in got if isinstance(e, SessionMerged)] for name, got in events.items()
    }
    assert merged == {"a": [SessionMerged(2)], "b": [SessionMerged(2)]}
    texts = [m.text() for m in open_store(location).open(session_id).messages()]
    assert texts == ["first", "answer a", "second", "answer b", "third", "answer a"]
