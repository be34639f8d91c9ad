"""MCP: tools from any MCP server for carryall's agents, and carryall's sessions served over MCP.

`read_mcp_file(path)` reads an `mcpServers` file in the form Claude Desktop,
Cursor and VS Code write; `McpToolbox(servers)` starts those servers (stdio
or streamable HTTP) on the official `mcp` SDK and offers their tools as
carryall `Tool`s, each named `server__tool`, and `mcp_read_resource` to read
a resource a result linked to; `result_output` is the one mapping of an MCP
tool result onto the block model (`resource_output` of a resource read).
What a server asks back (a person's answer, the model's completion, the
roots, progress) is `carryall.mcp._host`'s: `Elicitation`, `ElicitAnswer`,
`McpNotice`. `carryall mcp serve`
is the server side (`carryall.mcp.serve`).

Everything but the config reader needs the `carryall[mcp]` extra and loads
on first use, so reading a config never imports the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from carryall._lazy import lazy_names
from carryall.mcp._config import mcp_servers_from, read_mcp_file

if TYPE_CHECKING:
    from carryall.mcp._client import (
        DEFAULT_CALL_TIMEOUT,
        DEFAULT_START_TIMEOUT,
        READ_RESOURCE_TOOL,
        STDERR_TAIL_BYTES,
        McpToolbox,
        ServerTools,
        inherited_env,
        tool_name,
        unique_tool_name,
    )
    from carryall.mcp._host import (
        NOT_INTERACTIVE,
        Asker,
        ElicitAnswer,
        Elicitation,
        McpNotice,
        field_value,
    )
    from carryall.mcp._results import in_schema_order, resource_output, result_output

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "NOT_INTERACTIVE",
    "READ_RESOURCE_TOOL",
    "STDERR_TAIL_BYTES",
    "Asker",
    "ElicitAnswer",
    "Elicitation",
    "McpNotice",
    "McpToolbox",
    "ServerTools",
    "field_value",
    "in_schema_order",
    "inherited_env",
    "mcp_servers_from",
    "read_mcp_file",
    "resource_output",
    "result_output",
    "tool_name",
    "unique_tool_name",
]

_HOMES = {
    "DEFAULT_CALL_TIMEOUT": "carryall.mcp._client",
    "DEFAULT_START_TIMEOUT": "carryall.mcp._client",
    "READ_RESOURCE_TOOL": "carryall.mcp._client",
    "STDERR_TAIL_BYTES": "carryall.mcp._client",
    "McpToolbox": "carryall.mcp._client",
    "ServerTools": "carryall.mcp._client",
    "inherited_env": "carryall.mcp._client",
    "tool_name": "carryall.mcp._client",
    "unique_tool_name": "carryall.mcp._client",
    "NOT_INTERACTIVE": "carryall.mcp._host",
    "Asker": "carryall.mcp._host",
    "ElicitAnswer": "carryall.mcp._host",
    "Elicitation": "carryall.mcp._host",
    "McpNotice": "carryall.mcp._host",
    "field_value": "carryall.mcp._host",
    "in_schema_order": "carryall.mcp._results",
    "resource_output": "carryall.mcp._results",
    "result_output": "carryall.mcp._results",
}

__getattr__ = lazy_names(__name__, _HOMES, globals())
