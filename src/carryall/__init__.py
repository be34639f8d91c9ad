"""carryall: keep a tool-using conversation whole on every backend.

The names the README's tour uses, from one place:

    from carryall import Agent, Message, Store, open_backend, tool

The block model and the errors load with the package; the agent loop, the
backends, the tools and the session store load on first use (PEP 562), so
`import carryall` costs only what a reader of blocks needs.
"""

from typing import TYPE_CHECKING

from carryall._lazy import lazy_names
from carryall.blocks import (
    Block,
    Citation,
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Role,
    ServerToolCall,
    ServerToolResult,
    Spelling,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    document_placeholder,
    image_media_type,
    image_placeholder,
    validate_history,
)
from carryall.errors import (
    AttachmentError,
    BlockError,
    CarrierError,
    CarryallError,
    HistoryError,
    HostedToolError,
    ProviderError,
    SessionConflict,
    StructuredOutputError,
    TranscriptError,
)

if TYPE_CHECKING:
    from carryall.agent import Agent
    from carryall.backends import Backend, open_backend
    from carryall.sessions import Session, Store
    from carryall.tools import Tool, tool

__version__ = "0.1.0"

_LAZY = {
    "Agent": "carryall.agent",
    "Backend": "carryall.backends",
    "open_backend": "carryall.backends",
    "Session": "carryall.sessions",
    "Store": "carryall.sessions",
    "Tool": "carryall.tools",
    "tool": "carryall.tools",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "Agent",
    "AttachmentError",
    "Backend",
    "Block",
    "BlockError",
    "CarrierError",
    "CarryallError",
    "Citation",
    "Document",
    "HistoryError",
    "HostedToolError",
    "Image",
    "Message",
    "Opaque",
    "Origin",
    "ProviderError",
    "RedactedThinking",
    "Role",
    "ServerToolCall",
    "ServerToolResult",
    "Session",
    "SessionConflict",
    "Spelling",
    "Store",
    "StructuredOutputError",
    "Text",
    "Thinking",
    "Tool",
    "ToolResult",
    "ToolUse",
    "TranscriptError",
    "__version__",
    "document_placeholder",
    "image_media_type",
    "image_placeholder",
    "open_backend",
    "tool",
    "validate_history",
]
