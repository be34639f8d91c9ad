"""Appends per second on each session store, beside the floor of its disk or its server.

    .venv/bin/python benchmarks/appends.py [--appends 300] [--only jsonl|postgres]

- JSON Lines: `AnySession.append` of one message, opened by `open_store`
  as the CLI opens it (the recall index caught up by the next search, not
  by the append), against the floor: `write`
  and `fsync` of the same event line to a file opened for appending. Once
  with 1 writer, once with 8 processes each on its own session (and each on
  its own floor file), started together.
- PostgreSQL, on a server started here from the machine's packages
  (`fsync=on`, as the JSONL store syncs; skipped with a line when there are
  no binaries or no psycopg): the same appends against the floor of one
  committed single-row `INSERT` of the same bytes, with 1 writer, 8 processes,
  and 8 threads sharing one store (each thread on its own session; the floor
  threads each on their own connection).

Figures are appends per second of wall time over the span all writers ran,
and the ratio to the floor. A single writer's figures are the best of three
rounds, ours and the floor's taken in turn, since an fsync's time moves with
whatever else the disk is doing; the machine's other work still moves them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from carryall.blocks import Message
from carryall.sessions import open_store
from carryall.sessions._transcript import Event, encode_event, now

ROOT = Path(__file__).resolve().parent.parent

# One writer process: waits for a line on stdin, then appends COUNT events
# (ours, or the floor's) and prints when it started and ended.
CHILD = r"""
import os, sys, time
kind, location, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
from carryall.blocks import Message
from carryall.sessions._transcript import Event, encode_event, now
line = encode_event(Event("append", now(), n=1, start=0, messages=[Message.user("event 1")]))
if kind == "jsonl-floor":
    fd = os.open(os.path.join(location, str(os.getpid())), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    def one(i):
        os.write(fd, line)
        os.fsync(fd)
elif kind == "pg-floor":
    import psycopg
    conn = psycopg.connect(location, autocommit=True)
    def one(i):
        conn.execute("INSERT INTO floor (body) VALUES (%s)", (line,))
else:
    from carryall.sessions import open_store
    session = open_store(location).create()
    def one(i):
        session.append([Message.user(f"event {i}")])
sys.stdin.readline()
start = time.perf_counter()
for i in range(count):
    one(i)
print(start, time.perf_counter())
"""


def _line() -> bytes:
    return encode_event(Event("append", now(), n=1, start=0, messages=[Message.user("event 1")]))


def _rate(count: int, took: float) -> float:
    return count / took if took > 0 else float("inf")


def _row(label: str, ours: float, floor: float) -> None:
    print(f"  {label:<34} {ours:>9,.0f}/s   floor {floor:>9,.0f}/s   {ours / floor:5.2f}x")


def _ours_alone(location: str, count: int) -> float:
    store = open_store(location)
    session = store.create()
    start = time.perf_counter()
    for i in range(count):
        session.append([Message.user(f"event {i}")])
    return _rate(count, time.perf_counter() - start)


def _in_turn(
    ours: Callable[[], float], floor: Callable[[], float], rounds: int = 3
) -> tuple[float, float]:
    """The best rate of each over `rounds` rounds, one after the other within each round."""
    best_ours = best_floor = 0.0
    for _ in range(rounds):
        best_ours = max(best_ours, ours())
        best_floor = max(best_floor, floor())
    return best_ours, best_floor


def _processes(kind: str, location: str, count: int, writers: int = 8) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, kind, location, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(writers)
    ]
    time.sleep(2.0)  # every writer imported and connected before any starts
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    spans = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise SystemExit(f"a {kind} writer failed")
        first, last = out.split()
        spans.append((float(first), float(last)))
    return _rate(writers * count, max(e for _, e in spans) - min(s for s, _ in spans))


def _threads(work: Callable[[int], None], count: int, writers: int = 8) -> float:
    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _rate(writers * count, time.perf_counter() - start)


def bench_jsonl(count: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="carryall-appends-"))
    try:
        line = _line()
        fd = os.open(folder / "floor", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

        def floor_writer() -> float:
            start = time.perf_counter()
            for _ in range(count):
                os.write(fd, line)
                os.fsync(fd)
            return _rate(count, time.perf_counter() - start)

        ours, floor = _in_turn(lambda: _ours_alone(str(folder / "store"), count), floor_writer)
        os.close(fd)
        print(f"JSON Lines store ({folder.parent}), {count} appends per writer:")
        _row("1 writer", ours, floor)
        floors = folder / "floors"
        floors.mkdir()
        floor8 = _processes("jsonl-floor", str(floors), count)
        _row(
            "8 processes, a session each", _processes("ours", str(folder / "store"), count), floor8
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bench_postgres(count: int) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.support.postgres_server import Server, binaries

    bin_dir = binaries()
    try:
        import psycopg
    except ImportError:
        bin_dir = None
    if bin_dir is None:
        print("PostgreSQL store: skipped (no server binaries or no psycopg on this machine)")
        return
    server = Server(bin_dir, fsync=True)
    try:
        url = server.create_database("appends")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE floor (id bigserial PRIMARY KEY, body bytea NOT NULL)")
        line = _line()

        def floor_writer(_: int) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                for _ in range(count):
                    conn.execute("INSERT INTO floor (body) VALUES (%s)", (line,))

        ours, floor = _in_turn(
            lambda: _ours_alone(url, count), lambda: _threads(floor_writer, count, writers=1)
        )
        print(f"PostgreSQL store (fsync=on), {count} appends per writer:")
        _row("1 writer", ours, floor)
        _row(
            "8 processes, a session each",
            _processes("ours", url, count),
            _processes("pg-floor", url, count),
        )
        store = open_store(url)
        sessions = [store.create() for _ in range(8)]

        def our_writer(w: int) -> None:
            for i in range(count):
                sessions[w].append([Message.user(f"event {i}")])

        _row(
            "8 threads sharing one store",
            _threads(our_writer, count),
            _threads(floor_writer, count),
        )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=300, help="appends per writer")
    parser.add_argument("--only", choices=("jsonl", "postgres"))
    args = parser.parse_args()
    if args.only != "postgres":
        bench_jsonl(args.appends)
    if args.only != "jsonl":
        bench_postgres(args.appends)


if __name__ == "__main__":
    main()
