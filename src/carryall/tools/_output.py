"""What a tool gives back: its text, the images it made, and whether it failed.

One shape for every tool, whatever its function returned, so the loop puts
text in the result and images after the round's results (§1) without asking
which kind of tool ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from carryall.blocks import Document, Image
from carryall.errors import ToolError

__all__ = ["ToolOutput", "tool_output"]


class ToolOutput(msgspec.Struct, frozen=True):
    """What a tool gives back: its text, the images it made, and whether it failed.

    A function may return a plain `str` or a `(str, [Image, ...])` pair
    instead; `tool_output` turns any of them into this one shape.
    """

    text: str
    images: tuple[Image, ...] = ()
    is_error: bool = False
    documents: tuple[Document, ...] = ()
    """Documents the tool made (an MCP server's PDF); they ride after the images."""
    structured: Any = None
    """The result as a JSON value (an MCP server's structured content), kept on the `ToolResult`."""

    def __post_init__(self) -> None:
        if not isinstance(self.images, tuple):
            msgspec.structs.force_setattr(self, "images", tuple(self.images))
        if not isinstance(self.documents, tuple):
            msgspec.structs.force_setattr(self, "documents", tuple(self.documents))


def tool_output(value: Any) -> ToolOutput:
    """Normalise what a tool function returned into a `ToolOutput`.

    Accepts a `str`, a `ToolOutput`, a `(str, images)` pair, or `None` (a tool
    run for its effect says nothing). Anything else is a `ToolError` that says
    what came back, so the model is told and the author sees the mistake.
    """
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput(value)
    if value is None:
        return ToolOutput("")
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], Iterable)
        and not isinstance(value[1], str | bytes)
    ):
        images = tuple(value[1])
        bad = [type(i).__name__ for i in images if not isinstance(i, Image)]
        if bad:
            raise ToolError(
                f"tool returned a (text, images) pair whose images include {', '.join(bad)}; "
                "every item must be a carryall Image"
            )
        return ToolOutput(value[0], images)
    raise ToolError(
        f"tool returned {type(value).__name__}; expected str, ToolOutput or (str, list[Image])"
    )
