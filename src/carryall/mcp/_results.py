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

from carryall.attachments import DEFAULT_MAX_IMAGES, AttachmentPolicy, load_document, load_image
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

__all__ = [
    "MAX_CONTENT_ITEMS",
    "MAX_DOCUMENT_BYTES",
    "MAX_RESULT_CHARS",
    "in_schema_order",
    "resource_output",
    "result_output",
]

MAX_DOCUMENT_BYTES: Final = 32 * 1024 * 1024
"""The largest PDF taken from a server (Anthropic's request limit for one)."""

MAX_CONTENT_ITEMS: Final = 1_000
"""Content items of one result that are read; the rest are counted in one line."""

MAX_RESULT_CHARS: Final = 100_000
"""The result text a model is given at most (the built-in `read_file`'s cap)."""

_POLICY: Final = AttachmentPolicy(roots=[], max_image_bytes=IMAGE_FIT_INPUT_BYTES)
"""No path, no host: only the `data:` form of what the server sent is loaded."""

_RESOURCE_POLICY: Final = AttachmentPolicy(roots=[])
"""A linked resource's text or PDF is held to what `-i` holds a file to: no path, no host."""

_TEXT_TYPES: Final = ("text/", "application/json", "application/xml", "application/yaml")
"""Media types read as text: checked as the `text/plain` document they are to a model."""

_READER: Final = "mcp_read_resource"
"""The reading tool's name, as a link line gives it (`carryall.mcp.READ_RESOURCE_TOOL`)."""


def result_output(
    result: types.CallToolResult, label: str, output_schema: dict[str, Any] | None = None
) -> ToolOutput:
    """The `ToolOutput` of one MCP tool result; `label` names the tool in image sources.

    Text content is the result text, in order; an image is a placeholder
    line at its place in that text and an `Image` after the results; an
    embedded text resource is its text, an image blob an image, a PDF blob
    a `Document` after the results (placeholder line in its place), anything
    else a line naming it; the result's `is_error` is the output's.

    Structured content is kept as the value (`ToolOutput.structured`, for
    the wires that take JSON) and, for the wires that take text, written as
    JSON with its fields in the order of the tool's `output_schema`, in
    place of text that says the same or where there is no text.
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
    if structured is not None:
        structured = in_schema_order(structured, output_schema)
        if not _said_as_text(content) or _same_json(content, structured):
            parts = [json.dumps(structured, ensure_ascii=False)]
    text = "\n".join(part for part in parts if part)
    if len(text) > MAX_RESULT_CHARS:
        # Too long to give whole: the wires that take JSON get the cut text as well.
        structured = None
        cut = len(text) - MAX_RESULT_CHARS
        text = text[:MAX_RESULT_CHARS] + f"\n[{cut} more characters not shown]"
    return ToolOutput(text, tuple(images), bool(result.is_error), tuple(documents), structured)


def in_schema_order(value: Any, schema: dict[str, Any] | None) -> Any:
    """`value` with an object's fields in the order `schema`'s `properties` name them, nested.

    JSON objects have no order, but a model reads text in order, and the
    schema's order is the one the tool's author chose (`city` before
    `temperature`); fields the schema does not name keep theirs, after.
    """
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return value
        named = [key for key in properties if key in value]
        rest = [key for key in value if key not in properties]
        return {key: in_schema_order(value[key], properties.get(key)) for key in (*named, *rest)}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [in_schema_order(item, schema["items"]) for item in value]
    return value


def _same_json(content: list[Any], structured: Any) -> bool:
    """Whether the result's text is the structured content written as JSON (what SDKs send)."""
    texts = [item.text for item in content if isinstance(item, types.TextContent)]
    if len(texts) != 1 or len(content) != 1:
        return False
    try:
        return bool(json.loads(texts[0]) == structured)
    except (ValueError, RecursionError):
        return False


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
        server = label.split("/", 1)[0]
        return (
            f"[resource link {item.name}: {item.uri}{kind}; "
            f"{_READER} reads it with server {server!r}]"
        )
    if isinstance(item, types.AudioContent):
        return f"[audio ({item.mime_type}): not shown to the model]"
    return f"[{type(item).__name__} content: not shown to the model]"


def resource_output(result: types.ReadResourceResult, label: str) -> ToolOutput:
    """What `resources/read` gave, as the model is given it: text as text, images and PDFs after.

    Each item passes the checks an attachment passes (`-i`): text must be
    UTF-8 under the size cap, an image canonical base64 whose bytes match
    its type, a PDF a PDF; another type is named and not read. A read
    that gives nothing readable is an error result, with why.
    """
    parts: list[str] = []
    images: list[Image] = []
    documents: list[Document] = []
    readable = False
    for item in result.contents[:MAX_CONTENT_ITEMS]:
        media_type = item.mime_type or (
            "text/plain" if isinstance(item, types.TextResourceContents) else "unknown"
        )
        uri = str(item.uri)
        if isinstance(item, types.TextResourceContents):
            data = base64.b64encode(item.text.encode("utf-8", errors="replace")).decode()
        else:
            data = item.blob
        shown, took = _resource_item(uri, media_type, data, label, images, documents)
        parts.append(shown)
        readable = readable or took
    text = "\n".join(parts) or f"{label}: the server sent no contents"
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = text[:MAX_RESULT_CHARS] + f"\n[{cut} more characters not shown]"
    return ToolOutput(text, tuple(images), not readable, tuple(documents))


def _resource_item(
    uri: str,
    media_type: str,
    data: str,
    label: str,
    images: list[Image],
    documents: list[Document],
) -> tuple[str, bool]:
    """One read item's line (or text) and whether the model was given it."""
    if media_type in IMAGE_MEDIA_TYPES:
        line = _image(media_type, data, label, images)
        return f"[resource {uri}] {line}", line.endswith("(shown after the results)")
    checked_as = "text/plain" if media_type.startswith(_TEXT_TYPES) else media_type
    if checked_as not in ("text/plain", "application/pdf"):
        return (
            f"[resource {uri} ({media_type}): not read: carryall reads text, images "
            "and PDFs, as it takes them as attachments]",
            False,
        )
    try:
        document = load_document(f"data:{checked_as};base64,{data}", _RESOURCE_POLICY)
    except AttachmentError as exc:
        return f"[resource {uri} ({media_type}): not read: {exc.reason}]", False
    if checked_as == "text/plain":
        return f"[resource {uri} ({media_type})]\n{document.to_bytes().decode('utf-8')}", True
    shown = Document(document.media_type, document.data, source=f"{label}", title=uri)
    documents.append(shown)
    return f"[resource {uri}] {shown.placeholder()} (shown after the results)", True


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
