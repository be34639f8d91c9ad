"""Prompt caching: where each wire's cache markers go, decided once for every encoder.

`Request.cache` is the policy: `"off"` marks nothing, `"auto"` marks what
each wire caches by its own rules. A wire reads a cache only where the
request begins with the very bytes an earlier request began with, so the
rules below are as much about what never changes between two steps of a
conversation as about where the markers go.

- **Anthropic** (`cache_control`) and **Bedrock Converse** (`cachePoint`
  blocks, on Claude and Nova models) cache a prefix up to an explicit
  breakpoint, at most `MAX_BREAKPOINTS` of them in a request, counting any
  the history already carries (a provider-native block kept whole may hold
  one). `breakpoints` chooses, in this order while the budget lasts: the
  *latest* anchor, on the last cacheable block of the history (so each step
  writes its whole prefix); the *bridge*, on the last cacheable block of the
  message the previous step ended on (so this step reads what that step
  wrote, however many blocks the answer and its tool results added since:
  the service looks back only `LOOKBACK` blocks from a breakpoint for an
  earlier entry); then the system prompt and the tools, which stay cached
  when the history is cut or a new conversation starts with the same
  setup. A thinking or redacted-thinking block never takes a marker (the
  API refuses one there), nor does a provider-native block, whose type
  this module cannot vouch for. How step n+1 reads step n's cache: step n
  marked the last block of its last message; in step n+1 that message is
  the one before the model's answer, the bridge marks that same block, and
  every byte before it is what step n sent. A marker sits on that block in
  step n and (as the bridge) in step n+1, and leaves it in step n+2: the
  marker is not part of what is cached, so the entry it wrote still reads.
- **OpenAI** (Chat Completions and Responses) caches every long prefix by
  itself; `prompt_cache_key` routes a conversation's requests to the
  machines that hold its prefix. It goes only to OpenAI's own API
  (`OPENAI_HOSTS`): several OpenAI-compatible servers refuse the field.
  The key is `Request.cache_key` (an `Agent` derives one from its session
  id), else a digest of the system prompt and the tools: a name, never
  anything secret, and the same for every request of a conversation.
- **Gemini** and **llama-server** cache implicitly: the longest prefix
  a request shares with an earlier one. Nothing is marked; what they need
  is what every wire needs, a prefix that stays byte-identical.

Every encoder writes the tools in the order the request holds them, each
schema as the dict it is (insertion order, nothing sorted or regenerated),
and an earlier message the same way at every step: the property test
`tests/providers/test_caching.py` holds all six wires to that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from carryall.blocks import (
    Block,
    Document,
    Image,
    Message,
    Opaque,
    Text,
    ToolResult,
    ToolUse,
)
from carryall.providers._types import CachePolicy, Request, ToolSpec

__all__ = [
    "ANTHROPIC_CACHEABLE",
    "BEDROCK_CACHEABLE",
    "LOOKBACK",
    "MAX_BREAKPOINTS",
    "OPENAI_HOSTS",
    "Breakpoints",
    "CachePolicy",
    "anthropic_breakpoints",
    "bedrock_breakpoints",
    "conversation_key",
    "mark_anthropic",
    "mark_bedrock",
    "prompt_cache_key",
]

MAX_BREAKPOINTS: Final = 4
"""Breakpoints one Anthropic or Bedrock request may hold; a fifth is refused."""

LOOKBACK: Final = 20
"""How many blocks before a breakpoint Anthropic checks for an earlier cache entry."""

OPENAI_HOSTS: Final = frozenset({"api.openai.com"})
"""Where `prompt_cache_key` is sent: OpenAI-compatible servers elsewhere may refuse it."""

ANTHROPIC_CACHEABLE: Final = frozenset({"text", "image", "document", "tool_use", "tool_result"})
"""The Messages API block types carryall writes that take a `cache_control`."""

BEDROCK_CACHEABLE: Final = frozenset({"text", "image", "document", "toolUse", "toolResult"})
"""The Converse content blocks carryall writes that a `cachePoint` may follow."""

_KEY_PREFIX: Final = "carryall-"


class Breakpoints(NamedTuple):
    """Where one request's cache markers go.

    `messages` are indices into the prepared history, ascending: each of
    those messages takes one marker, on its last cacheable block.
    """

    tools: bool = False
    system: bool = False
    messages: tuple[int, ...] = ()


_NONE: Final = Breakpoints()


def anthropic_breakpoints(
    request: Request, messages: Sequence[Message], irregular: Sequence[int]
) -> Breakpoints:
    """The Messages API's breakpoints for `request`, its history as `prepare` left it.

    `irregular` are the history's irregular messages (`Prepared.irregular`):
    only they can hold a provider-native block, so only they are searched
    for the markers the history carries.
    """
    if request.cache != "auto":
        return _NONE
    return _placed(request, messages, irregular, _anthropic_carried, tools=True)


def bedrock_breakpoints(
    request: Request, messages: Sequence[Message], irregular: Sequence[int]
) -> Breakpoints:
    """The Converse cache points for `request`, on the models that cache (Claude, Nova).

    Nova caches the system prompt and messages but not the tools; another
    model (or an inference profile ARN, which names none) gets no cache
    point, since a model without prompt caching refuses the block.
    """
    if request.cache != "auto":
        return _NONE
    model = request.model
    if "anthropic.claude" in model:
        return _placed(request, messages, irregular, _bedrock_carried, tools=True)
    if "amazon.nova" in model:
        return _placed(request, messages, irregular, _bedrock_carried, tools=False)
    return _NONE


def mark_anthropic(content: list[dict[str, Any]]) -> None:
    """Put an ephemeral `cache_control` on the last cacheable block of a written message."""
    for block in reversed(content):
        if block.get("type") in ANTHROPIC_CACHEABLE:
            block["cache_control"] = {"type": "ephemeral"}
            return


def mark_bedrock(content: list[dict[str, Any]]) -> None:
    """Put a `cachePoint` right after the last cacheable block of a written Converse message."""
    for at in range(len(content) - 1, -1, -1):
        if not BEDROCK_CACHEABLE.isdisjoint(content[at]):
            content.insert(at + 1, {"cachePoint": {"type": "default"}})
            return


def prompt_cache_key(request: Request) -> str | None:
    """The `prompt_cache_key` an OpenAI request carries, or None where none goes.

    `Request.cache_key` as given, else `conversation_key` of the system
    prompt and the tools (the part of a prompt every request of the
    conversation begins with).
    """
    if request.cache != "auto" or request.endpoint not in OPENAI_HOSTS:
        return None
    if request.cache_key:
        return request.cache_key
    setup = msgspec.json.encode([request.system or "", [_tool_json(t) for t in request.tools]])
    return conversation_key(setup)


def conversation_key(name: str | bytes) -> str:
    """A cache key naming a conversation: a short digest of `name`, never `name` itself.

    A session id or a system prompt is the user's own text; the wire gets
    only whether it is the same from one request to the next.
    """
    data = name.encode("utf-8", "surrogatepass") if isinstance(name, str) else name
    return _KEY_PREFIX + hashlib.blake2b(data, digest_size=16).hexdigest()


# -- placement ----------------------------------------------------------------


def _placed(
    request: Request,
    messages: Sequence[Message],
    irregular: Sequence[int],
    carried: Callable[[Opaque], int],
    *,
    tools: bool,
) -> Breakpoints:
    budget = MAX_BREAKPOINTS - _carried(messages, irregular, carried)
    if budget <= 0:
        return _NONE
    # An anchor the history already marks itself (an imported request's own
    # marker after that block) is kept as it is, not marked twice.
    anchors = [i for i in _anchors(messages) if not _marked(messages[i], carried)][:budget]
    budget -= len(anchors)
    # The system prompt's entry holds the tools too (they come first), so
    # it is the one kept when only one of the two fits.
    system = bool(request.system) and budget > 0
    budget -= system
    return Breakpoints(
        tools=tools and bool(request.tools) and budget > 0,
        system=system,
        messages=tuple(sorted(anchors)),
    )


def _anchors(messages: Sequence[Message]) -> tuple[int, ...]:
    """The latest anchor, then the bridge to the previous step's, as message indices."""
    latest = _anchor_at(messages, len(messages) - 1)
    if latest is None:
        return ()
    # The message the previous request ended on: the last one before an
    # assistant answer (the model's turn begins where the request stopped).
    for index in range(latest, 0, -1):
        if messages[index].role == "assistant" and messages[index - 1].role != "assistant":
            bridge = _anchor_at(messages, index - 1)
            if bridge is not None and bridge != latest:
                return (latest, bridge)
            break
    return (latest,)


def _anchor_at(messages: Sequence[Message], end: int) -> int | None:
    """The last message at or before `end` with a block a marker may go on."""
    for index in range(end, -1, -1):
        message = messages[index]
        if message.role != "system" and any(map(_cacheable, message.content)):
            return index
    return None


def _marked(message: Message, carried: Callable[[Opaque], int]) -> bool:
    """Whether a marker the message carries already follows its last cacheable block."""
    for block in reversed(message.content):
        if type(block) is Opaque and carried(block):
            return True
        if _cacheable(block):
            return False
    return False


def _cacheable(block: Block) -> bool:
    # What both marking wires write as a plain content block: never
    # thinking, never a provider-native block kept whole.
    kind = type(block)
    if kind is Text:
        text: str = block.text  # type: ignore[union-attr]
        return bool(text) and not text.isspace()
    return kind is ToolResult or kind is ToolUse or kind is Image or kind is Document


def _carried(
    messages: Sequence[Message], irregular: Sequence[int], carried: Callable[[Opaque], int]
) -> int:
    """The markers the history's own provider-native blocks already hold."""
    count = 0
    for index in irregular:
        for block in messages[index].content:
            if type(block) is Opaque:
                count += carried(block)
    return count


def _anthropic_carried(block: Opaque) -> int:
    if "cache_control" not in block.raw:
        return 0
    return _count_key(json.loads(block.raw), "cache_control")


def _bedrock_carried(block: Opaque) -> int:
    return 1 if block.kind == "cachePoint" else 0


def _count_key(value: Any, key: str) -> int:
    if isinstance(value, dict):
        own = 1 if value.get(key) is not None else 0
        return own + sum(_count_key(v, key) for v in value.values())
    if isinstance(value, list):
        return sum(_count_key(v, key) for v in value)
    return 0


def _tool_json(tool: ToolSpec) -> tuple[str, str, dict[str, Any]]:
    return (tool.name, tool.description, tool.input_schema)
