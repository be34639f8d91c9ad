"""Attachments: loading declared images safely and lifting them into the user turn."""

from __future__ import annotations

from collections.abc import Sequence

from carryall.blocks import Image, Message, Text

__all__ = ["apply_image_limit"]


def apply_image_limit(messages: Sequence[Message], max_images: int) -> list[Message]:
    """Keep the newest `max_images` images of a history; older ones become placeholder text.

    One function, used by every encoder, so every backend drops the same
    images and says the same thing where they were.
    """
    total = sum(1 for m in messages for b in m.content if isinstance(b, Image))
    excess = total - max(max_images, 0)
    if excess <= 0:
        return list(messages)
    out: list[Message] = []
    for message in messages:
        if excess <= 0 or not any(isinstance(b, Image) for b in message.content):
            out.append(message)
            continue
        blocks = []
        for block in message.content:
            if isinstance(block, Image) and excess > 0:
                blocks.append(Text(block.placeholder()))
                excess -= 1
            else:
                blocks.append(block)
        out.append(Message(message.role, tuple(blocks)))
    return out
