"""carryall: keep a tool-using conversation whole on every backend."""

from carryall.blocks import (
    Block,
    Image,
    Message,
    Role,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
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
    ProviderError,
    TranscriptError,
)

__version__ = "0.1.0"

__all__ = [
    "AttachmentError",
    "Block",
    "BlockError",
    "CarrierError",
    "CarryallError",
    "HistoryError",
    "Image",
    "Message",
    "ProviderError",
    "Role",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolUse",
    "TranscriptError",
    "__version__",
    "image_media_type",
    "image_placeholder",
    "validate_history",
]
