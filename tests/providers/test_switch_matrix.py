"""The switch matrix (issue 13): a conversation recorded on any wire, continued on any other.

`WIRES` is the one table that names a wire: its origin, an assistant turn
as its real decoder reads it from that wire's answer, its encoder, the
official SDK check its requests must pass, and how a body of its own is
imported back. Every pair is run both on the golden histories (encoded on
wire A, imported back as A's recording, encoded for wire B) and on random
histories whose turns were each made on a wire drawn from the table. For
every target, three things must hold: the body validates against that
wire's SDK types; no signature, encrypted content or provider-native block
made elsewhere appears in it; and `Encoded.downgrades` names each such
block left off, at its message and by its kind.

Each wire's turns are asked for by an alias and answered by a dated model
(as people and configs name models), and each target is asked for by the
alias, by the dated name, or by another model of the same wire: the first
two are home to what that wire made, the third is not. Turns also carry the
provider-native blocks decoders keep as `Opaque` (a Responses hosted-tool
call, Gemini's executed code), which only their origin may get, and the
common forms: provider-run tools (`ServerToolCall`, `ServerToolResult`),
which every other wire gets as their readable text, and cited text
(`Citation`), which every other wire gets with numbered footnotes naming
each source's URL.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import (
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    ServerToolCall,
    ServerToolResult,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.providers import Capabilities, Encoded, Request, Response
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import bedrock as bedrock_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers import openai as openai_wire
from carryall.providers import responses as responses_wire
from tests.support.fidelity import RIDERS, anthropic_turn, openai_turn
from tests.support.goldens import GOLDENS, TOOLS
from tests.support.histories import sdk_check
from tests.support.sdk_openai import check_openai_request
from tests.support.sdk_wires import (
    check_bedrock_request,
    check_gemini_request,
    check_responses_request,
)

CAPS = Capabilities(vision=True, native_tools=True, thinking=True)


def _responses_turn(origin: Origin, n: int, thinking: bool, call: bool) -> Message:
    output: list[dict[str, Any]] = []
    if thinking:
        output.append(
            {
                "type": "reasoning",
                "id": f"rs_{n}",
                "encrypted_content": f"RENC-{origin.model}-{n}",
                "summary": [{"type": "summary_text", "text": f"pondering {n}"}],
            }
        )
    text: dict[str, Any] = {"type": "output_text", "text": f"answer {n}"}
    if thinking:
        url = f"https://example.com/{origin.model}/{n}"
        text["annotations"] = [
            {"type": "url_citation", "url": url, "title": f"Page {n}", "start_index": 0}
            | {"end_index": 6}
        ]
    output.append({"type": "message", "role": "assistant", "content": [text]})
    if thinking:
        # A hosted tool's call and its sources: one item, for this origin alone.
        source = {"type": "url", "url": f"https://example.com/found/{n}"}
        output.append(
            {
                "type": "web_search_call",
                "id": f"ws_{n}",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": f"WSQ-{origin.model}-{n}",
                    "sources": [source],
                },
            }
        )
    if call:
        output.append(
            {"type": "function_call", "call_id": f"call_{n}", "name": "look", "arguments": "{}"}
        )
    body = {"id": f"resp_{n}", "model": origin.model, "status": "completed", "output": output}
    return responses_wire.decode_response(body, endpoint=origin.endpoint).message


def _gemini_turn(origin: Origin, n: int, thinking: bool, call: bool) -> Message:
    def signature(what: str) -> str:
        return base64.b64encode(f"{what}-{origin.model}-{n}".encode()).decode()

    parts: list[dict[str, Any]] = []
    if thinking:
        parts.append(
            {"text": f"pondering {n}", "thought": True, "thoughtSignature": signature("T")}
        )
    parts.append({"text": f"answer {n}", "thoughtSignature": signature("X")})
    if thinking:
        # Code the model ran and its output: native parts, the signature with the code.
        parts.append(
            {
                "executableCode": {"language": "PYTHON", "code": f"print({n})"},
                "thoughtSignature": signature("E"),
            }
        )
        parts.append({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": f"{n}\n"}})
    if call:
        parts.append(
            {
                "functionCall": {"id": f"call_{n}", "name": "look", "args": {"n": n}},
                "thoughtSignature": signature("C"),
            }
        )
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": parts},
        "finishReason": "STOP",
    }
    if thinking:
        # Google Search grounding: the search, and the answer's text citing a page.
        page = {"uri": f"https://example.com/grounded/{n}", "title": f"Grounded {n}"}
        candidate["groundingMetadata"] = {
            "webSearchQueries": [f"GQ-{n}"],
            "groundingChunks": [{"web": page}],
            "groundingSupports": [
                {"segment": {"startIndex": 0, "endIndex": 6}, "groundingChunkIndices": [0]}
            ],
        }
    body = {"candidates": [candidate], "modelVersion": origin.model}
    return gemini_wire.decode_response(body, endpoint=origin.endpoint).message


def _bedrock_turn(origin: Origin, n: int, thinking: bool, call: bool) -> Message:
    content: list[dict[str, Any]] = []
    if thinking:
        text = {"text": f"pondering {n}", "signature": f"BSIG-{origin.model}-{n}"}
        content.append({"reasoningContent": {"reasoningText": text}})
        redacted = base64.b64encode(f"BRED-{origin.model}-{n}".encode()).decode()
        content.append({"reasoningContent": {"redactedContent": redacted}})
    content.append({"text": f"answer {n}"})
    if call:
        content.append({"toolUse": {"toolUseId": f"call_{n}", "name": "look", "input": {"n": n}}})
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use" if call else "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
    }
    return bedrock_wire.decode_response(body, endpoint=origin.endpoint, model=origin.model).message


def _anthropic(origin: Origin, n: int, thinking: bool, call: bool) -> Message:
    kinds = ["thinking", "redacted", "server_tool", "citations"] if thinking else []
    return anthropic_turn(origin, n, kinds, call)


def _request(history: list[Message], target: Origin) -> Request:
    return Request(
        model=target.model, endpoint=target.endpoint, messages=tuple(history), tools=TOOLS
    )


_BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


class WireCase(NamedTuple):
    """One wire of the matrix, everything the matrix needs of it."""

    origin: Origin
    """What answers: the dated model the wire's answers name."""
    turn: Callable[[Origin, int, bool, bool], Message]
    encode: Callable[[Request], Encoded]
    check: Callable[[dict[str, Any]], None]
    imported: Callable[[dict[str, Any]], tuple[str | None, list[Message]]]
    takes_thinking_text: bool = False
    """Takes any thinking's text (no signature) where others take only their own."""
    alias: str = ""
    """The name a request asks for (empty: the dated name itself, as on Bedrock)."""


WIRES: dict[str, WireCase] = {
    "anthropic": WireCase(
        Origin("anthropic", "api.anthropic.com", "claude-sonnet-4-5-20250929"),
        _anthropic,
        lambda r: anthropic_wire.encode(r, CAPS),
        sdk_check,
        lambda b: anthropic_wire.decode_messages(b["messages"], system=b.get("system")),
        alias="claude-sonnet-4-5",
    ),
    "openai": WireCase(
        Origin("openai", "api.openai.com", "gpt-4o-2024-08-06"),
        openai_turn,
        lambda r: openai_wire.encode(r, CAPS, "openai"),
        check_openai_request,
        lambda b: openai_wire.decode_messages(b["messages"]),
        alias="gpt-4o",
    ),
    "llama-server": WireCase(
        Origin("llama-server", "127.0.0.1", "qwen2.5-0.5b-instruct-q8_0.gguf"),
        openai_turn,
        lambda r: openai_wire.encode(r, CAPS, "llama-server"),
        check_openai_request,
        lambda b: openai_wire.decode_messages(b["messages"]),
        takes_thinking_text=True,
        alias="qwen2.5-0.5b",
    ),
    "responses": WireCase(
        Origin("responses", "api.openai.com", "gpt-5-2025-08-07"),
        _responses_turn,
        lambda r: responses_wire.encode(r, CAPS),
        check_responses_request,
        lambda b: responses_wire.decode_messages(b["input"], system=b.get("instructions")),
        alias="gpt-5",
    ),
    "gemini": WireCase(
        Origin("gemini", "generativelanguage.googleapis.com", "gemini-3-pro-preview"),
        _gemini_turn,
        lambda r: gemini_wire.encode(r, CAPS),
        check_gemini_request,
        lambda b: gemini_wire.decode_messages(b["contents"], system=b.get("systemInstruction")),
        alias="gemini-pro-latest",
    ),
    "bedrock": WireCase(
        Origin("bedrock", "bedrock-runtime.us-east-1.amazonaws.com", _BEDROCK_MODEL),
        _bedrock_turn,
        lambda r: bedrock_wire.encode(r, CAPS),
        lambda b: check_bedrock_request(b, _BEDROCK_MODEL),
        lambda b: bedrock_wire.decode_messages(b["messages"], system=b.get("system")),
    ),
}
PAIRS = [(a, b) for a in WIRES for b in WIRES]


def _signed(block: Any) -> list[str]:
    """The signed or opaque strings a block carries, which only its origin may see."""
    if isinstance(block, Thinking | ToolUse) and block.signature:
        return [block.signature]
    if isinstance(block, RedactedThinking):
        return [block.data]
    if isinstance(block, Opaque) and block.raw:
        return [block.raw]
    return []


def _at_home(origin: Origin | None, target: Origin) -> bool:
    """Whether a signed block may go to `target`, as the block model defines its origins.

    No origin is a transcript from before origins, when only Anthropic
    signed; an origin naming only its dialect is an imported file's, which
    any model of that dialect may be sent.
    """
    if origin is None:
        return target.dialect == "anthropic"
    if not origin.endpoint and not origin.model:
        return origin.dialect == target.dialect
    # Its dialect and endpoint, and either name the model answered to.
    return (origin.dialect, origin.endpoint) == (
        target.dialect,
        target.endpoint,
    ) and target.model in (origin.model, origin.requested or origin.model)


NAMINGS = ("alias", "dated", "another")
"""How a request names its model: as the turns were asked for, as they were answered, or not."""


def _named(case: WireCase, naming: str) -> Origin:
    model = {
        "alias": case.alias or case.origin.model,
        "dated": case.origin.model,
        "another": "another-model-entirely",
    }[naming]
    return Origin(case.origin.dialect, case.origin.endpoint, model)


def _asked(case: WireCase, message: Message) -> Message:
    """A turn as the transport stamps it: asked for by the wire's alias."""
    answer = Response(message=message, stop_reason="end_turn")
    return answer.as_requested(case.alias or case.origin.model).message


_KIND = {Thinking: "thinking", ToolUse: "tool_use", RedactedThinking: "redacted_thinking"}


def check_switch(history: list[Message], target: WireCase, naming: str = "dated") -> None:
    """Encode `history` for one wire of the table and hold it to the matrix's three rules.

    `naming` says how the request names the target's model (`NAMINGS`).
    """
    target_name = target.origin.dialect
    asked = _named(target, naming)
    encoded = target.encode(_request(history, asked))
    target.check(encoded.body)
    sent = json.dumps(encoded.body)
    reported = {(d.index, d.kind) for d in encoded.downgrades}
    for index, message in enumerate(history):
        for block in message.content:
            _check_common(block, index, asked, sent, reported, target_name)
            origin = getattr(block, "origin", None)
            tokens = _signed(block)
            if not tokens or _at_home(origin, asked):
                continue
            for token in tokens:
                # An Opaque's raw JSON may quote its own text line; the secret parts must not go.
                secret = json.loads(token).get("encrypted_content") if token[:1] == "{" else token
                if isinstance(block, Opaque) and not secret:
                    secret = token
                assert secret not in sent, (
                    f"{type(block).__name__} of {origin} reached {target_name}"
                )
            if isinstance(block, Thinking) and target.takes_thinking_text:
                continue  # its text goes, never its signature (checked above)
            kind = _KIND.get(type(block), "opaque")
            assert (index, kind) in reported, f"{kind} at {index} left off without a word"


def _check_common(
    block: Any, index: int, asked: Origin, sent: str, reported: set[tuple[int, str]], to: str
) -> None:
    """The common forms away from home: a provider-run tool as its reading, cited text with
    footnotes naming every source's URL and a `citations` downgrade; their raw never goes."""
    if isinstance(block, ServerToolCall | ServerToolResult) and not _at_home(block.origin, asked):
        assert json.dumps(block.text)[1:-1] in sent, f"{block.tool} at {index} not read to {to}"
    if isinstance(block, Text) and block.citations:
        if all(_at_home(c.origin, asked) for c in block.citations):
            return
        assert (index, "citations") in reported, f"citations at {index} left off without a word"
        for citation in block.citations:
            if citation.url:
                assert citation.url in sent, f"source {citation.url} not footnoted on {to}"
            if citation.raw:
                assert citation.raw not in sent, f"a citation's own form reached {to}"


@pytest.mark.parametrize(("recorded", "target"), PAIRS)
@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_every_golden_recorded_on_one_wire_continues_on_every_other(
    name: str, recorded: str, target: str
) -> None:
    source = WIRES[recorded]
    body = source.encode(_request(GOLDENS[name], source.origin)).body
    _, history = source.imported(body)
    check_switch(history, WIRES[target])


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    history = [Message.user("start")]
    for n in range(draw(st.integers(1, 4))):
        wire = WIRES[draw(st.sampled_from(sorted(WIRES)))]
        call = draw(st.booleans())
        history.append(_asked(wire, wire.turn(wire.origin, n, draw(st.booleans()), call)))
        riders = draw(st.lists(st.sampled_from(RIDERS), max_size=2))
        if call:
            answered = tuple(ToolResult(c.id, f"looked {n}") for c in history[-1].tool_uses())
            history.append(Message("user", (*answered, *riders)))
        else:
            history.append(Message("user", (Text(f"next {n}"), *riders)))
    return history


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(histories(), st.sampled_from(NAMINGS))
def test_any_history_made_across_the_wires_continues_on_each(
    history: list[Message], naming: str
) -> None:
    for target in WIRES.values():
        check_switch(history, target, naming)


def test_a_wire_asked_by_its_alias_gets_back_everything_it_made() -> None:
    """Home is either name: nothing a wire made is left off when asked by alias or dated name.

    Save what has no form of its own for a request, which goes back to no
    model and is named whatever the name (Gemini's grounding, read with no raw).
    """
    for case in WIRES.values():
        turn = _asked(case, case.turn(case.origin, 0, True, True))
        history = [Message.user("start"), turn]
        history.append(Message("user", tuple(ToolResult(c.id, "ok") for c in turn.tool_uses())))
        for naming in ("alias", "dated"):
            encoded = case.encode(_request(history, _named(case, naming)))
            left = [d for d in encoded.downgrades if d.index == 1]
            assert all(_formless(turn, d.block) for d in left), (case.origin, naming, left)
        moved = case.encode(_request(history, _named(case, "another")))
        if any(_signed(b) for b in turn.content):
            assert any(d.index == 1 for d in moved.downgrades), case.origin


def _formless(turn: Message, at: int | None) -> bool:
    """Whether the block at `at` holds no wire form to send back (an `Opaque` with no raw)."""
    if at is None:
        return False
    block = turn.content[at]
    return isinstance(block, Opaque) and not block.raw


def test_the_matrix_catches_a_signature_sent_abroad_and_a_silent_loss() -> None:
    """The check can fail: a Gemini call signature forced onto the Anthropic wire is caught,
    and so is a body that leaves the Gemini signatures off without reporting it."""
    gemini = WIRES["gemini"]
    turn = gemini.turn(gemini.origin, 0, False, True)
    history = [Message.user("start"), turn, Message("user", (ToolResult("call_0", "ok"),))]
    anthropic = WIRES["anthropic"]

    def leaky(request: Request) -> Encoded:
        encoded = anthropic.encode(request)
        signatures = json.dumps([b.signature for b in turn.tool_uses()])
        return Encoded({**encoded.body, "metadata": {"user_id": signatures}}, encoded.downgrades)

    def silent(request: Request) -> Encoded:
        return Encoded(anthropic.encode(request).body, ())

    check_switch(history, anthropic)
    # A cited Responses text sent on without its footnotes is caught too.
    responses = WIRES["responses"]
    cited = responses.turn(responses.origin, 1, True, False)
    plain = [Message.user("start"), cited, Message.user("next")]
    url = f"https://example.com/{responses.origin.model}/1"

    def unnoted(request: Request) -> Encoded:
        encoded = anthropic.encode(request)
        return Encoded(json.loads(json.dumps(encoded.body).replace(url, "")), encoded.downgrades)

    check_switch(plain, anthropic)
    with pytest.raises(AssertionError, match="not footnoted"):
        check_switch(plain, anthropic._replace(encode=unnoted))
    with pytest.raises(AssertionError, match=r"ToolUse of .* reached anthropic"):
        check_switch(history, anthropic._replace(encode=leaky))
    with pytest.raises(AssertionError, match="left off without a word"):
        check_switch(history, anthropic._replace(encode=silent))
