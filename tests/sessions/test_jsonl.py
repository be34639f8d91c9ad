"""Recording sessions: append vs rewrite, recovery of earlier versions, the file format."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import Document, Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.errors import SessionConflict, TranscriptError
from carryall.sessions import Store, default_root
from carryall.sessions import jsonl as jsonl_module
from tests.support.sessions import PNG, rich_history


def _user(text: str) -> Message:
    return Message.user(text)


def _assistant(text: str) -> Message:
    return Message.assistant([Text(text)])


def _events(path: Path) -> list[dict[str, Any]]:
    lines = path.read_bytes().split(b"\n")
    return [json.loads(line) for line in lines[1:] if line]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "sessions")


# -- append or rewrite -----------------------------------------------------------


def test_unchanged_prefix_appends_only_the_tail(store: Store) -> None:
    session = store.create(backend="fake", model="m")
    first = [_user("hello")]
    assert session.record([], first) == "append"
    second = [*first, _assistant("hi"), _user("again")]
    assert session.record(first, second) == "append"
    events = _events(session.path)
    assert [e["event"] for e in events] == ["append", "append"]
    assert events[1]["start"] == 1
    assert len(events[1]["messages"]) == 2
    assert store.open(session.id).messages() == second


def test_prefix_compares_by_value_not_identity(store: Store) -> None:
    session = store.create()
    session.record([], [_user("hello")])
    # New but equal objects (as a reloaded history would have) still count as unchanged.
    assert session.record([_user("hello")], [_user("hello"), _assistant("hi")]) == "append"


def test_edit_of_an_earlier_message_is_a_rewrite(store: Store) -> None:
    session = store.create()
    history = [_user("hello"), _assistant("hi")]
    session.record([], history)
    edited = [_user("hello, edited"), _assistant("hi"), _user("next")]
    assert session.record(history, edited) == "rewrite"
    assert store.open(session.id).messages() == edited


def test_truncation_is_a_rewrite(store: Store) -> None:
    session = store.create()
    history = [_user("a"), _assistant("b"), _user("c"), _assistant("d")]
    session.record([], history)
    assert session.record(history, history[:2]) == "rewrite"
    assert store.open(session.id).messages() == history[:2]


def test_reorder_is_a_rewrite(store: Store) -> None:
    session = store.create()
    history = [_user("a"), _assistant("b")]
    session.record([], history)
    assert session.record(history, [history[1], history[0]]) == "rewrite"


def test_compaction_that_keeps_length_is_a_rewrite(store: Store) -> None:
    session = store.create()
    history = [_user("a"), _assistant("b"), _user("c")]
    session.record([], history)
    compacted = [_user("summary of a and b"), _assistant("ok"), _user("c")]
    assert session.record(history, compacted) == "rewrite"


def test_started_from_that_is_not_what_is_stored_is_a_conflict(store: Store) -> None:
    session = store.create()
    session.record([], [_user("a")])
    # The run claims to have started from a history the store never held.
    with pytest.raises(SessionConflict, match="not the session's") as caught:
        session.record([_user("x")], [_user("x"), _assistant("y")])
    assert caught.value.unrecorded == [_assistant("y")]
    assert store.open(session.id).messages() == [_user("a")]


def test_nothing_new_writes_nothing(store: Store) -> None:
    session = store.create()
    history = [_user("a")]
    session.record([], history)
    size = session.path.stat().st_size
    assert session.record(history, list(history)) == "append"
    assert session.path.stat().st_size == size


def test_store_changed_underneath_by_another_writer_is_a_conflict(store: Store) -> None:
    mine = store.create()
    base = [_user("a")]
    mine.record([], base)
    theirs = store.open(mine.id)
    theirs.record(base, [*base, _assistant("from the other writer")])
    # `mine` still believes the store holds `base`; its answer cannot go
    # after the other writer's, and must not replace it either.
    left = [*base, _assistant("from me")]
    with pytest.raises(SessionConflict, match=r"turn is not finished|continue a turn"):
        mine.record(base, left)
    assert store.open(mine.id).messages() == [*base, _assistant("from the other writer")]
    assert len(store.open(mine.id).versions()) == 1


def test_writer_that_caught_up_appends_on_top_of_another_writer(store: Store) -> None:
    mine = store.create()
    mine.record([], [_user("a")])
    theirs = store.open(mine.id)
    theirs.append([_assistant("b")])
    mine.refresh()
    assert mine.messages() == [_user("a"), _assistant("b")]
    started = mine.messages()
    assert mine.record(started, [*started, _user("c")]) == "append"
    assert store.open(mine.id).messages() == [_user("a"), _assistant("b"), _user("c")]


def test_every_earlier_version_is_recoverable_after_rewrites(store: Store) -> None:
    session = store.create()
    v1 = [_user("a"), _assistant("b")]
    v2 = [_user("a, edited")]
    v3 = [_user("a, edited"), _assistant("c")]
    v4 = [_user("summary")]
    session.record([], v1)
    session.record(v1, v2)
    session.record(v2, v3)
    session.record(v3, v4)
    assert store.open(session.id).versions() == [v1, v3, v4]


def test_rewrite_keeps_times_of_unchanged_messages(store: Store) -> None:
    session = store.create()
    history = [_user("a"), _assistant("b")]
    session.record([], history)
    before = session.times()
    session.record(history, [history[0], _assistant("b, edited")])
    after = store.open(session.id).times()
    assert after[0] == before[0]
    assert after[1] > before[1]


# -- round trips and the file ----------------------------------------------------


def test_every_block_type_round_trips(store: Store) -> None:
    session = store.create()
    history = rich_history()
    session.record([], history)
    loaded = store.open(session.id).messages()
    assert loaded == history
    thinking = loaded[1].content[0]
    assert isinstance(thinking, Thinking) and thinking.signature == "c2lnbmF0dXJl"


def test_image_bytes_live_once_in_the_blob_folder_not_in_the_transcript(store: Store) -> None:
    session = store.create()
    session.record([], rich_history())
    text = session.path.read_text()
    encoded = base64.b64encode(PNG).decode()
    assert encoded[:40] not in text
    sha = hashlib.sha256(PNG).hexdigest()
    assert sha in text
    blobs = [p for p in (store.root / "blobs").rglob("*") if p.is_file()]
    assert [p.name for p in blobs] == [sha]  # two images, same bytes: one blob
    assert blobs[0].read_bytes() == PNG
    image_line = _events(session.path)[0]["messages"][0]["content"][1]
    assert image_line == {
        "type": "image",
        "media_type": "image/png",
        "sha256": sha,
        "source": "shot.png",
    }


def test_a_document_written_inline_before_blobs_still_loads(store: Store) -> None:
    # How transcripts held a document before it was kept by hash: its JSON form inline.
    paper = Document.from_bytes("application/pdf", b"%PDF-1.4\n", source="paper.pdf")
    session = store.create()
    session.record([], [Message.user("read", [paper])])
    sha = hashlib.sha256(b"%PDF-1.4\n").hexdigest()
    lines = session.path.read_bytes().splitlines()
    event = json.loads(lines[1])
    event.pop("crc")
    event["messages"][0]["content"][1] = {
        "type": "document",
        "media_type": "application/pdf",
        "data": paper.data,
        "source": "paper.pdf",
    }
    body = json.dumps(event, separators=(",", ":"))
    assert sha not in body
    # Written without the integrity check, as lines older than it were.
    session.path.write_bytes(lines[0] + b"\n" + body.encode() + b"\n")
    assert store.open(session.id).messages() == [Message.user("read", [paper])]


def test_missing_blob_reads_as_its_placeholder_with_a_note(store: Store) -> None:
    session = store.create()
    session.record([], rich_history())
    for blob in (store.root / "blobs").rglob("*"):
        if blob.is_file():
            blob.unlink()
    image = store.open(session.id).messages()[0].content[1]
    assert image == Text(
        "[image: shot.png (image/png)] (its bytes are missing from the session store)"
    )


def test_damaged_blob_is_refused(store: Store) -> None:
    session = store.create()
    session.record([], rich_history())
    blob = next(p for p in (store.root / "blobs").rglob("*") if p.is_file())
    blob.write_bytes(b"not the picture")
    with pytest.raises(TranscriptError, match="does not match its hash"):
        store.open(session.id)


def test_header_names_format_and_meta(store: Store, tmp_path: Path) -> None:
    session = store.create(backend="llama", model="smol", cwd=tmp_path, system="be brief")
    header = json.loads(session.path.read_bytes().split(b"\n")[0])
    assert header["carryall"] == "session"
    assert header["format"] == 1
    assert header["id"] == session.id
    assert header["backend"] == "llama"
    assert header["model"] == "smol"
    assert header["cwd"] == str(tmp_path)
    meta = store.open(session.id).meta
    assert (meta.backend, meta.model, meta.cwd, meta.system) == (
        "llama",
        "smol",
        str(tmp_path),
        "be brief",
    )
    assert meta.created.tzinfo is not None


def test_newer_format_is_refused_clearly(store: Store) -> None:
    session = store.create()
    lines = session.path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["format"] = 99
    session.path.write_bytes(json.dumps(header).encode() + b"\n")
    with pytest.raises(TranscriptError, match="format 99 was written by a newer carryall"):
        store.open(session.id)


def test_title_is_the_first_thing_a_person_said(store: Store) -> None:
    session = store.create()
    assert session.meta.title is None
    session.record([], [_user("  Fix the\n flaky   test in CI  "), _assistant("ok")])
    assert session.meta.title == "Fix the flaky test in CI"
    session.record(session.messages(), [*session.messages(), _user("something else")])
    assert store.open(session.id).meta.title == "Fix the flaky test in CI"


def test_title_skips_tool_results_and_is_shortened(store: Store) -> None:
    session = store.create()
    results = Message.tool_results([ToolResult("c", "x")])
    call = Message.assistant([ToolUse("c", "t", {})])
    session.record([], [call, results, _user("word " * 40)])
    title = store.open(session.id).meta.title
    assert title is not None and title.startswith("word word") and len(title) <= 80


def test_given_title_is_kept(store: Store) -> None:
    session = store.create(title="Imported chat")
    session.record([], [_user("hello")])
    assert store.open(session.id).meta.title == "Imported chat"


def test_torn_last_line_is_ignored_on_read_and_moved_aside_on_write(store: Store) -> None:
    session = store.create()
    session.record([], [_user("a")])
    torn = b'{"event":"append","time":"2025-01-01T00:00:00.000000Z","n":2,"start":1,"mess'
    with session.path.open("ab") as f:
        f.write(torn)
    reopened = store.open(session.id)
    assert reopened.messages() == [_user("a")]
    assert [info.turns for info in store.list()] == [1]
    reopened.record([_user("a")], [_user("a"), _assistant("b")])
    assert store.open(session.id).messages() == [_user("a"), _assistant("b")]
    kept = list((store.root / "torn").iterdir())
    assert len(kept) == 1 and kept[0].read_bytes() == torn
    assert session.path.read_bytes().endswith(b"\n")


def test_corrupt_middle_line_is_skipped_and_named(store: Store) -> None:
    session = store.create()
    session.record([], [_user("a")])
    session.record([_user("a")], [_user("a"), _assistant("b")])
    lines = session.path.read_bytes().split(b"\n")
    lines[1] = b'{"event":"append","oops'
    session.path.write_bytes(b"\n".join(lines))
    opened = store.open(session.id)
    assert opened.messages() == [_assistant("b")]  # line 3 still read, where it says
    assert any("line 2: invalid event" in note for note in opened.damage)
    assert any("line 3: append starts at message 1" in note for note in opened.damage)


def test_line_nested_deeper_than_python_holds_names_the_line(store: Store) -> None:
    session = store.create()
    session.record([], [_user("a")])
    deep = b"[" * 100_000 + b"]" * 100_000
    line = (
        b'{"event":"append","time":"2026-11-29T00:00:00Z","n":1,"messages":[{"role":"assistant",'
        b'"content":[{"type":"tool_use","id":"a","name":"b","input":' + deep + b"}]}]}\n"
    )
    with session.path.open("ab") as out:
        out.write(line)
    opened = store.open(session.id)
    assert opened.messages() == [_user("a")]
    assert [note.split(": ")[0] for note in opened.damage] == [f"{session.path} line 3"]


def test_now_writes_the_moment_it_is_across_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from carryall.sessions import _transcript

    start = datetime(2026, 12, 31, 23, 59, 59, 999_998, tzinfo=UTC)
    for step in (0, 1, 2, 3, 1_000_000, 86_400_000_000):
        moment = start + timedelta(microseconds=step)
        ns = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
        monkeypatch.setattr(_transcript.time, "time_ns", lambda ns=ns: ns + 999)
        assert _transcript.now() == _transcript.format_time(moment)


def test_a_write_the_kernel_cuts_short_is_finished_by_further_writes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = store.create()
    real_write = os.write
    calls: list[int] = []

    def short_write(fd: int, data: bytes) -> int:
        calls.append(fd)
        return real_write(fd, bytes(data)[:7])

    monkeypatch.setattr(os, "write", short_write)
    session.append([_user("a question long enough to take many short writes")])
    session.append([_user("and another")])
    monkeypatch.undo()
    assert len(calls) > 20
    assert store.open(session.id).messages() == session.messages()
    assert len(session.messages()) == 2


def test_inconsistent_append_is_named(store: Store) -> None:
    session = store.create()
    session.record([], [_user("a")])
    with session.path.open("ab") as f:
        f.write(b'{"event":"append","time":"2025-01-01T00:00:00.000000Z","n":9,"start":7}\n')
    opened = store.open(session.id)
    assert opened.messages() == [_user("a")]
    assert any("line 3: append starts at message 7" in note for note in opened.damage)
    assert any("line 3: event says the history holds 9" in note for note in opened.damage)


def test_non_message_is_refused_before_writing(store: Store) -> None:
    session = store.create()
    size = session.path.stat().st_size
    with pytest.raises(TranscriptError, match="message 0 is a dict"):
        session.record([], [{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    assert session.path.stat().st_size == size


def test_append_reads_only_what_other_writers_added(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = store.create()
    history = [_user("a")]
    session.record([], history)

    def no_full_reads(*args: object, **kwargs: object) -> object:
        raise AssertionError("appending reread the whole transcript")

    monkeypatch.setattr(Store, "load", no_full_reads)
    for i in range(5):
        left = [*history, _assistant(f"b{i}")]
        assert session.record(history, left) == "append"
        history = left


# -- the store -------------------------------------------------------------------


def test_list_is_newest_first_with_turns_and_titles(store: Store) -> None:
    old = store.create(backend="b1", model="m1")
    old.record([], [_user("older"), _assistant("x")])
    new = store.create(backend="b2", model="m2")
    new.record([], [_user("newer")])
    empty = store.create()
    infos = store.list()
    assert [i.meta.id for i in infos] == [empty.id, new.id, old.id]
    assert [i.turns for i in infos] == [0, 1, 2]
    assert [i.meta.title for i in infos] == [None, "newer", "older"]
    assert infos[2].meta.backend == "b1"


def test_list_reports_unreadable_sessions_without_failing(store: Store) -> None:
    good = store.create()
    bad = store.create()
    bad.path.write_bytes(b"garbage\n")
    problems: list[TranscriptError] = []
    infos = store.list(on_error=problems.append)
    assert [i.meta.id for i in infos] == [good.id]
    assert len(problems) == 1 and str(bad.path) in str(problems[0])


def test_open_by_unique_prefix_and_refuse_ambiguous(store: Store) -> None:
    a = store.create()
    b = store.create()
    assert store.open(a.id[:-1]).id == a.id
    assert store.open(b.id).id == b.id
    common = a.id[:4]
    with pytest.raises(TranscriptError, match="ambiguous"):
        store.open(common)
    with pytest.raises(TranscriptError, match="no session"):
        store.open("nope")
    with pytest.raises(TranscriptError, match="not a session id"):
        store.open("../etc/passwd")


def test_remove_deletes_the_transcript(store: Store) -> None:
    session = store.create()
    session.record([], [_user("bye")])
    store.remove(session.id)
    assert store.list() == []
    with pytest.raises(TranscriptError):
        session.record(session.messages(), [*session.messages(), _user("more")])


def test_default_root_follows_carryall_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path))
    assert default_root() == tmp_path / "sessions"
    assert Store().root == tmp_path / "sessions"
    monkeypatch.delenv("CARRYALL_HOME")
    assert default_root().name == "sessions"
    assert "carryall" in str(default_root())


def test_missing_root_lists_nothing(tmp_path: Path) -> None:
    assert Store(tmp_path / "never-made").list() == []


# -- any history round-trips -----------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_text = st.text(max_size=60)
_image = st.builds(
    Image.from_bytes,
    st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
    st.binary(min_size=1, max_size=64),
    st.none() | st.text(min_size=1, max_size=20),
)
_user_block = st.one_of(st.builds(Text, _text), _image)
_assistant_block = st.one_of(
    st.builds(Text, _text),
    st.builds(Thinking, _text, st.none() | st.text(min_size=1, max_size=30)),
    st.builds(ToolUse, st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=10), _json),
)
_message = st.one_of(
    st.builds(Message, st.just("user"), st.lists(_user_block, min_size=1, max_size=3)),
    st.builds(Message, st.just("assistant"), st.lists(_assistant_block, min_size=1, max_size=3)),
    st.builds(
        Message,
        st.just("user"),
        st.lists(st.builds(ToolResult, _text, _text, st.booleans()), min_size=1, max_size=2),
    ),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.lists(_message, max_size=4),
    second=st.lists(_message, max_size=4),
    cut=st.integers(0, 4),
)
def test_any_history_round_trips_through_record_and_open(
    store: Store, first: list[Message], second: list[Message], cut: int
) -> None:
    session = store.create()
    session.record([], first)
    grown = [*first, *second]
    session.record(first, grown)
    trimmed = grown[cut:]
    kind = session.record(grown, trimmed)
    assert kind == ("append" if cut == 0 else "rewrite") or (trimmed == grown)
    assert store.open(session.id).messages() == trimmed
    # The file only ever holds whole JSON lines.
    for line in session.path.read_bytes().split(b"\n")[:-1]:
        msgspec.json.decode(line)


def test_module_docstring_example_is_the_api() -> None:
    # The agent loop relies on these names staying put.
    assert callable(Store.create) and callable(Store.open) and callable(Store.list)
    assert hasattr(jsonl_module.Session, "record") and hasattr(jsonl_module.Session, "messages")


# -- loading in one pass ------------------------------------------------------------


_PIECES = st.sampled_from([b"a", b"{}", b"\n", b"\0", b" ", b"\r"])


@given(st.lists(_PIECES, max_size=24).map(b"".join))
@settings(max_examples=400, deadline=None)
def test_streamed_lines_are_the_lines_split_lines_finds_in_the_whole_file(data: bytes) -> None:
    # The load reads the file line by line (no whole copy); torn tails and
    # a power loss's run of NULs must cut exactly what the whole-file reading cut.
    import io

    from carryall.sessions._transcript import LineReader, split_lines

    lines, end = split_lines(data)
    reader = LineReader(io.BytesIO(data))
    assert [line for _, line in reader] == lines
    assert (reader.end, reader.count) == (end, len(lines))


@given(st.lists(_PIECES, max_size=40).map(b"".join), st.integers(1, 9))
@settings(max_examples=400, deadline=None)
def test_lines_read_a_few_bytes_at_a_time_are_the_lines_of_the_whole_file(
    data: bytes, size: int
) -> None:
    # The load reads in blocks: a line split across reads, a block of only
    # NULs and newlines, a torn piece longer than a block must all come out
    # as the whole-file reading has them, numbered in order.
    import io

    from carryall.sessions._transcript import LineReader, split_lines

    lines, end = split_lines(data)
    reader = LineReader(io.BytesIO(data))
    numbered = [
        (no, line) for first, run in reader.batches(size) for no, line in enumerate(run, first)
    ]
    assert numbered == list(enumerate(lines, 1))
    assert (reader.end, reader.count) == (end, len(lines))


def test_open_never_reads_the_transcript_whole(tmp_path: Path, monkeypatch: Any) -> None:
    store = Store(tmp_path)
    session = store.create(backend="b", model="m")
    session.append([Message.user(f"turn {i}") for i in range(50)])
    reads: list[int] = []
    real_open = Path.open

    def watched(self: Path, *args: Any, **kwargs: Any) -> Any:
        f = real_open(self, *args, **kwargs)
        if self.suffix == ".jsonl" and "b" in (args[0] if args else kwargs.get("mode", "r")):
            real_read = f.read

            def read(size: int = -1) -> bytes:
                reads.append(size)
                return real_read(size)

            f.read = read
        return f

    monkeypatch.setattr(Path, "open", watched)
    assert len(store.open(session.id).messages()) == 50
    assert -1 not in reads  # no read of the whole file


def test_a_loaded_session_gives_the_collector_nothing_to_track_per_message(
    store: Store,
) -> None:
    # A tracked object per message made a long load set off full
    # collections over the growing session; loaded, a session of agent turns
    # (text, tool calls, results) leaves the collector no more objects to
    # scan than an empty one.
    import gc

    session = store.create(backend="b", model="m")
    turns = 2_000
    for i in range(0, turns, 4):
        session.append(
            [
                Message.user(f"turn {i}"),
                Message.assistant([Text("looking"), ToolUse(f"c{i}", "read", {"path": f"{i}"})]),
                Message.tool_results([ToolResult(f"c{i}", f"body {i}")]),
                Message.assistant([Text(f"done {i}")]),
            ]
        )
    gc.collect()
    before = len(gc.get_objects())
    loaded = store.open(session.id)
    gc.collect()
    grown = len(gc.get_objects()) - before
    messages = loaded.messages()
    assert len(messages) == turns
    assert not any(map(gc.is_tracked, messages))
    assert grown < 100, f"{grown} more tracked objects after loading {turns} messages"


# -- a run of lines read at once -----------------------------------------------------


def _line(kind: str, n: int, start: int, messages: list[Any], **extra: Any) -> bytes:
    from carryall.sessions._transcript import Event, encode_event

    stamp = f"2025-01-01T00:00:{n:02d}.000000Z"
    return encode_event(Event(kind, stamp, n=n, start=start, messages=messages, **extra))[:-1]


def _with_older_check(line: bytes) -> bytes:
    """A line as carryall wrote it before the CRC field: the SHA-256 check field instead."""
    body = line[: line.rindex(b',"crc"')] + b"}"
    check = hashlib.sha256(body).hexdigest()[:12].encode()
    return body[:-1] + b',"check":"' + check + b'"}'


def _replay_state(replay: Any) -> tuple[Any, ...]:
    return (
        replay.messages,
        replay.times,
        replay.title,
        replay.updated,
        replay.events,
        replay.damage,
        replay.unsettled,
        replay.downgrades,
        replay.usage,
        replay.system_changes,
    )


_SAY = [Message.user("hello"), Message.assistant([Text("hi")])]
_LINE_KINDS = (
    "append",
    "titled",
    "rewrite",
    "gap",
    "wrong n",
    "flipped",
    "unchecked",
    "older check",
    "older check flipped",
    "crc flipped",
    "empty",
    "two values",
    "image",
    "inline image",
    "document",
    "document by hash and url",
    "downgrade",
    "usage",
    "usage only",
    "system",
    "system cleared",
)
_KINDS_OF_LINE = st.sampled_from(_LINE_KINDS)


def _lines_of(kinds: list[str]) -> list[bytes]:
    """Event lines of each kind, in order, each numbered on from the history before it."""
    from carryall.blocks import Downgrade
    from carryall.sessions._transcript import StoredImage

    lines: list[bytes] = []
    held = 0
    for kind in kinds:
        one = [_SAY[held % 2]]
        if kind == "append":
            lines.append(_line("append", held + 1, held, one))
        elif kind == "titled":
            lines.append(_line("append", held + 1, held, one, title=f"title {held}"))
        elif kind == "rewrite":
            lines.append(_line("rewrite", 1, 0, one))
            held = 0
        elif kind == "gap":
            lines.append(_line("append", held + 2, held + 1, one))
            held += 1
        elif kind == "wrong n":
            lines.append(_line("append", held + 5, held, one))
        elif kind == "flipped":
            good = _line("append", held + 1, held, one)
            lines.append(good.replace(b"hello", b"jello").replace(b'"hi"', b'"ho"'))
            continue  # damage: the history does not grow
        elif kind == "unchecked":
            good = _line("append", held + 1, held, one)
            lines.append(good[: good.rindex(b',"crc"')] + b"}")
        elif kind == "older check":
            lines.append(_with_older_check(_line("append", held + 1, held, one)))
        elif kind == "older check flipped":
            good = _with_older_check(_line("append", held + 1, held, one))
            lines.append(good.replace(b"hello", b"jello").replace(b'"hi"', b'"ho"'))
            continue
        elif kind == "crc flipped":
            good = _line("append", held + 1, held, one)
            lines.append(good[:-3] + bytes([good[-3] ^ 1]) + good[-2:])  # a letter of the field
            continue
        elif kind == "empty":
            lines.append(b"")
            continue
        elif kind == "two values":
            good = _line("append", held + 1, held, one)
            lines.append(good + b"," + good)
            continue
        elif kind == "image":
            stored = StoredImage("image/png", "ab" * 32, "shot.png")
            from carryall.sessions._transcript import StoredMessage

            lines.append(_line("append", held + 1, held, [StoredMessage("user", (stored,))]))
        elif kind == "inline image":
            # As no carryall writes it (images go by hash): read by line, damage.
            image = Image("image/png", base64.b64encode(b"\x89PNG\r\n\x1a\n").decode())
            lines.append(_line("append", held + 1, held, [Message.user("look", [image])]))
        elif kind == "document by hash and url":
            from carryall.sessions._transcript import StoredDocument, StoredMessage

            kept = StoredDocument(
                "application/pdf", url="https://example.com/a.pdf", sha256="cd" * 32
            )
            lines.append(_line("append", held + 1, held, [StoredMessage("user", (kept,))]))
        elif kind == "document":
            document = Document("application/pdf", base64.b64encode(b"%PDF-1.4").decode())
            lines.append(_line("append", held + 1, held, [Message.user("see", [document])]))
        elif kind == "downgrade":
            drop = Downgrade(0, "image", "the model cannot see")
            lines.append(_line("append", held + 1, held, one, downgrades=[drop]))
        elif kind == "usage":
            lines.append(_line("append", held + 1, held, one, usage=[_recorded(held)]))
        elif kind == "usage only":
            lines.append(_line("append", held, held, [], usage=[_recorded(held)]))
        elif kind in ("system", "system cleared"):
            # A system prompt change alone: an append of no messages.
            said = "" if kind == "system cleared" else f"prompt {held}"
            lines.append(_line("append", held, held, [], system=said))
            continue
        held += 1
    return lines


def _recorded(n: int) -> Any:
    """A request's usage as a session records it, its figures told apart by `n`."""
    from datetime import UTC, datetime

    from carryall.usage import RequestUsage, Usage

    return RequestUsage(
        time=datetime(2025, 1, 1, 0, 0, n % 60, tzinfo=UTC),
        backend="openai",
        wire="openai",
        model="gpt-4.1",
        usage=Usage(input_tokens=n, output_tokens=1),
        raw={"prompt_tokens": n, "completion_tokens": 1},
        duration=0.5,
    )


@given(st.lists(_KINDS_OF_LINE, max_size=12))
@settings(max_examples=300, deadline=None)
def test_a_run_read_at_once_replays_as_its_lines_read_one_by_one(kinds: list[str]) -> None:
    # The fast reading of a clean run must end where reading every line in
    # turn ends: same history, times, title, damage and downgrades, whatever
    # mix of clean and unclean lines the run holds.
    from carryall.sessions._transcript import Replay, image_stand_in

    lines = _lines_of(kinds)
    at_once, one_by_one = Replay("t", image_stand_in), Replay("t", image_stand_in)
    at_once.apply_batch(2, lines)
    one_by_one.apply_lines(enumerate(lines, 2))
    assert _replay_state(at_once) == _replay_state(one_by_one)


@pytest.mark.parametrize("kind", _LINE_KINDS)
def test_each_line_decodes_as_the_blob_search_alone_decoded_it(kind: str) -> None:
    # decode_event tries the plain decoding before searching the line; what
    # it returns, or whether it refuses, is what choosing by `has_blob` first gave.
    from carryall.sessions import _transcript as t

    def by_search(line: bytes) -> Any:
        t.verify_line(line, "t", 2)
        decoder = t._event_decoder if t.has_blob(line) else t._plain_decoder
        return decoder.decode(line)

    for line in _lines_of(["append", kind]):
        try:
            expected: Any = by_search(line)
        except (TranscriptError, msgspec.DecodeError, msgspec.ValidationError):
            with pytest.raises(TranscriptError):
                t.decode_event(line, "t", 2)
        else:
            # Restored, as every reader takes them: a `StoredMessage` without
            # blocks by hash restores to the `Message` the plain decoding gives.
            def restored(event: Any) -> Any:
                messages = [t.restore(m, t.image_stand_in) for m in event.messages]
                return msgspec.structs.replace(event, messages=messages)

            assert restored(t.decode_event(line, "t", 2)) == restored(expected), kind


def test_a_clean_run_takes_the_reading_at_once() -> None:
    # A guard on the test above: a run of plain appends does go the fast way.
    from carryall.sessions import _transcript

    lines = [_line("append", i + 1, i, [_SAY[i % 2]]) for i in range(20)]
    events = _transcript._clean_run(lines)
    assert events is not None and len(events) == 20
    assert _transcript._clean_run([*lines[:4], lines[4].replace(b"hello", b"jello")]) is None
    # A system prompt change is read by line, where it is noted.
    changed = _line("append", 20, 20, [], system="be brief")
    assert _transcript._clean_run([*lines, changed]) is None


def test_a_run_of_appends_carrying_usage_takes_the_reading_at_once() -> None:
    # An agent's appends each carry the usage of the requests before them:
    # the fast reading is the common case, so it must take them.
    from carryall.sessions import _transcript

    lines = [_line("append", i + 1, i, [_SAY[i % 2]], usage=[_recorded(i)]) for i in range(20)]
    lines.append(_line("append", 20, 20, [], usage=[_recorded(20)]))
    events = _transcript._clean_run(lines)
    assert events is not None and len(events) == 21
    replay = _transcript.Replay("t", _transcript.image_stand_in)
    replay.apply_batch(2, lines)
    assert replay.usage == [_recorded(i) for i in range(21)]
    assert len(replay.messages) == 20


def test_an_event_without_usage_is_written_as_it_was() -> None:
    # Old transcripts and plain events stay byte-identical: no usage field
    # unless there is usage, and a line without one still decodes.
    from carryall.sessions import _transcript

    line = _line("append", 1, 0, [_SAY[0]])
    assert b"usage" not in line
    event = _transcript.decode_event(line, "t", 2)
    assert event.usage == []


def test_a_run_of_lines_with_the_older_check_still_takes_the_reading_at_once() -> None:
    from carryall.sessions import _transcript

    lines = [_with_older_check(_line("append", i + 1, i, [_SAY[i % 2]])) for i in range(20)]
    events = _transcript._clean_run(lines)
    assert events is not None and len(events) == 20
    flipped = lines[7].replace(b"hello", b"jello").replace(b'"hi"', b'"ho"')
    assert _transcript._clean_run([*lines[:7], flipped, *lines[8:]]) is None
    with pytest.raises(TranscriptError, match="line 9: fails its integrity check"):
        _transcript.verify_line(flipped, "t", 9)


@given(st.lists(st.binary(max_size=200), min_size=1, max_size=8), st.data())
@settings(max_examples=200, deadline=None)
def test_every_crc_is_reachable_and_any_flipped_bit_is_found(
    bodies: list[bytes], data: st.DataObject
) -> None:
    # The letters can bring any line's CRC to the value checked, and the
    # lines of a run, joined by commas as a load joins them, check together:
    # one flipped bit anywhere (field included) and the line, and the run, fail.
    from carryall.sessions import _transcript

    lines = [_transcript._with_crc(b"{" + body + b"}")[:-1] for body in bodies]
    assert all(map(_transcript._crc_holds, lines))
    assert _transcript._crc_holds(b",".join(lines))
    which = data.draw(st.integers(0, len(lines) - 1))
    bit = data.draw(st.integers(0, 8 * len(lines[which]) - 1))
    damaged = bytearray(lines[which])
    damaged[bit // 8] ^= 1 << (bit % 8)
    assert not _transcript._crc_holds(bytes(damaged))
    lines[which] = bytes(damaged)
    assert not _transcript._crc_holds(b",".join(lines))


def test_the_run_decoding_reads_every_field_an_event_has() -> None:
    from carryall.sessions._transcript import Event, _PlainEvent

    def shape(cls: Any) -> list[tuple[str, Any]]:
        return [(f.name, f.default) for f in msgspec.structs.fields(cls)]

    assert [name for name, _ in shape(_PlainEvent)] == [name for name, _ in shape(Event)]


def test_a_usage_record_without_a_time_zone_is_damage_named_by_its_line(tmp_path: Path) -> None:
    # Every reader compares request times with one another and with a
    # window: a time no zone anchors is refused where it is read.
    store = Store(tmp_path / "sessions")
    session = store.create()
    history = [Message.user("ask"), Message.assistant([Text("answer")])]
    session.record([], history, usage=[_recorded(1)])
    session.record(history, [*history, Message.user("more")], usage=[_recorded(2)])
    lines = session.path.read_bytes().splitlines(keepends=True)
    from carryall.sessions import _transcript

    event = _transcript.decode_event(lines[2].rstrip(b"\n"), "t", 3)
    raw = msgspec.json.decode(_transcript.encode_event(event)[:-1])
    raw.pop("crc")
    raw["usage"][0]["time"] = raw["usage"][0]["time"].rstrip("Z")
    forged = _transcript._with_crc(msgspec.json.encode(raw))
    session.path.write_bytes(b"".join([*lines[:2], forged]))
    reopened = store.open(session.id)
    assert reopened.usage() == [_recorded(1)]
    assert any("line 3" in note and "timezone" in note for note in reopened.damage)


def test_a_transcript_with_a_system_prompt_change_loads_in_a_reader_of_any_age(
    tmp_path: Path,
) -> None:
    # The change is an append of no messages: the fields an older reader
    # knows replay it as nothing, and this reader notes it where it stands.
    from carryall.sessions import _transcript as t

    store = Store(tmp_path / "s")
    session = store.create(system="first")
    session.record([], list(_SAY))
    session.change_system("second")
    session.change_system("second")  # the same prompt again: nothing written
    session.record(list(_SAY), [*_SAY, Message.user("more")])
    lines = session.path.read_bytes().splitlines()[1:]
    assert len(lines) == 3
    older = msgspec.json.Decoder(_OlderEvent)
    assert [len(older.decode(line).messages) for line in lines] == [2, 0, 1]
    loaded = store.open(session.id)
    assert [m.text() for m in loaded.messages()] == ["hello", "hi", "more"]
    assert (loaded.meta.system, loaded.system) == ("first", "second")
    assert [(c.at, c.system) for c in loaded.system_changes()] == [(2, "second")]
    assert t.decode_head(lines[1], "t", 3).event == "append"


class _OlderEvent(msgspec.Struct):
    """An event line as a carryall without system prompt changes decoded it."""

    event: str
    time: str
    n: int
    start: int = 0
    messages: list[Any] = []


def test_a_held_writer_lock_is_waited_for_then_refused_by_name_by_append_and_remove(
    tmp_path: Path,
) -> None:
    import fcntl

    store = Store(tmp_path / "sessions", lock_timeout=0.2)
    session = store.create()
    session.append([Message.user("first")])
    # Another writer (another open file description: another process, as flock sees it).
    holder = os.open(tmp_path / "sessions" / "locks" / f"{session.id}.lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        for act in (
            lambda: session.append([Message.user("second")]),
            lambda: store.remove(session.id),
        ):
            with pytest.raises(TranscriptError, match=r"another writer has held .* for over 0\.2s"):
                act()
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    session.append([Message.user("second")])  # free again: at once
    assert [m.text() for m in store.open(session.id).messages()] == ["first", "second"]
    store.remove(session.id)
    assert store.list() == []
