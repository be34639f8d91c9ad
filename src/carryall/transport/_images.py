"""Images fitted to the wire a request goes to, in that request only.

The transport is where a request meets a wire, so this is where an image
the wire would refuse is scaled down (`carryall.imagefit`, Pillow): the
agent's history and the session keep the original bytes, and the fitted
copy goes in the request alone. Each resize, and each image whose bytes do
not decode (sent as its placeholder with the reason instead of failing the
request), is a `Downgrade` in the encode's report, so the loss is recorded.

Fast when there is nothing to do: an image's size is read from its header
(`image_size`), and an image within limits goes byte for byte once Pillow
has found its body whole (`check_image`: a PNG's checksums, a JPEG decoded
at an eighth of its size), once per image in the process, not per request.
Without Pillow the header is all that is read.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib.util
import logging
from collections.abc import Iterable, Mapping
from typing import Final

import msgspec

from carryall.backend_specs import BACKENDS, ImageLimits
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
from carryall.imagefit import Fitted, check_image, fit_image
from carryall.imagefit import image_size as _header_size
from carryall.providers import Request

__all__ = ["WIRE_IMAGE_LIMITS", "ImageLimits", "fit_request_images"]

log = logging.getLogger("carryall.transport")


WIRE_IMAGE_LIMITS: Final[Mapping[str, ImageLimits]] = {
    spec.wire: spec.image_limits for spec in BACKENDS.values()
}
"""Per wire, what one image may be before it is fitted, as the backend table states it."""

_NO_PILLOW: Final = (
    "an image over this wire's limits (or with an unreadable header) is sent as it is: "
    "install carryall[images] (Pillow) to have it fitted"
)
_HEAD_CHARS: Final = 4 * 16384
"""Base64 read for a header: 48 KiB of file, past the metadata most JPEGs carry."""


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
            fitted = _fitted(block, limits)
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


@functools.lru_cache(maxsize=64)
def _fitted(image: Image, limits: ImageLimits) -> Fitted | None:
    """`image` fitted to `limits`; None when it goes as it is.

    Cached: the same history goes out with every request of a turn (and of
    the turns after it), so an image is fitted once, not once per request.
    """
    size, data_bytes = _declared(image)
    pillow = importlib.util.find_spec("PIL") is not None
    if size is not None and _within(size, data_bytes, limits):
        reason = _damage(image) if pillow else None
        return None if reason is None else Fitted(None, reason)
    if not pillow:
        _note_no_pillow()
        return None
    max_edge = limits.max_edge if limits.max_edge is not None else 1 << 30
    fitted = fit_image(
        image, max_edge=max_edge, max_bytes=limits.max_bytes, fit_edge=limits.fit_edge
    )
    return None if fitted.image is image else fitted


@functools.lru_cache(maxsize=256)
def _damage(image: Image) -> str | None:
    """Why an image within limits cannot go as it is (`check_image`); None when it can.

    An image whose header reads fine may still have a garbage body, which a
    provider refuses along with the whole request. Checked once per image
    for every wire (the cache outlives `_fitted`'s, which is per wire), so
    a history's images are read once, not once per request.
    """
    return check_image(image)


def _declared(image: Image) -> tuple[tuple[int, int] | None, int]:
    """The size `image`'s header declares (None if unreadable) and its length in bytes."""
    data = image.data
    length = len(data) * 3 // 4 - data[-2:].count("=")
    try:
        head = base64.b64decode(data[:_HEAD_CHARS])
        size = _header_size(head)
        if size is None and len(data) > _HEAD_CHARS and image.media_type == "image/jpeg":
            size = _header_size(base64.b64decode(data))
    except (binascii.Error, ValueError):
        return None, length
    return size, length


def _within(size: tuple[int, int], data_bytes: int, limits: ImageLimits) -> bool:
    width, height = size
    if width <= 0 or height <= 0:
        return False
    edge_ok = limits.max_edge is None or max(width, height) <= limits.max_edge
    return edge_ok and data_bytes <= limits.max_bytes


@functools.cache
def _note_no_pillow() -> None:
    # Once per process: the same history would say it with every request.
    log.warning(_NO_PILLOW)
