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
from carryall.blocks import DOCUMENT_MEDIA_TYPES, Document, Image, Message, document_media_type
from carryall.errors import AttachmentError, BlockError
from carryall.providers import Request

if TYPE_CHECKING:
    from carryall.backends import Backend

__all__ = ["named_image", "sendable"]


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
    return load_image(str(path), policy)


def sendable(blocks: Sequence[Image | Document], backend: Backend) -> list[Image | Document]:
    """`blocks` as `backend` can take them: a URL fetched only where its wire needs the bytes.

    Naming a URL is the permission to fetch from its host, so that host is
    the one allowed. Whether the wire takes a URL is asked of its own codec
    (`_takes_url`). Raises `AttachmentError`.
    """
    out: list[Image | Document] = []
    for block in blocks:
        url = block.url
        if url is not None and not block.data and not _takes_url(block, backend):
            policy = AttachmentPolicy(roots=[], allow_hosts=[urlsplit(url).hostname or ""])
            block = (
                load_image(url, policy) if isinstance(block, Image) else load_document(url, policy)
            )
        out.append(block)
    return out


def _is_url(target: str) -> bool:
    return target[:8].lower().startswith(("http://", "https://"))


def _takes_url(block: Image | Document, backend: Backend) -> bool:
    """Whether `backend` sends `block` as its URL, asked of its own codec (`Wire`).

    The codec is the one answer: a request holding the block is encoded
    (nothing is sent, nothing fetched) and a wire that cannot take it
    reports the downgrade. A model that cannot see gets an image as its
    placeholder line anyway, so nothing is fetched for it; a backend that
    cannot encode is asked for bytes, the safe side.
    """
    if isinstance(block, Image) and not backend.capabilities.vision:
        return True
    encode = getattr(backend, "encode", None)
    if encode is None:
        return False
    request = Request(model=backend.model, messages=(Message.user("probe", [block]),))
    return not encode(request).downgrades
