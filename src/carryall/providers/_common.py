"""What every encoder does before it writes its dialect: one place, so all agree."""

from __future__ import annotations

from typing import NamedTuple

from carryall.blocks import Image, Message, Text, apply_image_limit, survey_history
from carryall.providers._types import Capabilities, Request

__all__ = ["Prepared", "prepare", "prepare_messages"]


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
