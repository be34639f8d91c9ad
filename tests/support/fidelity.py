"""What must ride a history across wires: the fidelity histories and the turns that carry them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from carryall.blocks import (
    Document,
    Image,
    Message,
    Origin,
    Text,
    ToolResult,
)
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import openai as openai_wire
from tests.support.goldens import PNG_1x1

SONNET = Origin("anthropic", "api.anthropic.com", "claude-sonnet-4-5")


HAIKU = Origin("anthropic", "api.anthropic.com", "claude-haiku-4-5")


GPT = Origin("openai", "api.openai.com", "gpt-4o")


LLAMA = Origin("llama-server", "127.0.0.1", "qwen2.5-0.5b")


# The same dialect on another server: OpenRouter passing an OpenAI model's encrypted reasoning.
ROUTER = Origin("openai", "openrouter.ai", "openai/o3")


ORIGINS = [SONNET, HAIKU, GPT, LLAMA, ROUTER]


# Anthropic block kinds an assistant turn may hold, beside its text.
KINDS = ["thinking", "redacted", "server_tool", "citations"]


def anthropic_turn(origin: Origin, n: int, kinds: list[str], call: bool) -> Message:
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


def openai_turn(origin: Origin, n: int, thinking: bool, call: bool) -> Message:
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
            history.append(anthropic_turn(origin, n, kinds, call))
        else:
            history.append(openai_turn(origin, n, draw(st.booleans()), call))
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
