"""Histories for the codec property tests, and the Anthropic SDK's check of an encoded request."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter

from carryall.blocks import (
    Block,
    Image,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.providers.anthropic import (
    INVALID_JSON_KEY,
)

_SDK_REQUEST = TypeAdapter(MessageCreateParamsNonStreaming)


def _consume(value: Any) -> None:
    # pydantic validates the SDK's `Iterable[...]` fields lazily, as iterators
    # that check each item only when drawn: a check that stopped at the top
    # level would pass any message list. Draw every one, at every depth.
    if isinstance(value, str | bytes):
        return
    if isinstance(value, BaseModel):
        _consume(value.__dict__)
    elif isinstance(value, Mapping):
        for item in value.values():
            _consume(item)
    elif isinstance(value, list | tuple | Iterator):
        for item in value:
            _consume(item)


def sdk_check(wire: Mapping[str, Any]) -> None:
    """Validate a request body against the SDK's request type; `ValidationError` if it fails."""
    _consume(_SDK_REQUEST.validate_python(wire))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


tool_inputs = st.dictionaries(st.text(max_size=8), json_values, max_size=4).filter(
    # The one object this wire cannot tell from a wrapped non-object input.
    lambda d: not (len(d) == 1 and isinstance(d.get(INVALID_JSON_KEY), str))
)


visible = st.text(min_size=1, max_size=30).filter(lambda s: not s.isspace())


images = st.builds(
    Image.from_bytes,
    st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
    st.binary(max_size=30),
)


signatures = st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", min_size=1
)


assistant_blocks = st.one_of(
    st.builds(Text, visible),
    st.builds(Thinking, st.text(max_size=30), signatures),
    st.builds(RedactedThinking, st.text(max_size=30)),
)


user_blocks = st.one_of(st.builds(Text, visible), images)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Valid block histories holding only what the Anthropic wire holds (see the module notes)."""
    history: list[Message] = []
    pending: list[str] = []
    calls = 0
    for turn in range(draw(st.integers(1, 6))):
        if turn % 2 == 0:
            results = [
                ToolResult(call, draw(st.text(max_size=20)), draw(st.booleans()))
                for call in draw(st.permutations(pending))
            ]
            rest = draw(st.lists(user_blocks, min_size=0 if results else 1, max_size=3))
            history.append(Message("user", (*results, *rest)))
            pending = []
        else:
            blocks: list[Block] = draw(st.lists(assistant_blocks, max_size=3))
            for _ in range(draw(st.integers(0, 3))):
                calls += 1
                blocks.append(
                    ToolUse(
                        f"toolu_{calls}", draw(st.text(min_size=1, max_size=8)), draw(tool_inputs)
                    )
                )
                pending.append(f"toolu_{calls}")
            history.append(Message("assistant", tuple(blocks or [Text("ok")])))
    if pending:
        history.append(Message.tool_results([ToolResult(call, "done") for call in pending]))
    return history
