"""The one error family every part of carryall raises.

Each message names the thing, the place (message index, line number, file)
and the reason, so a person reading one line knows what to fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from carryall._text import shorten

__all__ = [
    "RETRYABLE_KINDS",
    "RETRYABLE_STATUSES",
    "STATUS_KINDS",
    "AttachmentError",
    "BlockError",
    "CarrierError",
    "CarryallError",
    "HistoryError",
    "HostedToolError",
    "LocalBackendError",
    "ProviderError",
    "SessionConflict",
    "StructuredOutputError",
    "ToolError",
    "TranscriptError",
    "wire_error",
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


RETRYABLE_STATUSES: Final = frozenset({408, 409, 429, *range(500, 600)})
"""The HTTP statuses worth sending a request again for, on every wire.

Request timeout (408), conflict or lock timeout (409), rate limit (429) and
every 5xx (Anthropic's 529 overload among them): the rule of the `anthropic`
and `openai` SDKs, which holds the statuses `google-genai` retries (408,
429, 500, 502, 503, 504) and those botocore's standard mode does (429,
500, 502, 503, 504), so a status any of the four SDKs would retry is
retried alike whichever wire met it.
"""

STATUS_KINDS: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout",
    409: "conflict_error",
    413: "request_too_large",
    422: "unprocessable_entity_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
"""The error kind a status means when the answer names none: the SDKs' status error classes
(`BadRequestError` for 400, ...) in the words of Anthropic's error types."""


RETRYABLE_KINDS: Final = frozenset(
    {
        # Anthropic's error types.
        "overloaded_error",
        "rate_limit_error",
        "api_error",
        # OpenAI's (a stream's error event often carries one and no status).
        "server_error",
        "rate_limit_exceeded",
        # Bedrock's error codes, and the same as a Converse stream's exception events.
        "ThrottlingException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelStreamErrorException",
        "ModelNotReadyException",
        "throttlingException",
        "serviceUnavailableException",
        "internalServerException",
        "modelStreamErrorException",
    }
)
"""Error kinds that mean "busy or broken for a moment, not your request", as each wire names
them: what decides when a failure has no status to judge by (an error event mid-stream)."""


def wire_error(
    message: str, *, status: int | None = None, kind: str | None = None
) -> ProviderError:
    """The `ProviderError` for a failure a wire reported: the one mapping every wire uses.

    `kind` is the one the answer named (its error type, Gemini's status
    name, Bedrock's error code), else the status's in `STATUS_KINDS`;
    retryable when the status is in `RETRYABLE_STATUSES` or the kind in
    `RETRYABLE_KINDS`.
    """
    return ProviderError(
        message,
        status=status,
        kind=kind or (STATUS_KINDS.get(status) if status is not None else None),
        retryable=status in RETRYABLE_STATUSES or kind in RETRYABLE_KINDS,
    )


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

    The messages are `carryall.blocks.Message`s, typed here as `Any`: the
    block model raises errors of this module, so this module names none of
    its types (the family sits below everything that raises it).
    """

    def __init__(
        self,
        session_id: str,
        reason: str,
        *,
        started: tuple[int, int],
        current: tuple[int, int],
        unrecorded: Sequence[Any] = (),
    ) -> None:
        self.session_id = session_id
        self.reason = reason
        self.started = started
        self.current = current
        self.unrecorded: list[Any] = list(unrecorded)
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


class StructuredOutputError(CarryallError, ValueError):
    """An answer asked for as structured output is not JSON, or does not match its schema.

    `path` is the JSON path of the first mismatch (`$.items[0].qty`; `$` for
    the whole answer), `reason` what is wrong there, `answer` the text that
    was checked, so a caller can show it, keep it or ask again.
    """

    def __init__(self, path: str, reason: str, answer: str) -> None:
        self.path = path
        self.reason = reason
        self.answer = answer
        super().__init__(f"the answer does not match the schema: at {path}: {reason}")
