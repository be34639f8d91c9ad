"""Whole histories in and out of files: OpenAI and Anthropic messages, and carryall's export.

Reading takes three shapes: an OpenAI-style `messages` array, an
Anthropic-style one (each a bare list, or an object with `messages` and an
optional `system`), and carryall's own session export
(`carryall.sessions.render.export_dict`). Writing gives the two wire shapes
(carryall's export is a reader format, written by `sessions.render`).

Both directions go through the provider codecs: a file is read by the
codecs' importers (`decode_messages`) and written by their request encoders
(`encode_body`, every origin kept), so a file reads and writes the way a request or
response on that wire would. `carryall sessions import` and `carryall
sessions export -f openai|anthropic` are this module and the store.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from carryall._beneath import read_regular
from carryall._json import repair_surrogates
from carryall.blocks import (
    Downgrade,
    Image,
    Message,
    image_placeholder,
    messages_from_dicts,
    validate_history,
)
from carryall.errors import BlockError, HistoryError, TranscriptError
from carryall.providers import Capabilities, Request, Target
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import openai as openai_codec
from carryall.sessions.render import EXPORT_KIND

__all__ = [
    "HistoryFormat",
    "Imported",
    "WireFormat",
    "detect_format",
    "export_messages",
    "read_messages_file",
]

WireFormat = Literal["openai", "anthropic"]
"""Which API's messages a file holds (not a codec's `Dialect`, which is a variant of one wire)."""

HistoryFormat = Literal["openai", "anthropic", "carryall"]
"""The shapes of a whole-history file this module reads: a wire's messages, or carryall's export."""

BlobReader = Callable[[str], bytes | None]
"""From a content hash to the image bytes stored under it, or None when they are not there."""

_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_PARTS = frozenset(
    {"tool_use", "tool_result", "image", "thinking", "redacted_thinking", "document"}
)


class Imported(msgspec.Struct, frozen=True):
    """What a messages file held: its format, system prompt and history (and any meta).

    `downgrades` names what the file held that no block keeps (by message
    index and path), so an import is never silently lossy.
    """

    format: HistoryFormat
    system: str | None
    messages: list[Message]
    title: str | None = None
    backend: str = ""
    model: str = ""
    downgrades: tuple[Downgrade, ...] = ()


# -- reading ----------------------------------------------------------------------


def detect_format(data: Any) -> HistoryFormat:
    """Which shape a parsed messages file has.

    carryall's export names itself. A `tool` or `developer` role, a
    `tool_calls` key or an `image_url` part is OpenAI; a `tool_use`,
    `tool_result`, `image` or `thinking` block is Anthropic. A `system`
    message decides nothing alone (both APIs take one in the history). A
    file of plain text turns reads the same either way: with a top-level
    `system` it is taken as Anthropic (where the system prompt lives beside
    the messages), else as OpenAI.
    """
    if isinstance(data, Mapping) and data.get("carryall") == EXPORT_KIND:
        return "carryall"
    messages = _messages_of(data)
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in ("tool", "developer") or "tool_calls" in message:
            return "openai"
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind in _OPENAI_PARTS:
                    return "openai"
                if kind in _ANTHROPIC_PARTS:
                    return "anthropic"
    if isinstance(data, Mapping) and data.get("system") is not None:
        return "anthropic"
    return "openai"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_messages_file(
    path: str | Path,
    fmt: HistoryFormat | Literal["auto"] = "auto",
    *,
    blob: BlobReader | None = None,
) -> Imported:
    """Read a messages file (see the module notes) into a history.

    `blob` lets a carryall export made without embedded images get them
    back from a store that still holds them; an image it cannot find
    becomes its placeholder text, so nothing is silently dropped. A file
    with no messages, or whose history `validate_history` rejects, is a
    `TranscriptError` naming the file and the message.
    """
    imported = _read_file(path, fmt, blob)
    where = str(path)
    # Refused here, before a store writes anything: a file with nothing in
    # it, or a history a request would reject (a tool result that answers no
    # call), would otherwise become a session that fails only when resumed.
    if not imported.messages:
        raise TranscriptError(
            f"{where}: no messages to import (expected a list of messages or an object "
            "with a non-empty `messages` list)"
        )
    try:
        validate_history(imported.messages)
    except HistoryError as exc:
        raise TranscriptError(f"{where} as {imported.format} messages: {exc}") from None
    return imported


def _read_file(
    path: str | Path, fmt: HistoryFormat | Literal["auto"], blob: BlobReader | None
) -> Imported:
    where = str(path)
    try:
        # A FIFO or a device is refused by type (`read_regular`), not waited on.
        # NaN is no JSON any wire carries; a lone surrogate no stream can write.
        data = repair_surrogates(json.loads(read_regular(Path(path)), parse_constant=_no_constant))
    except OSError as exc:
        raise TranscriptError(f"cannot read {where}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"{where} is not JSON: {exc}") from None
    except RecursionError:
        raise TranscriptError(f"{where}: JSON nested too deeply to read") from None
    chosen: HistoryFormat = detect_format(data) if fmt == "auto" else fmt
    if chosen == "carryall":
        return _read_export(data, where, blob)
    messages = _messages_of(data)
    if not isinstance(data, list | Mapping) or not isinstance(messages, list):
        raise TranscriptError(
            f"{where}: expected a list of messages or an object with a `messages` list"
        )
    system = data.get("system") if isinstance(data, Mapping) else None
    codec = anthropic_codec if chosen == "anthropic" else openai_codec
    try:
        found_system, history = codec.decode_messages(messages, system=system)
    except Exception as exc:  # the codecs raise BlockError or ProviderError, both named
        raise TranscriptError(f"{where} as {chosen} messages: {exc}") from None
    model = data.get("model") if isinstance(data, Mapping) else None
    return Imported(
        format=chosen,
        system=found_system,
        messages=list(history),
        model=model if isinstance(model, str) else "",
        downgrades=history.downgrades,
    )


def _messages_of(data: Any) -> Sequence[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, Mapping):
        messages = data.get("messages")
        if isinstance(messages, list):
            return messages
    return []


def _read_export(data: Any, where: str, blob: BlobReader | None) -> Imported:
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        raise TranscriptError(f"{where}: a carryall export needs a `messages` list")
    if data.get("format", 1) != 1:
        raise TranscriptError(
            f"{where}: export format {data.get('format')!r} is newer than this carryall reads (1)"
        )
    found = data.get("session")
    session: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    raw_messages = []
    for index, raw in enumerate(data["messages"]):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("content"), list):
            raise TranscriptError(f"{where}: messages[{index}] is not a message object")
        content = [_export_block(b, blob) for b in raw["content"]]
        raw_messages.append({"role": raw.get("role"), "content": content})
    try:
        messages = messages_from_dicts(raw_messages)
    except BlockError as exc:
        raise TranscriptError(f"{where}: {exc}") from None
    system = session.get("system")
    title = session.get("title")
    return Imported(
        format="carryall",
        system=system if isinstance(system, str) else None,
        messages=messages,
        title=title if isinstance(title, str) else None,
        backend=str(session.get("backend") or ""),
        model=str(session.get("model") or ""),
    )


def _export_block(raw: Any, blob: BlobReader | None) -> Any:
    """An exported block in carryall's JSON form, its image data restored where possible."""
    if not isinstance(raw, Mapping) or raw.get("type") != "image":
        return raw
    media_type = raw.get("media_type")
    source = raw.get("source")
    source = source if isinstance(source, str) else None
    data = raw.get("data")
    if isinstance(data, str) and data:
        return {"type": "image", "media_type": media_type, "data": data, "source": source}
    sha = raw.get("sha256")
    found = blob(sha) if blob is not None and isinstance(sha, str) else None
    if found is not None and isinstance(media_type, str):
        try:
            image = Image.from_bytes(media_type, found, source)
        except BlockError:
            pass
        else:
            return {"type": "image", "media_type": media_type, "data": image.data, "source": source}
    # No bytes to restore: keep the honest line a reader would have shown.
    return {"type": "text", "text": image_placeholder(str(media_type), source)}


# -- writing ----------------------------------------------------------------------


def export_messages(
    fmt: WireFormat,
    messages: Sequence[Message],
    *,
    system: str | None = None,
    model: str = "",
) -> str:
    """A history as an OpenAI or Anthropic messages file (JSON text), through the request codecs.

    The file is `{"messages": [...]}`, with Anthropic's top-level `system`
    when there is one (OpenAI carries it as the first message), which
    `read_messages_file` reads back.
    """
    request = Request(model=model, system=system, messages=tuple(messages), max_images=sys.maxsize)
    # Every image and every tool round goes out, and every signature and
    # native block whatever made it: the export is the whole history, not
    # what one model could take; whoever sends it on decides.
    caps = Capabilities(vision=True, native_tools=True, thinking=True)
    target = Target(caps=caps, every_origin=True)
    document: dict[str, Any]
    if fmt == "anthropic":
        body = anthropic_codec.encode_body(request, target).body
        document = {"messages": body["messages"]}
        if "system" in body:
            document = {"system": body["system"], **document}
    else:
        wire = openai_codec.encode_body(request, target).body
        document = {"messages": wire["messages"]}
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
