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
from typing import Final, Protocol

from carryall.providers import Capabilities, Request, Response

__all__ = ["NO_KEY", "RETRY_DELAY", "Backend"]

RETRY_DELAY: Final = 0.5
"""First pause before retrying a broken stream, doubled each time (up to 8 s)."""

NO_KEY: Final = "no-key-needed"
"""The API key sent to a server that needs none: the SDKs refuse to start without one."""


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

    def close(self) -> None:
        """Release the connection pool; the backend is not used afterwards."""
        ...
