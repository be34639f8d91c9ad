"""What a person hands over on the command line (`-i`, chat's `/image`): one rule for both.

An image (PNG, JPEG, GIF, WebP) or a document (PDF, plain text), told apart
by its name or its `data:` URI's type. A file is read at once. An http(s)
URL stays a URL (`Image.url`, `Document.url`) until the backend is known: a
wire that takes that URL (Anthropic, OpenAI for images) gets it as one and
carryall never fetches it; only for a wire that needs the bytes is it
fetched (`sendable`), through the loader's one fetch and its checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from carryall.attachments import AttachmentPolicy, load_document, load_image
from carryall.blocks import (
    DOCUMENT_MEDIA_TYPES,
    Block,
    Document,
    Image,
    Message,
    document_media_type,
    image_media_type,
)
from carryall.errors import AttachmentError, BlockError

if TYPE_CHECKING:
    from carryall.backends import Backend

__all__ = ["fetched_history", "named_image", "sendable"]


def named_image(target: str) -> Image | Document:
    """An image or document a person named (`-i`, chat's `/image`), checked like any attachment.

    Naming a file is the permission to read it, so its own folder is the
    allowed root; the size cap, extension and magic-byte checks apply. A
    name ending in `.pdf` or `.txt` (or a `data:` URI of those types) is a
    document, anything else an image. A URL is not fetched here: it becomes
    a block by URL (`Image.from_url`), which `sendable` fetches only for a
    wire that cannot take it. Raises `AttachmentError`.
    """
    if _is_url(target):
        parts = urlsplit(target)
        if not parts.hostname:
            raise AttachmentError(target, "the URL names no host")
        media_type = document_media_type(parts.path)
        try:
            if media_type is not None:
                return Document(media_type, url=target)
            return Image.from_url(target)
        except BlockError as exc:
            raise AttachmentError(target, str(exc)) from None
    if target[:5].lower() == "data:":
        head = target[5:].split(";", 1)[0].split(",", 1)[0].lower()
        if head in DOCUMENT_MEDIA_TYPES:
            return load_document(target, AttachmentPolicy(roots=[]))
        return load_image(target, AttachmentPolicy(roots=[]))
    path = Path(target).expanduser()
    policy = AttachmentPolicy(roots=[path.parent])
    if document_media_type(str(path)) is not None:
        return load_document(str(path), policy)
    if image_media_type(str(path)) is None:
        # Said here, where both kinds are taken: the image loader alone
        # would name only the image extensions.
        raise AttachmentError(
            target,
            "the file name has neither an image extension (png, jpg, jpeg, gif or webp) "
            "nor a document one (pdf or txt)",
        )
    return load_image(str(path), policy)


def sendable(blocks: Sequence[Image | Document], backend: Backend) -> list[Image | Document]:
    """`blocks` as `backend` can take them: a URL fetched only where its wire needs the bytes.

    Naming a URL is the permission to fetch from its host, so that host is
    the one allowed. Whether the wire takes a URL is asked of its own codec
    (`Backend.takes_url`). Raises `AttachmentError`.
    """
    out: list[Image | Document] = []
    for block in blocks:
        url = block.url
        if url is not None and not block.data and not backend.takes_url(block):
            block = _fetched(block, [urlsplit(url).hostname or ""])
        out.append(block)
    return out


def fetched_history(
    messages: Sequence[Message], backend: Backend, allow_hosts: Sequence[str]
) -> tuple[list[Message], list[AttachmentError]]:
    """A continued history's remote media fetched where `backend`'s wire needs the bytes.

    Only from `allow_hosts` (the config's `[attachments] allow_hosts`), by
    the same fetch as `sendable`: a file held by URL that the wire takes as
    a URL stays one, and one whose host is not allowed, or whose fetch
    fails (returned, to be told), stays by URL too, so its wire sends its
    placeholder line and reports the downgrade. The fetched block keeps its
    URL beside its bytes.
    """
    out: list[Message] = []
    failed: list[AttachmentError] = []
    allowed = sorted({host.lower() for host in allow_hosts})
    for message in messages:
        blocks: list[Block] = []
        for block in message.content:
            if (
                isinstance(block, Image | Document)
                and block.url is not None
                and not block.data
                and (urlsplit(block.url).hostname or "").lower() in allowed
                and not backend.takes_url(block)
            ):
                try:
                    block = _fetched(block, allowed)
                except AttachmentError as exc:
                    failed.append(exc)
            blocks.append(block)
        changed = any(a is not b for a, b in zip(blocks, message.content, strict=True))
        out.append(Message(message.role, tuple(blocks)) if changed else message)
    return out, failed


def _fetched(block: Image | Document, hosts: Sequence[str]) -> Image | Document:
    """The one fetch both callers use: the loader's, under an allowlist of `hosts`."""
    url = block.url or ""
    policy = AttachmentPolicy(roots=[], allow_hosts=hosts)
    if isinstance(block, Image):
        image = load_image(url, policy)
        return Image(image.media_type, image.data, block.source or image.source, url)
    document = load_document(url, policy)
    return Document(document.media_type, document.data, url, block.title, block.source)


def _is_url(target: str) -> bool:
    return target[:8].lower().startswith(("http://", "https://"))
