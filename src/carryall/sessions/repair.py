"""Repairing a history no wire will take into the nearest one every wire takes.

A transcript line that is whole and checked can still hold a history that
breaks the history rules (`carryall.blocks.validate_history`): a line
forged with a valid check, an import from a tool with other rules, a
session written by a carryall with a bug. Such a session reads and shows,
but cannot be continued or exported. `repair_history` changes as little as
it can, and names every change, so `carryall sessions repair` can record
the result as one rewrite that says what it did (the old version stays in
`versions()`).
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from functools import cache

from carryall.blocks import (
    Block,
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    validate_history,
)
from carryall.errors import HistoryError, TranscriptError

__all__ = ["known_dialects", "repair_history"]

_UNANSWERED = "(no result was recorded for this call; added by `carryall sessions repair`)"


@cache
def known_dialects() -> frozenset[str]:
    """The wires this carryall speaks: a signature from any other can go nowhere."""
    from carryall.providers import Dialect, anthropic, bedrock, gemini, responses

    return frozenset(
        {anthropic.DIALECT, bedrock.DIALECT, gemini.DIALECT, responses.DIALECT}
        | set(typing.get_args(Dialect))
    )


def repair_history(messages: Sequence[Message]) -> tuple[list[Message], list[str]]:
    """The nearest valid history to `messages`, and each change made, naming its message.

    Media outside a user message becomes its placeholder line; a call whose
    id an earlier call used is dropped; a result that answers no call made
    just before is dropped; a call left unanswered gets an error result; a
    signature or opaque block from a wire this carryall does not know loses
    what only that wire could read; a message left empty is dropped.
    Raises `TranscriptError` if the result still breaks a rule.
    """
    changes: list[str] = []
    out: list[Message] = []
    used: set[str] = set()
    pending: list[ToolUse] = []

    def answer_pending(where: str) -> None:
        if pending:
            names = ", ".join(f"{u.name} ({u.id})" for u in pending)
            changes.append(f"{where}: answered unanswered call(s) {names} with an error result")
            out.append(Message.tool_results([ToolResult(u.id, _UNANSWERED, True) for u in pending]))
            pending.clear()

    for index, message in enumerate(messages):
        where = f"message {index}"
        blocks: list[Block] = []
        answered: set[str] = set()
        for block in message.content:
            fixed = _unsigned(block, where, changes)
            if fixed is None:
                continue
            block = fixed
            if isinstance(block, Image | Document) and message.role != "user":
                changes.append(f"{where}: {block.placeholder()} outside a user message became text")
                blocks.append(Text(block.placeholder()))
            elif isinstance(block, ToolUse):
                if message.role != "assistant" or block.id in used:
                    why = (
                        "reuses an earlier call's id" if block.id in used else "is not the model's"
                    )
                    changes.append(f"{where}: dropped call {block.name} ({block.id}), which {why}")
                    continue
                used.add(block.id)
                blocks.append(block)
            elif isinstance(block, ToolResult):
                ids = {u.id for u in pending}
                if (
                    message.role != "user"
                    or block.tool_use_id not in ids
                    or (block.tool_use_id in answered)
                ):
                    changes.append(
                        f"{where}: dropped a result for {block.tool_use_id}, "
                        "which answers no call made just before it"
                    )
                    continue
                answered.add(block.tool_use_id)
                blocks.append(block)
            else:
                blocks.append(block)
        if pending:
            missing = [u for u in pending if u.id not in answered]
            if message.role == "user" and answered and missing:
                names = ", ".join(f"{u.name} ({u.id})" for u in missing)
                changes.append(f"{where}: answered call(s) {names} with an error result")
                results = [ToolResult(u.id, _UNANSWERED, True) for u in missing]
                blocks = [*results, *blocks]
                answered.update(u.id for u in missing)
            if answered:
                pending.clear()
            else:
                answer_pending(where)
        if not blocks:
            changes.append(f"{where}: dropped the {message.role} message, empty once repaired")
            continue
        repaired = Message(message.role, tuple(blocks))
        # Results first, as the rules read a user turn that answers calls.
        if message.role == "user" and any(isinstance(b, ToolResult) for b in blocks):
            ordered = tuple(
                sorted(blocks, key=lambda b: not isinstance(b, ToolResult))  # stable
            )
            repaired = Message(message.role, ordered)
        out.append(repaired)
        pending[:] = [b for b in blocks if isinstance(b, ToolUse)]
    answer_pending(f"after message {len(messages) - 1}")
    try:
        validate_history(out)
    except HistoryError as exc:
        raise TranscriptError(f"the history cannot be repaired: {exc}") from None
    return out, changes


def _unsigned(block: Block, where: str, changes: list[str]) -> Block | None:
    """`block` without what only an unknown wire could read (None: nothing is left)."""
    origin: Origin | None = getattr(block, "origin", None)
    if origin is None or origin.dialect in known_dialects():
        return block
    wire = origin.dialect or "an unnamed wire"
    if isinstance(block, Thinking):
        changes.append(f"{where}: dropped the signature of thinking from {wire}")
        return Thinking(block.text) if block.text else None
    if isinstance(block, RedactedThinking):
        changes.append(f"{where}: dropped redacted thinking from {wire}")
        return None
    if isinstance(block, Opaque):
        changes.append(f"{where}: a {block.kind} block from {wire} became its text")
        return Text(block.text) if block.text else None
    if isinstance(block, ToolUse):
        changes.append(f"{where}: dropped the signature of call {block.name} from {wire}")
        return ToolUse(block.id, block.name, block.input)
    return block
