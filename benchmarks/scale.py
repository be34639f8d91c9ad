"""Scale figures, each beside its floor and (where there is one) its peer, in one run.

    PYTHONPATH=src .venv/bin/python benchmarks/scale.py [--messages 1000000]
        [--sessions 10000] [--history 10000] [--runs 5] [--appends 200]
        [--only fit,step,jsonl,postgres,recall,list,local] [--cache DIR]

- fit: `context.fit_history` of a `--history`-message agent history cut by
  1%, 10% and 50% of its estimate, against writing the history to JSON once
  (what one whole estimate costs). Target: the 50% cut within 50 ms of CPU.
- step: one agent step (`Agent.send`: fit, encode, send to a mock
  transport of the OpenAI SDK, decode, record in a JSONL session) at
  `--history` messages with the history just over the context window (each
  request fitted) against the same step far below the window, taken in
  turn. Target: within 2x, and no rewrite recorded in the session. Beside
  it, the far step's request alone (no session, no fitting) through
  carryall's backend, the OpenAI SDK's own `create` and pydantic-ai's
  `OpenAIChatModel.request`, against posting the finished body, all by the
  same mock transport (printed, not judged).
- jsonl: `Session.append` of one message, by 1 writer and by 8 writer
  processes (each on its own session), in appends per second of wall time,
  against `write` + `fsync` of the same event line to a file (1 and 8
  processes). Target: at least 0.5x the floor. The recall index is caught
  up by the next search, not by the appends (`Store`'s default): the time
  that catch-up takes for the 8 writers' messages is printed beside them.
- postgres: the same appends on `PostgresStore` (a server started here, with
  `fsync=on`), by 1 writer, 8 writer processes and 8 threads sharing one
  store (with the p99 of one append), against a committed `INSERT` of the
  same bytes into a plain table (1 connection, 8 processes, 8 threads on
  their own connections). Target: at least 0.5x. Skipped with a line when
  there are no PostgreSQL binaries or no psycopg.
- recall: a search of a common word and of a rare one over a `--messages`
  store (the JSONL store's SQLite index, as `carryall recall` searches:
  caught up first), against `rg -c` of the word over the same transcripts.
  The store and its index are built once into `--cache` and reused; the
  first build's figures are printed when it happens. Target: the common
  word at most 1x `rg -c`.
- list: `carryall sessions list` (the command, its table written to a
  string) of `--sessions` sessions, and its `--json`, against a reader of
  each transcript's first and last line. Target: at most 2x.
- local: the embedded backend's plain-text tokens per second through
  carryall (a streamed request without tools) against a direct streamed
  request to the same llama-server without a schema, taken in turn. Target:
  at least 0.97x. Skipped with a line when the local backend is not
  installed.

Every figure is CPU time (`time.process_time`, plus the CPU of child
processes where the work is theirs: `rg`) with the garbage collector on, as
the median and the mean of `--runs` runs, unless it says it is wall time
(appends per second, tokens per second). Targets are printed as met or
MISSED, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from carryall.blocks import Message
from carryall.context import estimate_fixed_tokens, estimate_tokens, fit_history
from carryall.sessions import SessionMeta, Store
from carryall.sessions._transcript import Event, encode_event, encode_header, now
from sessions import WORDS, _history

HERE = Path(__file__).resolve().parent
SECTIONS = ("fit", "step", "jsonl", "postgres", "recall", "list", "local")


# -- measuring -------------------------------------------------------------------


def cpu() -> float:
    """CPU seconds of this process and of its waited-for children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def cpu_runs(fn: Callable[[], object], runs: int) -> list[float]:
    """The CPU time of `fn`, `runs` times (after one run outside the clock)."""
    fn()
    out = []
    for _ in range(runs):
        start = cpu()
        fn()
        out.append(cpu() - start)
    return out


def ms(samples: list[float]) -> str:
    """Median and mean of CPU samples in milliseconds."""
    return (
        f"median {statistics.median(samples) * 1000:9.2f} ms, "
        f"mean {statistics.fmean(samples) * 1000:9.2f} ms"
    )


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def ratio_line(label: str, ours: list[float], floor: list[float], most: float) -> None:
    """One figure beside its floor, and whether ours is at most `most` times it."""
    ratio = statistics.median(ours) / max(statistics.median(floor), 1e-9)
    print(f"  {label}: {ms(ours)}")
    print(
        f"  {'':{len(label)}}  {ratio:.2f}x the floor -> {verdict(ratio <= most)} (target {most}x)"
    )


def bulk_session(root: Path, messages: list[Message], title: str = "") -> str:
    """A transcript of one append event per message, as an agent records them, unsynced."""
    root.mkdir(parents=True, exist_ok=True)
    session_id = f"{random.randrange(16**12):012x}-bench"
    meta = SessionMeta(
        id=session_id, created=datetime.now(UTC), backend="bench", model="m", title=title or None
    )
    stamp = now()
    with (root / f"{session_id}.jsonl").open("wb") as f:
        f.write(encode_header(meta))
        for index, message in enumerate(messages):
            event = Event("append", stamp, n=index + 1, start=index, messages=[message])
            f.write(encode_event(event))
    return session_id


# -- fit -------------------------------------------------------------------------


def bench_fit(args: argparse.Namespace) -> None:
    history = _history(args.history, random.Random(1))
    total = estimate_tokens(history)
    print(f"fit: a {len(history):,}-message history of about {total:,} tokens")
    floor = cpu_runs(lambda: msgspec.json.encode(history), args.runs)
    print(f"  floor, the history written to JSON once: {ms(floor)}")
    for cut in (0.01, 0.10, 0.50):
        budget = int(total * (1 - cut))
        fitted = fit_history(history, budget=budget)
        ours = cpu_runs(lambda budget=budget: fit_history(history, budget=budget), args.runs)
        median = statistics.median(ours)
        line = (
            f"  fit_history down by {cut:4.0%} ({fitted.dropped_messages:,} messages dropped, "
            f"{fitted.shortened_outputs:,} outputs shortened): {ms(ours)}, "
            f"{median / max(statistics.median(floor), 1e-9):.2f}x the floor"
        )
        if cut == 0.50:
            line += f" -> {verdict(median <= 0.050)} (target 50 ms)"
        print(line)


# -- step ------------------------------------------------------------------------

_OPENAI_REPLY = {
    "id": "chatcmpl-01",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Done.", "refusal": None},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}


def mock_transport() -> Any:
    """An httpx2 `MockTransport` that reads each request's body and answers `_OPENAI_REPLY`."""
    import httpx2

    reply = json.dumps(_OPENAI_REPLY).encode()

    def answer(request: Any) -> Any:
        request.read()
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=reply)

    return httpx2.MockTransport(answer)


def mock_backend() -> Any:
    """carryall's OpenAI backend, unstreamed, whose SDK client answers from a mock transport."""
    import openai

    from carryall.backends import open_backend
    from carryall.config import Config

    real = openai.DefaultHttpxClient

    class Mocked(real):  # type: ignore[misc,valid-type]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(transport=mock_transport(), **kwargs)

    openai.DefaultHttpxClient = Mocked
    try:
        return open_backend(
            "openai",
            base_url="http://mock.invalid/v1",
            api_key="not-used",
            model="gpt-4.1",
            config=Config(),
            stream=False,
        )
    finally:
        openai.DefaultHttpxClient = real


def bench_step(args: argparse.Namespace) -> None:
    from carryall.agent import Agent, ContextFitted

    history = _history(args.history, random.Random(2))
    root = Path(tempfile.mkdtemp(prefix="carryall-scale-step-"))
    try:
        store = Store(root)
        need = estimate_tokens(history)
        agents = {}
        fits = {"near": 0, "far": 0, "anew": 0}
        for name, window in (("near", None), ("far", need * 10), ("anew", None)):
            session = store.open(bulk_session(root, history))
            agent = Agent(mock_backend(), session=session, max_tokens=256)
            if window is None:
                # Just over the window: the history is about 1% too long for
                # it, and the first step is fitted.
                request = agent.request()
                fixed = estimate_fixed_tokens(request.system, request.tools)
                window = fixed + 256 + int(need * 0.99)

            def seen(event: object, name: str = name) -> None:
                if isinstance(event, ContextFitted):
                    fits[name] += 1

            agent.context_window = window
            agent.on_event = seen
            agents[name] = (agent, session)
        # The index catches up with the bulk-written sessions outside the clock.
        store.recall.sync()
        samples: dict[str, list[float]] = {"near": [], "far": [], "anew": []}
        for name in samples:  # once each outside the clock (the near one's first cut)
            agents[name][0].send("warm up")
            fits[name] = 0
        for n in range(args.runs * 2):
            for name in samples:
                agent = agents[name][0]
                if name == "anew":
                    # The worst case: every step's history fitted anew, as
                    # when each step's output outgrows the slack of the last cut.
                    agent._fitter.forget()
                start = cpu()
                agent.send(f"step {n}: what now?")
                samples[name].append(cpu() - start)
        print(f"step: one agent step at {len(history):,} messages (OpenAI wire, mock transport)")
        labels = (
            ("far", "far below the window"),
            ("near", "just over the window"),
            ("anew", "over it, fitted anew"),
        )
        for name, label in labels:
            agent, session = agents[name]
            versions = len(session.versions())
            print(
                f"  {label:22}: {ms(samples[name])}, max {max(samples[name]) * 1000:.2f} ms; "
                f"{fits[name]} of {len(samples[name])} requests cut, {versions - 1} rewrites"
            )
        rewrites = sum(len(agents[name][1].versions()) - 1 for name in ("near", "anew"))
        far = statistics.median(samples["far"])
        ratio = statistics.median(samples["near"]) / far
        print(
            f"  near / far: {ratio:.2f}x -> {verdict(ratio <= 2 and rewrites == 0)} "
            "(target within 2x, no rewrite)"
        )
        ratio = statistics.median(samples["anew"]) / far
        print(
            f"  fitted anew / far: {ratio:.2f}x (the cut moving at every step: printed, not judged)"
        )
        step_peers(args, agents["far"][0])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def step_peers(args: argparse.Namespace, agent: Any) -> None:
    """The far step's request alone beside the floor and the peers, by the same mock transport.

    Each sends the request the next step would (the whole history and a new
    user message) and reads the same canned reply: the floor posts the
    finished body bytes with an httpx2 client; carryall's backend
    (`Backend.complete`, no session and no fitting) encodes and posts it;
    the OpenAI SDK's own `create` takes the wire's messages (carryall's
    body, decoded); pydantic-ai's `OpenAIChatModel.request` takes the same
    history as its own message parts. Taken in turn, round after round.
    """
    try:
        import httpx2
        import openai
        from pydantic_ai.messages import (
            ModelMessage,
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )

        from request_path import MOCK_URL, Route, pydantic_ai_path
    except ImportError as exc:
        print(f"  peers: skipped ({exc}; pip install -e '.[bench]')")
        return
    from carryall.blocks import Text, ToolResult, ToolUse
    from carryall.providers.openai import encode_request_bytes
    from carryall.transport.openai import OPENAI_CAPABILITIES

    asked = agent.request()
    request = msgspec.structs.replace(asked, messages=(*asked.messages, Message.user("what now?")))
    data = encode_request_bytes(request, OPENAI_CAPABILITIES)
    body = json.loads(data)
    url = f"{MOCK_URL}/v1"
    http = httpx2.Client(transport=mock_transport())

    def floor() -> object:
        posted = http.post(
            f"{url}/chat/completions", content=data, headers={"content-type": "application/json"}
        )
        return json.loads(posted.content)

    sdk = openai.OpenAI(
        api_key="not-used", base_url=url, http_client=httpx2.Client(transport=mock_transport())
    )
    rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}

    def raw_sdk() -> object:
        return sdk.chat.completions.create(model=body["model"], messages=body["messages"], **rest)

    # The same history as pydantic-ai holds it: its own parts, built outside the clock.
    names: dict[str, str] = {}
    typed: list[ModelMessage] = []
    for message in request.messages:
        if message.role == "assistant":
            parts: list[Any] = []
            for block in message.content:
                if isinstance(block, ToolUse):
                    names[block.id] = block.name
                    parts.append(ToolCallPart(block.name, block.input, block.id))
                elif isinstance(block, Text):
                    parts.append(TextPart(block.text))
            typed.append(ModelResponse(parts=parts))
        else:
            parts = [
                ToolReturnPart(names[block.tool_use_id], block.content, block.tool_use_id)
                if isinstance(block, ToolResult)
                else UserPromptPart(block.text)
                for block in message.content
                if isinstance(block, ToolResult | Text)
            ]
            typed.append(ModelRequest(parts=parts))
    # request_path's pydantic-ai contender, given this request's tools and limit.
    pydantic_ai = pydantic_ai_path(
        "openai",
        Route("mock", MOCK_URL, mock=True),
        typed,
        tools=request.tools,
        max_tokens=request.max_tokens,
    )

    contenders: dict[str, Callable[[], object]] = {
        "floor, the finished body posted": floor,
        "carryall, Backend.complete": lambda: agent.backend.complete(request),
        "OpenAI SDK, create": raw_sdk,
        "pydantic-ai, request": pydantic_ai,
    }
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    try:
        for run in contenders.values():
            run()  # warm caches and lazy imports outside the clock
        for _ in range(args.runs):
            for name, run in contenders.items():
                start = cpu()
                run()
                samples[name].append(cpu() - start)
    finally:
        pydantic_ai.close()  # type: ignore[attr-defined]
    print(
        f"  the step's request alone ({len(request.messages):,} messages, "
        f"{len(data) / 1e6:.1f} MB), beside the peers, by the same mock transport:"
    )
    ours = statistics.median(samples["carryall, Backend.complete"])
    for name, taken in samples.items():
        times = statistics.median(taken) / max(ours, 1e-9)
        print(f"    {name:32}: {ms(taken)}, {times:6.2f}x carryall")


# -- appends -------------------------------------------------------------------

_WRITER = r"""
import os, sys, time
from carryall.blocks import Message
from carryall.sessions import open_store
from carryall.sessions._transcript import Event, encode_event, now

kind, location, session_id, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
message = Message.user("writer event: " + "the build failed again " * 4)
if kind == "store":
    session = open_store(location).open(session_id)
elif kind == "file":
    line = encode_event(Event("append", now(), n=1, start=0, messages=[message]))
    fd = os.open(location, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
else:
    import psycopg
    conn = psycopg.connect(location, autocommit=True)
    line = encode_event(Event("append", now(), n=1, start=0, messages=[message]))
sys.stdout.write("ready\n")
sys.stdout.flush()
sys.stdin.readline()  # go
start = time.time()
for i in range(count):
    if kind == "store":
        session.append([message])
    elif kind == "file":
        os.write(fd, line)
        os.fsync(fd)
    else:
        conn.execute(
            "INSERT INTO floor(session, seq, line) VALUES (%s, %s, %s)", (session_id, i, line)
        )
print(start, time.time(), flush=True)
"""


def writers(kind: str, locations: list[tuple[str, str]], count: int) -> float:
    """Appends per second of wall time of one writer process per `(location, session)`."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, kind, location, session, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for location, session in locations
    ]
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()  # ready: imported and opened
    for child in children:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
    spans = []
    for child in children:
        out, _ = child.communicate(timeout=900)
        if child.returncode:
            raise RuntimeError(f"a {kind} writer failed with exit code {child.returncode}")
        spans.append(tuple(float(x) for x in out.split()))
    took = max(end for _, end in spans) - min(start for start, _ in spans)
    return len(locations) * count / took


def rate(samples: list[float]) -> str:
    return f"median {statistics.median(samples):8,.0f}/s, mean {statistics.fmean(samples):8,.0f}/s"


def rate_line(label: str, ours: list[float], floor: list[float], least: float = 0.5) -> None:
    ratio = statistics.median(ours) / statistics.median(floor)
    print(
        f"  {label:38}: {rate(ours)}   floor {rate(floor)}   "
        f"{ratio:.2f}x -> {verdict(ratio >= least)} (target {least}x)"
    )


def bench_jsonl(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="carryall-scale-jsonl-"))
    message = Message.user("writer event: " + "the build failed again " * 4)
    line = encode_event(Event("append", now(), n=1, start=0, messages=[message]))
    count = args.appends
    try:
        store = Store(root / "store")
        ours1: list[float] = []
        floor1: list[float] = []
        ours8: list[float] = []
        floor8: list[float] = []
        caught: list[float] = []
        for round_ in range(args.rounds):
            session = store.create(backend="bench")
            start = time.perf_counter()
            for _ in range(count):
                session.append([message])
            ours1.append(count / (time.perf_counter() - start))
            path = root / f"floor-{round_}.jsonl"
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            start = time.perf_counter()
            for _ in range(count):
                os.write(fd, line)
                os.fsync(fd)
            floor1.append(count / (time.perf_counter() - start))
            os.close(fd)
            ids = [store.create(backend="bench").id for _ in range(8)]
            ours8.append(writers("store", [(str(store.root), i) for i in ids], count))
            # What the appends left to the index: the next search's catch-up.
            start = time.perf_counter()
            store.recall.sync()
            caught.append(time.perf_counter() - start)
            files = [(str(root / f"floor8-{round_}-{i}.jsonl"), "-") for i in range(8)]
            floor8.append(writers("file", files, count))
        print(
            f"jsonl: appends of one message, {count} per writer, {args.rounds} rounds (wall time)"
        )
        rate_line("1 writer vs write+fsync", ours1, floor1)
        rate_line("8 writer processes vs 8 write+fsync", ours8, floor8)
        print(
            f"  the next search indexes what the 8 writers appended ({8 * count:,} messages):"
            f" median {statistics.median(caught) * 1000:8.1f} ms,"
            f" mean {statistics.fmean(caught) * 1000:8.1f} ms (an append does none of it)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_postgres(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parent))
    try:
        import psycopg

        try:
            from tests.support.postgres_server import Server, binaries
        except ImportError:
            from tests.support.postgres_server import Server, binaries
    except ImportError as exc:
        print(f"postgres: skipped ({exc}; pip install -e '.[postgres]')")
        return
    bin_dir = binaries()
    if bin_dir is None:
        print("postgres: skipped (no initdb on this machine: apt-get install postgresql)")
        return
    from carryall.sessions.postgres import PostgresStore

    message = Message.user("writer event: " + "the build failed again " * 4)
    line = encode_event(Event("append", now(), n=1, start=0, messages=[message]))
    count = args.appends
    server = Server(bin_dir, fsync=True)
    try:
        url = server.create_database("bench")
        store = PostgresStore(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE floor(session text, seq integer, line bytea)")
        figures: dict[str, tuple[list[float], list[float]]] = {
            "1 writer": ([], []),
            "8 writer processes": ([], []),
            "8 threads sharing one store": ([], []),
        }
        latencies: list[float] = []
        for round_ in range(args.rounds):
            session = store.create(backend="bench")
            start = time.perf_counter()
            for _ in range(count):
                session.append([message])
            figures["1 writer"][0].append(count / (time.perf_counter() - start))
            with psycopg.connect(url, autocommit=True) as conn:
                start = time.perf_counter()
                for i in range(count):
                    conn.execute(
                        "INSERT INTO floor(session, seq, line) VALUES (%s, %s, %s)",
                        (f"one-{round_}", i, line),
                    )
                figures["1 writer"][1].append(count / (time.perf_counter() - start))
            ids = [store.create(backend="bench").id for _ in range(8)]
            figures["8 writer processes"][0].append(
                writers("store", [(url, i) for i in ids], count)
            )
            floors = [(url, f"proc-{round_}-{i}") for i in range(8)]
            figures["8 writer processes"][1].append(writers("postgres", floors, count))
            ours, lat = threads_sharing(store, message, count)
            latencies += lat
            figures["8 threads sharing one store"][0].append(ours)
            figures["8 threads sharing one store"][1].append(threads_floor(url, line, count))
        print(
            f"postgres {bin_dir.parent.name} (fsync=on): appends of one message, {count} per "
            f"writer, {args.rounds} rounds (wall time; floor: a committed INSERT of the same bytes)"
        )
        for label, (ours, floor) in figures.items():
            rate_line(label, ours, floor)
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99)]
        print(f"  8 threads sharing one store: p99 of one append {p99 * 1000:.1f} ms")
        store.close()
    finally:
        server.stop()


def threads_sharing(store: Any, message: Message, count: int) -> tuple[float, list[float]]:
    """Appends per second of 8 threads on one store, each on its own session, and each latency."""
    sessions = [store.create(backend="bench") for _ in range(8)]
    latencies: list[float] = []
    go = threading.Barrier(9)

    def write(session: Any) -> None:
        go.wait()
        for _ in range(count):
            start = time.perf_counter()
            session.append([message])
            latencies.append(time.perf_counter() - start)

    threads = [threading.Thread(target=write, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    go.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return 8 * count / (time.perf_counter() - start), latencies


def threads_floor(url: str, line: bytes, count: int) -> float:
    """Committed INSERTs per second of 8 threads, each on its own connection."""
    import psycopg

    conns = [psycopg.connect(url, autocommit=True) for _ in range(8)]
    go = threading.Barrier(9)

    def write(n: int) -> None:
        go.wait()
        for i in range(count):
            conns[n].execute(
                "INSERT INTO floor(session, seq, line) VALUES (%s, %s, %s)", (f"t{n}", i, line)
            )

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    go.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - start
    for conn in conns:
        conn.close()
    return 8 * count / took


# -- recall ------------------------------------------------------------------------


def built_once(folder: Path, build: Callable[[Path], None]) -> Path:
    """`folder`, built by `build` the first time (a build that was cut short is done again)."""
    done = folder / ".complete"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        start = time.perf_counter()
        build(folder)
        done.touch()
        print(f"  (built {folder} in {time.perf_counter() - start:.1f} s)")
    return folder


def recall_sessions(root: Path, messages: int) -> None:
    """`messages` messages in sessions of 1,000."""
    rng = random.Random(3)
    for start in range(0, messages, 1000):
        bulk_session(root, _history(min(1000, messages - start), rng))


def bench_recall(args: argparse.Namespace) -> None:
    rg = shutil.which("rg")
    root = built_once(
        args.cache / f"recall-{args.messages}", lambda f: recall_sessions(f, args.messages)
    )
    store = Store(root)
    if not store.recall.path.exists():
        start, wall = cpu(), time.perf_counter()
        store.recall.sync()
        print(
            f"  (built the index: {cpu() - start:.1f} s of CPU, "
            f"{time.perf_counter() - wall:.1f} s of wall time)"
        )
    files = sorted(str(p) for p in root.glob("*.jsonl"))
    print(f"recall: {args.messages:,} messages in {len(files):,} transcripts")
    common, rare = WORDS[1], "zanzibar"
    for word in (common, rare):
        hits = store.recall.search(word, limit=20)
        ours = cpu_runs(lambda word=word: store.recall.search(word, limit=20), args.runs)
        print(f"  {word!r:10} recall top 20 ({len(hits)} hits): {ms(ours)}")
        if rg is None:
            print("  rg: not installed (apt-get install ripgrep)")
            continue
        command = [rg, "-c", word, str(root)]
        counted = subprocess.run(command, capture_output=True, text=True, check=False).stdout
        lines = sum(int(x.rpartition(":")[2]) for x in counted.split())
        peer = cpu_runs(
            lambda command=command: subprocess.run(command, capture_output=True, check=False),
            args.runs,
        )
        ratio = statistics.median(ours) / max(statistics.median(peer), 1e-9)
        line = f"  {'':10} rg -c ({lines:,} lines):  {ms(peer)}   recall {ratio:.2f}x"
        if word == common:
            line += f" -> {verdict(ratio <= 1)} (target 1x)"
        print(line)


# -- list ------------------------------------------------------------------------


def list_sessions_of(root: Path, sessions: int) -> None:
    """`sessions` short sessions with titles."""
    rng = random.Random(4)
    for n in range(sessions):
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        bulk_session(root, _history(rng.randint(2, 24), rng), title=f"{n}: {title}")


def first_and_last(root: Path) -> int:
    """The floor: each transcript's first and last line read and decoded."""
    count = 0
    decode = msgspec.json.decode
    for path in root.glob("*.jsonl"):
        with path.open("rb") as f:
            first = f.readline()
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - 65536))
            last = f.read().rstrip(b"\n").rpartition(b"\n")[2]
        decode(first)
        decode(last)
        count += 1
    return count


def bench_list(args: argparse.Namespace) -> None:
    from carryall._commands.sessions import list_sessions

    root = built_once(
        args.cache / f"list-{args.sessions}", lambda f: list_sessions_of(f, args.sessions)
    )

    def command(as_json: bool) -> Callable[[], object]:
        def run() -> object:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                list_sessions(as_json=as_json, limit=None, location=str(root))
            return out

        return run

    table = command(False)().getvalue()  # type: ignore[attr-defined]
    rows = table.count("\n")
    floor = cpu_runs(lambda: first_and_last(root), args.runs)
    ours = cpu_runs(command(False), args.runs)
    as_json = cpu_runs(command(True), args.runs)
    print(f"list: `carryall sessions list` of {args.sessions:,} sessions ({rows:,} table lines)")
    print(f"  floor, each file's first and last line read and decoded: {ms(floor)}")
    ratio_line("sessions list (table)", ours, floor, 2.0)
    ratio = statistics.median(as_json) / statistics.median(floor)
    print(f"  sessions list --json: {ms(as_json)}, {ratio:.2f}x the floor")


# -- local -------------------------------------------------------------------------


def bench_local(args: argparse.Namespace) -> None:
    try:
        import httpx2

        from carryall import local
        from carryall.local import LocalServer
    except ImportError as exc:
        print(f"local: skipped ({exc})")
        return
    if not local.status().ready:
        print("local: skipped (the local backend is not installed: carryall local install)")
        return
    from carryall.providers import Request
    from carryall.transport.openai import OpenAIBackend
    from local_speed import server_cpu

    prompt = "Write a long story about a lighthouse keeper and the ships she watches."
    tokens = args.tokens
    with LocalServer() as server:
        backend = OpenAIBackend(
            name="local",
            dialect="llama-server",
            model=server.model_id,
            base_url=f"{server.base_url}/v1",
            capabilities=server.capabilities,
            server=server,
        )
        request = Request(
            model=server.model_id,
            messages=(Message.user(prompt),),
            max_tokens=tokens,
        )
        # The direct request is carryall's own body without any schema: the
        # same prompt, limits and sampling, so only the constraint differs.
        addressed = backend.addressed(request)
        direct = json.loads(backend._codec.for_request(addressed).encode_bytes(addressed, True))
        schema = direct.pop("response_format", None)
        direct.setdefault("stream_options", {"include_usage": True})
        # For the record: the same request held to the schema, as it went before.
        held = json.loads(backend._codec.encode_bytes(addressed, True))
        held.setdefault("stream_options", {"include_usage": True})
        client = httpx2.Client(base_url=server.base_url, timeout=600)

        def ours() -> Run:
            seen: list[float] = []
            cpu_before = server_cpu(server.pid or 0) or 0.0
            start = time.perf_counter()
            response = backend.complete(request, on_text=lambda _: seen.append(time.perf_counter()))
            out = response.usage.output_tokens if response.usage else 0
            took = time.perf_counter() - start
            used = (server_cpu(server.pid or 0) or 0.0) - cpu_before
            return Run(out, took, seen[0] - start, seen[-1] - start, used)

        def theirs(body: dict[str, Any]) -> Run:
            seen: list[float] = []
            out = 0
            cpu_before = server_cpu(server.pid or 0) or 0.0
            start = time.perf_counter()
            with client.stream("POST", "/v1/chat/completions", json=body) as answer:
                for raw in answer.iter_lines():
                    if not raw.startswith("data: ") or raw == "data: [DONE]":
                        continue
                    chunk = json.loads(raw[6:])
                    delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                    if delta.get("content"):
                        seen.append(time.perf_counter())
                    if chunk.get("usage"):
                        out = chunk["usage"]["completion_tokens"]
            took = time.perf_counter() - start
            used = (server_cpu(server.pid or 0) or 0.0) - cpu_before
            return Run(out, took, seen[0] - start, seen[-1] - start, used)

        ours()
        theirs(direct)
        mine: list[Run] = []
        peer: list[Run] = []
        schema_held: list[Run] = []
        failures: list[str] = []
        for _ in range(args.runs):
            mine.append(ours())
            peer.append(theirs(direct))
            try:
                schema_held.append(theirs(held))
            except httpx2.HTTPError as exc:
                # Noted, and the server started again for the next round.
                failures.append(f"{type(exc).__name__}: {exc}")
                client.close()
                server.ensure_running()
                client = httpx2.Client(base_url=server.base_url, timeout=600)
        client.close()

    print(
        f"local: {server.model_id}, plain text, {tokens} tokens asked, {args.runs} runs in turn "
        f"(wall time); carryall's plain body {'holds' if schema else 'has no'} response_format"
    )
    contenders = (
        ("carryall (no tools)", mine),
        ("direct, no schema", peer),
        ("direct, schema held", schema_held),
    )
    for failure in dict.fromkeys(failures):
        print(f"  direct, schema held: {failures.count(failure)} request(s) failed: {failure}")
    for label, runs in contenders:
        if not runs:
            continue
        streamed = [r.streaming for r in runs]
        whole = statistics.median(r.tokens / r.took for r in runs)
        first = statistics.median(r.first for r in runs) * 1000
        per_cpu = statistics.median(r.tokens / max(r.server_cpu, 1e-9) for r in runs)
        print(
            f"  {label:20}: median {statistics.median(streamed):6.1f} tok/s as the text streams "
            f"(mean {statistics.fmean(streamed):6.1f}), {whole:6.1f} over the request, "
            f"{per_cpu:6.1f} per server CPU-second; first text after {first:.0f} ms; "
            f"{runs[0].tokens} tokens"
        )
    ratio = statistics.median(r.streaming for r in mine) / statistics.median(
        r.streaming for r in peer
    )
    print(f"  carryall / direct: {ratio:.2f}x -> {verdict(ratio >= 0.97)} (target 0.97x)")


@dataclasses.dataclass(frozen=True)
class Run:
    """One streamed answer: its tokens, the seconds to its end, first and last text, server CPU."""

    tokens: int
    took: float
    first: float
    last: float
    server_cpu: float

    @property
    def streaming(self) -> float:
        """Tokens per second from the first text to the last: the generation as it is seen."""
        return (self.tokens - 1) / max(self.last - self.first, 1e-9)


# -- main ------------------------------------------------------------------------


def main() -> None:
    """Run every section asked for, in one process, and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="recall store size")
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions for `list`")
    parser.add_argument("--history", type=int, default=10_000, help="messages for fit and step")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the append figures")
    parser.add_argument("--appends", type=int, default=200, help="appends per writer")
    parser.add_argument("--tokens", type=int, default=128, help="tokens the local backend writes")
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "carryall-bench"
        / "scale",
    )
    args = parser.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    args.cache.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    print(f"python {sys.version.split()[0]}, load {load:.1f}, cache {args.cache}")
    runners = {
        "fit": bench_fit,
        "step": bench_step,
        "jsonl": bench_jsonl,
        "postgres": bench_postgres,
        "recall": bench_recall,
        "list": bench_list,
        "local": bench_local,
    }
    for name in SECTIONS:
        if name in chosen:
            print()
            runners[name](args)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
