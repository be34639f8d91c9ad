"""The store conformance suite: every promise of `carryall.sessions.protocol`, on every store.

Each test takes `store_location` (tests/conftest.py), once a JSON Lines
folder and once a database on a real PostgreSQL server, and opens it with
`open_store` as the CLI does. What only one store has (the transcript file
format, torn lines, PostgreSQL's server faults) is tested beside that store:
`test_jsonl.py`, `test_faults.py`, `test_postgres.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Document, Downgrade, Image, Message, Text, Thinking
from carryall.errors import SessionConflict, TranscriptError
from carryall.sessions import AnyStore, Store, open_store
from carryall.sessions.redact import BUILTIN_PATTERNS, REDACTED
from carryall.usage import RequestUsage, Usage
from tests.support.sessions import ANTHROPIC_KEY, PNG, SECRET, rich_history, secret_history
from tests.support.stores import finish, spawn_writer

OpenAny = Callable[[], AnyStore]


def _user(text: str) -> Message:
    return Message.user(text)


def _assistant(text: str) -> Message:
    return Message.assistant([Text(text)])


# A fresh home: the config file's redaction patterns are the built-in ones only.
pytestmark = pytest.mark.usefixtures("home")


@pytest.fixture
def store(open_any: OpenAny) -> AnyStore:
    return open_any()


def _raw(store: AnyStore) -> bytes:
    """Every byte the store keeps: files under its folder, or every row of its tables."""
    if isinstance(store, Store):
        store.recall.flush()
        return b"".join(p.read_bytes() for p in sorted(store.root.rglob("*")) if p.is_file())
    import psycopg

    from carryall.sessions.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    out = []
    with psycopg.connect(store.url) as conn:
        for table in ("sessions", "events", "blobs", "blob_refs", "messages"):
            for (row,) in conn.execute(f"SELECT t::text FROM carryall_{table} t"):  # type: ignore[arg-type]
                out.append(row.encode())
    return b"\n".join(out)


def _drop_blob(store: AnyStore, sha: str) -> None:
    """Delete a blob behind the store's back, as a lost file or a manual DELETE would."""
    if isinstance(store, Store):
        store.blob_path(sha).unlink()
        return
    import psycopg

    from carryall.sessions.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute("DELETE FROM carryall_blobs WHERE sha256 = %s", (sha,))


# -- append or rewrite -------------------------------------------------------------


def test_create_refuses_a_field_it_does_not_know(store: AnyStore) -> None:
    with pytest.raises(TypeError, match="'nickname'"):
        store.create(nickname="x")  # type: ignore[call-arg]
    assert store.list() == []


def test_unchanged_prefix_appends_only_the_tail(store: AnyStore, open_any: OpenAny) -> None:
    session = store.create(title="t")
    first = [_user("one"), _assistant("two")]
    assert session.record([], first) == "append"
    assert session.record(first, [*first, _user("three")]) == "append"
    again = open_any().open(session.id)
    assert [m.text() for m in again.messages()] == ["one", "two", "three"]
    assert len(again.versions()) == 1


def test_edit_truncation_and_reorder_are_rewrites_and_keep_every_version(
    store: AnyStore, open_any: OpenAny
) -> None:
    session = store.create()
    h1 = [_user("a"), _assistant("b"), _user("c")]
    session.record([], h1)
    h2 = [_user("A"), _assistant("b"), _user("c")]
    assert session.record(h1, h2) == "rewrite"
    h3 = h2[:1]
    assert session.record(h2, h3) == "rewrite"
    h4 = [_assistant("b"), _user("A")]
    assert session.record(h3, h4) == "rewrite"
    versions = open_any().open(session.id).versions()
    assert versions == [h1, h2, h3, h4]


def test_nothing_new_writes_nothing(store: AnyStore, open_any: OpenAny) -> None:
    session = store.create()
    history = [_user("a")]
    session.record([], history)
    before = store.export_events(session.id)[1]
    assert session.record(history, list(history)) == "append"
    assert open_any().export_events(session.id)[1] == before


def test_an_answer_the_other_writer_overtook_is_a_conflict_naming_both_versions(
    store: AnyStore, open_any: OpenAny
) -> None:
    mine = store.create()
    base = [_user("a")]
    mine.record([], base)
    theirs = open_any().open(mine.id)
    theirs.record(base, [*base, _assistant("theirs")])
    # Started from `base`, but the store holds more now: never a silent
    # merge, never a silent overwrite.
    with pytest.raises(SessionConflict) as caught:
        mine.record(base, [*base, _assistant("mine")])
    assert (caught.value.started, caught.value.current) == ((1, 1), (1, 2))
    assert caught.value.unrecorded == [_assistant("mine")]
    versions = open_any().open(mine.id).versions()
    assert [[m.text() for m in v] for v in versions] == [["a", "theirs"]]


def test_a_new_turn_goes_after_another_writers_finished_turn(
    store: AnyStore, open_any: OpenAny
) -> None:
    mine = store.create()
    base = [_user("a"), _assistant("b")]
    mine.record([], base)
    theirs = open_any().open(mine.id)
    theirs.record(base, [*base, _user("theirs"), _assistant("their answer")])
    mine_now = [*base, _user("mine"), _assistant("my answer")]
    assert mine.record(base, mine_now) == "merge"
    # The writer carries on from its own history: its next step appends on.
    step = [*mine_now, _user("more"), _assistant("done")]
    assert mine.record(mine_now, step) == "append"
    texts = [m.text() for m in open_any().open(mine.id).messages()]
    assert texts == ["a", "b", "theirs", "their answer", "mine", "my answer", "more", "done"]
    assert len(open_any().open(mine.id).versions()) == 1


def test_a_rewrite_of_a_history_no_longer_current_is_refused(
    store: AnyStore, open_any: OpenAny
) -> None:
    mine = store.create()
    base = [_user("a"), _assistant("b")]
    mine.record([], base)
    theirs = open_any().open(mine.id)
    theirs.record(base, [*base, _user("theirs"), _assistant("kept")])
    with pytest.raises(SessionConflict, match="rewrite must replace"):
        mine.record(base, [_user("compacted")])
    assert [m.text() for m in open_any().open(mine.id).messages()][-1] == "kept"
    # Stated against the current history, the same rewrite is made.
    mine.refresh()
    assert mine.record(mine.messages(), [_user("compacted")]) == "rewrite"
    assert len(open_any().open(mine.id).versions()) == 2


def test_a_writer_that_appends_goes_on_top_of_another_writer(
    store: AnyStore, open_any: OpenAny
) -> None:
    mine = store.create()
    mine.record([], [_user("a")])
    theirs = open_any().open(mine.id)
    theirs.append([_assistant("b")])
    mine.append([_user("c")])
    assert [m.text() for m in mine.messages()] == ["a", "b", "c"]
    mine.refresh()
    theirs.refresh()
    assert theirs.messages() == mine.messages()


def test_downgrades_are_listed_by_the_writer_and_by_a_reader(
    store: AnyStore, open_any: OpenAny
) -> None:
    session = store.create()
    first = [_user("see"), _assistant("seen")]
    lost = Downgrade(0, "image", "this model takes no images")
    session.record([], first, [lost])
    session.record(first, [*first, _user("more")])
    assert session.downgrades() == [lost]
    assert open_any().open(session.id).downgrades() == [lost]


def _request(n: int, backend: str = "anthropic") -> RequestUsage:
    """A recorded request whose figures differ with `n`, its raw usage as a wire would send it."""
    raw = {"input_tokens": n, "output_tokens": 2 * n, "cache_read_input_tokens": 10 * n}
    return RequestUsage(
        time=datetime(2026, 3, 1, 12, n, tzinfo=UTC),
        backend=backend,
        wire=backend,
        model="claude-sonnet-4-5",
        answered="claude-sonnet-4-5-20250929",
        usage=Usage(input_tokens=n, output_tokens=2 * n, cache_read_input_tokens=10 * n),
        raw=raw,
        duration=0.25 * n,
    )


def test_usage_is_listed_by_the_writer_and_by_a_reader_in_the_order_recorded(
    store: AnyStore, open_any: OpenAny
) -> None:
    session = store.create()
    first = [_user("ask"), _assistant("answer")]
    second = [*first, _user("again"), _assistant("again answered")]
    session.record([], first, usage=[_request(1)])
    session.record(first, second, usage=[_request(2), _request(3)])
    # A rewrite carries its requests' usage too (a compaction after a request).
    session.record(second, second[2:], usage=[_request(4)])
    expected = [_request(1), _request(2), _request(3), _request(4)]
    assert session.usage() == expected
    reopened = open_any().open(session.id)
    assert reopened.usage() == expected
    assert reopened.messages() == second[2:]


def test_usage_with_no_new_message_is_kept_on_an_empty_append(
    store: AnyStore, open_any: OpenAny
) -> None:
    # A paid request whose answer was not kept still counts in the bill.
    session = store.create()
    history = [_user("ask"), _assistant("answer")]
    session.record([], history)
    assert session.record(history, history, usage=[_request(5)]) == "append"
    assert session.record(history, history) == "append"  # and nothing at all writes nothing
    reopened = open_any().open(session.id)
    assert reopened.usage() == [_request(5)]
    assert reopened.messages() == history
    assert reopened.damage == []


def test_usage_stats_read_every_store_alike(store: AnyStore) -> None:
    from carryall.sessions.stats import usage_stats

    first = store.create(backend="anthropic", model="claude-sonnet-4-5")
    first.record([], [_user("a"), _assistant("b")], usage=[_request(1), _request(2)])
    second = store.create(backend="local", model="SmolLM2")
    second.record([], [_user("c"), _assistant("d")], usage=[_request(3, "local")])
    stats = usage_stats(store)
    assert {s.id: s.totals.requests for s in stats.sessions} == {first.id: 2, second.id: 1}
    assert stats.total.input_tokens == 6 and stats.total.cache_read_input_tokens == 60
    assert set(stats.backends) == {"anthropic", "local"}
    window = usage_stats(store, since=_request(2).time, until=_request(3).time)
    assert window.total.requests == 2


def test_a_session_without_usage_lists_none(store: AnyStore, open_any: OpenAny) -> None:
    session = store.create()
    session.record([], [_user("ask"), _assistant("answer")])
    assert session.usage() == []
    assert open_any().open(session.id).usage() == []


def test_a_system_prompt_change_is_recorded_and_read_back_by_every_reader(
    store: AnyStore, open_any: OpenAny
) -> None:
    session = store.create(system="Be brief.")
    first = [_user("a"), _assistant("b")]
    session.record([], first)
    theirs = open_any().open(session.id)
    session.change_system(f"Answer in French; deploy with {ANTHROPIC_KEY}.")
    session.change_system(f"Answer in French; deploy with {ANTHROPIC_KEY}.")  # no write
    second = [*first, _user("c")]
    assert session.record(first, second) == "append"  # still an append after the change
    session.change_system(None)
    wanted = [(2, f"Answer in French; deploy with {REDACTED}."), (3, None)]
    for reader in (session, open_any().open(session.id), theirs):
        reader.refresh()
        assert [(c.at, c.system) for c in reader.system_changes()] == wanted
        assert reader.meta.system == "Be brief." and reader.system is None
        assert [m.text() for m in reader.messages()] == ["a", "b", "c"]
    assert ANTHROPIC_KEY.encode() not in _raw(store)
    [info] = store.list()
    assert info.turns == 3
    meta, lines = store.export_events(session.id)
    moved = Store(Path(os.environ["CARRYALL_HOME"]) / "moved")
    moved.import_events(meta, lines)
    assert [(c.at, c.system) for c in moved.open(session.id).system_changes()] == wanted


def test_rewrite_keeps_times_of_unchanged_messages(store: AnyStore) -> None:
    session = store.create()
    h1 = [_user("a"), _assistant("b")]
    session.record([], h1)
    t1 = session.times()
    time.sleep(0.01)
    session.record(h1, [h1[0], _assistant("B")])
    t2 = store.open(session.id).times()
    assert t2[0] == t1[0] and t2[1] > t1[1]


def test_every_block_type_round_trips(store: AnyStore, open_any: OpenAny) -> None:
    history = rich_history()
    session = store.create()
    session.record([], history)
    assert open_any().open(session.id).messages() == history


def test_non_message_is_refused_before_writing(store: AnyStore) -> None:
    session = store.create()
    with pytest.raises(TranscriptError, match="message 1 is a str, not a Message"):
        session.record([], [_user("a"), "oops"])  # type: ignore[list-item]
    assert store.open(session.id).messages() == []


# -- meta, list, open --------------------------------------------------------------


def test_title_is_the_first_thing_a_person_said_unless_given(store: AnyStore) -> None:
    untitled = store.create(backend="b", model="m", system="be brief")
    untitled.record([], [_user("what is a monad"), _assistant("a monoid...")])
    titled = store.create(title="given")
    titled.record([], [_user("something else")])
    meta = store.open(untitled.id).meta
    assert (meta.title, meta.backend, meta.model, meta.system) == (
        "what is a monad",
        "b",
        "m",
        "be brief",
    )
    assert store.open(titled.id).meta.title == "given"


def test_list_is_newest_first_with_turns_and_titles(store: AnyStore) -> None:
    assert store.list() == []
    older = store.create()
    older.record([], [_user("first session")])
    time.sleep(0.01)
    newer = store.create()
    newer.record([], [_user("second"), _assistant("reply")])
    infos = store.list()
    assert [i.meta.id for i in infos] == [newer.id, older.id]
    assert [i.turns for i in infos] == [2, 1]
    assert [i.meta.title for i in infos] == ["second", "first session"]
    assert infos[0].updated >= infos[0].meta.created


def test_open_by_unique_prefix_and_refuse_ambiguous_or_unknown(store: AnyStore) -> None:
    a = store.create()
    b = store.create()
    assert store.open(a.id[:-1] if a.id[:-1] != b.id[:-1] else a.id).id == a.id
    with pytest.raises(TranscriptError, match="ambiguous"):
        store.open(a.id[:8])
    with pytest.raises(TranscriptError, match="no session 'zzz'"):
        store.open("zzz")
    with pytest.raises(TranscriptError, match="is not a session id"):
        store.open("../etc")


# -- blobs and removal -------------------------------------------------------------


def test_image_bytes_are_kept_once_by_hash_and_shared(store: AnyStore) -> None:
    image = Image.from_bytes("image/png", PNG, "shot.png")
    one = store.create()
    one.record([], [Message.user("a", [image])])
    two = store.create()
    two.record([], [Message.user("b", [image])])
    refs = store.referenced_blobs()
    assert len(refs) == 1
    (sha,) = refs
    assert store.get_blob(sha) == PNG
    assert store.put_blob(PNG) == sha
    assert all(b'"sha256"' in line for line in store.export_events(one.id)[1])
    assert all(PNG not in line for line in store.export_events(one.id)[1])


def test_remove_deletes_the_session_and_only_its_own_blobs(store: AnyStore) -> None:
    shared = Image.from_bytes("image/png", PNG, "shared.png")
    own = Image.from_bytes("image/png", PNG + b"own", "own.png")
    keep = store.create()
    keep.record([], [Message.user("keep", [shared])])
    gone = store.create()
    gone.record([], [Message.user("gone", [shared, own])])
    removed = store.remove(gone.id)
    assert removed == [hashlib.sha256(PNG + b"own").hexdigest()]
    assert [i.meta.id for i in store.list()] == [keep.id]
    with pytest.raises(TranscriptError, match="no session"):
        store.open(gone.id)
    assert store.open(keep.id).messages()[0].content[1] == shared
    with pytest.raises(TranscriptError, match=r"gone|removed"):
        gone.append([_user("too late")])


def test_collect_blobs_removes_orphans_and_keeps_referenced(store: AnyStore) -> None:
    session = store.create()
    session.record([], [Message.user("a", [Image.from_bytes("image/png", PNG, "a.png")])])
    orphan = store.put_blob(b"nobody refers to this")
    time.sleep(0.01)
    assert store.collect_blobs() == [orphan]
    assert store.referenced_blobs() <= {store.put_blob(PNG)}
    assert store.get_blob(store.put_blob(PNG)) == PNG
    with pytest.raises(TranscriptError, match="missing"):
        store.get_blob(orphan)


def test_missing_blob_reads_as_its_placeholder_with_a_note(store: AnyStore) -> None:
    session = store.create()
    session.record([], [Message.user("look", [Image.from_bytes("image/png", PNG, "gone.png")])])
    (sha,) = store.referenced_blobs()
    _drop_blob(store, sha)
    content = store.open(session.id).messages()[0].content
    assert isinstance(content[1], Text)
    assert "gone.png" in content[1].text and "missing from the session store" in content[1].text


PDF = b"%PDF-1.4\n%a paper kept once\n"


def test_document_bytes_are_kept_by_hash_like_images(store: AnyStore) -> None:
    paper = Document.from_bytes("application/pdf", PDF, source="paper.pdf", title="Paper")
    remote = Document("application/pdf", url="https://example.com/remote.pdf")
    one = store.create()
    history = [Message.user("read", [paper, remote])]
    one.record([], history)
    store.create().record([], [Message.user("again", [paper])])
    (sha,) = store.referenced_blobs()
    assert sha == hashlib.sha256(PDF).hexdigest() and store.get_blob(sha) == PDF
    lines = store.export_events(one.id)[1]
    assert all(paper.data not in line.decode() for line in lines)
    assert store.open(one.id).messages() == history
    _drop_blob(store, sha)
    content = store.open(one.id).messages()[0].content
    assert content[1] == Text(
        "[document: Paper (application/pdf)] (its bytes are missing from the session store)"
    )
    assert content[2] == remote


# -- recall ------------------------------------------------------------------------


def test_recall_keeps_the_same_bounds_on_every_store(store: AnyStore) -> None:
    store.create().record([], [_user("a few words to find")])
    with pytest.raises(TranscriptError, match="at most 64"):
        store.recall.search(" ".join(f"w{i}" for i in range(65)))
    with pytest.raises(TranscriptError, match="--limit"):
        store.recall.search("words", limit=2**63)
    with pytest.raises(TranscriptError, match="not valid UTF-8"):
        store.recall.search("words \udcff")
    # A repeated word is one condition, not 20,000.
    assert len(store.recall.search(" ".join(["words"] * 20_000))) == 1


def test_recall_finds_ranked_snippets_with_filters(store: AnyStore) -> None:
    one = store.create()
    one.record([], [_user("the flaky test fails on bananas"), _assistant("try pinning the seed")])
    two = store.create()
    two.record([], [_user('bananas again, C++ and a "quote" AND * too')])
    hits = store.recall.search("banana")  # stemmed: bananas
    assert {(h.session, h.message) for h in hits} == {(one.id, 0), (two.id, 0)}
    for hit in hits:
        assert hit.role == "user"
        (start, end), *_ = hit.matches
        assert hit.snippet[start:end].lower().startswith("banana")
    assert [h.session for h in store.recall.search("banana", session=two.id)] == [two.id]
    assert store.recall.search("banana", role="assistant") == []
    assert [h.message for h in store.recall.search("seed")] == [1]
    future = hits[0].time + timedelta(days=1)
    assert store.recall.search("banana", since=future) == []
    # Words are taken literally: nothing a person types is query syntax.
    for query in ('C++ "quote', "AND", "*", "a-b OR", "NEAR(x", "\x00 bananas"):
        store.recall.search(query)
    assert store.recall.search("   ") == []


def test_recall_follows_rewrites_and_removal(store: AnyStore) -> None:
    session = store.create()
    first = [_user("apricot jam")]
    session.record([], first)
    session.record(first, [_user("quince jam")])
    assert store.recall.search("apricot") == []
    assert [h.session for h in store.recall.search("quince")] == [session.id]
    store.remove(session.id)
    assert store.recall.search("quince") == []
    assert store.recall.reindex() == 0


def _damage_event(store: AnyStore, session_id: str, old: bytes, new: bytes) -> None:
    """Change an event line behind the store's back, as a flipped bit on the disk would."""
    if isinstance(store, Store):
        path = store.path(session_id)
        path.write_bytes(path.read_bytes().replace(old, new))
        return
    import psycopg

    from carryall.sessions.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE carryall_events SET body = overlay(body PLACING %s FROM position(%s IN body))"
            " WHERE session_id = %s AND position(%s IN body) > 0",
            (new, old, session_id, old),
        )


def test_reindex_keeps_every_undamaged_message_of_a_damaged_session(store: AnyStore) -> None:
    session = store.create()
    history = [_user("marmot"), _assistant("badger"), _user("stork")]
    session.record([], history[:1])
    session.record(history[:1], history[:2])
    session.record(history[:2], history)
    other = store.create()
    other.record([], [_user("stork elsewhere")])
    _damage_event(store, session.id, b"badger", b"badgEr")  # fails its integrity check
    assert store.recall.reindex() == 3  # marmot, stork and the other session's one
    for word in ("marmot", "stork"):
        assert session.id in {h.session for h in store.recall.search(word)}, word
    assert store.recall.search("badger") == [] and store.recall.search("badgEr") == []
    assert store.open(session.id).damage  # named by the readers, as indexed


def test_recall_json_has_the_same_shape_on_every_store(store_location: str) -> None:
    store = open_store(store_location)
    store.create().record([], [_user("pomegranate seeds")])
    app = typer.Typer()
    commands.register(app)
    result = CliRunner().invoke(app, ["recall", "pomegranate", "--json", "--store", store_location])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert set(row) == {"session", "message", "role", "time", "snippet", "matches"}
    assert row["snippet"] == "pomegranate seeds" and row["matches"] == [[0, 11]]


# -- redaction ---------------------------------------------------------------------


def test_keys_are_cut_out_of_what_is_written_and_indexed(store: AnyStore) -> None:
    session = store.create(system=f"deploy with {ANTHROPIC_KEY}")
    history = secret_history(ANTHROPIC_KEY)
    assert session.record([], history) == "append"
    signature = f"sig-{ANTHROPIC_KEY}-sig"
    assert ANTHROPIC_KEY.encode() not in _raw(store).replace(signature.encode(), b"")
    user, assistant, results = store.open(session.id).messages()
    assert user.text() == f"my key is {REDACTED}, use it"
    assert assistant.tool_uses()[0].input["token"] == REDACTED
    assert results.content[0].content == f"logged in with {REDACTED}"  # type: ignore[union-attr]
    # The signature is opaque: a key-shaped substring in it is untouched.
    assert assistant.content[0] == Thinking("signed thoughts", signature)
    assert store.open(session.id).meta.system == f"deploy with {REDACTED}"
    assert store.recall.search("Q7fVb2LxkP9zR4tYw8eN1mJc6aH3sD5gU0iO") == []
    assert store.recall.search("logged") != []
    # The run keeps what it holds, so its next recording is still an append.
    assert session.record(history, [*history, _user("next")]) == "append"


def test_redact_removes_a_string_from_every_version_and_the_index(store: AnyStore) -> None:
    session = store.create(title=f"about {SECRET}")
    first = secret_history(SECRET)
    session.record([], first)
    session.record(first, [first[0], _assistant(f"again {SECRET}")])
    assert store.recall.search(SECRET) != []
    assert store.redact(session.id, SECRET) >= 3  # the meta and two events
    signature = f"sig-{SECRET}-sig"
    assert SECRET.encode() not in _raw(store).replace(signature.encode(), b"")
    assert store.recall.search(SECRET) == []
    versions = store.open(session.id).versions()
    assert len(versions) == 2
    for version in versions:
        assert SECRET not in repr(version).replace(signature, "")
    assert versions[0][1].content[0] == Thinking("signed thoughts", signature)
    assert store.open(session.id).meta.title == f"about {REDACTED}"
    # A session open elsewhere carries on.
    session.append([_assistant("done")])
    assert store.open(session.id).messages()[-1].text() == "done"


def test_redact_leaves_a_signature_that_holds_a_key_shape_untouched(store: AnyStore) -> None:
    session = store.create()
    signed = Thinking("plain reasoning", f"sig{ANTHROPIC_KEY}")
    session.record([], [_user("hi"), Message.assistant([signed, Text("hello")])])
    store.redact(session.id, BUILTIN_PATTERNS["anthropic"])
    assert store.open(session.id).messages()[1].content[0] == signed


# -- moving between stores ---------------------------------------------------------


def test_export_then_import_gives_the_same_session(store: AnyStore, tmp_path: Path) -> None:
    session = store.create(title="moving")
    h1 = rich_history()
    session.record([], h1)
    session.record(h1, h1[:2])
    meta, lines = store.export_events(session.id)
    other = Store(tmp_path / "elsewhere")
    for sha in store.referenced_blobs():
        other.put_blob(store.get_blob(sha))
    other.import_events(meta, lines)
    assert other.export_events(session.id) == (meta, lines)
    assert other.open(session.id).versions() == store.open(session.id).versions()
    with pytest.raises(TranscriptError, match="already in"):
        other.import_events(meta, lines)
    with pytest.raises(TranscriptError, match="already in"):
        store.import_events(meta, lines)


# -- faults ------------------------------------------------------------------------


def _texts(store: AnyStore, session_id: str) -> list[str]:
    return [m.text() for m in store.open(session_id).messages()]


def test_sigkill_at_random_points_keeps_every_acknowledged_event(
    store: AnyStore, store_location: str
) -> None:
    rng = random.Random(int(os.environ.get("CARRYALL_FAULT_SEED", "0")) or None)
    for round_number in range(3):
        session = store.create()
        tag = f"round{round_number}"
        kill_after = rng.randrange(1, 950)  # leave the writer work, so the kill lands mid-run
        where = f"round {round_number}, killed after ack {kill_after}"
        child = spawn_writer(store_location, session.id, tag, 1000)
        assert child.stdout is not None
        acked = -1
        deadline = time.monotonic() + 120
        while acked < kill_after - 1 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            acked = int(line)
        time.sleep(rng.uniform(0, 0.005))  # land the kill anywhere inside the next append
        child.send_signal(signal.SIGKILL)
        rest, err = finish(child, timeout=30)
        acked = max([acked, *(int(x) for x in rest.split())])
        assert child.returncode == -signal.SIGKILL, f"{where}: {err}"
        texts = _texts(store, session.id)
        # Every acknowledged event loads; at most the one in flight is extra.
        assert len(texts) >= acked + 1, where
        assert texts == [f"{tag} {i} " for i in range(len(texts))], where
        reopened = store.open(session.id)
        reopened.append([_user("after the kill")])
        assert _texts(store, session.id)[-1] == "after the kill"
        assert len(store.recall.search(tag, session=session.id, limit=2000)) == len(texts)


def test_two_writers_never_interleave(store: AnyStore, store_location: str) -> None:
    session = store.create()
    children = [spawn_writer(store_location, session.id, tag, 1000) for tag in ("alpha", "beta")]
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert out.split() == [str(i) for i in range(1000)]
    _, lines = store.export_events(session.id)
    assert [json.loads(line)["n"] for line in lines] == list(range(1, 2001))
    texts = _texts(store, session.id)
    for tag in ("alpha", "beta"):
        assert [t for t in texts if t.startswith(tag + " ")] == [f"{tag} {i} " for i in range(1000)]


@contextlib.contextmanager
def _refusing_writes(store: AnyStore) -> Iterator[tuple[dict[str, object], str]]:
    """Make the store refuse every write after the first 20 events: a file size limit, a trigger."""
    if isinstance(store, Store):
        import resource

        def limit() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (40 * 1024, 40 * 1024))

        yield {"preexec_fn": limit}, "File too large"
        return
    import psycopg

    from carryall.sessions.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.seq > 20 THEN RAISE EXCEPTION 'disk quota exceeded (test)'; END IF; "
            "RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON carryall_events "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    try:
        yield {}, "disk quota exceeded (test)"
    finally:
        with psycopg.connect(store.url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER refuse ON carryall_events")
            conn.execute("DROP FUNCTION refuse()")


def test_a_refused_write_is_a_clear_error_and_leaves_the_session_intact(
    store: AnyStore, store_location: str
) -> None:
    session = store.create()
    with _refusing_writes(store) as (limit, expected):
        child = spawn_writer(store_location, session.id, "fill", 1000, pad=2000, **limit)
        out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    lines = out.splitlines()
    acks = [line for line in lines if line.isdigit()]
    errors = [line for line in lines if line.startswith("ERROR ")]
    assert len(errors) == 1, out
    assert expected in errors[0] and "Traceback" not in err
    texts = _texts(store, session.id)
    assert len(texts) == len(acks) > 0
    assert texts == [f"fill {i} {'x' * 2000}" for i in range(len(acks))]
    store.open(session.id).append([_user("after")])
    assert _texts(store, session.id)[-1] == "after"


def test_every_sessions_command_works_on_every_store(store_location: str) -> None:
    store = open_store(store_location)
    image = Image.from_bytes("image/png", PNG, "shot.png")
    session = store.create(title="cli")
    session.record([], [Message.user(f"see {SECRET}", [image]), _assistant("seen")])
    app = typer.Typer()
    commands.register(app)
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(app, [*args, "--store", store_location])
        assert result.exit_code == 0, result.output
        return result.stdout + result.stderr

    (row,) = json.loads(run("sessions", "list", "--json"))
    assert (row["id"], row["turns"], row["title"]) == (session.id, 2, "cli")
    shown = run("sessions", "show", session.id[:12])
    assert "[image: shot.png (image/png)]" in shown and SECRET in shown
    assert "redacted" in run("sessions", "redact", session.id, "--pattern", SECRET, "--yes")
    assert SECRET not in run("sessions", "show", session.id)
    store.put_blob(b"an orphan")
    time.sleep(0.01)
    assert "removed 1 unreferenced" in run("sessions", "gc")
    assert "removed session" in run("sessions", "rm", session.id, "--yes")
    assert json.loads(run("sessions", "list", "--json")) == []


# -- the same behaviour on every store ---------------------------------------------


def test_last_names_the_newest_session_in_every_command(
    store_location: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.support.agent import say
    from tests.support.cli import invoke, script

    store = open_store(store_location)
    store.create(title="older").record([], [_user("older"), _assistant("a")])
    time.sleep(0.01)
    newest = store.create(title="newest")
    newest.record([], [_user("newest"), _assistant("b")])
    assert store.open("last").id == newest.id
    shown = invoke("sessions", "show", "last", "--store", store_location)
    assert shown.exit_code == 0, shown.stderr
    assert "newest" in shown.stdout
    script(monkeypatch, say("continued"))
    ran = invoke("run", "-c", "and then?", "--store", store_location, "-w", str(tmp_path))
    assert ran.exit_code == 0, ran.stderr
    assert [m.text() for m in store.open(newest.id).messages()][-1] == "continued"
    removed = invoke("sessions", "rm", "last", "--yes", "--store", store_location)
    assert removed.exit_code == 0, removed.stderr
    assert [i.meta.title for i in store.list()] == ["older"]


def test_a_failed_first_prompt_is_kept_and_run_json_names_the_session(
    store_location: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from carryall.errors import ProviderError
    from tests.support.agent import say
    from tests.support.cli import invoke, script

    script(monkeypatch, ProviderError("invalid x-api-key", status=401))
    failed = invoke("run", "keep me", "--store", store_location, "-w", str(tmp_path))
    assert failed.exit_code == 1
    store = open_store(store_location)
    [info] = store.list()
    assert (info.failed, info.turns) == ("[401] invalid x-api-key", 1)
    assert [m.text() for m in store.open(info.meta.id).messages()] == ["keep me"]
    script(monkeypatch, say("done"))
    ran = invoke("run", "hello", "--json", "--store", store_location, "-w", str(tmp_path))
    assert ran.exit_code == 0, ran.stderr
    session = json.loads(ran.stdout)["session"]
    assert session is not None and store.open(session).messages()[-1].text() == "done"


def test_a_nul_in_the_first_prompt_and_the_failure_is_stored(store: AnyStore) -> None:
    session = store.create()
    session.append([_user("apricot\x00quince")], failed="bad\x00byte")
    [info] = store.list()
    assert (info.meta.title, info.failed) == ("apricot\x00quince", "bad\x00byte")
    assert store.open(session.id).messages() == [_user("apricot\x00quince")]
    assert [h.session for h in store.recall.search("quince")] == [session.id]


def test_a_megabyte_message_of_distinct_words_is_recorded_and_searchable(
    store: AnyStore, open_any: OpenAny
) -> None:
    words = " ".join(f"w{i:07x}" for i in range(120_000))  # about 1.1 MB, every word new
    session = store.create()
    session.record([], [_user(words)])
    session.append([_assistant("read it")])
    assert open_any().open(session.id).messages()[0].text() == words
    assert [h.session for h in store.recall.search("w0000010")] == [session.id]
