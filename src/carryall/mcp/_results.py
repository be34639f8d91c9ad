"""An MCP tool result onto the block model: text in the result, images after the round's results.

One door for every content item a server can send, so a tool from an MCP
server gives back the same `ToolOutput` a Python tool does and the loop puts
its images on the user turn after the results (§1) like any other tool's.
Nothing a server sends is trusted: each image passes the attachment
loader's checks (canonical base64, magic bytes agreeing with the media type
it claims, the size cap), and an image that fails them is named in the text
with the reason instead of failing the request that would carry it. An
image that passes is kept as the server sent it; fitting it to a model
(pixels, bytes, a body that does not decode) is the transport's, per
request, like every other image's (`carryall.transport._images`).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

from mcp import types

from carryall.attachments import DEFAULT_MAX_IMAGES, AttachmentPolicy, load_image
from carryall.blocks import (
    IMAGE_MEDIA_TYPES,
    Document,
    Image,
    document_placeholder,
    image_placeholder,
)
from carryall.errors import AttachmentError
from carryall.imagefit import IMAGE_FIT_INPUT_BYTES
from carryall.tools import ToolOutput

__all__ = ["MAX_CONTENT_ITEMS", "MAX_DOCUMENT_BYTES", "MAX_RESULT_CHARS", "result_output"]

MAX_DOCUMENT_BYTES: Final = 32 * 1024 * 1024
"""The largest PDF taken from a server (Anthropic's request limit for one)."""

MAX_CONTENT_ITEMS: Final = 1_000
"""Content items of one result that are read; the rest are counted in one line."""

MAX_RESULT_CHARS: Final = 100_000
"""The result text a model is given at most (the built-in `read_file`'s cap)."""

_POLICY: Final = AttachmentPolicy(roots=[], max_image_bytes=IMAGE_FIT_INPUT_BYTES)
"""No path, no host: only the `data:` form of what the server sent is loaded."""


def result_output(result: types.CallToolResult, label: str) -> ToolOutput:
    """The `ToolOutput` of one MCP tool result; `label` names the tool in image sources.

    Text content is the result text, in order; an image is a placeholder
    line at its place in that text and an `Image` after the results; an
    embedded text resource is its text, an image blob an image, a PDF blob
    a `Document` after the results (placeholder line in its place), anything
    else a line naming it; the result's `is_error` is the output's; structured content is
    added as JSON to a result with no text.
    """
    parts: list[str] = []
    images: list[Image] = []
    documents: list[Document] = []
    content = result.content
    for item in content[:MAX_CONTENT_ITEMS]:
        parts.append(_item_text(item, label, images, documents))
    if len(content) > MAX_CONTENT_ITEMS:
        parts.append(f"[{len(content) - MAX_CONTENT_ITEMS} more content items not shown]")
    structured = result.structured_content
    if structured is not None and not _said_as_text(content):
        parts.append("structured content: " + json.dumps(structured, ensure_ascii=False))
    text = "\n".join(part for part in parts if part)
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = text[:MAX_RESULT_CHARS] + f"\n[{cut} more characters not shown]"
    return ToolOutput(text, tuple(images), bool(result.is_error), tuple(documents))


def _item_text(item: Any, label: str, images: list[Image], documents: list[Document]) -> str:
    if isinstance(item, types.TextContent):
        return item.text
    if isinstance(item, types.ImageContent):
        return _image(item.mime_type, item.data, label, images)
    if isinstance(item, types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        media_type = resource.mime_type or "application/octet-stream"
        if media_type in IMAGE_MEDIA_TYPES:
            return _image(media_type, resource.blob, label, images)
        if media_type == "application/pdf":
            return _pdf(str(resource.uri), resource.blob, label, documents)
        return (
            f"[resource {resource.uri} ({media_type}, "
            f"{_blob_size(resource.blob)}): not shown to the model]"
        )
    if isinstance(item, types.ResourceLink):
        kind = f" ({item.mime_type})" if item.mime_type else ""
        return f"[resource link {item.name}: {item.uri}{kind}]"
    if isinstance(item, types.AudioContent):
        return f"[audio ({item.mime_type}): not shown to the model]"
    return f"[{type(item).__name__} content: not shown to the model]"


def _image(media_type: str, data: str, label: str, images: list[Image]) -> str:
    source = f"{label} image {len(images) + 1}"
    if len(images) >= DEFAULT_MAX_IMAGES:
        return f"{image_placeholder(media_type, source)} (not shown: over {DEFAULT_MAX_IMAGES})"
    target = f"data:{media_type};base64,{data}"
    try:
        image = load_image(target, _POLICY)
    except AttachmentError as exc:
        return f"{image_placeholder(media_type, source)} (not shown: {exc.reason})"
    # The server's bytes as they came: the transport fits them to the wire
    # each request goes to, so the session keeps the original.
    shown = Image(image.media_type, image.data, source)
    images.append(shown)
    return f"{shown.placeholder()} (shown after the results)"


def _pdf(uri: str, blob: str, label: str, documents: list[Document]) -> str:
    """A PDF blob as a `Document` after the results, checked like an attachment first."""
    shown = document_placeholder("application/pdf", uri)
    if len(blob) > 4 * ((MAX_DOCUMENT_BYTES + 2) // 3):
        return f"{shown} (not shown: larger than the {MAX_DOCUMENT_BYTES}-byte document limit)"
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return f"{shown} (not shown: the payload is not canonical base64)"
    if not data.startswith(b"%PDF-"):
        return f"{shown} (not shown: its bytes are not a PDF (no %PDF- header))"
    document = Document.from_bytes("application/pdf", data, source=f"{label} {uri}", title=uri)
    documents.append(document)
    return f"{document.placeholder()} (shown after the results)"


def _blob_size(blob: str) -> str:
    try:
        return f"{len(base64.b64decode(blob, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return "not valid base64"


def _said_as_text(content: list[Any]) -> bool:
    """Whether the result has text: the spec asks a server to put its structured content there too.

    Its text is then what the server meant a model to read (SDKs wrap a
    plain return value as `{"result": ...}` beside it), so the JSON is added
    only to a result that has no text at all.
    """
    return any(isinstance(item, types.TextContent) for item in content)
