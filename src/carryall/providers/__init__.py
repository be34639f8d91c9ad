"""Wire dialects: one pure codec per backend, plus prompt mode.

Each codec turns a `Request` into the JSON its wire takes and that wire's
JSON (or stream events) back into a `Response`. Prompt mode writes and reads
tool rounds as text under two grammars of its own, each in the module named
for it: `calling_convention` (the calls) and `results_body` (their results).
No network and no files here: transport is a separate seam
(`carryall.transport`).
"""

from carryall.providers._types import (
    DEFAULT_TARGET,
    CachePolicy,
    Capabilities,
    Dialect,
    Downgrade,
    Effort,
    Encoded,
    HostedTool,
    HostedToolKind,
    Imported,
    Logprobs,
    ModelOptions,
    OutputSchema,
    Request,
    Response,
    Sent,
    StopReason,
    Target,
    TokenLogprob,
    ToolChoice,
    ToolSpec,
    Usage,
)

__all__ = [
    "DEFAULT_TARGET",
    "CachePolicy",
    "Capabilities",
    "Dialect",
    "Downgrade",
    "Effort",
    "Encoded",
    "HostedTool",
    "HostedToolKind",
    "Imported",
    "Logprobs",
    "ModelOptions",
    "OutputSchema",
    "Request",
    "Response",
    "Sent",
    "StopReason",
    "Target",
    "TokenLogprob",
    "ToolChoice",
    "ToolSpec",
    "Usage",
]
