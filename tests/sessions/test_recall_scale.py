"""Recall at scale: a common word answered from its newest matches, a catch-up that can stop."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carryall.blocks import Message, Text
from carryall.cli import app
from carryall.sessions import Store
from carryall.sessions import recall as recall_module


def _said(store: Store, *texts: str) -> str:
    session = store.create(backend="local")
    history: list[Message] = []
    for text in texts:
        history += [Message.user(text), Message.assistant([Text("noted")])]
    session.record([], history)
    return session.id


def test_a_word_in_fewer_messages_than_are_ranked_is_ranked_over_all_of_them(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    _said(store, "kettle kettle kettle kettle", *[f"one kettle and {n} cups" for n in range(12)])
    (best, *_) = store.recall.search("kettle")
    assert best.message == 0  # the oldest message, the best match


def test_a_word_in_more_messages_than_are_ranked_is_ranked_among_its_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall_module, "RANKED", 10)
    store = Store(tmp_path)
    _said(store, "kettle kettle kettle kettle", *[f"one kettle and {n} cups" for n in range(12)])
    hits = store.recall.search("kettle", limit=5)
    # The newest ten matches are the user messages of n = 2 to 11 (messages
    # 6 to 24); the oldest one, the best match, is not among them.
    assert len(hits) == 5 and all(hit.message >= 6 for hit in hits)
    assert all("kettle" in hit.snippet for hit in hits)
    # A limit past `RANKED` ranks that many.
    assert len(store.recall.search("kettle", limit=50)) == 13


def test_an_interrupted_catch_up_keeps_the_sessions_it_indexed(tmp_path: Path) -> None:
    writer = Store(tmp_path, recall=False)
    ids = [_said(writer, f"walrus number {n}") for n in range(6)]
    store = Store(tmp_path)
    heard: list[tuple[int, int]] = []

    def stop_after_three(done: int, total: int) -> None:
        heard.append((done, total))
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.recall.search("walrus", progress=stop_after_three)
    assert heard == [(0, 6), (1, 6), (2, 6), (3, 6)]
    with sqlite3.connect(store.recall.path) as conn:
        assert conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 3
    heard.clear()
    hits = store.recall.search("walrus", limit=50, progress=lambda d, t: heard.append((d, t)))
    assert {hit.session for hit in hits} == set(ids)
    assert heard[0] == (0, 3) and heard[-1] == (3, 3)  # only what was left


def test_recall_tells_of_a_long_first_catch_up_on_stderr(tmp_path: Path) -> None:
    writer = Store(tmp_path, recall=False)
    for n in range(100):
        _said(writer, f"narwhal {n}")
    result = CliRunner().invoke(app, ["recall", "narwhal", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert "recall: indexing 100 sessions" in result.stderr
    assert "recall: indexed 100 sessions" in result.stderr
    again = CliRunner().invoke(app, ["recall", "narwhal", "--store", str(tmp_path)])
    assert again.exit_code == 0 and "indexing" not in again.stderr
