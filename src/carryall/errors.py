"""The one error family every part of carryall raises.

Each message names the thing, the place (message index, line number, file)
and the reason, so a person reading one line knows what to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from carryall._text import shorten

if TYPE_CHECKING:
    from carryall.blocks import Message

__all__ = [
    "AttachmentError",
    "BlockError",
    "CarrierError",
    "CarryallError",
    "HistoryError",
    "HostedToolError",
    "LocalBackendError",
    "ProviderError",
    "SessionConflict",
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


class HostedToolError(CarryallError, ValueError):
    """A provider-hosted tool a wire does not run (or not with those settings); raised before
    anything is sent, so a declared tool is never silently left off."""

    def __init__(self, kind: str, wire: str, reason: str) -> None:
        self.kind = kind
        self.wire = wire
        self.reason = reason
        super().__init__(f"hosted tool {kind!r} on the {wire} wire: {reason}")


class TranscriptError(CarryallError):
    """A session transcript could not be read or written."""


class SessionConflict(TranscriptError):
    """A write to a session that would hide what another writer recorded, refused whole.

    Raised when the history a writer started from is no longer what the
    session holds and its change cannot go after the other writer's (see
    `carryall.sessions.protocol`). Nothing of the refused write is stored:
    `unrecorded` holds its messages, so the caller can show or keep them;
    `started` and `current` are the two versions (numbered as `versions()`
    lists them, from 1) with their message counts.
    """

    def __init__(
        self,
        session_id: str,
        reason: str,
        *,
        started: tuple[int, int],
        current: tuple[int, int],
        unrecorded: Sequence[Message] = (),
    ) -> None:
        self.session_id = session_id
        self.reason = reason
        self.started = started
        self.current = current
        self.unrecorded = list(unrecorded)
        (v1, n1), (v2, n2) = started, current
        super().__init__(
            f"session {session_id}: another writer changed it underneath this one: "
            f"this write started from version {v1} ({n1} messages) and the session now "
            f"holds version {v2} ({n2} messages); {reason}; "
            f"{len(self.unrecorded)} new message(s) of this write are not recorded"
        )


class ToolError(CarryallError):
    """A tool could not be described or run."""


class LocalBackendError(CarryallError):
    """The embedded llama-server could not be installed, started or reached."""


class McpError(CarryallError):
    """An MCP server could not be configured, started or spoken to (`carryall.mcp`)."""
