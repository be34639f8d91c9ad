"""Fuzz the wire decoders and the importers with hypothesis: nothing may escape but a
`CarryallError`, and nothing they return may be text no stream can write.

Run by hand, not in CI (it runs for minutes per target):

    .venv/bin/python benchmarks/fuzz_decoders.py --minutes 5
    .venv/bin/python benchmarks/fuzz_decoders.py --minutes 1 --target anthropic.stream

Each target is fed two kinds of input: hostile JSON-shaped values from
scratch (keys drawn from the wire's own field names, strings with control
characters, escapes and lone surrogates, NaN and Infinity, deep nesting), and
valid bodies with one part replaced by such a value, which reach far deeper
into a decoder than random values do. Hypothesis runs in batches of fresh
seeds until the time is up, with shrinking off: an example is counted and
kept, never raised, so one finding does not stop the run.

It prints, per target, the examples run, how many were refused with a
`CarryallError`, and every other exception type with its first example.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from carryall.blocks import Message, block_to_dict
from carryall.errors import CarryallError
from carryall.interchange import read_messages_file
from carryall.providers import anthropic, bedrock, gemini, openai, prompt, responses

KEYS = [
    "type", "id", "name", "input", "content", "role", "text", "thinking", "signature", "data",
    "choices", "message", "tool_calls", "function", "arguments", "delta", "index", "partial_json",
    "stop_reason", "finish_reason", "usage", "model", "messages", "system", "tool_use_id",
    "is_error", "source", "media_type", "image_url", "url", "content_block", "reasoning_content",
    "refusal", "tool_call_id", "carryall", "format", "session", "event",
    # the Responses wire
    "output", "status", "call_id", "output_text", "summary", "encrypted_content",
    "incomplete_details", "output_index", "item", "response", "instructions", "error",
    # the Gemini wire
    "candidates", "parts", "functionCall", "functionResponse", "args", "thought",
    "thoughtSignature", "finishReason", "usageMetadata", "modelVersion", "promptFeedback",
    "inlineData", "mimeType", "contents", "systemInstruction", "blockReason",
]  # fmt: skip

HOSTILE = st.sampled_from(
    ["\ud800", "\udfff", "\x00", "\x1b]52;c;x\x07", "\x9b", "[/]", "<script>", "NaN", "", "dup"]
)
TEXT = st.one_of(st.text(max_size=12), HOSTILE, st.sampled_from(KEYS))
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.one_of(st.sampled_from(KEYS), TEXT), inner, max_size=5)
    ),
    max_leaves=24,
)

# Valid inputs per target: the mutations start from these.
_ANTHROPIC_BODY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
_ANTHROPIC_STREAM = [
    {"type": "message_start", "message": {**_ANTHROPIC_BODY, "content": [], "stop_reason": None}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"path": "a"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
    {"type": "message_stop"},
]
_OPENAI_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Reading.",
                "reasoning_content": "hmm",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


_OPENAI_STREAM = [
    _chunk({"role": "assistant", "content": "Read"}),
    _chunk({"content": "ing."}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"pa'},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a"}'}}]}),
    _chunk({}, "tool_calls"),
]
_PROMPT_BODY = copy.deepcopy(_OPENAI_BODY)
_PROMPT_BODY["choices"][0]["message"] = {
    "role": "assistant",
    "content": 'Reading.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n'
    "</tool_call>",
}
_ANTHROPIC_MESSAGES = {
    "system": "be brief",
    "messages": [
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": _ANTHROPIC_BODY["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "text"}],
        },
    ],
}
_OPENAI_MESSAGES = {
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "read a.txt"},
        _OPENAI_BODY["choices"][0]["message"],  # type: ignore[index]
        {"role": "tool", "tool_call_id": "call_1", "content": "text"},
    ]
}


_RESPONSES_BODY = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5",
    "status": "completed",
    "output": [
        {
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": "gAAAA==",
            "summary": [{"type": "summary_text", "text": "hmm"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
    ],
    "usage": {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 2},
    },
}
_RESPONSES_STREAM = [
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"type": "message", "role": "assistant", "content": []},
    },
    {"type": "response.output_text.delta", "output_index": 0, "delta": "Read"},
    {"type": "response.output_text.delta", "output_index": 0, "delta": "ing."},
    {
        "type": "response.output_item.added",
        "output_index": 1,
        "item": {"type": "function_call", "call_id": "call_1", "name": "read_file"},
    },
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"pa'},
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": 'th": "a"}'},
    # Output left out of the final response, as some servers do: built from the deltas.
    {"type": "response.completed", "response": {**_RESPONSES_BODY, "output": []}},
]
_RESPONSES_MESSAGES = {
    "instructions": "be brief",
    "input": [
        {"role": "developer", "content": "be kind"},
        {"role": "user", "content": [{"type": "input_text", "text": "read a.txt"}]},
        _RESPONSES_BODY["output"][0],  # type: ignore[index]
        {"type": "message", "role": "assistant", "content": "looking"},
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "text"},
        {"role": "user", "content": "and?"},
    ],
}
_GEMINI_BODY = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "hmm", "thought": True, "thoughtSignature": "c2ln"},
                    {"text": "Reading."},
                    {"functionCall": {"name": "read_file", "args": {"path": "a"}}},
                    {"functionCall": {"id": "x9", "name": "read_file", "args": {"path": "b"}}},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 2},
    "modelVersion": "gemini-2.5-flash",
}
_GEMINI_STREAM = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Read"}]}}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "ing."}]}}]},
    _GEMINI_BODY,
]
_GEMINI_MESSAGES = {
    "systemInstruction": {"parts": [{"text": "be brief"}]},
    "contents": [
        {"role": "user", "parts": [{"text": "read a.txt"}]},
        _GEMINI_BODY["candidates"][0]["content"],  # type: ignore[index]
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read_file", "response": {"output": "text"}}},
                {"functionResponse": {"id": "x9", "name": "read_file", "response": {"t": 1}}},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}},
            ],
        },
    ],
}
_BEDROCK_BODY = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "c2ln"}}},
                {"reasoningContent": {"redactedContent": "cmVk"}},
                {"text": "Reading."},
                {"toolUse": {"toolUseId": "t1", "name": "read_file", "input": {"path": "a"}}},
            ],
        }
    },
    "stopReason": "tool_use",
    "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, "cacheReadInputTokens": 2},
}
_BEDROCK_STREAM = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hm"}}}},
    {
        "contentBlockDelta": {
            "contentBlockIndex": 0,
            "delta": {"reasoningContent": {"signature": "c2ln"}},
        }
    },
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"text": "Read"}}},
    {"contentBlockStop": {"contentBlockIndex": 1}},
    {
        "contentBlockStart": {
            "contentBlockIndex": 2,
            "start": {"toolUse": {"toolUseId": "t1", "name": "read_file"}},
        }
    },
    {
        "contentBlockDelta": {
            "contentBlockIndex": 2,
            "delta": {"toolUse": {"input": '{"path": "a"}'}},
        }
    },
    {"contentBlockStop": {"contentBlockIndex": 2}},
    {"messageStop": {"stopReason": "tool_use"}},
    {"metadata": {"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}}},
]
_BEDROCK_MESSAGES = {
    "system": [{"text": "be brief"}],
    "messages": [
        {"role": "user", "content": [{"text": "read a.txt"}]},
        _BEDROCK_BODY["output"]["message"],  # type: ignore[index]
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "t1",
                        "content": [{"text": "text"}, {"json": {"n": 1}}],
                        "status": "error",
                    }
                },
                {"image": {"format": "png", "source": {"bytes": "iVBORw=="}}},
            ],
        },
    ],
}


def _encodable(messages: Iterable[Message]) -> None:
    """What a decoder returns must be writable again: a lone surrogate would fail here."""
    for message in messages:
        json.dumps([block_to_dict(b) for b in message.content], ensure_ascii=False).encode()


def _stream(decoder: Any, events: Any) -> None:
    if not isinstance(events, list):
        events = [events]
    for event in events:
        decoder.feed(event)
    _encodable([decoder.response().message])


def _import(fmt: str) -> Callable[[Any], None]:
    def run(value: Any) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "history.json"
            try:
                text = json.dumps(value, allow_nan=True)
            except (TypeError, ValueError):
                return
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
            _encodable(read_messages_file(path, fmt).messages)  # type: ignore[arg-type]

    return run


def _messages(
    codec: Any, items: str = "messages", system: str = "system", keyword: str = "system"
) -> Callable[[Any], None]:
    """`decode_messages` of a wire whose file names its list `items` and its prompt `system`."""

    def run(value: Any) -> None:
        if isinstance(value, Mapping):
            _, history = codec.decode_messages(value.get(items), **{keyword: value.get(system)})
        else:
            _, history = codec.decode_messages(value)
        _encodable(history)

    return run


TARGETS: dict[str, tuple[Callable[[Any], None], Any]] = {
    "anthropic.response": (
        lambda v: _encodable([anthropic.decode_response(v).message]),
        _ANTHROPIC_BODY,
    ),
    "anthropic.stream": (lambda v: _stream(anthropic.StreamDecoder(), v), _ANTHROPIC_STREAM),
    "anthropic.messages": (_messages(anthropic), _ANTHROPIC_MESSAGES),
    "openai.response": (lambda v: _encodable([openai.decode_response(v).message]), _OPENAI_BODY),
    "openai.stream": (lambda v: _stream(openai.StreamDecoder(), v), _OPENAI_STREAM),
    "openai.messages": (_messages(openai), _OPENAI_MESSAGES),
    "prompt.response": (lambda v: _encodable([prompt.decode_response(v).message]), _PROMPT_BODY),
    "prompt.stream": (
        lambda v: _stream(prompt.StreamDecoder(), v),
        [_chunk({"role": "assistant", "content": _PROMPT_BODY["choices"][0]["message"]["content"]})]
        + [_chunk({}, "stop")],
    ),
    "responses.response": (
        lambda v: _encodable([responses.decode_response(v).message]),
        _RESPONSES_BODY,
    ),
    "responses.stream": (lambda v: _stream(responses.StreamDecoder(), v), _RESPONSES_STREAM),
    "responses.messages": (
        _messages(responses, "input", "instructions", "instructions"),
        _RESPONSES_MESSAGES,
    ),
    "gemini.response": (lambda v: _encodable([gemini.decode_response(v).message]), _GEMINI_BODY),
    "gemini.stream": (lambda v: _stream(gemini.StreamDecoder(), v), _GEMINI_STREAM),
    "gemini.messages": (
        _messages(gemini, "contents", "systemInstruction", "system_instruction"),
        _GEMINI_MESSAGES,
    ),
    "bedrock.response": (lambda v: _encodable([bedrock.decode_response(v).message]), _BEDROCK_BODY),
    "bedrock.stream": (lambda v: _stream(bedrock.StreamDecoder(), v), _BEDROCK_STREAM),
    "bedrock.messages": (_messages(bedrock), _BEDROCK_MESSAGES),
    "import.anthropic": (_import("anthropic"), _ANTHROPIC_MESSAGES),
    "import.openai": (_import("openai"), _OPENAI_MESSAGES),
}


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*at, i))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copied = copy.deepcopy(value)
    holder = copied
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = new
    return copied


@st.composite
def _inputs(draw: st.DrawFn, valid: Any) -> Any:
    if draw(st.booleans()):
        return draw(VALUE)
    paths = _paths(valid)
    value = valid
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        value = _replaced(value, path, draw(VALUE))
        paths = _paths(value)
    return value


class Tally:
    """What one target's run found."""

    def __init__(self) -> None:
        self.examples = 0
        self.refused = 0
        self.escaped: dict[str, tuple[int, str]] = {}

    def take(self, run: Callable[[Any], None], value: Any) -> None:
        self.examples += 1
        try:
            run(value)
        except CarryallError:
            self.refused += 1
        except Exception as exc:  # the finding: anything that is not a CarryallError
            name = f"{type(exc).__name__}: {str(exc)[:80]}"
            count, example = self.escaped.get(name, (0, repr(value)[:300]))
            self.escaped[name] = (count + 1, example)


def fuzz(name: str, minutes: float, batch: int = 400) -> Tally:
    """Run one target for `minutes` of CPU time, in hypothesis batches of fresh seeds."""
    run, valid = TARGETS[name]
    tally = Tally()

    @settings(
        max_examples=batch,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(_inputs(valid))
    def examples(value: Any) -> None:
        tally.take(run, value)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    started = time.process_time()
    round_no = 0
    while time.process_time() - started < minutes * 60:
        seed(round_no)(examples)()
        round_no += 1
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="CPU minutes per target.")
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="Repeatable.")
    args = parser.parse_args()
    names = args.target or list(TARGETS)
    print(f"fuzzing {len(names)} target(s), {args.minutes:g} CPU minute(s) each")
    print(f"{'target':<20} {'examples':>9} {'refused':>9} {'escaped':>8}")
    clean = True
    for name in names:
        started = time.process_time()
        tally = fuzz(name, args.minutes)
        spent = time.process_time() - started
        escaped = sum(count for count, _ in tally.escaped.values())
        print(
            f"{name:<20} {tally.examples:>9} {tally.refused:>9} {escaped:>8}   ({spent:.0f} s CPU)"
        )
        for kind, (count, example) in sorted(tally.escaped.items()):
            clean = False
            print(f"    {count} x {kind}\n      first: {example}")
    print(
        "no exception outside CarryallError" if clean else "FOUND exceptions outside CarryallError"
    )
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
