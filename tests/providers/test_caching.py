"""Prompt caching on every wire: markers within each wire's rules, and a prefix that holds still.

The property test drives one growing agent conversation per example (a
prompt, then rounds of an answer with signed thinking, text and calls and a
user turn of results with the images the tools made, and now and then a
final answer and a new prompt with images) through each wire's own codec,
the one a transport holds (`KeptItems` and all), one request per step, with
`cache="auto"`. Every request must validate against the official SDK's
types (and on Anthropic, whose transport keeps the JSON of earlier
messages, be the same JSON as the body built whole), and:

- **Markers** (Anthropic `cache_control`, Bedrock `cachePoint`): at most
  `MAX_BREAKPOINTS` in the request, none on (or, for a `cachePoint`, right
  after) a thinking or redacted-thinking block; the last message carries
  the moving breakpoint; Nova gets none on its tools.
- **Prefix**: what a wire caches is its tools, its system prompt and its
  messages in that order (OpenAI Chat: the tools, then `messages`, the
  system prompt being the first; Responses: `tools`, `instructions` and
  `input`; Gemini: `tools`, `systemInstruction`, `contents`), plus the
  `prompt_cache_key` that routes it. Step n's prefix is those fields and
  every message of step n's body; in step n+1 the same fields and the
  first as many messages must be the same JSON, element by element as
  they were sent (each element parsed from the bytes and written again
  compactly, so key order counts). The moving breakpoint is taken out of
  both before comparing (a `cache_control` key, a `cachePoint` block):
  it is the one part meant to move, and the service does not count it as
  content. What makes that safe is asserted beside it: the block step n's
  last breakpoint sat on (its cache lookup point) is, in step n+1, at or
  before a breakpoint and within `LOOKBACK` blocks of it, counting the
  blocks in the order the service reads them (tools, system, messages).
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
    Block,
    Image,
    Message,
    Origin,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.errors import CarryallError
from carryall.providers import Capabilities, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import bedrock as bedrock_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers.caching import (
    LOOKBACK,
    MAX_BREAKPOINTS,
    anthropic_breakpoints,
    conversation_key,
    prompt_cache_key,
)
from carryall.providers.codec import anthropic_codec, openai_codec, responses_codec
from tests.support.goldens import TOOLS
from tests.support.histories import sdk_check
from tests.support.sdk_openai import check_openai_request
from tests.support.sdk_wires import (
    BEDROCK_MODEL,
    check_bedrock_request,
    check_gemini_request,
    check_responses_request,
)

CAPS = Capabilities(vision=True, native_tools=True, thinking=True)
SYSTEM = "You are a careful assistant. Use the tools."

Encoder = Callable[[Request], bytes]


class WireCase(NamedTuple):
    """One wire as a transport speaks it: where, which model, its encoder and its SDK check."""

    dialect: str
    endpoint: str
    model: str
    encoder: Callable[[], Encoder]
    """A fresh encoder per conversation (a codec keeps the JSON of what it last sent)."""
    check: Callable[[dict[str, Any]], None]
    markers: str
    """`cache_control`, `cachePoint`, or "" for a wire that caches without markers."""


def _codec_bytes(make: Callable[[], Any]) -> Callable[[], Encoder]:
    def fresh() -> Encoder:
        codec = make()
        return lambda request: bytes(codec.sent(request, False).data)

    return fresh


def _bedrock_check(model: str) -> Callable[[dict[str, Any]], None]:
    return lambda body: check_bedrock_request(body, model)


NOVA = "us.amazon.nova-pro-v1:0"

WIRES = {
    "anthropic": WireCase(
        "anthropic",
        "api.anthropic.com",
        "claude-sonnet-4-5",
        _codec_bytes(lambda: anthropic_codec(CAPS, "api.anthropic.com")),
        sdk_check,
        "cache_control",
    ),
    "bedrock": WireCase(
        "bedrock",
        "bedrock-runtime.us-east-1.amazonaws.com",
        BEDROCK_MODEL,
        lambda: lambda request: bedrock_wire.encode_request_bytes(request, CAPS),
        _bedrock_check(BEDROCK_MODEL),
        "cachePoint",
    ),
    "bedrock-nova": WireCase(
        "bedrock",
        "bedrock-runtime.us-east-1.amazonaws.com",
        NOVA,
        lambda: lambda request: bedrock_wire.encode_request_bytes(request, CAPS),
        _bedrock_check(NOVA),
        "cachePoint",
    ),
    "openai": WireCase(
        "openai",
        "api.openai.com",
        "gpt-4.1-mini",
        _codec_bytes(lambda: openai_codec(CAPS, "openai", "api.openai.com")),
        check_openai_request,
        "",
    ),
    "llama-server": WireCase(
        "llama-server",
        "127.0.0.1:8080",
        "qwen3-4b",
        _codec_bytes(lambda: openai_codec(CAPS, "llama-server", "127.0.0.1:8080")),
        check_openai_request,
        "",
    ),
    "responses": WireCase(
        "responses",
        "api.openai.com",
        "gpt-5-mini",
        _codec_bytes(lambda: responses_codec(CAPS, endpoint="api.openai.com")),
        check_responses_request,
        "",
    ),
    "gemini": WireCase(
        "gemini",
        "generativelanguage.googleapis.com",
        "gemini-2.5-flash",
        lambda: lambda request: gemini_wire.encode_request_bytes(request, CAPS),
        check_gemini_request,
        "",
    ),
}


# -- the conversations ----------------------------------------------------------------


words = st.text("abcdefghij klmnop", min_size=1, max_size=20).filter(lambda s: not s.isspace())
images = st.builds(
    Image.from_bytes,
    st.sampled_from(["image/png", "image/jpeg"]),
    st.binary(min_size=1, max_size=12),
)
signatures = st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode())


@st.composite
def conversations(draw: st.DrawFn, origin: Origin) -> list[tuple[Message, ...]]:
    """The histories one agent conversation sends, step by step, each the last one grown.

    Thinking is signed and stamped with `origin` (the target's own, so each
    wire keeps what it takes of it); a round's results and the images its
    tools made are one user message, as the agent loop writes them.
    """
    history = [Message.user(draw(words), draw(st.lists(images, max_size=2)))]
    sent = [tuple(history)]
    calls = 0
    for _ in range(draw(st.integers(1, 6))):
        blocks: list[Block] = []
        for _ in range(draw(st.integers(0, 2))):
            blocks.append(Thinking(draw(words), draw(signatures), origin))
        if draw(st.booleans()):
            blocks.append(RedactedThinking(draw(signatures), origin))
        if draw(st.booleans()):
            blocks.append(Text(draw(words)))
        uses = []
        for _ in range(draw(st.integers(0, 4))):
            calls += 1
            tool = draw(st.sampled_from(TOOLS))
            arguments = {tool.input_schema["required"][0]: draw(words)}
            uses.append(ToolUse(f"toolu_{calls}", tool.name, arguments))
        if not uses and not any(type(b) is Text for b in blocks):
            blocks.append(Text(draw(words)))
        history.append(Message("assistant", (*blocks, *uses)))
        if uses:
            results = [ToolResult(u.id, draw(words), draw(st.booleans())) for u in uses]
            made = draw(st.lists(images, max_size=2))
            history.append(Message("user", (*results, *made)))
        else:
            history.append(Message.user(draw(words), draw(st.lists(images, max_size=1))))
        sent.append(tuple(history))
    return sent


def request(case: WireCase, history: tuple[Message, ...]) -> Request:
    return Request(
        model=case.model,
        endpoint=case.endpoint,
        messages=history,
        system=SYSTEM,
        tools=TOOLS,
        max_tokens=8192,
        thinking=True,
        cache="auto",
    )


# -- what a cache reads ---------------------------------------------------------------


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _unmarked(value: Any) -> Any:
    """`value` with every cache marker taken out: `cache_control` keys, `cachePoint` blocks."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value if not (isinstance(v, dict) and "cachePoint" in v)]
    return value


def cached_parts(dialect: str, body: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """What the wire caches, in its order: the fixed fields, then the message sequence."""
    if dialect == "anthropic":
        return [body.get("tools"), body.get("system")], body["messages"]
    if dialect == "bedrock":
        return [body.get("toolConfig", {}).get("tools"), body.get("system")], body["messages"]
    if dialect in ("openai", "llama-server"):
        return [body.get("tools"), body.get("prompt_cache_key")], body["messages"]
    if dialect == "responses":
        fixed = [body.get("tools"), body.get("instructions"), body.get("prompt_cache_key")]
        return fixed, body["input"]
    assert dialect == "gemini", dialect
    return [body.get("tools"), body.get("systemInstruction")], body["contents"]


def check_prefix_holds(dialect: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Fail unless `after` begins with `before`'s whole prefix, markers aside (module notes)."""
    fixed, sequence = cached_parts(dialect, before)
    fixed_after, sequence_after = cached_parts(dialect, after)
    assert _compact(_unmarked(fixed_after)) == _compact(_unmarked(fixed)), "tools or system moved"
    assert len(sequence_after) > len(sequence), "the history did not grow"
    for at, (old, new) in enumerate(zip(sequence, sequence_after, strict=False)):
        assert _compact(_unmarked(new)) == _compact(_unmarked(old)), f"message {at} changed"


def _flat(dialect: str, body: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """Every block in the order the service reads them, each with whether a breakpoint is on it."""
    out: list[tuple[dict[str, Any], bool]] = []
    if dialect == "anthropic":
        system = body.get("system")
        groups = [body.get("tools", []), system if isinstance(system, list) else []]
        groups += [m["content"] for m in body["messages"]]
        for group in groups:
            out += [(block, "cache_control" in block) for block in group]
        return out
    tools = body.get("toolConfig", {}).get("tools", [])
    groups = [tools, body.get("system", []), *(m["content"] for m in body["messages"])]
    for group in groups:
        for block in group:
            if "cachePoint" in block:
                assert out and not out[-1][1], "a cachePoint with no block of its own before it"
                out[-1] = (out[-1][0], True)
            else:
                out.append((block, False))
    return out


def check_markers(case: WireCase, body: dict[str, Any]) -> list[int]:
    """Fail unless the markers keep the wire's rules; the positions they mark (`_flat`)."""
    flat = _flat(case.dialect, body)
    marked = [i for i, (_, on) in enumerate(flat) if on]
    raw = json.dumps(body)
    assert raw.count(f'"{case.markers}"') == len(marked), "a marker outside the blocks read"
    assert len(marked) <= MAX_BREAKPOINTS, f"{len(marked)} breakpoints"
    for i in marked:
        block = flat[i][0]
        assert block.get("type") not in ("thinking", "redacted_thinking"), "a marker on thinking"
        assert "reasoningContent" not in block, "a cachePoint right after thinking"
    for message in body["messages"]:
        content = message["content"]
        assert not content or "cachePoint" not in content[0], "a cachePoint opens a message"
    if case.model == NOVA:
        tools = body.get("toolConfig", {}).get("tools", [])
        assert all("cachePoint" not in t for t in tools), "Nova takes no cachePoint on its tools"
    return marked


def check_lookup_in_reach(before: list[int], after: list[int]) -> None:
    """Fail unless step n's last breakpoint is read from a breakpoint of step n+1 within reach."""
    lookup = before[-1]
    assert any(0 <= at - lookup < LOOKBACK for at in after), (lookup, after)


# -- the property -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WIRES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_agent_conversation_keeps_its_cached_prefix_on_every_wire(
    name: str, data: st.DataObject
) -> None:
    case = WIRES[name]
    origin = Origin(case.dialect, case.endpoint, case.model)
    steps = data.draw(conversations(origin))
    encode = case.encoder()
    previous: dict[str, Any] | None = None
    previous_marks: list[int] = []
    for history in steps:
        sent = request(case, history)
        body = json.loads(encode(sent))
        case.check(body)
        if case.dialect == "anthropic":
            # The messages from the first breakpoint on are written apart
            # from the kept JSON: the bytes still hold what the dict does.
            whole = anthropic_wire.encode_request(sent, CAPS)
            assert body == json.loads(json.dumps(whole))
        if case.markers:
            marks = check_markers(case, body)
            flat = _flat(case.dialect, body)
            last = body["messages"][-1]["content"]
            assert flat[marks[-1]][0] in last, "the last message holds no moving breakpoint"
            if previous is not None:
                check_lookup_in_reach(previous_marks, marks)
            previous_marks = marks
        if previous is not None:
            check_prefix_holds(case.dialect, previous, body)
        previous = body


# -- the checkers can fail ----------------------------------------------------------------


def _anthropic_body(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": list(blocks)}]}


def test_the_checkers_catch_a_fifth_breakpoint_a_marked_thinking_and_a_moved_message() -> None:
    case = WIRES["anthropic"]
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    with pytest.raises(AssertionError, match="5 breakpoints"):
        check_markers(case, _anthropic_body(*[dict(marked) for _ in range(5)]))
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    with pytest.raises(AssertionError, match="on thinking"):
        check_markers(case, _anthropic_body({**thinking, "cache_control": {"type": "ephemeral"}}))
    before = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]}
    moved = {"messages": [{"role": "user", "content": [{"type": "text", "text": "b"}]}] * 2}
    with pytest.raises(AssertionError, match="message 0 changed"):
        check_prefix_holds("anthropic", before, moved)
    reordered = {"messages": [{"role": "user", "content": [{"text": "a", "type": "text"}]}] * 2}
    with pytest.raises(AssertionError, match="message 0 changed"):
        check_prefix_holds("anthropic", before, reordered)
    with pytest.raises(AssertionError):
        check_lookup_in_reach([3], [3 + LOOKBACK])
    bedrock = {"messages": [{"role": "user", "content": [{"reasoningContent": {}}]}]}
    bedrock["messages"][0]["content"].append({"cachePoint": {"type": "default"}})
    with pytest.raises(AssertionError, match="after thinking"):
        check_markers(WIRES["bedrock"], bedrock)


# -- placement, case by case ---------------------------------------------------------------


def _round(n: int) -> list[Message]:
    use = ToolUse(f"toolu_{n}", "read_file", {"path": f"{n}.txt"})
    return [Message.assistant([use]), Message.tool_results([ToolResult(use.id, "ok")])]


def test_a_round_wider_than_the_lookback_is_bridged_to_the_last_step() -> None:
    # Thirty calls and thirty results: the last step's breakpoint lies sixty
    # blocks back, past the service's reach, and the bridge marks it again.
    uses = [ToolUse(f"toolu_{n}", "read_file", {"path": f"{n}"}) for n in range(30)]
    history = (
        Message.user("go"),
        Message.assistant(uses),
        Message.tool_results([ToolResult(u.id, "ok") for u in uses]),
    )
    marks = anthropic_breakpoints(
        Request(model="m", messages=history, system="s", tools=TOOLS, cache="auto"),
        history,
        [],
    )
    assert marks.messages == (0, 2)
    assert marks.system and marks.tools


def test_a_history_ending_on_thinking_alone_moves_the_breakpoint_back() -> None:
    origin = Origin("anthropic", "", "m")
    history = (
        Message.user("go"),
        Message("assistant", (Thinking("hm", "sig", origin),)),
    )
    marks = anthropic_breakpoints(Request(model="m", messages=history, cache="auto"), history, [1])
    assert marks.messages == (0,)


def test_markers_the_history_carries_count_against_the_four() -> None:
    history: list[Message] = [Message.user("a"), *_round(1)]
    carried = json.dumps(
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [],
            "cache_control": {"type": "ephemeral"},
        }
    )
    from carryall.blocks import Opaque

    native = Opaque("web_search_tool_result", carried, Origin("anthropic", "", "m"))
    history[1] = Message("assistant", (*history[1].content, native))
    many = Message.user("b"), Message.assistant([native, native, Text("x")])
    full = (*history, *many, Message.user("c"))
    request_ = Request(model="m", messages=full, system="s", tools=TOOLS, cache="auto")
    irregular = [i for i, m in enumerate(full) if any(type(b) is Opaque for b in m.content)]
    marks = anthropic_breakpoints(request_, full, irregular)
    # Three carried: one left, for the latest anchor; no bridge, system or tools.
    assert marks == (False, False, (len(full) - 1,))


def test_cache_off_marks_nothing_anywhere() -> None:
    history = (Message.user("a"), *_round(1))
    for name, case in WIRES.items():
        off = Request(
            model=case.model, endpoint=case.endpoint, messages=history, system=SYSTEM, tools=TOOLS
        )
        raw = case.encoder()(off).decode()
        assert "cache_control" not in raw and "cachePoint" not in raw, name
        assert "prompt_cache_key" not in raw, name


def test_a_policy_that_is_neither_off_nor_auto_is_refused() -> None:
    with pytest.raises(CarryallError, match="'off' or 'auto', got 'on'"):
        Request(model="m", messages=(Message.user("a"),), cache="on")  # type: ignore[arg-type]


def test_bedrock_caches_only_on_models_that_cache() -> None:
    history = (Message.user("a"), *_round(1))
    for model in ("meta.llama3-70b-instruct-v1:0", "arn:aws:bedrock:us-east-1:1:foo/bar"):
        body = bedrock_wire.encode_request(
            Request(model=model, messages=history, system="s", tools=TOOLS, cache="auto"), CAPS
        )
        assert "cachePoint" not in json.dumps(body), model


# -- OpenAI's key ---------------------------------------------------------------------------


def test_prompt_cache_key_goes_to_openai_alone_and_names_no_secret() -> None:
    history = (Message.user("a"),)
    base = Request(
        model="gpt", messages=history, system="key sk-live-123", tools=TOOLS, cache="auto"
    )
    at_openai = Request(**{**_fields(base), "endpoint": "api.openai.com"})
    key = prompt_cache_key(at_openai)
    assert key is not None and key.startswith("carryall-") and len(key) <= 64
    assert "sk-live" not in key
    assert prompt_cache_key(Request(**{**_fields(at_openai), "messages": (*history, *_round(2))}))
    assert prompt_cache_key(Request(**{**_fields(base), "endpoint": "api.groq.com"})) is None
    assert prompt_cache_key(Request(**{**_fields(at_openai), "cache": "off"})) is None
    named = Request(**{**_fields(at_openai), "cache_key": conversation_key("session-1")})
    assert prompt_cache_key(named) == conversation_key("session-1") != key
    other_tools = Request(**{**_fields(at_openai), "tools": TOOLS[:1]})
    assert prompt_cache_key(other_tools) != key


def _fields(request: Request) -> dict[str, Any]:
    return {f: getattr(request, f) for f in request.__struct_fields__}


def test_every_openai_request_of_a_conversation_has_the_same_key() -> None:
    codec = responses_codec(CAPS, endpoint="api.openai.com")
    history = [Message.user("a")]
    keys = set()
    for n in range(3):
        sent = Request(
            model="gpt",
            endpoint="api.openai.com",
            messages=tuple(history),
            system=SYSTEM,
            tools=TOOLS,
            cache="auto",
        )
        keys.add(json.loads(codec.sent(sent, False).data)["prompt_cache_key"])
        history += _round(n)
    assert len(keys) == 1
