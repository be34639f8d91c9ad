"""Where the MCP tests find their real peer, `@modelcontextprotocol/server-everything`.

`.ci/run` installs the pinned version with npm into ~/.cache/carryall-ci/npm
and names its entry point in `CARRYALL_MCP_EVERYTHING`. The tests skip only
when Node.js is missing; with Node.js but no server they fail, saying how
to install it, so a CI that forgot the step does not pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from carryall.config import McpServer

_DEFAULT = (
    Path.home()
    / ".cache/carryall-ci/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def everything_server() -> McpServer:
    """The reference server over stdio, or a skip (no Node.js) or a failure (not installed)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the reference MCP server needs it")
    entry = Path(os.environ.get("CARRYALL_MCP_EVERYTHING") or _DEFAULT)
    if not entry.is_file():
        pytest.fail(
            f"the reference MCP server is not at {entry}: run .ci/run, or npm install "
            "@modelcontextprotocol/server-everything into ~/.cache/carryall-ci/npm",
            pytrace=False,
        )
    return McpServer(command=node, args=[str(entry), "stdio"], timeout=30)


HOSTILE = McpServer(
    command=sys.executable,
    args=[str(Path(__file__).parent.parent / "fixtures/mcp_hostile_server.py")],
)
"""The in-repo server whose tools misbehave (tests/fixtures/mcp_hostile_server.py)."""


def server_alive(pid: int) -> bool:
    """Whether MCP server process `pid` still runs; a zombie counts as gone.

    A zombie is gone for every purpose but its parent's bookkeeping.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def server_gone(pid: int, within: float = 15.0) -> bool:
    """Whether MCP server process `pid` has ended, waiting up to `within` seconds for it."""
    deadline = time.monotonic() + within
    while server_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
