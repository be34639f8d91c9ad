"""An `mcpServers` file as Claude Desktop, Cursor and VS Code write it, read into `McpServer`s.

The reader needs no MCP SDK: a bad file is one error line naming the file
and the server before anything is started.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import msgspec

from carryall._beneath import read_regular
from carryall.config import McpServer
from carryall.errors import McpError

__all__ = ["mcp_servers_from", "read_mcp_file"]

_FIELDS = frozenset(McpServer.__struct_encode_fields__)
"""The keys carryall reads; the other tools' own keys (`autoApprove`, ...) are left alone."""


def read_mcp_file(path: str | os.PathLike[str]) -> dict[str, McpServer]:
    """The servers of an MCP config file: `{"mcpServers": {...}}` (VS Code: `"servers"`).

    A missing or unreadable file, bad JSON, or an entry carryall cannot
    start is an `McpError` naming the file and the server.
    """
    where = os.fspath(path)
    try:
        raw = read_regular(path)
    except OSError as exc:
        reason = exc.strerror if isinstance(exc, FileNotFoundError) else str(exc)
        raise McpError(f"MCP config {where}: cannot read it: {reason}") from None
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise McpError(f"MCP config {where}: not valid JSON: {exc}") from None
    except RecursionError:
        raise McpError(f"MCP config {where}: nested too deeply to be a config") from None
    if not isinstance(document, dict):
        raise McpError(f"MCP config {where}: expected a JSON object with an 'mcpServers' key")
    servers = document.get("mcpServers", document.get("servers"))
    if not isinstance(servers, dict):
        raise McpError(
            f"MCP config {where}: no 'mcpServers' object (the form Claude Desktop, "
            'Cursor and VS Code use: {"mcpServers": {"name": {"command": ...}}})'
        )
    return mcp_servers_from(servers, where)


def mcp_servers_from(entries: Mapping[str, Any], where: str) -> dict[str, McpServer]:
    """Each entry of an `mcpServers` object checked and converted; `where` names it in errors."""
    servers: dict[str, McpServer] = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise McpError(f"MCP config {where}: mcpServers.{name}: expected an object")
        known = {key: value for key, value in entry.items() if key in _FIELDS}
        try:
            server = msgspec.convert(known, McpServer)
        except msgspec.ValidationError as exc:
            raise McpError(f"MCP config {where}: mcpServers.{name}: {exc}") from None
        problem = server.problem()
        if problem is not None:
            raise McpError(f"MCP config {where}: mcpServers.{name}: {problem}")
        if not server.disabled:
            servers[name] = server
    return servers
