"""Provider-hosted tools: each `HostedTool` kind as the wire that runs it declares it.

A hosted tool is one the provider runs itself (web search, web fetch, code
execution, file search, URL context, a remote MCP server): the request
declares it, and its calls and results come back in the answer as
`ServerToolCall` and `ServerToolResult` blocks. Each wire that has a kind
gets it in its own tool definition; a kind the wire does not have, or a
setting of it the wire does not take, is refused with a `HostedToolError`
naming the kind, the wire and why, before anything is sent: a declared
tool is never silently left off.

One table per wire maps the kind to the wire's definition and the
settings (carryall's names, shared where the wires share a meaning) to
the wire's fields, so the answer to "what does web search look like on
Gemini" is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from carryall.blocks import Opaque, ServerToolCall, survey_history
from carryall.errors import HostedToolError
from carryall.providers._common import goes_back
from carryall.providers._types import HostedTool, Request

__all__ = [
    "ANTHROPIC_ADVISOR_BETA",
    "ANTHROPIC_COMPACTION_BETA",
    "ANTHROPIC_MCP_BETA",
    "WIRE_KINDS",
    "anthropic_betas",
    "anthropic_fields",
    "anthropic_headers",
    "chat_options",
    "gemini_tools",
    "refuse_all",
    "responses_tools",
]

_Build = Callable[[Mapping[str, Any]], dict[str, Any]]


class _Kind:
    """How one wire declares one hosted kind: the definition, and the settings it takes."""

    __slots__ = ("base", "required", "settings")

    def __init__(
        self,
        base: Mapping[str, Any],
        settings: Mapping[str, str] | None = None,
        required: Sequence[str] = (),
    ) -> None:
        self.base = dict(base)
        self.settings = dict(settings or {})  # carryall's name: the wire's field
        self.required = tuple(required)

    def build(self, tool: HostedTool, wire: str) -> dict[str, Any]:
        out = {key: (dict(v) if isinstance(v, dict) else v) for key, v in self.base.items()}
        for name in self.required:
            if name not in tool.config:
                raise HostedToolError(tool.kind, wire, f"it needs the setting {name!r}")
        for name, value in tool.config.items():
            field = self.settings.get(name)
            if field is None:
                taken = ", ".join(sorted(self.settings)) or "none"
                raise HostedToolError(
                    tool.kind, wire, f"setting {name!r} is not one it takes (it takes: {taken})"
                )
            _put(out, field, value)
        return out


def _put(out: dict[str, Any], field: str, value: Any) -> None:
    # A dotted field sits inside an object of the definition (`filters.allowed_domains`).
    *path, last = field.split(".")
    holder = out
    for step in path:
        holder = holder.setdefault(step, {})
    holder[last] = value


_ANTHROPIC: Final = {
    "web_search": _Kind(
        {"type": "web_search_20250305", "name": "web_search"},
        {
            "max_uses": "max_uses",
            "allowed_domains": "allowed_domains",
            "blocked_domains": "blocked_domains",
            "user_location": "user_location",
        },
    ),
    "web_fetch": _Kind(
        {"type": "web_fetch_20250910", "name": "web_fetch"},
        {
            "max_uses": "max_uses",
            "allowed_domains": "allowed_domains",
            "blocked_domains": "blocked_domains",
            "max_content_tokens": "max_content_tokens",
        },
    ),
    "code_execution": _Kind({"type": "code_execution_20250825", "name": "code_execution"}),
    # Not a tool but a server of them: `mcp_servers` beside `tools`, under a beta.
    "mcp": _Kind(
        {"type": "url"},
        {
            "server_url": "url",
            "server_label": "name",
            "authorization": "authorization_token",
            "allowed_tools": "tool_configuration.allowed_tools",
        },
        required=("server_label", "server_url"),
    ),
    # A second model the answering one consults mid-answer, under a beta: its
    # calls come back as a `server_tool_use` named `advisor` and an
    # `advisor_tool_result`.
    "advisor": _Kind(
        {"type": "advisor_20260301", "name": "advisor"},
        {
            "model": "model",
            "max_tokens": "max_tokens",
            "max_uses": "max_uses",
            "caching": "caching",
        },
        required=("model",),
    ),
}
"""The Messages API's server tools, by their current dated types, its MCP connector and
its advisor."""

ANTHROPIC_MCP_BETA: Final = "mcp-client-2025-04-04"
"""The beta the Messages API's MCP connector (`mcp_servers`) is opted into by."""

ANTHROPIC_ADVISOR_BETA: Final = "advisor-tool-2026-03-01"
"""The beta the Messages API's advisor tool (`advisor_20260301`) is opted into by.

Its blocks (a `server_tool_use` named `advisor`, an `advisor_tool_result`)
are typed only in the SDK's beta request type, so a history that sends them
back is a beta request too.
"""

ANTHROPIC_COMPACTION_BETA: Final = "compact-2026-01-12"
"""The beta the Messages API's server-side compaction is opted into by; the `compaction` block
it answers with goes back under it."""

_ANTHROPIC_BLOCK_BETAS: Final = {
    "advisor_tool_result": ANTHROPIC_ADVISOR_BETA,
    "mcp_tool_use": ANTHROPIC_MCP_BETA,
    "mcp_tool_result": ANTHROPIC_MCP_BETA,
    "compaction": ANTHROPIC_COMPACTION_BETA,
}
"""The beta a native block goes back under, by its type (`Opaque.kind`); every other block
is in the plain request type."""

_ANTHROPIC_CALL_BETAS: Final = {"advisor": ANTHROPIC_ADVISOR_BETA}
"""The beta a `server_tool_use` goes back under, by the server tool it names."""

_ANTHROPIC_KIND_BETAS: Final = {"mcp": ANTHROPIC_MCP_BETA, "advisor": ANTHROPIC_ADVISOR_BETA}
"""The beta a declared hosted kind is opted into by; every other kind is in the plain type."""

_RESPONSES: Final = {
    "web_search": _Kind(
        {"type": "web_search"},
        {
            "allowed_domains": "filters.allowed_domains",
            "user_location": "user_location",
            "search_context_size": "search_context_size",
        },
    ),
    "file_search": _Kind(
        {"type": "file_search"},
        {"vector_store_ids": "vector_store_ids", "max_num_results": "max_num_results"},
        required=("vector_store_ids",),
    ),
    "code_execution": _Kind(
        {"type": "code_interpreter", "container": {"type": "auto"}}, {"container": "container"}
    ),
    # Approval is asked for every call unless the declaration says otherwise,
    # and an agent loop has no one to ask: `never` unless the config says.
    "mcp": _Kind(
        {"type": "mcp", "require_approval": "never"},
        {
            "server_url": "server_url",
            "server_label": "server_label",
            "allowed_tools": "allowed_tools",
            "authorization": "authorization",
            "headers": "headers",
            "require_approval": "require_approval",
            "server_description": "server_description",
        },
        required=("server_label", "server_url"),
    ),
}
"""The Responses API's hosted tools."""

_GEMINI: Final = {
    "web_search": _Kind({"googleSearch": {}}),
    "url_context": _Kind({"urlContext": {}}),
    "code_execution": _Kind({"codeExecution": {}}),
    "file_search": _Kind(
        {"fileSearch": {}},
        {
            "file_search_store_names": "fileSearch.fileSearchStoreNames",
            "top_k": "fileSearch.topK",
            "metadata_filter": "fileSearch.metadataFilter",
        },
        required=("file_search_store_names",),
    ),
}
"""Gemini's built-in tools, each a `Tool` of its own."""

_CHAT: Final = {
    "web_search": _Kind(
        {},
        {"search_context_size": "search_context_size", "user_location": "user_location"},
    ),
}
"""Chat Completions: web search alone, as `web_search_options` (the search models take it)."""

WIRE_KINDS: Final[dict[str, frozenset[str]]] = {
    "anthropic": frozenset(_ANTHROPIC),
    "openai-responses": frozenset(_RESPONSES),
    "gemini": frozenset(_GEMINI),
    "openai": frozenset(_CHAT),
    "llama-server": frozenset(),
    "bedrock": frozenset(),
}
"""Which hosted kinds each wire runs; every other kind is refused there."""

_WHY_NOT: Final[dict[tuple[str, str], str]] = {}
"""A wire's own reason for lacking a kind, where "it has no such tool" does not say enough."""


def _tools(
    hosted: Sequence[HostedTool], table: Mapping[str, _Kind], wire: str
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in hosted:
        kind = table.get(tool.kind)
        if kind is None:
            raise _refused(tool, wire)
        out.append(kind.build(tool, wire))
    return out


def _refused(tool: HostedTool, wire: str) -> HostedToolError:
    reason = _WHY_NOT.get((wire, tool.kind))
    if reason is None:
        runs = ", ".join(sorted(WIRE_KINDS[wire])) or "no hosted tool at all"
        reason = f"this wire has no such tool (it runs: {runs})"
    return HostedToolError(tool.kind, wire, reason)


def anthropic_fields(hosted: Sequence[HostedTool]) -> dict[str, list[dict[str, Any]]]:
    """The Messages API's server tools (`tools`, appended to the function tools) and MCP
    servers (`mcp_servers`, sent with `anthropic_headers`), each present when declared."""
    built = _tools(hosted, _ANTHROPIC, "anthropic")
    out: dict[str, list[dict[str, Any]]] = {}
    for tool, definition in zip(hosted, built, strict=True):
        out.setdefault("mcp_servers" if tool.kind == "mcp" else "tools", []).append(definition)
    return out


def anthropic_betas(request: Request) -> tuple[str, ...]:
    """The betas a Messages API request opts into, each once, in the order first needed.

    What it declares (the MCP connector, the advisor) and the native blocks of a beta
    feature its history sends back (an advisor call or result, an MCP
    tool's, a compaction): such a request is a beta request, which the
    SDK's `client.beta.messages` sends with these names in
    `anthropic-beta`, and the plain request type does not even hold. A
    block counts only when the encoder sends it back as itself
    (`goes_back`): another model's or server's is left off, and a gateway
    that does not know a beta refuses the request for its name.
    """
    betas: dict[str, None] = {}
    for tool in request.hosted_tools:
        declared = _ANTHROPIC_KIND_BETAS.get(tool.kind)
        if declared is not None:
            betas[declared] = None
    # A native block makes its message irregular, and the survey (kept for the
    # encoder that follows) lists those: the rest of a long history is not walked.
    messages = request.messages
    for index in survey_history(messages).irregular:
        for block in messages[index].content:
            if not isinstance(block, Opaque):
                continue
            if isinstance(block, ServerToolCall) and block.kind == "server_tool_use":
                beta = _ANTHROPIC_CALL_BETAS.get(block.name)
            else:
                beta = _ANTHROPIC_BLOCK_BETAS.get(block.kind)
            if beta is not None and goes_back(block.origin, request, "anthropic"):
                betas[beta] = None
    return tuple(betas)


def anthropic_headers(request: Request) -> dict[str, str]:
    """The headers a Messages API request needs for what it holds: its betas (`anthropic_betas`),
    comma-joined in one `anthropic-beta` as the SDK's `betas=` sends them."""
    betas = anthropic_betas(request)
    return {"anthropic-beta": ",".join(betas)} if betas else {}


def responses_tools(hosted: Sequence[HostedTool]) -> list[dict[str, Any]]:
    """The Responses API hosted-tool definitions, appended to `tools`."""
    return _tools(hosted, _RESPONSES, "openai-responses")


def gemini_tools(hosted: Sequence[HostedTool]) -> list[dict[str, Any]]:
    """Gemini's built-in tools, each a `Tool` of `tools` beside the function declarations."""
    return _tools(hosted, _GEMINI, "gemini")


def chat_options(hosted: Sequence[HostedTool], dialect: str) -> dict[str, Any]:
    """The body fields Chat Completions declares hosted tools with: `web_search_options`.

    llama-server runs none; on the OpenAI dialect a second web search is
    refused, as there is one `web_search_options`.
    """
    if not hosted:
        return {}
    if dialect != "openai":
        refuse_all(hosted, dialect if dialect in WIRE_KINDS else "llama-server")
    built = _tools(hosted, _CHAT, "openai")
    if len(built) > 1:
        raise HostedToolError("web_search", "openai", "it is declared once, not twice")
    return {"web_search_options": built[0]}


def refuse_all(hosted: Sequence[HostedTool], wire: str) -> None:
    """Refuse the first hosted tool declared for a wire that runs none."""
    if hosted:
        raise _refused(hosted[0], wire)
