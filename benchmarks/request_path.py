"""The whole request path, from a history to the bytes on the socket: carryall beside its peers.

Each contender sends one step of a growing agent conversation (text, tool
rounds, a few images) through its own full path to a loopback HTTP server:

- carryall: `Backend.complete` on the Anthropic and OpenAI wires (unstreamed),
  which encodes the blocks to bytes once and posts them through the SDK's
  httpx2 client with the SDK's headers (`carryall.transport._http`); a
  breakdown line under each table says how much of it came before the body
  bytes existed (the image fitting and `Codec.sent`, timed on their own in
  the same rounds) and how much after;
- pydantic-ai: `AnthropicModel.request` and `OpenAIChatModel.request`, its
  message mapping and the (async) official SDK's `create`;
- LiteLLM: `litellm.completion` with `anthropic/` and `openai/` models and the
  server as `api_base`, from OpenAI-format messages.

The mock transport, the same kind for every contender: a child process
running a `ThreadingHTTPServer` on 127.0.0.1 that reads every POST whole and
answers it with a canned reply of that wire (a short text answer). Its CPU is
not counted; the CPU of the calling thread is (`time.thread_time`: user and
system time, so the socket writes are in it), which is everything the
caller's own thread spends, with the garbage collector on, as in a real run.
LiteLLM's logging threads are not counted, which only flatters LiteLLM.

The floor is `orjson.dumps` of carryall's finished wire body: no path can
hand the socket a body without at least serialising it. Every contender and
the floor are run in turn, round after round, in one process, so a load spike
on the shared machine lands on all of them alike; each reports the median
and the mean of its runs. Targets (carryall within 3x of the floor, each
peer at least 5x slower than carryall at 1,000 and 5,000 messages) are
printed as met or missed, never asserted.

    .venv/bin/python benchmarks/request_path.py [--runs 7] [--sizes 200,1000,5000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.server
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# LiteLLM fetches its model price map over the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

try:
    import orjson
except ImportError:
    sys.exit(
        "benchmarks/request_path.py needs the bench extra (orjson is missing): "
        "pip install -e '.[bench]'"
    )

from carryall.backends import open_backend
from carryall.config import Config
from carryall.providers import Request
from carryall.providers.anthropic import encode_request as anthropic_body
from carryall.providers.openai import encode_request as openai_body
from carryall.transport._images import fit_request_images
from carryall.transport.anthropic import ANTHROPIC_CAPABILITIES
from carryall.transport.openai import OPENAI_CAPABILITIES
from encode import (
    MAX_TOKENS,
    SYSTEM,
    TOOLS,
    carryall_history,
    conversation,
    openai_history,
    pydantic_ai_anthropic,
    pydantic_ai_history,
)

ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-4.1"
IMAGE_SIZE = 256 * 1024
MESSAGES_PER_IMAGE = 200
"""A few images: one tool-made screenshot of 256 KiB every 200 messages."""

ANTHROPIC_REPLY = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": ANTHROPIC_MODEL,
    "content": [{"type": "text", "text": "Done."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 2},
}
OPENAI_REPLY = {
    "id": "chatcmpl-01",
    "object": "chat.completion",
    "created": 1741569952,
    "model": OPENAI_MODEL,
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Done.", "refusal": None},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}


# -- the loopback server (the child process) -------------------------------------


class _Canned(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        reply = ANTHROPIC_REPLY if "messages" in self.path else OPENAI_REPLY
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve() -> None:
    """Answer every POST with a canned reply; print the port, then serve until killed."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    print(server.server_address[1], flush=True)
    server.serve_forever()


# -- the contenders ------------------------------------------------------------------


def carryall_backend(wire: str, url: str) -> Any:
    """carryall's backend for `wire`, unstreamed, sending to the loopback server."""
    return open_backend(
        wire,
        base_url=url if wire == "anthropic" else f"{url}/v1",
        api_key="not-used",
        model=ANTHROPIC_MODEL if wire == "anthropic" else OPENAI_MODEL,
        config=Config(),
        stream=False,
    )


def carryall_path(backend: Any, history: list[Any]) -> Callable[[], object]:
    """`backend` completing the whole history."""

    def run() -> object:
        request = Request(
            model="", messages=tuple(history), system=SYSTEM, tools=TOOLS, max_tokens=MAX_TOKENS
        )
        return backend.complete(request)

    return run


def carryall_encode(backend: Any, history: list[Any]) -> Callable[[], object]:
    """The part of `backend.complete` before the send: the image fitting and `Codec.sent`.

    Timed beside the whole path for the breakdown line only (the part after
    the body bytes exist is the whole path less this); it is not a contender.
    """

    def run() -> object:
        request = Request(
            model="", messages=tuple(history), system=SYSTEM, tools=TOOLS, max_tokens=MAX_TOKENS
        )
        fitted, _ = fit_request_images(backend.addressed(request), backend.image_limits)
        return backend._codec.sent(fitted, backend.stream)

    return run


def litellm_path(wire: str, url: str, history: list[dict[str, Any]]) -> Callable[[], object]:
    """`litellm.completion` to the server, from OpenAI-format messages."""
    import litellm

    tools = [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in TOOLS
    ]
    model = f"anthropic/{ANTHROPIC_MODEL}" if wire == "anthropic" else f"openai/{OPENAI_MODEL}"
    base = url if wire == "anthropic" else f"{url}/v1"
    messages = [{"role": "system", "content": SYSTEM}, *history]

    def run() -> object:
        return litellm.completion(
            model=model,
            messages=messages,
            tools=tools,
            max_tokens=MAX_TOKENS,
            api_base=base,
            api_key="not-used",
        )

    return run


def pydantic_ai_path(wire: str, url: str, history: list[Any]) -> Callable[[], object]:
    """pydantic-ai's model for `wire`, `request` run on one event loop kept for every run."""
    from pydantic_ai.models import ModelRequestParameters, ModelSettings
    from pydantic_ai.tools import ToolDefinition

    model: Any
    # The SDK clients are built here and handed over: pydantic-ai's own
    # default makes an `httpx.AsyncClient`, which SDKs built on httpx2 refuse.
    # The request still runs pydantic-ai's mapping and the SDK's `create`.
    if wire == "anthropic":
        model = pydantic_ai_anthropic(ANTHROPIC_MODEL, base_url=url)
    else:
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = AsyncOpenAI(api_key="not-used", base_url=f"{url}/v1")
        model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
    params = ModelRequestParameters(
        function_tools=[
            ToolDefinition(
                name=t.name, description=t.description, parameters_json_schema=t.input_schema
            )
            for t in TOOLS
        ]
    )
    settings = ModelSettings(max_tokens=MAX_TOKENS)
    loop = asyncio.new_event_loop()

    def run() -> object:
        return loop.run_until_complete(model.request(history, settings, params))

    return run


def floor_path(wire: str, history: list[Any]) -> Callable[[], object]:
    """`orjson.dumps` of carryall's finished body for `wire`, built once."""
    request = Request(
        model=ANTHROPIC_MODEL if wire == "anthropic" else OPENAI_MODEL,
        messages=tuple(history),
        system=SYSTEM,
        tools=TOOLS,
        max_tokens=MAX_TOKENS,
    )
    if wire == "anthropic":
        body = anthropic_body(request, ANTHROPIC_CAPABILITIES)
    else:
        body = openai_body(request, OPENAI_CAPABILITIES)
    return lambda: orjson.dumps(body)


# -- timing and report ------------------------------------------------------------------

FLOOR = "floor (orjson.dumps)"
CONTENDERS = (FLOOR, "carryall", "pydantic-ai", "litellm")
ENCODE = "carryall encode"
"""Not a contender: carryall's path up to the body bytes, for the breakdown line."""
WIRES = ("anthropic", "openai")


@dataclass
class Figures:
    """One contender's CPU times, in seconds, from every run."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples)


def measure(url: str, messages: int, runs: int) -> dict[str, dict[str, Figures]]:
    """Every contender on both wires at one size, in turn, `runs` rounds; gc left on."""
    tasks = conversation(
        messages, max(1, messages // MESSAGES_PER_IMAGE), seed=4, image_size=IMAGE_SIZE
    )
    blocks = carryall_history(tasks)
    flat = openai_history(tasks, blocks)
    typed = pydantic_ai_history(tasks)
    got: dict[str, dict[str, Figures]] = {}
    for wire in WIRES:
        backend = carryall_backend(wire, url)
        paths = {
            FLOOR: floor_path(wire, blocks),
            "carryall": carryall_path(backend, blocks),
            # Right after carryall, so every contender still runs after the
            # one it ran after before, and the floor after LiteLLM.
            ENCODE: carryall_encode(backend, blocks),
            "pydantic-ai": pydantic_ai_path(wire, url, typed),
            "litellm": litellm_path(wire, url, flat),
        }
        for run in paths.values():
            run()  # warm caches, pools and lazy imports outside the clock
        figures = {name: Figures([]) for name in paths}
        for _ in range(runs):
            for name, run in paths.items():
                start = time.thread_time()
                run()
                figures[name].samples.append(time.thread_time() - start)
        got[wire] = figures
    return got


def report(messages: int, got: dict[str, dict[str, Figures]], runs: int) -> None:
    """Print one size's table, both wires, and the targets as met or missed."""
    print(f"\n{messages:,} messages ({max(1, messages // MESSAGES_PER_IMAGE)} images), "
          f"{runs} runs each, CPU of the calling thread, gc on")  # fmt: skip
    judged = messages >= 1_000
    for wire in WIRES:
        figures = got[wire]
        floor = figures[FLOOR].median
        ours = figures["carryall"].median
        print(f"  {wire} wire")
        print(
            f"    {'contender':<22}{'median ms':>11}{'mean ms':>10}{'x floor':>9}{'x carryall':>12}"
        )
        for name in CONTENDERS:
            f = figures[name]
            print(
                f"    {name:<22}{f.median * 1000:11.2f}{f.mean * 1000:10.2f}"
                f"{f.median / floor:9.2f}{f.median / ours:12.2f}"
            )
        encode = figures[ENCODE].median
        print(
            f"    carryall's path: {encode * 1000:.2f} ms to the body bytes (image fitting and "
            f"Codec.sent), {(ours - encode) * 1000:.2f} ms after them (send, read, decode), "
            "by median"
        )
        if not judged:
            continue
        verdict = "met" if ours / floor <= 3 else "MISSED"
        print(f"    target: carryall within 3x of the floor: {ours / floor:.2f}x -> {verdict}")
        for name in CONTENDERS[2:]:
            ratio = figures[name].median / ours
            verdict = "met" if ratio >= 5 else "MISSED"
            print(f"    target: {name} at least 5x slower than carryall: {ratio:.2f}x -> {verdict}")


def main() -> None:
    """Start the loopback server, time every size, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each contender")
    parser.add_argument("--sizes", default="200,1000,5000", help="message counts, comma-separated")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    missing = [
        name for name in ("litellm", "pydantic_ai") if importlib.util.find_spec(name) is None
    ]
    if missing:
        sys.exit(
            f"benchmarks/request_path.py needs the bench extra ({', '.join(missing)} missing): "
            "pip install -e '.[bench]'"
        )
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        sys.exit(f"--sizes {args.sizes!r}: expected message counts such as 200,1000,5000")
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        gc.collect()
        for messages in sizes:
            report(messages, measure(url, messages, args.runs), args.runs)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
