"""The whole request path, from a history to the bytes on the socket: carryall beside its peers.

Each contender sends one step of a growing agent conversation (text, tool
rounds, a few images) through its own full path, two ways (each a table):

- through a mock transport, as issue 14 asks: the HTTP client each
  contender's path ends in is given an `httpx2.MockTransport` (LiteLLM's
  Anthropic path, on httpx, an `httpx.MockTransport`), which takes the
  finished request, reads its body and answers with a canned reply of that
  wire. Everything up to the bytes handed to the socket runs (the mapping,
  the encoding, the HTTP client building and sending the request), and the
  reply is read and decoded; nothing is written to a socket;
- to a loopback HTTP server (what this benchmark measured first): the same,
  plus the kernel's work of writing the body to a socket and reading the
  reply from one, and the HTTP/1.1 connection handling of each client.
  That part is past "the bytes handed to the socket" and grows with the
  body (about 0.2 ms per MB here), so it is printed, not judged.

The contenders:

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

The loopback server, the same for every contender: a child process running
a `ThreadingHTTPServer` on 127.0.0.1 that reads every POST whole and answers
it with the same canned reply (a short text answer). Its CPU is not counted;
the CPU of the calling thread is (`time.thread_time`: user and system time,
so the socket writes are in it), which is everything the caller's own thread
spends, with the garbage collector on, as in a real run. LiteLLM's logging
threads are not counted, which only flatters LiteLLM.

carryall's backend keeps the JSON of the messages it sent last
(`carryall._json.KeptItems`), as it does in every run: each timed request
sends the same history, so after the warm-up every message but those
holding an image is copied in as written before. An agent's next step is
the same history with a few messages added, which are then all that is
written. The breakdown line's "to the body bytes" figure is that path.

The floor is `orjson.dumps` of carryall's finished wire body: no path can
hand the socket a body without at least serialising it. Every contender and
the floor are run in turn, round after round, in one process, so a load spike
on the shared machine lands on all of them alike; each reports the median
and the mean of its runs. Targets (carryall within 3x of the floor, each
peer at least 5x slower than carryall at 1,000 and 5,000 messages) are
printed as met or missed, never asserted.

    .venv/bin/python benchmarks/request_path.py [--runs 7] [--sizes 200,1000,5000]
        [--via mock,loopback]
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
from collections.abc import Callable, Sequence
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
from carryall.providers import Request, ToolSpec
from carryall.providers.anthropic import encode_request as anthropic_body
from carryall.providers.codec import codec_for
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
        data = canned(self.path)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def canned(path: str) -> bytes:
    """The reply to a POST to `path`: a short text answer of that wire."""
    wire = "/chat/completions" not in path
    return json.dumps(ANTHROPIC_REPLY if wire else OPENAI_REPLY).encode()


def mock_transport(http: Any) -> Any:
    """A `MockTransport` of `http` (httpx2 or httpx): reads each body, answers `canned`."""

    def answer(request: Any) -> Any:
        request.read()
        return http.Response(
            200, headers={"content-type": "application/json"}, content=canned(request.url.path)
        )

    return http.MockTransport(answer)


@dataclass(frozen=True)
class Route:
    """Where every contender's requests go: the loopback server's URL, or a mock transport."""

    name: str
    url: str
    mock: bool


MOCK_URL = "http://mock.invalid"


def serve() -> None:
    """Answer every POST with a canned reply; print the port, then serve until killed."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    print(server.server_address[1], flush=True)
    server.serve_forever()


# -- the contenders ------------------------------------------------------------------


def carryall_backend(wire: str, route: Route) -> Any:
    """carryall's backend for `wire`, unstreamed, sending by `route`.

    For the mock transport, the SDK's `DefaultHttpxClient` (the httpx2 client
    the backend sends through) is made with it while the backend is opened.
    """
    url = route.url

    def opened() -> Any:
        return open_backend(
            wire,
            base_url=url if wire == "anthropic" else f"{url}/v1",
            api_key="not-used",
            model=ANTHROPIC_MODEL if wire == "anthropic" else OPENAI_MODEL,
            config=Config(),
            stream=False,
        )

    if not route.mock:
        return opened()
    import httpx2

    sdk = importlib.import_module("anthropic" if wire == "anthropic" else "openai")
    real = sdk.DefaultHttpxClient

    class Mocked(real):  # type: ignore[misc,valid-type]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(transport=mock_transport(httpx2), **kwargs)

    sdk.DefaultHttpxClient = Mocked
    try:
        return opened()
    finally:
        sdk.DefaultHttpxClient = real


def carryall_path(backend: Any, history: list[Any]) -> Callable[[], object]:
    """`backend` completing the whole history."""

    def run() -> object:
        request = Request(
            model="", messages=tuple(history), system=SYSTEM, tools=TOOLS, max_tokens=MAX_TOKENS
        )
        return backend.complete(request)

    return run


def carryall_encode(
    backend: Any, history: list[Any], fresh: Callable[[], Any] | None = None
) -> Callable[[], object]:
    """The part of `backend.complete` before the send: the image fitting and `Codec.sent`.

    Timed beside the whole path for the breakdown line only (the part after
    the body bytes exist is the whole path less this); it is not a contender.
    With `fresh`, each run makes its codec with it (one that kept nothing,
    as if the history were sent for the first time) instead of using the
    backend's.
    """

    def run() -> object:
        request = Request(
            model="", messages=tuple(history), system=SYSTEM, tools=TOOLS, max_tokens=MAX_TOKENS
        )
        fitted, _ = fit_request_images(backend.addressed(request), backend.image_limits)
        codec = backend._codec if fresh is None else fresh()
        return codec.sent(fitted, backend.stream)

    return run


def traced_path(backend: Any, history: list[Any], traced: bool) -> Callable[[], object] | None:
    """One agent step's request as `Agent` sends it, with tracing off or on (None: no otel extra).

    Off is the agent's own request path with no tracer, which must cost what
    `backend.complete` does; on is the same step inside a turn span with its
    request span, through the OpenTelemetry SDK with a batch processor, as a
    program that exports spans runs it (the in-memory exporter stands in for
    the network and is emptied each run).
    """
    from carryall.agent import Agent

    tracer = None
    if traced:
        if importlib.util.find_spec("opentelemetry.sdk") is None:
            return None
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from carryall.tracing import AgentTracer

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        tracer = AgentTracer(session_id="bench", tracer_provider=provider)
    agent = Agent(backend, tracer=tracer)

    def run() -> object:
        request = Request(
            model="", messages=tuple(history), system=SYSTEM, tools=TOOLS, max_tokens=MAX_TOKENS
        )
        if tracer is None:
            return agent._complete(request)
        with tracer.turn(backend):
            answer = agent._complete(request)
        exporter.clear()
        return answer

    return run


def unkept_codec(wire: str, backend: Any) -> Callable[[], Any]:
    """A maker of the codec `backend`'s is made from, new each time: nothing kept in it."""
    target = backend._codec.target
    return lambda: codec_for(wire, target)


def litellm_path(wire: str, route: Route, history: list[dict[str, Any]]) -> Callable[[], object]:
    """`litellm.completion` by `route`, from OpenAI-format messages.

    For the mock transport LiteLLM is handed its client, as its `client`
    argument allows: its own `HTTPHandler` on an httpx client for Anthropic,
    an `openai.OpenAI` on an httpx2 client for OpenAI.
    """
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
    base = route.url if wire == "anthropic" else f"{route.url}/v1"
    messages = [{"role": "system", "content": SYSTEM}, *history]
    client: dict[str, Any] = {}
    if route.mock and wire == "anthropic":
        import httpx
        from litellm.llms.custom_httpx.http_handler import HTTPHandler

        client["client"] = HTTPHandler(client=httpx.Client(transport=mock_transport(httpx)))
    elif route.mock:
        import httpx2
        from openai import OpenAI

        client["client"] = OpenAI(
            api_key="not-used",
            base_url=base,
            http_client=httpx2.Client(transport=mock_transport(httpx2)),
        )

    def run() -> object:
        return litellm.completion(
            model=model,
            messages=messages,
            tools=tools,
            max_tokens=MAX_TOKENS,
            api_base=base,
            api_key="not-used",
            **client,
        )

    return run


def pydantic_ai_path(
    wire: str,
    route: Route,
    history: list[Any],
    *,
    tools: Sequence[ToolSpec] = TOOLS,
    max_tokens: int = MAX_TOKENS,
) -> Callable[[], object]:
    """pydantic-ai's model for `wire`, `request` run on one event loop kept for every run.

    For the mock transport its SDK client is made on an `httpx2.AsyncClient`
    with it, as the SDKs' `http_client` argument allows. `tools` and
    `max_tokens` are this benchmark's unless another's are given.
    """
    from pydantic_ai.models import ModelRequestParameters, ModelSettings
    from pydantic_ai.tools import ToolDefinition

    model: Any
    url = route.url
    http_client: Any = None
    if route.mock:
        import httpx2

        http_client = httpx2.AsyncClient(transport=mock_transport(httpx2))
    # The SDK clients are built here and handed over: pydantic-ai's own
    # default makes an `httpx.AsyncClient`, which SDKs built on httpx2 refuse.
    # The request still runs pydantic-ai's mapping and the SDK's `create`.
    if wire == "anthropic":
        model = pydantic_ai_anthropic(ANTHROPIC_MODEL, base_url=url, http_client=http_client)
    else:
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = AsyncOpenAI(api_key="not-used", base_url=f"{url}/v1", http_client=http_client)
        model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
    params = ModelRequestParameters(
        function_tools=[
            ToolDefinition(
                name=t.name, description=t.description, parameters_json_schema=t.input_schema
            )
            for t in tools
        ]
    )
    settings = ModelSettings(max_tokens=max_tokens)
    loop = asyncio.new_event_loop()

    def run() -> object:
        return loop.run_until_complete(model.request(history, settings, params))

    def close() -> None:
        # The SDK client's connections closed on its own loop, then the loop:
        # left to the collector, they are closed on a closed loop, which
        # prints a traceback in the middle of the tables.
        loop.run_until_complete(model.client.close())
        loop.close()

    run.close = close  # type: ignore[attr-defined]
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
UNKEPT = "carryall encode, nothing kept"
TRACE_OFF = "carryall agent step, tracing off"
TRACE_ON = "carryall agent step, tracing on"
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


def measure(route: Route, messages: int, runs: int) -> dict[str, dict[str, Figures]]:
    """Every contender on both wires at one size, by `route`, in turn, `runs` rounds; gc left on."""
    tasks = conversation(
        messages, max(1, messages // MESSAGES_PER_IMAGE), seed=4, image_size=IMAGE_SIZE
    )
    blocks = carryall_history(tasks)
    flat = openai_history(tasks, blocks)
    typed = pydantic_ai_history(tasks)
    got: dict[str, dict[str, Figures]] = {}
    for wire in WIRES:
        backend = carryall_backend(wire, route)
        paths = {
            FLOOR: floor_path(wire, blocks),
            "carryall": carryall_path(backend, blocks),
            # The breakdown's two (not contenders) right after carryall, so
            # the contenders keep their order, and the floor runs after LiteLLM.
            ENCODE: carryall_encode(backend, blocks),
            UNKEPT: carryall_encode(backend, blocks, unkept_codec(wire, backend)),
            **{
                name: path
                for name, traced in ((TRACE_OFF, False), (TRACE_ON, True))
                if (path := traced_path(backend, blocks, traced)) is not None
            },
            "pydantic-ai": pydantic_ai_path(wire, route, typed),
            "litellm": litellm_path(wire, route, flat),
        }
        for run in paths.values():
            run()  # warm caches, pools and lazy imports outside the clock
        figures = {name: Figures([]) for name in paths}
        for _ in range(runs):
            for name, run in paths.items():
                start = time.thread_time()
                run()
                figures[name].samples.append(time.thread_time() - start)
        for run in paths.values():
            getattr(run, "close", lambda: None)()
        got[wire] = figures
    return got


ROUTES = {
    "mock": "through a mock transport (issue 14's measure: to the bytes handed to the socket)",
    "loopback": "to a loopback server (the socket writes and reads too; not what is judged)",
}


def report(route: Route, messages: int, got: dict[str, dict[str, Figures]], runs: int) -> None:
    """Print one size's table by one route, both wires, and the targets as met or missed."""
    print(f"\n{messages:,} messages ({max(1, messages // MESSAGES_PER_IMAGE)} images), "
          f"{ROUTES[route.name]}, {runs} runs each, CPU of the calling thread, gc on")  # fmt: skip
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
            f"Codec.sent), {(ours - encode) * 1000:.2f} ms after them (send, reply, decode), "
            "by median"
        )
        print(
            f"    with nothing kept from the last request (a history sent for the first time), "
            f"{figures[UNKEPT].median * 1000:.2f} ms to the body bytes"
        )
        if TRACE_ON in figures:
            off, on = figures[TRACE_OFF], figures[TRACE_ON]
            print(
                f"    tracing: an agent step {off.median * 1000:.2f} ms off "
                f"({(off.median - ours) * 1000:+.2f} ms against carryall's row), "
                f"{on.median * 1000:.2f} ms on: {(on.median - off.median) * 1000:+.2f} ms a step "
                f"by median ({(on.mean - off.mean) * 1000:+.2f} ms by mean)"
            )
        else:
            print("    tracing: not timed (pip install -e '.[otel]')")
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
    parser.add_argument(
        "--via",
        default="mock,loopback",
        help="where requests go, comma-separated: mock (a mock transport), loopback (a server)",
    )
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
    via = args.via.split(",")
    if not via or set(via) - set(ROUTES):
        sys.exit(f"--via {args.via!r}: expected mock, loopback or both, comma-separated")
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        routes = {
            "mock": Route("mock", MOCK_URL, mock=True),
            "loopback": Route(
                "loopback", f"http://127.0.0.1:{server.stdout.readline().strip()}", mock=False
            ),
        }
        gc.collect()
        for messages in sizes:
            for name in via:
                route = routes[name]
                report(route, messages, measure(route, messages, args.runs), args.runs)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
