"""What every encoder does before it writes its dialect, and every decoder after it reads
an answer: one place, so all agree."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from carryall._json import repair_surrogates, repair_text
from carryall.blocks import (
    Block,
    Image,
    Message,
    Text,
    Thinking,
    ToolUse,
    apply_image_limit,
    survey_history,
)
from carryall.errors import ProviderError
from carryall.providers._types import Capabilities, Request

__all__ = ["Prepared", "answer_message", "prepare", "prepare_messages"]


class Prepared(NamedTuple):
    """A history ready for an encoder: checked, within the image limit, blind if need be."""

    messages: list[Message]
    irregular: list[int]
    """Indices of the messages whose JSON form is not canonical (`survey_history`)."""


def prepare(request: Request, caps: Capabilities) -> Prepared:
    """Validate the history, apply the image-count limit, and blind it for a model with no eyes.

    A model that cannot see gets each image as its `image_placeholder` line,
    so a run against a text-only model behaves as if images never existed
    rather than failing on a request it cannot serve. Only irregular
    messages can hold an image, so only they are looked at again.
    """
    survey = survey_history(request.messages)
    messages = list(request.messages)
    if survey.images > max(request.max_images, 0):
        messages = apply_image_limit(messages, request.max_images)
    if survey.images and not caps.vision:
        for index in survey.irregular:
            message = messages[index]
            if any(type(b) is Image for b in message.content):
                blind = (Text(b.placeholder()) if type(b) is Image else b for b in message.content)
                messages[index] = Message(message.role, tuple(blind))
    return Prepared(messages, survey.irregular)


def prepare_messages(request: Request, caps: Capabilities) -> list[Message]:
    """`prepare`'s messages, for the encoders that rewrite every message anyway."""
    return prepare(request, caps).messages


def _repaired(block: Block) -> Block:
    if isinstance(block, Text | Thinking):
        text = repair_text(block.text)
        return block if text is block.text else msgspec.structs.replace(block, text=text)
    if isinstance(block, ToolUse):
        try:
            value = repair_surrogates(block.input)
        except RecursionError:
            raise ProviderError(f"tool call {block.id!r}: its input is nested too deeply") from None
        return ToolUse(repair_text(block.id), repair_text(block.name), value)
    return block


def answer_message(blocks: Iterable[Block], where: str) -> Message:
    """The assistant message a decoder read: tool call ids checked, lone surrogates repaired.

    Every decoder ends here, so none lets through what the history validator
    would refuse on the next request (a call id that is empty or used twice
    would leave the session unable to continue) or text no wire can encode.
    """
    out = []
    seen: set[str] = set()
    for i, block in enumerate(blocks):
        block = _repaired(block)
        if isinstance(block, ToolUse):
            if not block.id:
                raise ProviderError(f"{where}: tool call {i} ({block.name!r}) has an empty id")
            if block.id in seen:
                raise ProviderError(f"{where}: tool call id {block.id!r} is used twice")
            seen.add(block.id)
        out.append(block)
    return Message("assistant", tuple(out))
