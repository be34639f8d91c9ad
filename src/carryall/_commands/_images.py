"""The images a person names on the command line (`-i`, chat's `/image`): one rule for both.

A file is read at once. An http(s) URL stays a URL (`Image.url`) until the
backend is known: a wire that takes image URLs (Anthropic, OpenAI) gets it
as one and carryall never fetches it; only for a wire that needs the bytes
is it fetched (`sendable`), with the same checks as any attachment.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from carryall.attachments import AttachmentPolicy, load_image
from carryall.blocks import Image, Message, image_media_type
from carryall.errors import AttachmentError, BlockError
from carryall.providers import Request

if TYPE_CHECKING:
    from carryall.backends import Backend

__all__ = ["named_image", "sendable"]

# What a URL without an image extension is held as, as the Anthropic decoder
# holds one: the wire that takes the URL reads the real type from its server.
_URL_MEDIA_TYPE = "image/png"


def named_image(target: str) -> Image:
    """An image a person named (`-i`, chat's `/image`), checked like any attachment.

    Naming a file is the permission to read it, so its own folder is the
    allowed root; the size cap, extension and magic-byte checks apply. A URL
    is not fetched here: it becomes an `Image` by URL, which `sendable`
    fetches only for a wire that cannot take URLs. Raises `AttachmentError`.
    """
    if _is_url(target):
        if not urlsplit(target).hostname:
            raise AttachmentError(target, "the URL names no host")
        media_type = image_media_type(urlsplit(target).path) or _URL_MEDIA_TYPE
        try:
            return Image(media_type, "", url=target)
        except BlockError as exc:
            raise AttachmentError(target, str(exc)) from None
    path = Path(target).expanduser()
    return load_image(str(path), AttachmentPolicy(roots=[path.parent]))


def sendable(images: Sequence[Image], backend: Backend) -> list[Image]:
    """`images` as `backend` can take them: a URL fetched only where its wire needs the bytes.

    Naming a URL is the permission to fetch from its host, so that host is
    the one allowed. A model that cannot see gets every image as its
    placeholder line anyway, so nothing is fetched for it either. Raises
    `AttachmentError`.
    """
    by_url = [image for image in images if image.url is not None and not image.data]
    if not by_url or _takes_image_urls(backend):
        return list(images)
    fetched: list[Image] = []
    for image in images:
        if image in by_url and image.url is not None:
            host = urlsplit(image.url).hostname or ""
            image = load_image(image.url, AttachmentPolicy(roots=[], allow_hosts=[host]))
        fetched.append(image)
    return fetched


def _is_url(target: str) -> bool:
    return target[:8].lower().startswith(("http://", "https://"))


def _takes_image_urls(backend: Backend) -> bool:
    """Whether `backend` sends an image URL as a URL, asked of its own codec (`Wire.image_urls`).

    The codec is the one answer: a request holding one image by URL is
    encoded (nothing is sent) and a wire that cannot take it reports the
    downgrade. A blind model counts as taking them (its images are lines);
    a backend that cannot encode is asked for bytes, the safe side.
    """
    if not backend.capabilities.vision:
        return True
    encode = getattr(backend, "encode", None)
    if encode is None:
        return False
    probe = Image(_URL_MEDIA_TYPE, "", url="https://example.invalid/probe.png")
    request = Request(model=backend.model, messages=(Message.user("probe", [probe]),))
    return not encode(request).downgrades
