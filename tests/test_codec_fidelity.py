"""Histories made on five origins, encoded for each: nothing signed or opaque goes astray.

Every assistant turn is decoded by the real codec from a response of its
origin (two Anthropic models, an OpenAI model on OpenAI and one on
OpenRouter, a llama-server model), so the
origins are the ones the decoders stamp. Each history is then encoded for
each of the five targets, and three things must hold: no signature,
redacted data or provider-native block reaches a target whose origin is not
its own; every body validates against the official SDK's request type; and
`Encoded.downgrades` names exactly what the body left off or rendered as
text, counted both ways (what is in the body plus what is reported is what
the history holds).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import (
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
)
from carryall.providers import Capabilities, Encoded, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import openai as openai_wire
from tests.goldens import PNG_1x1
from tests.sdk_openai import check_openai_request
from tests.test_codec_anthropic import sdk_check

SONNET = Origin("anthropic", "api.anthropic.com", "claude-sonnet-4-5")
HAIKU = Origin("anthropic", "api.anthropic.com", "claude-haiku-4-5")
GPT = Origin("openai", "api.openai.com", "gpt-4o")
LLAMA = Origin("llama-server", "127.0.0.1", "qwen2.5-0.5b")
# The same dialect on another server: OpenRouter passing an OpenAI model's encrypted reasoning.
ROUTER = Origin("openai", "openrouter.ai", "openai/o3")
ORIGINS = [SONNET, HAIKU, GPT, LLAMA, ROUTER]
CAPS = Capabilities(vision=True, native_tools=True, thinking=True)

# Anthropic block kinds an assistant turn may hold, beside its text.
KINDS = ["thinking", "redacted", "server_tool", "citations"]


def _anthropic_turn(origin: Origin, n: int, kinds: list[str], call: bool) -> Message:
    tag = f"{origin.model}-{n}"
    content: list[dict[str, Any]] = []
    if "thinking" in kinds:
        content.append(
            {"type": "thinking", "thinking": f"pondering {n}", "signature": f"SIG-{tag}"}
        )
    if "redacted" in kinds:
        content.append({"type": "redacted_thinking", "data": f"REDACTED-{tag}"})
    if "server_tool" in kinds:
        content.append(
            {
                "type": "server_tool_use",
                "id": f"srvtoolu_{n}",
                "name": "web_search",
                "input": {"query": f"query {n}"},
            }
        )
        result = {
            "type": "web_search_result",
            "title": f"Title {n}",
            "url": "https://example.com/a",
            "encrypted_content": f"ENC-{tag}",
            "page_age": None,
        }
        content.append(
            {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{n}", "content": [result]}
        )
    text: dict[str, Any] = {"type": "text", "text": f"answer {n}"}
    if "citations" in kinds:
        text["citations"] = [
            {
                "type": "web_search_result_location",
                "url": "https://example.com/a",
                "title": f"Title {n}",
                "encrypted_index": f"CITE-{tag}",
                "cited_text": "cited",
            }
        ]
    content.append(text)
    if call:
        content.append({"type": "tool_use", "id": f"toolu_{n}", "name": "look", "input": {"n": n}})
    body = {
        "type": "message",
        "role": "assistant",
        "model": origin.model,
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return anthropic_wire.decode_response(body, endpoint=origin.endpoint).message


def _openai_turn(origin: Origin, n: int, thinking: bool, call: bool) -> Message:
    message: dict[str, Any] = {"role": "assistant", "content": f"answer {n}"}
    if thinking:
        key = "reasoning_content" if origin.dialect == "llama-server" else "reasoning"
        message[key] = f"pondering {n}"
        # Encrypted reasoning as OpenRouter passes it through: for this origin alone.
        message["reasoning_details"] = [
            {"type": "reasoning.encrypted", "data": f"ENC-{origin.model}-{n}", "index": 0}
        ]
    if call:
        arguments = json.dumps({"n": n})
        message["tool_calls"] = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "look", "arguments": arguments},
            }
        ]
    body = {
        "model": origin.model,
        "choices": [{"message": message, "finish_reason": "tool_calls" if call else "stop"}],
    }
    dialect = origin.dialect
    return openai_wire.decode_response(body, dialect=dialect, endpoint=origin.endpoint).message  # type: ignore[arg-type]


PDF = Document.from_bytes("application/pdf", b"%PDF-1.4\n%fake\n", title="report")
PDF_URL = Document("application/pdf", url="https://example.com/paper.pdf")
NOTES = Document.from_bytes("text/plain", b"plain notes", source="notes.txt")
SHOT = Image.from_bytes("image/png", PNG_1x1, "shot.png")
REMOTE = Image("image/png", "", url="https://example.com/remote.png")
RIDERS = [PDF, PDF_URL, NOTES, SHOT, REMOTE]


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    history = [Message.user("start")]
    for n in range(draw(st.integers(1, 4))):
        origin = draw(st.sampled_from(ORIGINS))
        call = draw(st.booleans())
        if origin.dialect == "anthropic":
            kinds = draw(st.lists(st.sampled_from(KINDS), unique=True))
            history.append(_anthropic_turn(origin, n, kinds, call))
        else:
            history.append(_openai_turn(origin, n, draw(st.booleans()), call))
        riders = draw(st.lists(st.sampled_from(RIDERS), max_size=3))
        if call:
            call_id = history[-1].tool_uses()[0].id
            history.append(Message("user", (ToolResult(call_id, f"looked {n}"), *riders)))
        else:
            history.append(Message("user", (Text(f"next {n}"), *riders)))
        if draw(st.booleans()):
            history.append(Message("system", (Text(f"be brief {n}"),)))
            history.append(Message.user(f"after the instruction {n}"))
    return history


def _encode(history: list[Message], target: Origin) -> Encoded:
    request = Request(model=target.model, endpoint=target.endpoint, messages=tuple(history))
    if target.dialect == "anthropic":
        return anthropic_wire.encode(request, CAPS)
    return openai_wire.encode(request, CAPS, target.dialect)  # type: ignore[arg-type]


def _expected(history: list[Message], target: Origin) -> Counter[tuple[int, str]]:
    """The downgrades a target must report, worked out from the rules as the issue states them."""
    anthropic = target.dialect == "anthropic"
    openai = target.dialect == "openai"
    out: Counter[tuple[int, str]] = Counter()
    for index, message in enumerate(history):
        if message.role == "system" and target.dialect == "llama-server":
            out[index, "system"] += 1
        for block in message.content:
            if isinstance(block, Thinking):
                # Anthropic checks signatures; llama-server takes any reasoning; the
                # OpenAI dialect a model's own (DeepSeek and Kimi want it back).
                if anthropic:
                    kept = block.signature is not None and block.origin == target
                else:
                    kept = target.dialect == "llama-server" or block.origin == target
                if not kept:
                    out[index, "thinking"] += 1
            elif isinstance(block, RedactedThinking):
                if block.origin != target:
                    out[index, "redacted_thinking"] += 1
            elif isinstance(block, Opaque):
                if block.origin != target:
                    out[index, "opaque"] += 1
            elif isinstance(block, Image):
                if block.url is not None and target.dialect == "llama-server":
                    out[index, "image"] += 1
            elif isinstance(block, Document) and not anthropic:
                # OpenAI takes a PDF by its bytes; every other document is a loss here.
                native = openai and block.media_type == "application/pdf" and bool(block.data)
                out[index, "document"] += not native
    return out


def _in_body(body: dict[str, Any], dialect: str) -> Counter[str]:
    """How many thinking blocks, redacted blocks, native blocks and documents a body carries."""
    found: Counter[str] = Counter()
    for message in body["messages"]:
        content = message.get("content")
        if dialect != "anthropic":
            found["thinking"] += bool(message.get("reasoning_content"))
            found["opaque"] += len(message.get("reasoning_details", ()))
        for part in content if isinstance(content, list) else []:
            kind = part.get("type")
            if kind in ("thinking", "redacted_thinking", "document"):
                found[kind] += 1
            elif kind == "file":
                found["document"] += 1
            else:
                native = kind in ("server_tool_use", "web_search_tool_result")
                found["opaque"] += native or (kind == "text" and "citations" in part)
    return found


def _held(history: list[Message], dialect: str) -> Counter[str]:
    held: Counter[str] = Counter()
    for message in history:
        thinking = [b for b in message.content if isinstance(b, Thinking)]
        # llama-server takes a turn's thinking as one `reasoning_content`.
        held["thinking"] += (1 if thinking else 0) if dialect == "llama-server" else len(thinking)
        held["redacted_thinking"] += sum(isinstance(b, RedactedThinking) for b in message.content)
        held["opaque"] += sum(isinstance(b, Opaque) for b in message.content)
        held["document"] += sum(isinstance(b, Document) for b in message.content)
    return held


def _foreign_tokens(history: list[Message], target: Origin) -> list[str]:
    tokens: list[str] = []
    for message in history:
        for block in message.content:
            origin = getattr(block, "origin", None)
            if origin is None or origin == target:
                continue
            if isinstance(block, Thinking) and block.signature:
                tokens.append(block.signature)
            elif isinstance(block, RedactedThinking):
                tokens.append(block.data)
            elif isinstance(block, Opaque):
                tokens += [t for t in ("ENC-", "CITE-", "srvtoolu_") if t in block.raw]
                tokens.append(block.raw)
    return tokens


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(histories())
def test_nothing_signed_or_opaque_reaches_a_foreign_origin_and_every_loss_is_named(
    history: list[Message],
) -> None:
    for target in ORIGINS:
        encoded = _encode(history, target)
        body = encoded.body
        if target.dialect == "anthropic":
            sdk_check(body)
        else:
            check_openai_request(body)
        sent = json.dumps(body, ensure_ascii=False)
        for token in _foreign_tokens(history, target):
            if token in ("ENC-", "CITE-", "srvtoolu_"):
                # Some other origin's native block: only this target's may carry these.
                if not any(
                    isinstance(b, Opaque) and b.origin == target and token in b.raw
                    for m in history
                    for b in m.content
                ):
                    assert token not in sent, (target, token)
            else:
                assert token not in sent, (target, token)
        reported = Counter((d.index, d.kind) for d in encoded.downgrades)
        assert reported == _expected(history, target), target
        kinds = Counter(d.kind for d in encoded.downgrades)
        in_body = _in_body(body, target.dialect)
        held = _held(history, target.dialect)
        for kind in ("redacted_thinking", "opaque", "document"):
            assert in_body[kind] + kinds[kind] == held[kind], (target, kind)
        if target.dialect == "anthropic":
            assert in_body["thinking"] + kinds["thinking"] == held["thinking"], target
        for downgrade in encoded.downgrades:
            assert downgrade.reason and 0 <= downgrade.index < len(history)
