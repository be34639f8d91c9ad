"""Where the MCP tests find their real peer, `@modelcontextprotocol/server-everything`.

`.ci/run` installs the pinned version with npm into ~/.cache/carryall-ci/npm
and names its entry point in `CARRYALL_MCP_EVERYTHING`. Without Node.js or
without the server the tests skip, naming the command that installs it
(`tests.support.peers`); under `.ci/run` they fail instead, so a CI that
forgot the step does not pass by skipping.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

from carryall.config import McpServer
from tests.support.peers import peer_missing

_DEFAULT = (
    Path.home()
    / ".cache/carryall-ci/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


_CI_RUN = Path(__file__).resolve().parents[2] / ".ci/run"


def pinned_version() -> str:
    """The reference server's version `.ci/run` pins (read from it: one place says it)."""
    found = re.search(r"^MCP_EVERYTHING_VERSION=(\S+)$", _CI_RUN.read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{_CI_RUN} no longer sets MCP_EVERYTHING_VERSION")
    return found.group(1)


def install_command() -> str:
    """The one command that installs the pinned reference server where the tests look."""
    return (
        "npm install --prefix ~/.cache/carryall-ci/npm "
        f"@modelcontextprotocol/server-everything@{pinned_version()}"
    )


def everything_server() -> McpServer:
    """The reference server over stdio, or a skip (under `.ci/run` a failure) naming its install."""
    node = shutil.which("node")
    if node is None:
        peer_missing(
            "Node.js is not installed (the reference MCP server needs it)",
            "apt-get install nodejs npm",
        )
    entry = Path(os.environ.get("CARRYALL_MCP_EVERYTHING") or _DEFAULT)
    if not entry.is_file():
        peer_missing(f"the reference MCP server is not at {entry}", install_command())
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
