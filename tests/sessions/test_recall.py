"""Recall: full-text search over every session, kept current by recording."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.sessions import Store, fts_query, searchable_text

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


@pytest.fixture
def store(tmp_path: Path) -> Store:
    # Listening: most tests here are of the index kept current as events are written.
    return Store(tmp_path / "sessions", recall=True)


def _tool_session(store: Store) -> str:
    session = store.create(backend="fake", model="m")
    session.record(
        [],
        [
            Message.user(
                "please check the zebra config", [Image.from_bytes("image/png", PNG, "giraffe.png")]
            ),
            Message.assistant(
                [
                    Thinking("pondering the walrus question"),
                    Text("Looking now."),
                    ToolUse("c1", "read_file", {"path": "settings/octopus.toml"}),
                ]
            ),
            Message.tool_results([ToolResult("c1", "flamingo = true")]),
        ],
    )
    return session.id


def test_fts5_is_available() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")


@pytest.mark.parametrize(
    ("word", "message", "role"),
    [
        ("zebra", 0, "user"),  # text
        ("giraffe.png", 0, "user"),  # an image, by its placeholder
        ("walrus", 1, "assistant"),  # thinking
        ("octopus", 1, "assistant"),  # a tool call's input
        ("read_file", 1, "assistant"),  # a tool call's name
        ("flamingo", 2, "user"),  # a tool result
    ],
)
def test_everything_in_a_message_is_searchable(
    store: Store, word: str, message: int, role: str
) -> None:
    session_id = _tool_session(store)
    hits = store.recall.search(word)
    assert [(h.session, h.message, h.role) for h in hits] == [(session_id, message, role)]


def test_hit_has_snippet_with_match_spans_and_time(store: Store) -> None:
    _tool_session(store)
    before = datetime.now(UTC) - timedelta(minutes=1)
    (hit,) = store.recall.search("zebra")
    assert "zebra" in hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.matches] == ["zebra"]
    assert hit.time >= before
    (image_hit,) = store.recall.search("giraffe")
    assert "[image: giraffe.png (image/png)]" in image_hit.snippet
    assert "iVBOR" not in image_hit.snippet  # never base64


@pytest.mark.parametrize(
    "query",
    [
        "C++",
        "123e4567-e89b-12d3-a456-426614174000",
        '"',
        'say "hi',
        "AND",
        "OR NOT",
        "NEAR(a b)",
        "col:value",
        "*",
        "^start",
        "(unbalanced",
        "a - b",
        "{x}",
        "'single'",
    ],
)
def test_user_queries_are_never_fts_syntax(store: Store, query: str) -> None:
    _tool_session(store)
    store.recall.search(query)  # no sqlite3.OperationalError


def test_uuid_and_cpp_find_what_they_say(store: Store) -> None:
    session = store.create()
    uid = "123e4567-e89b-12d3-a456-426614174000"
    session.record([], [Message.user(f"request {uid} failed in C++ code")])
    other = store.create()
    other.record([], [Message.user("request 999 failed")])
    assert [h.session for h in store.recall.search(uid)] == [session.id]
    assert [h.session for h in store.recall.search("C++ failed")] == [session.id]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=30))
def test_any_query_text_is_safe(store: Store, query: str) -> None:
    if not store.recall.path.exists():
        _tool_session(store)
        store.recall.sync()
    store.recall.search(query, sync=False)


def test_fts_query_quotes_every_word() -> None:
    assert fts_query('C++ say "hi"') == '"C++" "say" """hi"""'
    assert fts_query("   ") is None


def test_all_words_must_appear(store: Store) -> None:
    session = store.create()
    session.record([], [Message.user("alpha beta"), Message.assistant([Text("alpha only")])])
    hits = store.recall.search("beta alpha")
    assert [h.message for h in hits] == [0]


def test_stemming_finds_word_forms(store: Store) -> None:
    session = store.create()
    session.record([], [Message.user("the tests were failing")])
    assert len(store.recall.search("failed test")) == 1


def test_better_matches_rank_first(store: Store) -> None:
    session = store.create()
    session.record(
        [],
        [
            Message.user("kettle " + "filler words " * 30),
            Message.assistant([Text("kettle kettle kettle")]),
        ],
    )
    assert [h.message for h in store.recall.search("kettle")] == [1, 0]


def test_filters_role_session_and_since(store: Store) -> None:
    a = store.create()
    a.record([], [Message.user("lantern one"), Message.assistant([Text("lantern two")])])
    b = store.create()
    b.record([], [Message.user("lantern three")])
    assert {h.role for h in store.recall.search("lantern", role="assistant")} == {"assistant"}
    assert {h.session for h in store.recall.search("lantern", session=b.id)} == {b.id}
    future = datetime.now(UTC) + timedelta(hours=1)
    assert store.recall.search("lantern", since=future) == []
    past = datetime.now(UTC) - timedelta(hours=1)
    assert len(store.recall.search("lantern", since=past)) == 3
    assert len(store.recall.search("lantern", limit=2)) == 2


def test_record_keeps_the_index_current_through_rewrites(store: Store) -> None:
    session = store.create()
    history = [Message.user("original pelican"), Message.assistant([Text("noted")])]
    session.record([], history)
    assert len(store.recall.search("pelican", sync=False)) == 1
    edited = [Message.user("compacted summary about a heron")]
    session.record(history, edited)
    assert store.recall.search("pelican", sync=False) == []
    assert [h.message for h in store.recall.search("heron", sync=False)] == [0]
    session.record(edited, [*edited, Message.assistant([Text("and a stork")])])
    assert [h.message for h in store.recall.search("stork", sync=False)] == [1]


def test_sync_catches_up_with_writers_that_skipped_the_index(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    quiet = Store(root, recall=False)
    session = quiet.create()
    session.record([], [Message.user("marmot")])
    reader = Store(root)
    assert len(reader.recall.search("marmot")) == 1
    history = session.messages()
    session.record(history, [*history, Message.assistant([Text("badger")])])
    assert [h.message for h in reader.recall.search("badger")] == [1]
    session.record(session.messages(), [Message.user("only a vole now")])
    assert reader.recall.search("marmot") == []
    assert len(reader.recall.search("vole")) == 1


def test_removed_sessions_leave_the_index(store: Store) -> None:
    session_id = _tool_session(store)
    store.remove(session_id)
    assert store.recall.search("zebra") == []


def test_reindex_rebuilds_from_the_transcripts(store: Store) -> None:
    _tool_session(store)
    store.recall.close()
    store.recall.path.write_bytes(b"this is not a database")
    count = store.recall.reindex()
    assert count == 3
    assert len(store.recall.search("zebra")) == 1


def test_search_with_no_sessions_is_empty(tmp_path: Path) -> None:
    assert Store(tmp_path / "none").recall.search("anything") == []


def test_one_unreadable_transcript_does_not_hide_the_others(store: Store) -> None:
    _tool_session(store)
    broken = store.create()
    broken.record([], [Message.user("zebra in a broken file")])
    store.recall.close()
    store.recall.path.unlink()
    broken.path.write_bytes(broken.path.read_bytes().replace(b'"event"', b'"evnt"'))
    hits = store.recall.search("zebra")
    assert [h.message for h in hits] == [0] and hits[0].session != broken.id


def _indexed(store: Store) -> int:
    """How many messages the index file holds, read past the index object (no catch-up)."""
    conn = sqlite3.connect(store.recall.path)
    try:
        count: int = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    finally:
        conn.close()
    return count


def test_recorded_events_are_held_back_until_a_batch_or_a_search(store: Store) -> None:
    store.recall.batch = 5
    session = store.create()
    history: list[Message] = []
    for i in range(4):
        left = [*history, Message.user(f"kumquat number {i}")]
        session.record(history, left)
        history = left
    assert not store.recall.path.exists() or _indexed(store) == 0
    assert len(store.recall.search("kumquat", sync=False)) == 4
    assert _indexed(store) == 4
    for i in range(5):
        left = [*history, Message.user(f"quince {i}")]
        session.record(history, left)
        history = left
    assert _indexed(store) == 9  # the fifth held-back message made a batch


def test_events_held_back_by_a_process_that_died_are_caught_up_from_the_files(
    tmp_path: Path,
) -> None:
    crashed = Store(tmp_path / "sessions")
    crashed.recall.batch = 1000
    crashed.create().record([], [Message.user("persimmon tart")])
    crashed.recall._pending.clear()  # what a SIGKILL leaves: nothing flushed
    hits = Store(tmp_path / "sessions").recall.search("persimmon")
    assert [h.message for h in hits] == [0]


def test_a_process_that_exits_indexes_what_it_held_back(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "sessions"
    code = (
        "from carryall.sessions import Store; from carryall.blocks import Message; "
        f"Store({str(root)!r}, recall=True).create().record([], [Message.user('rambutan'), "
        "Message.user('lychee')])"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert _indexed(Store(root)) == 2


def test_a_large_catch_up_merges_the_index_segments_once(tmp_path: Path) -> None:
    # Each session is caught up in a transaction of its own: a segment each.
    quiet = Store(tmp_path / "sessions", recall=False)
    for s in range(10):
        quiet.create().append([Message.user(f"message {i} of {s} about guava") for i in range(250)])
    store = Store(tmp_path / "sessions")
    assert len(store.recall.search("guava", limit=5000)) == 2500
    conn = sqlite3.connect(store.recall.path)
    try:
        segments = conn.execute("SELECT count(DISTINCT segid) FROM passages_idx").fetchone()[0]
    finally:
        conn.close()
    assert segments == 1


def test_held_back_events_of_a_deleted_store_are_dropped_not_recreated(tmp_path: Path) -> None:
    import shutil

    store = Store(tmp_path / "sessions")
    store.create().record([], [Message.user("durian")])
    shutil.rmtree(tmp_path / "sessions")
    store.recall.flush()
    assert not (tmp_path / "sessions").exists()


def _hold_the_index(store: Store) -> sqlite3.Connection:
    """Another process's view: a connection holding the index's write lock."""
    store.create().append([Message.user("the index is laid out")])
    store.recall.flush()
    other = sqlite3.connect(store.recall.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_a_recording_keeps_its_events_while_another_process_writes_the_index(
    store: Store,
) -> None:
    store.recall.batch = 2
    other = _hold_the_index(store)
    session = store.create()
    for i in range(6):
        session.append([Message.user(f"tamarind {i}")])
    assert len(store.recall._pending) == 6  # nothing waited, nothing dropped
    other.execute("COMMIT")
    other.close()
    # Indexed from what was held back, not read again from the transcript.
    hits = store.recall.search("tamarind", sync=False, limit=10)
    assert sorted(h.message for h in hits) == list(range(6))


def test_events_held_past_the_bound_are_left_to_the_catch_up(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import carryall.sessions.recall as recall

    monkeypatch.setattr(recall, "_HELD_MOST", 3)
    store.recall.batch = 1
    other = _hold_the_index(store)
    session = store.create()
    for i in range(5):
        session.append([Message.user(f"sapodilla {i}")])
    assert len(store.recall._pending) < 5
    other.execute("COMMIT")
    other.close()
    hits = store.recall.search("sapodilla", limit=10)
    assert sorted(h.message for h in hits) == list(range(5))


def test_a_batch_of_appends_and_rewrites_of_two_sessions_indexes_what_they_hold(
    store: Store,
) -> None:
    store.recall.batch = 10_000
    one, two = store.create(), store.create()
    for i in range(3):
        one.append([Message.user(f"loquat {i}")])
        two.append([Message.user(f"medlar {i}")])
    history = one.messages()
    one.record(history, [Message.user("loquat kept"), Message.user("now a quince")])
    one.append([Message.user("loquat after")])
    two.append([Message.user("medlar after")])
    store.recall.flush()
    indexed = {
        (h.session, h.message, h.snippet)
        for word in ("loquat", "medlar", "quince")
        for h in store.recall.search(word, sync=False, limit=50)
    }
    held = {
        (s.id, i, searchable_text(m))
        for s in (store.open(one.id), store.open(two.id))
        for i, m in enumerate(s.messages())
    }
    assert indexed == held


def test_a_new_sessions_events_are_indexed_without_reading_its_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "sessions", recall=True)
    store.recall.batch = 10_000
    fresh = store.create()
    # Written by a writer the index did not hear: only its file knows them.
    unheard = Store(store.root, recall=False).create()
    unheard.append([Message.user("persimmon before")])
    unheard_here = store.open(unheard.id)
    read: list[Path] = []
    real_load = Store.load

    def load(self: Store, path: Path, **kwargs: bool) -> object:
        read.append(path)
        return real_load(self, path, **kwargs)

    monkeypatch.setattr(Store, "load", load)
    fresh.append([Message.user("persimmon one")])
    fresh.record(fresh.messages(), [*fresh.messages(), Message.user("persimmon two")])
    unheard_here.append([Message.user("persimmon after")])
    store.recall.flush()
    assert read == [store.path(unheard.id)]  # the session heard only in part
    found = {(h.session, h.message) for h in store.recall.search("persimmon", sync=False)}
    assert found == {(fresh.id, 0), (fresh.id, 1), (unheard.id, 0), (unheard.id, 1)}
    store.recall.sync()
    assert read == [store.path(unheard.id)]  # the index is where the files end


def test_a_default_store_records_without_indexing_and_a_search_catches_up(tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions")
    session = store.create()
    session.record([], [Message.user("a quince tart")])
    session.append([Message.assistant([Text("with quince jam")])])
    assert not store.recall.path.exists()  # the recording spent nothing on the index
    assert [(h.session, h.message) for h in store.recall.search("quince")] == [
        (session.id, 1),
        (session.id, 0),
    ]
    session.append([Message.user("and quince paste")])
    assert len(store.recall.search("quince")) == 3  # only what the transcript gained is read
