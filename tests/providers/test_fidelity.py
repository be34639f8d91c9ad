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

from carryall.blocks import (
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Text,
    Thinking,
    ToolUse,
)
from carryall.providers import Capabilities, Encoded, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import openai as openai_wire
from tests.support.fidelity import ORIGINS, histories
from tests.support.histories import sdk_check
from tests.support.sdk_openai import OPENROUTER, check_openai_request, check_openrouter_request

CAPS = Capabilities(vision=True, native_tools=True, thinking=True)


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
            elif isinstance(block, Text) and block.citations:
                # Cited text goes as footnotes to any wire but its citations' own.
                if any(c.origin != target for c in block.citations):
                    out[index, "citations"] += 1
            elif isinstance(block, Image):
                if block.url is not None and target.dialect == "llama-server":
                    out[index, "image"] += 1
            elif isinstance(block, ToolUse) and block.spelling and block.spelling.extra:
                # A call's own text (its arguments as the model wrote them) goes to
                # the model that wrote it alone; the input goes everywhere.
                out[index, "tool_use"] += block.spelling.origin != target
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
                found["opaque"] += kind in ("server_tool_use", "web_search_tool_result")
                found["citations"] += kind == "text" and "citations" in part
    return found


def _held(history: list[Message], dialect: str) -> Counter[str]:
    held: Counter[str] = Counter()
    for message in history:
        thinking = [b for b in message.content if isinstance(b, Thinking)]
        # llama-server takes a turn's thinking as one `reasoning_content`.
        held["thinking"] += (1 if thinking else 0) if dialect == "llama-server" else len(thinking)
        held["redacted_thinking"] += sum(isinstance(b, RedactedThinking) for b in message.content)
        held["opaque"] += sum(isinstance(b, Opaque) for b in message.content)
        held["citations"] += sum(isinstance(b, Text) and bool(b.citations) for b in message.content)
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
        for block in message.content:
            if isinstance(block, Text):
                for citation in block.citations:
                    if citation.origin != target:
                        tokens += ["CITE-"] if "CITE-" in citation.raw else []
                        tokens.append(citation.raw)
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
        elif target.endpoint == OPENROUTER:
            check_openrouter_request(body)
        else:
            check_openai_request(body)
        sent = json.dumps(body, ensure_ascii=False)
        for token in _foreign_tokens(history, target):
            if token in ("ENC-", "CITE-", "srvtoolu_"):
                # Some other origin's native block: only this target's may carry these.
                if not any(
                    (isinstance(b, Opaque) and b.origin == target and token in b.raw)
                    or (
                        isinstance(b, Text)
                        and any(c.origin == target and token in c.raw for c in b.citations)
                    )
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
        for kind in ("redacted_thinking", "opaque", "document", "citations"):
            assert in_body[kind] + kinds[kind] == held[kind], (target, kind)
        if target.dialect == "anthropic":
            assert in_body["thinking"] + kinds["thinking"] == held["thinking"], target
        for downgrade in encoded.downgrades:
            assert downgrade.reason and 0 <= downgrade.index < len(history)
