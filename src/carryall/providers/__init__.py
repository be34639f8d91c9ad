"""Wire dialects: one pure codec per backend, plus prompt mode.

Each codec turns a `Request` into the JSON its wire takes and that wire's
JSON (or stream events) back into a `Response`. No network and no files
here: transport is a separate seam (`carryall.transport`).
"""

from carryall.providers._types import (
    Capabilities,
    Effort,
    Request,
    Response,
    StopReason,
    ToolChoice,
    ToolSpec,
    Usage,
)

__all__ = [
    "Capabilities",
    "Effort",
    "Request",
    "Response",
    "StopReason",
    "ToolChoice",
    "ToolSpec",
    "Usage",
]
