"""The store tells its listeners what it wrote and removed; the recall index is one of them."""

from __future__ import annotations

import ast
import importlib.util
import logging
from pathlib import Path

import pytest

from carryall.blocks import Message, Text
from carryall.sessions import RecallIndex, Recorded, SessionStore, Store
from carryall.sessions._transcript import parse_time


class Heard:
    """A listener that keeps what it was told."""

    def __init__(self) -> None:
        self.recorded: list[Recorded] = []
        self.removed: list[str] = []

    def on_record(self, recorded: Recorded, /) -> None:
        self.recorded.append(recorded)

    def on_remove(self, session_id: str, /) -> None:
        self.removed.append(session_id)


class Broken:
    """A listener that fails at everything."""

    def on_record(self, recorded: Recorded, /) -> None:
        raise RuntimeError("the listener broke")

    def on_remove(self, session_id: str, /) -> None:
        raise RuntimeError("the listener broke")


def test_listeners_hear_appends_rewrites_and_removals(tmp_path: Path) -> None:
    heard = Heard()
    store = SessionStore(tmp_path, listeners=[heard])
    session = store.create()
    first = [Message.user("one"), Message.assistant([Text("two")])]
    session.record([], first)
    (appended,) = heard.recorded
    assert appended.session_id == session.id
    assert (appended.first, list(appended.messages), appended.total) == (0, first, 2)
    assert appended.after == session.path.stat().st_size > appended.before
    assert [parse_time(t) for t in appended.times] == session.times()

    edited = [first[0], Message.assistant([Text("two, edited")])]
    assert session.record(first, edited) == "rewrite"
    rewrite = heard.recorded[1]
    assert (rewrite.first, list(rewrite.messages), rewrite.total) == (1, edited[1:], 2)
    assert rewrite.before == appended.after

    store.remove(session.id)
    assert heard.removed == [session.id]


def test_a_failing_listener_never_fails_a_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    heard = Heard()
    store = SessionStore(tmp_path, listeners=[Broken(), heard])
    session = store.create()
    with caplog.at_level(logging.WARNING, logger="carryall.sessions"):
        assert session.record([], [Message.user("kept")]) == "append"
        store.remove(session.id)
    assert len(heard.recorded) == 1 and heard.removed == [session.id]
    assert sum("the listener broke" in r.getMessage() for r in caplog.records) == 2


def test_a_store_without_listeners_keeps_no_index(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create().record([], [Message.user("no index here")])
    assert not (tmp_path / "recall.sqlite3").exists()
    # The index catches up from the files when someone searches.
    assert len(RecallIndex(store).search("index")) == 1


def test_store_subscribes_its_recall_index_only_when_asked(tmp_path: Path) -> None:
    # By default a recording spends nothing on the index: a search catches it up.
    assert Store(tmp_path).listeners == []
    store = Store(tmp_path, recall=True)
    assert store.recall in store.listeners


def _imports(module: str) -> set[str]:
    """The carryall modules a module's source imports (at the top or lazily)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("carryall")}


def test_imports_run_one_way_recall_store_transcript() -> None:
    assert _imports("carryall.sessions.recall") >= {"carryall.sessions.jsonl"}
    assert "carryall.sessions.indexed" not in _imports("carryall.sessions.recall")
    for lower in ("carryall.sessions.jsonl", "carryall.sessions._transcript"):
        assert not _imports(lower) & {"carryall.sessions.recall", "carryall.sessions.indexed"}
    assert "carryall.sessions.jsonl" not in _imports("carryall.sessions._transcript")
