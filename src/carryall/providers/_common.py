"""What every encoder does before it writes its dialect: one place, so all agree."""

from __future__ import annotations

from carryall.attachments import apply_image_limit
from carryall.blocks import Image, Message, Text, validate_history
from carryall.providers._types import Capabilities, Request

__all__ = ["prepare_messages"]


def prepare_messages(request: Request, caps: Capabilities) -> list[Message]:
    """Validate the history, apply the image-count limit, and blind it for a model with no eyes.

    A model that cannot see gets each image as its `image_placeholder` line,
    so a run against a text-only model behaves as if images never existed
    rather than failing on a request it cannot serve.
    """
    validate_history(request.messages)
    messages = apply_image_limit(request.messages, request.max_images)
    if caps.vision:
        return messages
    out: list[Message] = []
    for message in messages:
        if any(isinstance(b, Image) for b in message.content):
            blind = (Text(b.placeholder()) if isinstance(b, Image) else b for b in message.content)
            message = Message(message.role, tuple(blind))
        out.append(message)
    return out
