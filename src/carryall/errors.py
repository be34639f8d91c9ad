"""The one error family every part of carryall raises.

Each message names the thing, the place (message index, line number, file)
and the reason, so a person reading one line knows what to fix.
"""

from __future__ import annotations

from carryall._text import shorten

__all__ = [
    "AttachmentError",
    "BlockError",
    "CarrierError",
    "CarryallError",
    "HistoryError",
    "LocalBackendError",
    "ProviderError",
    "ToolError",
    "TranscriptError",
]


class CarryallError(Exception):
    """Base of every error carryall raises on purpose."""


class BlockError(CarryallError, ValueError):
    """A block or message could not be built or decoded (bad JSON form, bad image data)."""


class HistoryError(CarryallError, ValueError):
    """A history breaks an invariant of the block model; raised before any request is sent."""

    def __init__(self, index: int, reason: str) -> None:
        self.index = index
        self.reason = reason
        super().__init__(f"message {index}: {reason}")


class CarrierError(CarryallError, ValueError):
    """A tool-result carrier or marker cannot be written without changing its meaning."""


class AttachmentError(CarryallError):
    """A declared attachment was refused or could not be loaded."""

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        shown = shorten(target, 120)
        super().__init__(f"attachment {shown!r}: {reason}")


class ProviderError(CarryallError):
    """A backend refused a request, or its answer could not be decoded.

    `status` is the HTTP status when there was one, `kind` the provider's
    error type (`rate_limit_error`, `invalid_request_error`, ...) when known.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        kind: str | None = None,
        retryable: bool = False,
    ) -> None:
        self.status = status
        self.kind = kind
        self.retryable = retryable
        self.message = message
        parts = [p for p in (str(status) if status is not None else None, kind) if p]
        prefix = f"[{' '.join(parts)}] " if parts else ""
        super().__init__(f"{prefix}{message}")


class TranscriptError(CarryallError):
    """A session transcript could not be read or written."""


class ToolError(CarryallError):
    """A tool could not be described or run."""


class LocalBackendError(CarryallError):
    """The embedded llama-server could not be installed, started or reached."""


class McpError(CarryallError):
    """An MCP server could not be configured, started or spoken to (`carryall.mcp`)."""
