"""Transport: a codec's JSON sent through an official SDK, answered whole or not at all.

The seam between the pure codecs (`carryall.providers`) and the network.
`Backend` is what the agent loop talks to; the rest is in modules named for
their concept:

- `carryall.transport.sse`: server-sent events, read as raw events so every
  field a codec reads reaches it unchanged.
- `carryall.transport.anthropic` and `carryall.transport.openai`: one
  transport per SDK, each handed a `carryall.providers.codec.Codec` value.
- `_http` (private): one prepared POST per SDK client, sent through the
  SDK's httpx2 client with its headers and its retry policy.
- `_errors` (private): the one mapping of SDK and HTTP failures to
  `ProviderError`, and the loop that sends a broken stream again whole.

Choosing and opening a backend from the config is `carryall.backends`. This
module imports none of its siblings, so anything can import `Backend` from
here without loading an SDK, the HTTP client or the local server.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any, Final, Protocol

import msgspec

from carryall.blocks import Document, Image
from carryall.providers import Capabilities, Request, Response

__all__ = ["NO_KEY", "RETRY_DELAY", "Backend", "ModelInfo", "model_info"]

RETRY_DELAY: Final = 0.5
"""First pause before retrying a broken stream, doubled each time (up to 8 s)."""

NO_KEY: Final = "no-key-needed"
"""The API key sent to a server that needs none: the SDKs refuse to start without one."""


class ModelInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """One model a backend serves, as the provider's own model list names it.

    Every field but `id` is what that list says and nothing more: a field
    the provider leaves out stays None rather than being guessed.
    """

    id: str
    """The name `--model` (and `open_backend(model=...)`) takes."""
    name: str | None = None
    """The provider's display name, where it gives one."""
    owner: str | None = None
    """Who makes or serves it (`owned_by`, Bedrock's `providerName`)."""
    created: str | None = None
    """When it was released or added, as an ISO 8601 date or time."""
    context_window: int | None = None
    """Input tokens it takes (llama-server: the context of one request slot)."""
    max_output_tokens: int | None = None
    """Output tokens one answer may hold."""


def model_info(
    id: Any,
    *,
    name: Any = None,
    owner: Any = None,
    created: Any = None,
    context_window: Any = None,
    max_output_tokens: Any = None,
) -> ModelInfo | None:
    """A `ModelInfo` from what a model list holds, each value kept only when it has its type.

    The one reader every transport's list goes through, so a list entry with
    a field of the wrong type loses that field, not the whole list; an
    entry without a string `id` is no model (None). `created` may be a
    datetime, a date, an ISO string or Unix seconds (OpenAI's form).
    """
    if not isinstance(id, str) or not id:
        return None
    return ModelInfo(
        id=id,
        name=name if isinstance(name, str) and name else None,
        owner=owner if isinstance(owner, str) and owner else None,
        created=_when(created),
        context_window=_tokens(context_window),
        max_output_tokens=_tokens(max_output_tokens),
    )


def _when(value: Any) -> str | None:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value, UTC).isoformat()
        except (OverflowError, ValueError, OSError):
            return None  # seconds past what a datetime holds
    return value if isinstance(value, str) and value else None


def _tokens(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class Backend(Protocol):
    """A model behind a wire: what the agent loop talks to.

    `complete` returns a whole `Response` or raises `ProviderError`: never a
    partial answer, so a failed call leaves the caller's history untouched.
    `on_text` receives visible text as it streams in.
    """

    name: str
    model: str
    capabilities: Capabilities

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        """Send `request` (an empty `model` means this backend's) and return the whole answer."""
        ...

    @property
    def context_window(self) -> int | None:
        """The model's context in tokens where its server reports it (llama-server); else None."""
        ...

    def list_models(self) -> list[ModelInfo]:
        """The models this backend's server or account serves, as the provider lists them."""
        ...

    def takes_url(self, block: Image | Document) -> bool:
        """Whether this backend sends `block`, held by URL, as its URL (else it needs the bytes)."""
        ...

    def close(self) -> None:
        """Release the connection pool; the backend is not used afterwards."""
        ...
