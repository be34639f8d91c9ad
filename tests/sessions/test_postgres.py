"""The PostgreSQL store's own faults and schema, on a real server (support/postgres_server.py).

What every store promises is in `test_store_conformance.py`; here are the
faults only a server has: the server killed and restarted, a writer killed
inside its transaction, eight writer processes on fifty sessions, a
connection cut mid-stream, and the schema carryall creates and migrates.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Message
from carryall.errors import TranscriptError
from carryall.sessions import open_store
from carryall.sessions.postgres import SCHEMA_VERSION, PostgresStore
from tests.support.postgres_server import Server
from tests.support.stores import finish, spawn_writer

pytestmark = pytest.mark.slow

pytestmark = pytest.mark.usefixtures("home")


def _texts(store: PostgresStore, session_id: str) -> list[str]:
    return [m.text() for m in store.open(session_id).messages()]


def _seqs(url: str, session_id: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq FROM carryall_events WHERE session_id = %s ORDER BY seq", (session_id,)
        ).fetchall()
    return [row[0] for row in rows]


def test_server_killed_and_restarted_during_appends_loses_nothing_acknowledged(
    postgres_server: Server, postgres_url: str
) -> None:
    rng = random.Random()
    store = PostgresStore(postgres_url)
    session = store.create()
    child = spawn_writer(postgres_url, session.id, "w", 1000)
    assert child.stdout is not None
    acked: list[int] = []
    for kill_at in sorted(rng.sample(range(50, 900), 2)):
        while not acked or acked[-1] < kill_at:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else ""
            acked.append(int(line))
        time.sleep(rng.uniform(0, 0.01))
        postgres_server.kill()
        time.sleep(rng.uniform(0.1, 1.0))
        postgres_server.start()
    rest, err = finish(child, timeout=300)
    assert child.returncode == 0, err
    acked += [int(x) for x in rest.split()]
    assert acked == list(range(1000)), err
    # Every acknowledged append is there once, in order: a retry never doubled one.
    assert _texts(store, session.id) == [f"w {i} " for i in range(1000)]
    assert _seqs(postgres_url, session.id) == list(range(1, 1001))


# A writer that stops inside its transaction, after the event row is sent
# and before the commit, and says so: the test kills it there.
PAUSING_WRITER = r"""
import sys, time
from carryall.blocks import Message
from carryall.sessions import open_store
from carryall.sessions.postgres import PostgresSession

url, session_id = sys.argv[1:3]
session = open_store(url).open(session_id)
for i in range(5):
    session.append([Message.user(f"kept {i}")])
original = PostgresSession._insert

def pausing(self, conn, *args):
    title = original(self, conn, *args)
    print("IN-TRANSACTION", flush=True)
    time.sleep(120)
    return title

PostgresSession._insert = pausing
# A plain append is one statement, with no moment between its parts to stop
# in; a rewrite, a merge or an image takes the transaction stopped here.
PostgresSession._optimistic = lambda self, decide: None
session.append([Message.user("never committed")])
"""


def test_writer_killed_mid_transaction_leaves_the_session_as_it_was(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    session = store.create()
    child = subprocess.Popen(
        [sys.executable, "-c", PAUSING_WRITER, postgres_url, session.id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "IN-TRANSACTION\n", child.stderr.read()  # type: ignore[union-attr]
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    # The server rolls the transaction back and frees the session's row at once.
    started = time.monotonic()
    session.append([Message.user("next writer")])
    assert time.monotonic() - started < 10
    assert _texts(store, session.id) == [*(f"kept {i}" for i in range(5)), "next writer"]
    assert _seqs(postgres_url, session.id) == list(range(1, 7))
    assert [h.message for h in store.recall.search("committed")] == []
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT count(*) FROM carryall_messages").fetchone()
    assert row is not None and row[0] == 6


# A worker: appends COUNT events across every session named in a file,
# each event one message "w<worker> <i>", then prints "done".
WORKER = r"""
import sys
from carryall.blocks import Message
from carryall.sessions import open_store

url, ids_file, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = open_store(url)
sessions = [store.open(i) for i in open(ids_file).read().split()]
for i in range(count):
    sessions[(worker * 7 + i * 3) % len(sessions)].append([Message.user(f"w{worker} {i}")])
print("done", flush=True)
"""


def test_eight_workers_on_fifty_sessions_lose_and_interleave_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    store = PostgresStore(postgres_url)
    ids = [store.create().id for _ in range(50)]
    ids_file = tmp_path / "ids"
    ids_file.write_text("\n".join(ids))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, postgres_url, str(ids_file), str(w), "1000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(8)
    ]
    for worker in workers:
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0 and out == "done\n", err
    seen: dict[int, list[int]] = {w: [] for w in range(8)}
    total = 0
    for session_id in ids:
        texts = _texts(store, session_id)
        total += len(texts)
        _, lines = store.export_events(session_id)
        # One event per append, each on top of the last: nothing interleaved.
        assert [json.loads(line)["n"] for line in lines] == list(range(1, len(texts) + 1))
        assert _seqs(postgres_url, session_id) == list(range(1, len(texts) + 1))
        per_worker: dict[int, list[int]] = {}
        for text in texts:
            w, i = text[1:].split()
            per_worker.setdefault(int(w), []).append(int(i))
        for w, indices in per_worker.items():
            assert indices == sorted(indices), f"worker {w} out of order in {session_id}"
            seen[w] += indices
    assert total == 8000
    for w, indices in seen.items():
        assert sorted(indices) == list(range(1000)), f"worker {w} lost or doubled an event"
    # Recordings leave the search index to the next search, which catches it up.
    assert len(store.recall.search("w3", limit=5000)) == 1000
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT count(*) FROM carryall_messages").fetchone()
    assert row is not None and row[0] == 8000


def test_connections_dropped_mid_stream_are_retried_without_loss(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    session = store.create()
    big = [Message.user(f"message {i} " + "y" * 200) for i in range(2000)]
    session.record([], big)
    stop = threading.Event()
    cuts = 0

    def cut() -> None:
        nonlocal cuts
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            while not stop.is_set():
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND backend_type = 'client backend'"
                ).fetchall()
                cuts += sum(1 for (ok,) in rows if ok)
                time.sleep(random.uniform(0.02, 0.15))  # time enough for a load to finish

    cutter = threading.Thread(target=cut)
    cutter.start()
    # At least 100 appends, and on until the cutter has cut often enough for
    # the test to mean something (a fast machine can finish 100 between a
    # few cuts); bounded, so a cutter that never lands fails, not hangs.
    appended = 0
    deadline = time.monotonic() + 120
    try:
        while appended < 100 or (cuts <= 5 and time.monotonic() < deadline):
            session.append([Message.user(f"tail {appended}")])
            if appended % 10 == 0:  # a long read, cut off part way as often as not
                assert len(store.open(session.id)) == 2001 + appended
            appended += 1
    finally:
        stop.set()
        cutter.join()
    assert cuts > 5
    texts = _texts(store, session.id)
    assert texts[2000:] == [f"tail {i}" for i in range(appended)]
    assert _seqs(postgres_url, session.id) == list(range(1, appended + 2))


def test_a_conflicting_append_is_detected_and_refused(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    session = store.create()
    session.append([Message.user("one")])
    # A writer that skipped the session lock already took event 2.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO carryall_events (session_id, seq, token, body) "
            "VALUES (%s, 2, gen_random_uuid(), %s)",
            (session.id, b'{"event":"append","time":"2026-01-01T00:00:00.000000Z","n":2,'
             b'"start":1,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}'),
        )  # fmt: skip
    with pytest.raises(TranscriptError, match="another writer recorded event 2 first"):
        session.append([Message.user("two")])
    assert _seqs(postgres_url, session.id) == [1, 2]


def _backends(url: str) -> int:
    """Connections to the database at `url` other than the one asking."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_store_opens_pool_min_connections_before_its_threads_ask(postgres_url: str) -> None:
    def opened(store: PostgresStore, least: int) -> int:
        store.create()  # the first operation opens the pool
        deadline = time.monotonic() + 10
        while _backends(postgres_url) < least and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # for any the pool is still opening
        return _backends(postgres_url)

    # One thread's store opens one connection (two if it asked before the
    # first was ready); one for eight threads opens eight, with no thread
    # waiting for it.
    single = PostgresStore(postgres_url)
    assert opened(single, 1) < 8
    single.close()
    deadline = time.monotonic() + 10
    while _backends(postgres_url) and time.monotonic() < deadline:
        time.sleep(0.02)
    shared = PostgresStore(postgres_url, pool_min=8)
    assert opened(shared, 8) == 8
    session = shared.create()
    threads = [
        threading.Thread(target=shared.open(session.id).append, args=([Message.user("x")],))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(_seqs(postgres_url, session.id)) == 8
    assert _backends(postgres_url) == 8
    shared.close()


def test_a_pool_min_past_the_pool_size_is_refused(postgres_url: str) -> None:
    with pytest.raises(ValueError, match=r"pool_min \(9\) must be at least 1 and at most"):
        PostgresStore(postgres_url, pool_min=9, pool_size=8)


def test_schema_is_created_once_and_a_newer_one_is_refused(postgres_url: str) -> None:
    stores: list[PostgresStore] = []
    threads = [
        threading.Thread(target=lambda: stores.append(PostgresStore(postgres_url)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stores) == 4
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM carryall_schema")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        conn.execute("INSERT INTO carryall_schema VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(TranscriptError, match="newer than this carryall"):
        PostgresStore(postgres_url)


def test_an_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    url = "postgresql://someone:hunter2@127.0.0.1:1/nothing"
    with pytest.raises(TranscriptError, match="cannot connect") as caught:
        open_store(url)
    assert "hunter2" not in str(caught.value)
    app = typer.Typer()
    commands.register(app)
    result = CliRunner().invoke(app, ["sessions", "list", "--store", url])
    assert result.exit_code == 1
    assert "cannot connect" in result.stderr and "Traceback" not in result.output


def test_an_error_of_the_statement_is_reported_at_once_not_retried(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, retry_for=5)
    session = store.create()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # SQLSTATE 54000 is an OperationalError to psycopg, and no connection's fault.
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'too big (test)' USING ERRCODE = '54000'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON carryall_events "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    with pytest.raises(TranscriptError) as caught:
        session.append([Message.user("refused")])
    assert "too big (test)" in str(caught.value)
    assert "cannot reach the server" not in str(caught.value)
    assert "keeps every earlier event" in str(caught.value)


def test_search_catches_the_index_up_with_appends_and_rewrites(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    session = store.create()
    session.append([Message.user("a heron by the lake"), Message.user("a stork nearby")])
    assert [h.message for h in store.recall.search("stork")] == [1]
    session.append([Message.user("an egret too")])
    history = session.messages()
    session.record(history, [Message.user("only a crane now")])  # a rewrite
    session.append([Message.user("and a heron again")])
    other = PostgresStore(postgres_url)  # another process's store finds the same
    assert [h.message for h in other.recall.search("heron")] == [1]
    assert other.recall.search("stork") == [] and other.recall.search("egret") == []
    assert [h.message for h in other.recall.search("crane")] == [0]
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            "SELECT idx, body FROM carryall_messages WHERE session_id = %s ORDER BY idx",
            (session.id,),
        ).fetchall()
    assert rows == [(0, "only a crane now"), (1, "and a heron again")]


def test_a_recording_never_waits_for_a_search_catching_up(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    session = store.create()
    session.append([Message.user("first of many")])
    with psycopg.connect(postgres_url) as conn, conn.transaction():
        # What a search catching this session up holds: its index lock and mark.
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (0x63617273, session.id))
        conn.execute("INSERT INTO carryall_indexed (session_id, seq) VALUES (%s, 0)", (session.id,))
        session.append([Message.user("second, while the index is busy")])
        session.record(session.messages(), [Message.user("rewritten meanwhile")])
    assert [h.message for h in store.recall.search("rewritten")] == [0]


def test_sessions_of_an_older_schema_stay_found_without_a_catch_up(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    session = store.create()
    session.append([Message.user("an okapi in the old schema")])
    store.recall.search("okapi")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # Back to schema 3, where every recording indexed its own text and a
        # write's token had an index of its own.
        conn.execute("DROP TABLE carryall_indexed")
        conn.execute(
            "ALTER TABLE carryall_events ADD CONSTRAINT carryall_events_token_key UNIQUE (token)"
        )
        conn.execute("DELETE FROM carryall_schema WHERE version >= 4")
    store.close()
    migrated = PostgresStore(postgres_url)
    migrated.create()  # the first operation migrates
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute(
            "SELECT seq FROM carryall_indexed WHERE session_id = %s", (session.id,)
        ).fetchone()
        tokens = conn.execute(
            "SELECT count(*) FROM pg_constraint WHERE conname = 'carryall_events_token_key'"
        ).fetchone()
    assert row == (1,)
    assert tokens == (0,)  # schema 5: an append inserts into the key alone
    assert [h.message for h in migrated.recall.search("okapi")] == [0]
