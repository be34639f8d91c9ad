"""A request's images fitted to the wire it goes to, in that request only.

The transport is where a request meets a wire, so this is where each image
of a request is handed to `carryall.imagefit.fit_to_limits` with the
wire's limits (the one home of what fitting an image means): the agent's
history and the session keep the original bytes, and the fitted copy goes
in the request alone. Each resize, and each image whose bytes do not
decode (sent as its placeholder with the reason instead of failing the
request), is a `Downgrade` in the encode's report, so the loss is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

import msgspec

from carryall.backend_specs import BACKENDS
from carryall.blocks import (
    Block,
    Downgrade,
    Image,
    Message,
    Text,
    image_placeholder,
    survey_history,
)
from carryall.errors import HistoryError
from carryall.imagefit import ImageLimits, fit_to_limits
from carryall.providers import Request

__all__ = ["WIRE_IMAGE_LIMITS", "ImageLimits", "fit_request_images"]

WIRE_IMAGE_LIMITS: Final[Mapping[str, ImageLimits]] = {
    spec.wire: spec.image_limits for spec in BACKENDS.values()
}
"""Per wire, what one image may be before it is fitted, as the backend table states it."""


def fit_request_images(
    request: Request, limits: ImageLimits | None
) -> tuple[Request, list[Downgrade]]:
    """`request` with every image over `limits` fitted, and a `Downgrade` for each one changed.

    No `limits` is a model that sees no images: the codec writes each as its
    placeholder, so none is worth decoding. An image within limits (and a
    URL image, which is not carryall's to fetch) stays the very block it
    was, so its bytes go out unchanged; a request with nothing to fit is
    returned as it is.
    """
    downgrades: list[Downgrade] = []
    if limits is None:
        return request, downgrades
    messages: list[Message] | None = None
    held = request.messages
    try:
        # An image makes its message irregular, so only those can hold one;
        # the survey is the one every encode begins with, and it goes on
        # from the last request's history rather than reading it again.
        candidates: Iterable[int] = survey_history(held).irregular
    except HistoryError:
        candidates = range(len(held))  # the encoder refuses it, naming why; fit what is there
    for index in candidates:
        message = held[index]
        # Images ride user turns only (the encoder refuses a history holding
        # one elsewhere, before anything is sent), and a user turn is looked
        # into by exact type, as the encoders tell blocks apart.
        if type(message) is not Message or message.role != "user":
            continue
        if Image not in map(type, message.content):
            continue
        content: list[Block] | None = None
        for at, block in enumerate(message.content):
            if type(block) is not Image or block.url is not None:
                continue
            fitted = fit_to_limits(block, limits)
            if fitted is None:
                continue
            if content is None:
                content = list(message.content)
            if fitted.image is None:
                shown = image_placeholder(block.media_type, block.source)
                content[at] = Text(f"{shown} (not shown: {fitted.note})")
                downgrades.append(
                    Downgrade(index, "image", f"sent as its placeholder: {fitted.note}")
                )
            else:
                content[at] = fitted.image
                downgrades.append(Downgrade(index, "image", fitted.note or "fitted"))
        if content is not None:
            if messages is None:
                messages = list(request.messages)
            messages[index] = msgspec.structs.replace(message, content=tuple(content))
    if messages is None:
        return request, downgrades
    return msgspec.structs.replace(request, messages=messages), downgrades
