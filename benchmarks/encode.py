"""Encoding a history for the Anthropic API: carryall beside LiteLLM and pydantic-ai.

Each contender starts from the same conversation held in its own native form
and ends with the request body as JSON bytes (the peers by `orjson.dumps`):

- carryall: a list of `Message` blocks through `encode_bytes` (the codec
  contract), the bytes its transport sends (one pass of msgspec's encoder);
- LiteLLM: OpenAI-format messages (results as `role: tool`, a tool's images as
  `image_url` data URLs in a user message after the results) through
  `anthropic_messages_pt`, its OpenAI-to-Anthropic conversion;
- pydantic-ai: `ModelRequest`/`ModelResponse` parts through
  `AnthropicModel._map_message`, called directly with a dummy key (nothing
  is sent).

Building each native history is not timed; the conversion plus `orjson.dumps`
is. The floor is `orjson.dumps` of carryall's finished body, built once: no
encoder can beat serialising its own output. The peers' bodies get the same
model, max_tokens and tool list as carryall's, prebuilt (a constant few
hundred bytes), so what differs is the message conversion.

How it is timed: CPU time of the calling thread (`time.thread_time`), with
the garbage collector on, as in a real run where the SDKs and the session are
loaded and a collection can land in any request. Every contender and the
floor get the same number of runs; each contender's history is built just
before its turn and dropped after it, so no one's objects crowd another's
heap; the measurement is repeated in a few fresh processes and every run of
every process is pooled, and each contender reports the median and the mean
of that pool (a mean far above the median is collections, not noise). The
old method's figure is printed beside it for comparison: the best wall-clock
run with the collector off, the best of any process, which flatters whoever
a quiet moment happened to favour (it once printed carryall below the floor).
carryall's history build is printed beside the table, and so is one pass of
the check every timed encode begins with (`blocks.survey_history`), so the
share of the encode that is checking the history can be read off.

Two workloads: 1,000 messages in tool rounds with 20 one-MiB images spread
over them, and 10,000 messages of text-only tool rounds. The targets (with
images: carryall within 1.5x of the floor, each peer at least 3x slower;
text only: 5x and 5x) are printed as met or missed, never asserted; "slower"
is read against carryall, the stricter of the two readings. Peers are
benchmark-only dependencies (the `bench` extra), never runtime ones.

    .venv/bin/python benchmarks/encode.py [--rounds 9] [--processes 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import gc
import importlib.util
import io
import json
import os
import random
import resource
import statistics
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# LiteLLM fetches its model price map over the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

try:
    import orjson
except ImportError:
    sys.exit(
        "benchmarks/encode.py needs the bench extra (orjson is missing): pip install -e '.[bench]'"
    )

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

from carryall.blocks import Image, Message, Text, ToolResult, ToolUse, survey_history
from carryall.providers import DEFAULT_TARGET, Capabilities, Request, Target, ToolSpec
from carryall.providers.anthropic import encode_body, encode_bytes

MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 4096
SYSTEM = "You are a careful coding agent. Use the tools to look before you answer."
IMAGE_SIZE = int(os.environ.get("CARRYALL_BENCH_IMAGE_BYTES", 1024 * 1024))
"""Bytes of each image; `--image-kib` sets it for the worker processes (through the environment)."""
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROUNDS_PER_TASK = 4
"""Tool rounds between a user's question and the assistant's answer: 10 messages a task."""

TOOLS = (
    ToolSpec(
        name="read_file",
        description="Read a text file from the workspace.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    ),
    ToolSpec(
        name="screenshot",
        description="Take a screenshot of a window and show it.",
        input_schema={
            "type": "object",
            "properties": {"window": {"type": "string"}},
            "required": ["window"],
        },
    ),
)


# -- the conversation, independent of any library ----------------------------


@dataclass(frozen=True)
class Round:
    """One tool round: the assistant's remark and call, the tool's text and maybe an image."""

    call_id: str
    remark: str
    tool: str
    args: dict[str, Any]
    result: str
    image: bytes | None


@dataclass(frozen=True)
class Task:
    """A user's question, the tool rounds it took, and the assistant's answer."""

    question: str
    rounds: list[Round]
    answer: str


def noise_png(rng: random.Random, size: int) -> bytes:
    """A valid RGB PNG of random pixels of about `size` bytes (zlib level 0: no compression)."""
    side = max(1, int(((size - 100) / 3) ** 0.5))
    rows = b"".join(b"\x00" + rng.randbytes(side * 3) for _ in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        PNG_MAGIC
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 0))
        + chunk(b"IEND", b"")
    )


def conversation(messages: int, images: int, seed: int, image_size: int = IMAGE_SIZE) -> list[Task]:
    """Tasks adding up to `messages` messages, `images` of their rounds showing an image.

    Results are a few lines of varied file text (a few hundred bytes, like a
    real `read_file`), and each image is a real PNG of random pixels stored
    uncompressed (`noise_png`), about `image_size` bytes, all from one seeded
    generator so every run encodes the same data. (Until December 2026 an
    image was PNG magic followed by random bytes; since the transport checks
    the images it sends, such bytes went as a placeholder on carryall's full
    path, which made `request_path.py` compare a text line with 256 KiB.)
    """
    per_task = 2 + 2 * ROUNDS_PER_TASK
    if messages % per_task:
        raise SystemExit(f"message count {messages} is not a multiple of {per_task}")
    rng = random.Random(seed)
    words = [
        "def", "return", "self", "value", "index", "buffer", "carrier", "result",
        "message", "import", "class", "async", "await", "yield", "raise", "error",
    ]  # fmt: skip
    total_rounds = messages // per_task * ROUNDS_PER_TASK
    with_image = {(n * total_rounds) // images for n in range(images)} if images else set()
    tasks: list[Task] = []
    n = 0
    for t in range(messages // per_task):
        rounds: list[Round] = []
        for _ in range(ROUNDS_PER_TASK):
            lines = (" ".join(rng.choices(words, k=rng.randint(4, 12))) for _ in range(8))
            if n in with_image:
                image = noise_png(rng, image_size)
                rounds.append(
                    Round(
                        f"toolu_{n:06d}",
                        "Let me look at the editor.",
                        "screenshot",
                        {"window": f"editor-{n}"},
                        "screenshot taken",
                        image,
                    )
                )
            else:
                rounds.append(
                    Round(
                        f"toolu_{n:06d}",
                        f"I'll read module {n} next.",
                        "read_file",
                        {"path": f"src/pkg/module_{n}.py"},
                        "\n".join(lines),
                        None,
                    )
                )
            n += 1
        tasks.append(
            Task(
                f"Task {t}: what does module {n - 1} do with the buffer?",
                rounds,
                f"Module {n - 1} copies the buffer once and returns the carrier.",
            )
        )
    return tasks


# -- each contender's native history ------------------------------------------


def carryall_history(tasks: list[Task]) -> list[Message]:
    """The conversation as carryall blocks; each image's base64 made once, as a session holds it."""
    out: list[Message] = []
    for task in tasks:
        out.append(Message.user(task.question))
        for r in task.rounds:
            out.append(Message.assistant([Text(r.remark), ToolUse(r.call_id, r.tool, r.args)]))
            shots = [Image.from_bytes("image/png", r.image, "shot.png")] if r.image else []
            out.append(Message.tool_results([ToolResult(r.call_id, r.result)], shots))
        out.append(Message.assistant([Text(task.answer)]))
    return out


def openai_history(tasks: list[Task], carryall: list[Message]) -> list[dict[str, Any]]:
    """The conversation as OpenAI chat messages, LiteLLM's input form.

    Data URLs reuse carryall's base64 text, so neither side pays for
    encoding an image the other already holds encoded.
    """
    uris = iter(image.data_uri() for m in carryall for image in m.images())
    out: list[dict[str, Any]] = []
    for task in tasks:
        out.append({"role": "user", "content": task.question})
        for r in task.rounds:
            out.append(
                {
                    "role": "assistant",
                    "content": r.remark,
                    "tool_calls": [
                        {
                            "id": r.call_id,
                            "type": "function",
                            "function": {"name": r.tool, "arguments": json.dumps(r.args)},
                        }
                    ],
                }
            )
            out.append({"role": "tool", "tool_call_id": r.call_id, "content": r.result})
            if r.image:
                out.append(
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": next(uris)}}],
                    }
                )
        out.append({"role": "assistant", "content": task.answer})
    return out


def pydantic_ai_history(tasks: list[Task]) -> list[ModelMessage]:
    """The conversation as pydantic-ai messages; images as `BinaryContent` of raw bytes."""
    from pydantic_ai.messages import (
        BinaryContent,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[ModelMessage] = []
    for i, task in enumerate(tasks):
        opening = [SystemPromptPart(SYSTEM)] if i == 0 else []
        out.append(ModelRequest([*opening, UserPromptPart(task.question)]))
        for r in task.rounds:
            out.append(
                ModelResponse(
                    [TextPart(r.remark), ToolCallPart(r.tool, r.args, tool_call_id=r.call_id)]
                )
            )
            parts: list[Any] = [ToolReturnPart(r.tool, r.result, tool_call_id=r.call_id)]
            if r.image:
                parts.append(UserPromptPart([BinaryContent(r.image, media_type="image/png")]))
            out.append(ModelRequest(parts))
        out.append(ModelResponse([TextPart(task.answer)]))
    return out


# -- the contenders -----------------------------------------------------------


def wire_tools() -> list[dict[str, Any]]:
    """The tool list in Anthropic form, as carryall writes it; the peers get it prebuilt."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in TOOLS
    ]


def carryall_encoder(history: list[Message]) -> Callable[[], bytes]:
    """carryall: blocks to the bytes its transport sends."""
    target = Target(caps=Capabilities(vision=True, native_tools=True))

    def run() -> bytes:
        request = Request(model=MODEL, messages=tuple(history), system=SYSTEM, tools=TOOLS)
        return encode_bytes(request, target).data

    return run


def litellm_encoder(history: list[dict[str, Any]]) -> Callable[[], bytes]:
    """LiteLLM: OpenAI messages through `anthropic_messages_pt`, in a body like carryall's."""
    from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt

    tools = wire_tools()

    def run() -> bytes:
        messages = anthropic_messages_pt(history, model=MODEL, llm_provider="anthropic")  # type: ignore[arg-type]
        body = {
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "system": SYSTEM,
            "messages": messages,
            "tools": tools,
        }
        return orjson.dumps(body, default=_b64)

    return run


def pydantic_ai_anthropic(
    model_name: str, base_url: str | None = None, http_client: Any = None
) -> Any:
    """pydantic-ai's `AnthropicModel`, made to run against the installed Anthropic SDK.

    The SDK client is built here and handed over: pydantic-ai's default makes
    an `httpx.AsyncClient`, which SDKs built on httpx2 refuse. Newer SDKs made
    `BetaMessageParam` a Union of TypedDicts, which pydantic-ai still calls;
    calling a TypedDict makes a plain dict, so `dict` is what its mapping
    meant to build. And they dropped `temperature`, `top_p` and `top_k` from
    `create`, which pydantic-ai passes as the SDK's `Omit` when unset (sending
    nothing): those omitted keywords are dropped, every other argument reaches
    the SDK's own `create` unchanged, and a set one still fails as it should.
    """
    import inspect
    import typing

    import pydantic_ai.models.anthropic as pydantic_ai_module
    from anthropic import AsyncAnthropic, Omit
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    if typing.get_origin(pydantic_ai_module.BetaMessageParam) is typing.Union:
        pydantic_ai_module.BetaMessageParam = dict  # type: ignore[misc,assignment]
    client = AsyncAnthropic(
        api_key="not-used-nothing-is-sent", base_url=base_url, http_client=http_client
    )
    messages = client.beta.messages
    create = messages.create
    accepted = inspect.signature(create).parameters

    def compatible(**kwargs: Any) -> Any:
        kept = {k: v for k, v in kwargs.items() if k in accepted or not isinstance(v, Omit)}
        return create(**kept)

    messages.create = compatible  # type: ignore[method-assign]
    return AnthropicModel(model_name, provider=AnthropicProvider(anthropic_client=client))


def pydantic_ai_encoder(history: list[ModelMessage]) -> Callable[[], bytes]:
    """pydantic-ai: `AnthropicModel._map_message`, run to completion, in a body like carryall's."""
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.anthropic import AnthropicModelSettings
    from pydantic_ai.tools import ToolDefinition

    model = pydantic_ai_anthropic(MODEL)
    params = ModelRequestParameters(
        function_tools=[
            ToolDefinition(
                name=t.name, description=t.description, parameters_json_schema=t.input_schema
            )
            for t in TOOLS
        ]
    )
    settings = AnthropicModelSettings()
    tools = wire_tools()

    def run() -> bytes:
        system, messages = asyncio.run(model._map_message(history, params, settings))
        body = {
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "system": system,
            "messages": messages,
            "tools": tools,
        }
        return orjson.dumps(body, default=_b64)

    return run


# -- timing and report ----------------------------------------------------------


def timed(rounds: int, run: Callable[[], object], *, old: bool = True) -> dict[str, Any]:
    """`rounds` runs as CPU seconds with the collector on, and the old method's figure.

    `cpu` is every run's `time.thread_time`, collections included;
    `faults` the minor page faults each run took (fresh memory the kernel
    had to map: what a big body costs beyond its bytes) and `full` the full
    collections each run set off, printed beside the times so a slow run
    says which of the two it was; `old` is the fastest wall-clock run of as
    many more with the collector off, the figure this benchmark used to print.
    """
    run()  # warm caches and lazy imports outside the clock
    cpu: list[float] = []
    faults: list[int] = []
    full: list[int] = []
    started = [0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            started[0] += 1

    gc.callbacks.append(count)
    try:
        for _ in range(rounds):
            before, collections = _minor_faults(), started[0]
            start = time.thread_time()
            run()
            cpu.append(time.thread_time() - start)
            faults.append(_minor_faults() - before)
            full.append(started[0] - collections)
    finally:
        gc.callbacks.remove(count)
    if not old:
        return {"cpu": cpu, "faults": faults, "full": full}
    gc.collect()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
    finally:
        gc.enable()
    return {"cpu": cpu, "faults": faults, "full": full, "old": best}


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def timed_both(
    rounds: int, run: Callable[[], bytes], describe: Callable[[bytes], dict[str, Any]]
) -> dict[str, Any]:
    """`timed` with no body of the contender's held, and as it was timed before, one held.

    This benchmark used to keep a contender's first body (to describe it)
    alive while timing the rest. A request path never does that (a body is
    dropped once sent, before the next is built), and it is not neutral: a
    27 MiB body held changes which memory the allocator hands the next one,
    so a writer that allocates its body once at its exact size found fresh
    pages in the first timed run of each process (about 6,600 page faults,
    14 ms against 3) and none after. The held timing is kept, as `held`,
    and printed beside the one judged; `describe`'s fields of the first body
    are taken before it is let go.
    """
    body = run()
    held = timed(rounds, run, old=False)
    described = describe(body)
    del body
    return {**timed(rounds, run), "held": held["cpu"], **described}


def shape(body: bytes) -> tuple[int, int, int]:
    """Messages, tool results and images in a JSON body, to show every contender sent the same."""
    data = orjson.loads(body)
    results = images = 0
    for message in data["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block["type"] == "tool_result":
                results += 1
            elif block["type"] == "image":
                images += 1
    return len(data["messages"]), results, images


@dataclass(frozen=True)
class Workload:
    """A named conversation size and the targets carryall is held to on it."""

    name: str
    messages: int
    images: int
    floor_target: float
    peer_target: float


WORKLOADS = (
    Workload("tool rounds with images", 1_000, 20, floor_target=1.5, peer_target=3.0),
    Workload("text-only tool rounds", 10_000, 0, floor_target=5.0, peer_target=5.0),
)
FLOOR = "floor (orjson.dumps)"
CONTENDERS = (FLOOR, "carryall", "litellm", "pydantic-ai")


def measure(work: Workload, rounds: int) -> dict[str, dict[str, Any]]:
    """Time the floor and every contender on one workload, one after another.

    Each contender's native history is built from the same seeded
    conversation just before its turn and dropped after it, so no
    contender's objects crowd another's heap while it is timed. The floor
    serialises carryall's finished body. JSON-ready, for the parent to print.
    """
    # A real run has both SDKs loaded (the transport is them): their modules
    # are part of the heap every full collection walks.
    importlib.import_module("anthropic")
    importlib.import_module("openai")
    got: dict[str, dict[str, Any]] = {}

    def time_it(name: str, run: Callable[[], bytes], **extra: Any) -> None:
        described = timed_both(rounds, run, lambda body: {"shape": shape(body), "bytes": len(body)})
        got[name] = {**described, **extra}

    tasks = conversation(work.messages, work.images, seed=4)
    start = time.perf_counter()
    native = carryall_history(tasks)
    built = (time.perf_counter() - start) * 1000
    # One pass of the check each timed encode begins with, reported beside
    # it: the part of the encode that is the history's validation.
    start = time.perf_counter()
    survey_history(native)
    surveyed = (time.perf_counter() - start) * 1000

    request = Request(model=MODEL, messages=tuple(native), system=SYSTEM, tools=TOOLS)
    finished = encode_body(request, DEFAULT_TARGET).body
    time_it(FLOOR, functools.partial(orjson.dumps, finished))
    del request, finished
    time_it("carryall", carryall_encoder(native), build_ms=built, survey_ms=surveyed)
    openai = openai_history(tasks, native)
    del native
    time_it("litellm", litellm_encoder(openai))
    del openai
    time_it("pydantic-ai", pydantic_ai_encoder(pydantic_ai_history(tasks)))
    return got


def in_fresh_process(work: Workload, rounds: int) -> dict[str, dict[str, Any]]:
    """`measure` in a new interpreter, so each repetition starts from the same clean state."""
    done = subprocess.run(
        [sys.executable, __file__, "--worker", str(WORKLOADS.index(work)), str(rounds)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"timing {work.name!r} failed:\n{done.stderr.strip()}")
    figures: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return figures


def bench(work: Workload, rounds: int, processes: int) -> None:
    """Time the floor and the contenders in a few fresh processes, and print the table.

    Every run of every process is pooled per contender: the median is the
    typical request, the mean what a long session pays on average,
    collections included. The old method's figure (best wall-clock, gc off,
    best process) is printed beside them.
    """
    got: dict[str, dict[str, Any]] = {}
    for _ in range(processes):
        _pool(got, in_fresh_process(work, rounds))
    medians = {name: statistics.median(got[name]["cpu"]) for name in CONTENDERS}
    floor = medians[FLOOR]
    ours = medians["carryall"]
    size = got[FLOOR]["bytes"] / 2**20

    print(f"\n{work.name}: {work.messages:,} messages, {work.images} images, body {size:.1f} MiB")
    print(
        f"  CPU of {rounds} runs in each of {processes} fresh processes, pooled, gc on; "
        "old = best wall-clock run, gc off"
    )
    print(
        f"  {'contender':<22}{'median ms':>10}{'mean ms':>9}{'mean/med':>9}{'x floor':>9}"
        f"{'x carryall':>11}{'old ms':>8}{'old x fl':>9}{'faults':>8}{'full gc':>8}"
        "   messages/results/images"
    )
    old_floor = got[FLOOR]["old"]
    for name in CONTENDERS:
        median = medians[name]
        mean = statistics.fmean(got[name]["cpu"])
        old = got[name]["old"]
        seen = "-" if name == FLOOR else "/".join(map(str, got[name]["shape"]))
        print(
            f"  {name:<22}{median * 1000:10.1f}{mean * 1000:9.1f}{mean / median:9.2f}"
            f"{median / floor:9.2f}{median / ours:11.2f}{old * 1000:8.1f}{old / old_floor:9.2f}"
            f"{_memory_columns(got[name])}"
            f"   {seen}"
        )
    build = got["carryall"]
    print(
        f"  carryall's history build (not timed above): {build['build_ms']:.1f} ms; "
        f"the history check inside each encode (survey_history): {build['survey_ms']:.1f} ms"
    )
    storm = statistics.fmean(got["carryall"]["cpu"]) / ours
    print(
        f"  target: carryall's mean within 1.5x of its median: {storm:.2f}x -> "
        f"{'met' if storm <= 1.5 else 'MISSED'}"
    )
    print(f"  carryall's slowest runs: {_slowest(got['carryall'])}")
    held = got["carryall"]["held"]
    held_storm = statistics.fmean(held) / statistics.median(held)
    print(
        "  as timed before, the contender's first body held alive while the rest were: "
        + ", ".join(
            f"{name} {statistics.median(got[name]['held']) * 1000:.1f} ms"
            f" (mean {statistics.fmean(got[name]['held']) * 1000:.1f})"
            for name in CONTENDERS
        )
    )
    print(
        f"  the same target timed that way: carryall's mean within 1.5x of its median: "
        f"{held_storm:.2f}x -> {'met' if held_storm <= 1.5 else 'MISSED'}"
        " (not judged: see timed_both)"
    )
    met_floor = ours / floor <= work.floor_target
    print(
        f"  target: carryall within {work.floor_target:g}x of the floor by median: "
        f"{ours / floor:.2f}x -> {'met' if met_floor else 'MISSED'}"
    )
    for name in CONTENDERS[2:]:
        ratio = medians[name] / ours
        verdict = "met" if ratio >= work.peer_target else "MISSED"
        print(
            f"  target: {name} at least {work.peer_target:g}x slower than carryall: "
            f"{ratio:.2f}x -> {verdict}"
        )


# -- the other wires: Responses, Gemini, Bedrock; carryall beside pydantic-ai's own mapping --


def _b64(value: Any) -> str:
    # pydantic-ai leaves inline data as bytes (or, for newer Anthropic SDKs, a
    # BytesIO) for its SDK to encode: the SDK sends base64.
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, io.BytesIO):
        return base64.b64encode(value.getvalue()).decode("ascii")
    raise TypeError(type(value).__name__)


def responses_pair(tasks: list[Task]) -> dict[str, Callable[[], Callable[[], bytes]]]:
    """carryall's Responses codec and pydantic-ai's `OpenAIResponsesModel._map_messages`."""
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIResponsesModel, OpenAIResponsesModelSettings
    from pydantic_ai.providers.openai import OpenAIProvider

    from carryall.providers import responses

    # The client built here: pydantic-ai's default is an httpx client, which
    # an SDK built on httpx2 refuses.
    client = AsyncOpenAI(api_key="not-used")
    model = OpenAIResponsesModel(MODEL, provider=OpenAIProvider(openai_client=client))
    params = _pydantic_ai_params()
    settings = OpenAIResponsesModelSettings()
    tools = [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.input_schema,
            "strict": False,
        }
        for t in TOOLS
    ]
    return _pair(
        tasks,
        lambda request: responses.encode_bytes(request, DEFAULT_TARGET).data,
        lambda request: responses.encode_body(request, DEFAULT_TARGET).body,
        lambda history: _with_loop(
            lambda: model._map_messages(history, settings, params),
            lambda mapped: {
                "model": MODEL,
                # `Omit` when the system prompt went into the input items instead.
                **({"instructions": mapped[0]} if isinstance(mapped[0], str) else {}),
                "input": mapped[1],
                "tools": tools,
                "max_output_tokens": MAX_TOKENS,
                "store": False,
            },
        ),
    )


def gemini_pair(tasks: list[Task]) -> dict[str, Callable[[], Callable[[], bytes]]]:
    """carryall's Gemini codec and pydantic-ai's `GoogleModel._map_messages`."""
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    from carryall.providers import gemini

    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="not-used"))
    params = _pydantic_ai_params()
    tools = [
        {
            "functionDeclarations": [
                {
                    "name": t.name,
                    "description": t.description,
                    "parametersJsonSchema": t.input_schema,
                }
                for t in TOOLS
            ]
        }
    ]
    return _pair(
        tasks,
        lambda request: gemini.encode_bytes(request, DEFAULT_TARGET).data,
        lambda request: gemini.encode_body(request, DEFAULT_TARGET).body,
        lambda history: _with_loop(
            lambda: model._map_messages(history, params),
            lambda mapped: {
                "contents": mapped[1],
                "systemInstruction": mapped[0],
                "tools": tools,
                "generationConfig": {"maxOutputTokens": MAX_TOKENS},
            },
        ),
    )


BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def bedrock_pair(tasks: list[Task]) -> dict[str, Callable[[], Callable[[], bytes]]]:
    """carryall's Converse codec and pydantic-ai's `BedrockConverseModel._map_messages`.

    Both bodies are the Converse JSON: pydantic-ai's images are bytes for
    boto3, written here as base64 by the floor's serializer, which is what
    botocore writes for them (carryall's are base64 already).
    """
    from pydantic_ai.models.bedrock import BedrockConverseModel, BedrockModelSettings
    from pydantic_ai.providers.bedrock import BedrockProvider

    from carryall.providers import bedrock

    provider = BedrockProvider(
        region_name="us-east-1", aws_access_key_id="not-used", aws_secret_access_key="not-used"
    )
    model = BedrockConverseModel(BEDROCK_MODEL, provider=provider)
    params = _pydantic_ai_params()
    settings = BedrockModelSettings(max_tokens=MAX_TOKENS)
    return _pair(
        tasks,
        lambda request: bedrock.encode_bytes(request, DEFAULT_TARGET).data,
        lambda request: bedrock.encode_body(request, DEFAULT_TARGET).body,
        lambda history: _with_loop(
            lambda: model._map_messages(history, params, settings),
            lambda mapped: {
                "messages": mapped[1],
                "system": mapped[0],
                "inferenceConfig": model._map_inference_config(settings),
                "toolConfig": model._map_tool_config(params, settings),
            },
        ),
    )


def _pydantic_ai_params() -> Any:
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    return ModelRequestParameters(
        function_tools=[
            ToolDefinition(
                name=t.name, description=t.description, parameters_json_schema=t.input_schema
            )
            for t in TOOLS
        ]
    )


def _with_loop(mapping: Callable[[], Any], body: Callable[[Any], dict[str, Any]]) -> bytes:
    return orjson.dumps(body(asyncio.run(mapping())), default=_b64)


def _pair(
    tasks: list[Task],
    ours: Callable[[Request], bytes],
    finished: Callable[[Request], dict[str, Any]],
    theirs: Callable[[list[ModelMessage]], bytes],
) -> dict[str, Callable[[], Callable[[], bytes]]]:
    """The floor, carryall and pydantic-ai for one wire, each built only when its turn comes."""
    return {
        FLOOR: lambda: _floor(tasks, finished),
        "carryall": lambda: _ours(tasks, ours),
        "pydantic-ai": lambda: _theirs(tasks, theirs),
    }


def _request(tasks: list[Task]) -> Request:
    return Request(model=MODEL, messages=tuple(carryall_history(tasks)), system=SYSTEM, tools=TOOLS)


def _floor(tasks: list[Task], finished: Callable[[Request], dict[str, Any]]) -> Any:
    body = finished(_request(tasks))
    return functools.partial(orjson.dumps, body)


def _ours(tasks: list[Task], ours: Callable[[Request], bytes]) -> Any:
    history = carryall_history(tasks)
    return lambda: ours(Request(model=MODEL, messages=tuple(history), system=SYSTEM, tools=TOOLS))


def _theirs(tasks: list[Task], theirs: Callable[[list[ModelMessage]], bytes]) -> Any:
    history = pydantic_ai_history(tasks)
    return lambda: theirs(history)


WIRES = {"responses": responses_pair, "gemini": gemini_pair, "bedrock": bedrock_pair}
WIRE_CONTENDERS = (FLOOR, "carryall", "pydantic-ai")
WIRE_PEER_TARGET = 3.0


def measure_wire(work: Workload, wire: str, rounds: int) -> dict[str, dict[str, Any]]:
    """Time the floor, carryall and pydantic-ai on one wire, one after another (see `measure`)."""
    importlib.import_module("openai")
    tasks = conversation(work.messages, work.images, seed=4)
    got: dict[str, dict[str, Any]] = {}
    for name, build in WIRES[wire](tasks).items():
        run = build()
        got[name] = timed_both(rounds, run, lambda body: {"bytes": len(body)})
        del run
    return got


def bench_wire(work: Workload, wire: str, rounds: int, processes: int) -> None:
    """One wire's table: pooled medians and means, and the 3x target against pydantic-ai."""
    got: dict[str, dict[str, Any]] = {}
    for _ in range(processes):
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--wire-worker",
                str(WORKLOADS.index(work)),
                wire,
                str(rounds),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"timing {wire} on {work.name!r} failed:\n{done.stderr.strip()}")
        _pool(got, json.loads(done.stdout))
    medians = {name: statistics.median(got[name]["cpu"]) for name in WIRE_CONTENDERS}
    floor, ours = medians[FLOOR], medians["carryall"]
    print(f"\n{wire} wire, {work.name}: {work.messages:,} messages, {work.images} images")
    print(
        f"  {'contender':<22}{'median ms':>10}{'mean ms':>9}{'x floor':>9}{'x carryall':>11}"
        f"{'body MiB':>10}{'faults':>8}{'full gc':>8}"
    )
    for name in WIRE_CONTENDERS:
        mean = statistics.fmean(got[name]["cpu"])
        print(
            f"  {name:<22}{medians[name] * 1000:10.1f}{mean * 1000:9.1f}"
            f"{medians[name] / floor:9.2f}{medians[name] / ours:11.2f}"
            f"{got[name]['bytes'] / 2**20:10.2f}"
            f"{_memory_columns(got[name])}"
        )
    held = {name: statistics.median(got[name]["held"]) for name in WIRE_CONTENDERS}
    print(
        "  as timed before, the first body held: "
        + ", ".join(f"{name} {held[name] * 1000:.1f} ms" for name in WIRE_CONTENDERS)
        + f" by median; pydantic-ai {held['pydantic-ai'] / held['carryall']:.2f}x carryall"
    )
    ratio = medians["pydantic-ai"] / ours
    verdict = "met" if ratio >= WIRE_PEER_TARGET else "MISSED"
    print(
        f"  target: pydantic-ai at least {WIRE_PEER_TARGET:g}x slower than carryall: "
        f"{ratio:.2f}x -> {verdict}"
    )


def _pool(got: dict[str, dict[str, Any]], process: dict[str, dict[str, Any]]) -> None:
    """Add one process's figures to `got`: every run's, and the best of the old method's."""
    for name, figures in process.items():
        if name not in got:
            got[name] = figures
            continue
        for field in ("cpu", "faults", "full", "held"):
            got[name][field] += figures[field]
        if "old" in figures:
            got[name]["old"] = min(got[name]["old"], figures["old"])


def _memory_columns(figures: dict[str, Any]) -> str:
    """A row's page faults per run (median) and full collections (all runs), as printed."""
    return f"{statistics.median(figures['faults']):8.0f}{sum(figures['full']):8d}"


def _slowest(figures: dict[str, Any], count: int = 3) -> str:
    """The slowest timed runs, each with the page faults and full collections it took."""
    runs = sorted(zip(figures["cpu"], figures["faults"], figures["full"], strict=True))[-count:]
    return ", ".join(
        f"{cpu * 1000:.1f} ms ({faults:,} faults, {full} full gc)"
        for cpu, faults, full in reversed(runs)
    )


def main() -> None:
    """Run both workloads and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=9, help="runs per process, for each contender and the floor"
    )
    parser.add_argument(
        "--processes", type=int, default=3, help="fresh processes to repeat it all in"
    )
    parser.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--wire-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--image-kib",
        type=int,
        default=0,
        help="each image's size in KiB (default 1024); 1638 makes the image body 43 MiB, "
        "past the 32 MiB below which glibc reuses a freed body",
    )
    parser.add_argument(
        "--wires",
        default="anthropic,responses,gemini,bedrock",
        help="which wires' tables to print (anthropic is the table beside LiteLLM)",
    )
    args = parser.parse_args()
    if args.image_kib:
        os.environ["CARRYALL_BENCH_IMAGE_BYTES"] = str(args.image_kib * 1024)
        print(f"images of {args.image_kib:,} KiB, not the default 1,024")
    if args.wire_worker:
        index, wire, rounds = args.wire_worker
        print(json.dumps(measure_wire(WORKLOADS[int(index)], wire, int(rounds))))
        return
    if args.worker:
        index, rounds = args.worker
        print(json.dumps(measure(WORKLOADS[index], rounds)))
        return
    wires = args.wires.split(",")
    needed = ("litellm", "pydantic_ai") if "anthropic" in wires else ("pydantic_ai",)
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        sys.exit(
            f"benchmarks/encode.py needs the bench extra ({', '.join(missing)} missing): "
            "pip install -e '.[bench]'"
        )
    for work in WORKLOADS:
        if "anthropic" in wires:
            bench(work, args.rounds, args.processes)
        for wire in WIRES:
            if wire in wires:
                bench_wire(work, wire, args.rounds, args.processes)


if __name__ == "__main__":
    main()
