"""Session store figures, each beside its peer, in one run.

    .venv/bin/python benchmarks/sessions.py [--messages 100000] [--only load]

- append: `Session.record` of one new message onto a 100-message and onto a
  100,000-message history (write, fsync, recall index), with the recall
  index listening and without it, and the bytes each append read and wrote
  (`rchar`/`wchar` of /proc/self/io; the index is written in batches, so the
  mean carries the batches' cost and "most" is the costliest single append).
  The ratio must stay near 1: appending never rereads or rewrites the file.
  The default 128 repeats span several of the index's 64-message batches.
- load: `Store.open` of the 100,000-message transcript (typed decode into
  blocks) against a bare line-by-line `json.loads` of the same file (and
  `orjson.loads` when installed), taken in turn round after round: the best
  wall time, and the CPU (`time.process_time`, collector on) median and
  mean; then the peak memory traced during one `Store.open` against what
  the open session still holds afterwards (`tracemalloc`, a separate pass).
- recall: a ranked FTS5 query over 100,000 messages against `grep -c` over
  the JSONL files.
- the PostgreSQL store, in the same run, on a server started here from the
  machine's packages (`fsync=on`, as the JSONL store syncs; skipped with a
  line when there are no binaries or no psycopg): the same appends (bytes
  read and written are the server backends', from their /proc/<pid>/io, since
  the client only talks over a socket), and the same recall against the same
  `grep -c`.
- 8 concurrent writers: 8 processes each appending one-message events to
  its own session, on each store; events per second over the time they all
  ran.

Each append figure is wall time (it includes fsync, and the server's work)
and this process's CPU (`time.process_time`), both median and mean, with
the garbage collector on.

The big transcripts are written in bulk through the transcript encoder (one
event per message, as an agent loop records them) so setup takes seconds,
not the hours 100,000 synced appends would.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from carryall.blocks import Message, Text, ToolResult, ToolUse
from carryall.sessions import AnyStore, SessionMeta, Store
from carryall.sessions._transcript import Event, encode_event, encode_header, now
from carryall.sessions.recall import MAX_LIMIT

_SENTENCE = (
    "the build failed again because the cache key changed when the lockfile moved "
    "into the workspace root so every job downloaded all wheels from scratch and "
    "timed out waiting on the mirror which had throttled us after the retry storm"
)
WORDS = _SENTENCE.split()


def _history(count: int, rng: random.Random) -> list[Message]:
    """A plausible agent history: user turns, tool calls, results, answers."""
    out: list[Message] = []
    call = 0
    while len(out) < count:
        kind = len(out) % 4
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40)))
        if kind == 0:
            if rng.random() < 0.0001:
                text += " zanzibar"  # a rare word: about ten messages in 100,000
            out.append(Message.user(text))
        elif kind == 1:
            call += 1
            out.append(
                Message.assistant(
                    [Text(text), ToolUse(f"call_{call}", "read_file", {"path": f"src/m{call}.py"})]
                )
            )
        elif kind == 2:
            out.append(Message.tool_results([ToolResult(f"call_{call}", text * 2)]))
        else:
            out.append(Message.assistant([Text(text)]))
    return out[:count]


def _write_bulk(store: Store, messages: list[Message]) -> str:
    """A transcript of one append event per message, written without per-event fsync."""
    store.root.mkdir(parents=True, exist_ok=True)
    session_id = f"bench-{len(messages)}-{random.randrange(16**6):06x}"
    meta = SessionMeta(id=session_id, created=datetime.now(UTC), backend="bench", model="m")
    stamp = now()
    with store.path(session_id).open("wb") as f:
        f.write(encode_header(meta))
        for index, message in enumerate(messages):
            event = Event("append", stamp, n=index + 1, start=index, messages=[message])
            f.write(encode_event(event))
    return session_id


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


def _io() -> tuple[int, int]:
    """This process's bytes read and written so far (`rchar`, `wchar` of /proc/self/io)."""
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return 0, 0
    return int(fields["rchar"]), int(fields["wchar"])


def _io_self() -> int:
    """The bytes one reading of /proc/self/io adds to `rchar` (the file's own size)."""
    first = _io()[0]
    return _io()[0] - first


_IO_SELF = _io_self()


def bench_append(
    store: AnyStore,
    small: str,
    big: str,
    repeat: int,
    label: str,
    io: Callable[[], tuple[int, int]] | None = None,
) -> None:
    """Alternate appends at both sizes; `io` reads the bytes counters to charge (default: ours)."""
    io = io or _io
    where = "/proc/self/io" if io is _io else "the server backends' /proc/<pid>/io"
    print(
        f"append one message with Session.record, {label} "
        f"(median of {repeat}, fsync included; bytes per append from {where})"
    )
    store.recall.sync()  # the index is current, as it is for a running session
    sessions = {label: store.open(sid) for label, sid in (("small", small), ("big", big))}
    histories = {label: session.messages() for label, session in sessions.items()}
    sizes = {label: len(history) for label, history in histories.items()}
    times: dict[str, list[float]] = {"small": [], "big": []}
    cpu: dict[str, list[float]] = {"small": [], "big": []}
    reads: dict[str, list[int]] = {"small": [], "big": []}
    writes: dict[str, list[int]] = {"small": [], "big": []}
    # Alternate the two, so drift in the disk's fsync time hits both alike.
    for i in range(repeat):
        for label, session in sessions.items():
            history = histories[label]
            left = [*history, Message.user(f"next turn {i}")]
            read0, written0 = io()
            start, cpu0 = time.perf_counter(), time.process_time()
            kind = session.record(history, left)
            times[label].append(time.perf_counter() - start)
            cpu[label].append(time.process_time() - cpu0)
            read1, written1 = io()
            # Reading /proc/self/io is itself a read: take its own share out.
            reads[label].append(read1 - read0 - (_IO_SELF if io is _io else 0))
            writes[label].append(written1 - written0)
            assert kind == "append"
            histories[label] = left
    for label in ("small", "big"):
        print(
            f"  at {sizes[label]:>7,} messages: {_ms(statistics.median(times[label]))}"
            f" (mean {_ms(statistics.mean(times[label])).strip()})"
            f"   read {statistics.mean(reads[label]):>8,.0f} B"
            f"   written {statistics.mean(writes[label]):>8,.0f} B"
            f" (mean; most {max(reads[label]):,} / {max(writes[label]):,} B)"
        )
        print(
            f"  {'':>7}           CPU {_ms(statistics.median(cpu[label]))}"
            f" (mean {_ms(statistics.mean(cpu[label])).strip()})"
        )
    ratio = statistics.median(times["big"]) / statistics.median(times["small"])
    cpu_ratio = statistics.median(cpu["big"]) / statistics.median(cpu["small"])
    print(f"  ratio big/small: {ratio:.2f} (CPU {cpu_ratio:.2f})")


def _cpu_timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        out.append(time.process_time() - start)
    return out


def _peak_ratio(load: Callable[[], object]) -> tuple[int, int]:
    """Peak traced memory during `load`, and what stays traced while its result is kept."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        kept = load()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del kept
    return peak, current


def bench_load(store: Store, big: str, repeat: int) -> None:
    path = store.path(big)
    size = path.stat().st_size
    print(
        f"load the {big.split('-')[1]}-message transcript ({size / 1e6:.1f} MB), "
        f"best of {repeat} wall, and CPU (process_time) median and mean, gc on"
    )

    def ours() -> object:
        return store.open(big).messages()

    peers: list[tuple[str, Callable[[bytes], object]]] = [("json.loads", json.loads)]
    try:
        import orjson
    except ImportError:
        pass
    else:
        peers.append(("orjson.loads", orjson.loads))
    contenders: list[tuple[str, Callable[[], object]]] = [
        ("carryall Store.open (typed blocks):", ours)
    ]
    for name, loads in peers:

        def bare(loads: Callable[[bytes], object] = loads) -> None:
            with path.open("rb") as f:
                for line in f:
                    loads(line)

        contenders.append((f"bare {name} per line (dicts):", bare))
    # Every contender in turn, round after round, so a load spike lands on all alike.
    wall: dict[str, list[float]] = {label: [] for label, _ in contenders}
    cpu: dict[str, list[float]] = {label: [] for label, _ in contenders}
    for _ in range(repeat):
        for label, fn in contenders:
            wall[label] += _timed(fn, 1)
            cpu[label] += _cpu_timed(fn, 1)
    first = contenders[0][0]
    for label, _ in contenders:
        ratio = (
            ""
            if label == first
            else (
                f"   ratio {min(wall[first]) / min(wall[label]):.2f}"
                f" (CPU {statistics.median(cpu[first]) / statistics.median(cpu[label]):.2f})"
            )
        )
        print(
            f"  {label:<37} {_ms(min(wall[label]))}   CPU {_ms(statistics.median(cpu[label]))}"
            f" (mean {_ms(statistics.mean(cpu[label])).strip()}){ratio}"
        )
    if "bare orjson.loads per line (dicts):" in cpu:
        times = statistics.median(cpu[first]) / statistics.median(
            cpu["bare orjson.loads per line (dicts):"]
        )
        verdict = "met" if times <= 2 else "MISSED"
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"  Store.open CPU {times:.2f}x a bare orjson.loads per line -> {verdict} "
            f"(target 2x; load average {load})"
        )
    peak, kept = _peak_ratio(lambda: store.open(big))
    verdict = "met" if peak <= 1.3 * kept else "MISSED"
    print(
        f"  peak memory during Store.open {peak / 1e6:.1f} MB, kept by the loaded session "
        f"{kept / 1e6:.1f} MB (tracemalloc): {peak / kept:.2f}x -> {verdict} (target 1.3x)"
    )


def bench_recall(store: AnyStore, repeat: int, files: list[str], label: str) -> None:
    start = time.perf_counter()
    count = store.recall.reindex()
    built = time.perf_counter() - start
    print(f"recall, {label}, over {count:,} messages (index rebuilt in {built:.2f} s)")
    grep = shutil.which("grep")
    for word in ("zanzibar", "mirror", "lockfile workspace"):
        # recall returns at most MAX_LIMIT hits: a count at the bound is "at least".
        matching = len(store.recall.search(word, limit=MAX_LIMIT))
        over = "+" if matching == MAX_LIMIT else " "
        ours = statistics.median(_timed(functools.partial(store.recall.search, word), repeat))
        line = f"  {word!r:22} in {matching:>6,}{over}messages, recall top 20: {_ms(ours)}"
        if grep and " " not in word:
            cmd = [grep, "-c", word, *files]
            grep_once = functools.partial(subprocess.run, cmd, capture_output=True, check=False)
            peer = statistics.median(_timed(grep_once, repeat))
            line += f"   grep -c: {_ms(peer)}   ratio {ours / peer:.2f}"
        print(line)


WRITER = r"""
import sys, time
from carryall.blocks import Message
from carryall.sessions import open_store

location, session_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
session = open_store(location, recall=False).open(session_id)
sys.stdin.readline()  # go
start = time.time()
for i in range(count):
    session.append([Message.user(f"writer event {i}")])
print(start, time.time(), flush=True)
"""


def bench_writers(store: AnyStore, location: str, label: str, count: int = 250) -> None:
    """8 writer processes, each appending `count` events to its own session, started together."""
    ids = [store.create().id for _ in range(8)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, location, sid, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for sid in ids
    ]
    time.sleep(2.0)  # let every child import and open its session
    for child in children:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
    spans = []
    for child in children:
        out, _ = child.communicate(timeout=900)
        spans.append(tuple(float(x) for x in out.split()))
    took = max(end for _, end in spans) - min(start for start, _ in spans)
    print(
        f"8 concurrent writers, {label}: {8 * count:,} appends in {took:.2f} s, "
        f"{8 * count / took:,.0f} appends/s"
    )


def _pg_bulk(store: AnyStore, messages: list[Message]) -> str:
    """The same bulk transcript as `_write_bulk`, imported into the PostgreSQL store."""
    session_id = f"bench-{len(messages)}-{random.randrange(16**6):06x}"
    meta = SessionMeta(id=session_id, created=datetime.now(UTC), backend="bench", model="m")
    stamp = now()
    lines = [
        encode_event(Event("append", stamp, n=i + 1, start=i, messages=[m]))[:-1]
        for i, m in enumerate(messages)
    ]
    store.import_events(meta, lines)
    return session_id


def bench_postgres(args: argparse.Namespace, rng: random.Random, files: list[str]) -> None:
    """The PostgreSQL half: a server of this machine's, started and stopped here."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    try:
        import psycopg  # noqa: F401

        from tests.support.postgres_server import Server, binaries
    except ImportError as exc:
        print(f"PostgreSQL store: skipped ({exc}; pip install -e '.[postgres]')")
        return
    bin_dir = binaries()
    if bin_dir is None:
        print("PostgreSQL store: skipped (no initdb on this machine: apt-get install postgresql)")
        return
    from carryall.sessions.postgres import PostgresStore

    server = Server(bin_dir, fsync=True)
    try:
        url = server.create_database("bench")
        store = PostgresStore(url)
        start = time.perf_counter()
        big = _pg_bulk(store, _history(args.messages, rng))
        small = _pg_bulk(store, _history(100, rng))
        print(
            f"PostgreSQL {bin_dir.parent.name} (fsync=on), setup: imported "
            f"{args.messages + 100:,} messages in {time.perf_counter() - start:.1f} s"
        )
        print()

        # The store's pool may hand an append any of its connections: the
        # I/O read is that of every server backend serving this database.
        with store._connections().connection() as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND backend_type = 'client backend'"
            ).fetchall()
        backend_pids = [row[0] for row in rows]

        def backend_io() -> tuple[int, int]:
            read = written = 0
            for pid in backend_pids:
                text = Path(f"/proc/{pid}/io").read_text()
                fields = dict(line.split(": ") for line in text.splitlines())
                read += int(fields["rchar"])
                written += int(fields["wchar"])
            return read, written

        bench_append(store, small, big, args.repeat, "PostgreSQL store", io=backend_io)
        if args.only == "append":
            return
        print()
        bench_recall(store, args.repeat, files, "PostgreSQL full-text search")
        print()
        bench_writers(store, url, "PostgreSQL store")
    finally:
        server.stop()


def main() -> None:
    """Run every figure once and print them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=128)
    parser.add_argument("--only", choices=("append", "load", "all"), default="all")
    args = parser.parse_args()
    rng = random.Random(7)
    root = Path(tempfile.mkdtemp(prefix="carryall-bench-"))
    try:
        store = Store(root / "sessions", recall=True)
        print(f"python {sys.version.split()[0]}, store in {root}")
        start = time.perf_counter()
        big = _write_bulk(store, _history(args.messages, rng))
        small = _write_bulk(store, _history(100, rng))
        print(
            f"setup: wrote {args.messages + 100:,} messages in {time.perf_counter() - start:.1f} s"
        )
        if args.only == "load":
            print()
            bench_load(store, big, 5)
            return
        print()
        bench_append(store, small, big, args.repeat, "recall index listening")
        print()
        bench_append(
            Store(root / "sessions", recall=False),
            small,
            big,
            args.repeat,
            "recall index off (the default: a search catches it up)",
        )
        files = [str(p) for p in store.root.glob("*.jsonl")]
        if args.only != "append":
            print()
            bench_load(store, big, 3)
            print()
            bench_writers(Store(root / "writers"), str(root / "writers"), "JSONL store")
            print()
            bench_recall(store, args.repeat, files, "JSONL store (SQLite FTS5)")
        print()
        bench_postgres(args, rng, files)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
