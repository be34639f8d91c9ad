"""Server-sent events: the framing both SDK wires stream their answers in.

Streams are read as raw events, not as the SDKs' typed event objects, so
every field the codecs read (signatures, redacted thinking,
`reasoning_content`, events newer than the SDK) reaches them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

__all__ = ["ServerSentEvent", "iter_sse"]


class ServerSentEvent(NamedTuple):
    """One dispatched server-sent event: its `event:` name (None when unnamed) and its data."""

    event: str | None
    data: str


def iter_sse(lines: Iterable[str]) -> Iterator[ServerSentEvent]:
    """The events in a stream of SSE lines (line endings already removed).

    Follows the WHATWG rules carryall's servers rely on: `data:` lines join
    with newlines, one leading space after the colon is dropped, `:` lines
    are comments, a blank line dispatches, an event whose data is empty is
    not dispatched, and an event cut off by the end of the stream (no blank line
    after it) is dropped, since its data may be a torn JSON document.
    """
    name: str | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            joined = "\n".join(data)
            if joined:
                yield ServerSentEvent(name, joined)
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
