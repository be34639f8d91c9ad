"""MCP server configuration: the `mcpServers` form other tools write, and `carryall mcp list`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from carryall.config import McpServer, load_config
from carryall.errors import CarryallError, McpError
from carryall.mcp import read_mcp_file
from tests.support.mcp_peer import HOSTILE, everything_server, server_gone


def _file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document))
    return path


def test_a_claude_desktop_file_is_read_other_tools_keys_left_alone(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        {
            "mcpServers": {
                "files": {
                    "command": "npx",
                    "args": ["-y", "server-filesystem", "/srv"],
                    "env": {"A": "1"},
                    "autoApprove": ["read"],
                },
                "search": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}},
                "off": {"command": "x", "disabled": True},
            }
        },
    )
    servers = read_mcp_file(path)
    assert servers == {
        "files": McpServer(command="npx", args=["-y", "server-filesystem", "/srv"], env={"A": "1"}),
        "search": McpServer(url="https://mcp.example.com/mcp", headers={"X-Key": "k"}),
    }
    assert servers["files"].transport == "stdio" and servers["search"].transport == "http"


def test_a_vs_code_file_uses_servers_and_type(tmp_path: Path) -> None:
    path = _file(tmp_path, {"servers": {"s": {"type": "streamableHttp", "url": "http://h/mcp"}}})
    assert read_mcp_file(path)["s"].transport == "http"


@pytest.mark.parametrize(
    ("document", "said"),
    [
        (
            {"mcpServers": {"s": {"command": "a", "url": "http://h"}}},
            "mcpServers.s: give exactly one",
        ),
        ({"mcpServers": {"s": {}}}, "mcpServers.s: give exactly one"),
        ({"mcpServers": {"s": {"url": "ftp://h"}}}, "is not an http:// or https:// URL"),
        ({"mcpServers": {"s": {"command": "a", "type": "sse"}}}, "type 'sse' is not one"),
        ({"mcpServers": {"s": {"command": 3}}}, "mcpServers.s: Expected `str | null`"),
        ({"mcpServers": {"s": {"command": "a", "timeout": 0}}}, "timeout must be a positive"),
        ({"mcpServers": {"s": "npx"}}, "mcpServers.s: expected an object"),
        ({"tools": {}}, "no 'mcpServers' object"),
        ([1], "expected a JSON object"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_file_and_the_server(
    tmp_path: Path, document: object, said: str
) -> None:
    path = _file(tmp_path, document)
    with pytest.raises(McpError) as caught:
        read_mcp_file(path)
    assert str(caught.value).startswith(f"MCP config {path}: ")
    assert said in str(caught.value)


def test_a_missing_or_broken_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(McpError, match="cannot read it: No such file or directory"):
        read_mcp_file(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(McpError, match="not valid JSON"):
        read_mcp_file(tmp_path / "bad.json")


def test_the_config_file_takes_mcp_servers_in_the_same_form(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[mcpServers.files]\ncommand = "npx"\nargs = ["-y", "fs"]\n')
    assert load_config(path).mcp_servers == {"files": McpServer(command="npx", args=["-y", "fs"])}
    path.write_text('[mcpServers.files]\nurl = "nowhere"\n')
    with pytest.raises(CarryallError, match=r"mcpServers\.files: url 'nowhere' is not an http"):
        load_config(path)


def _carryall(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"CARRYALL_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "COLUMNS": "60"}
    return subprocess.run(
        [sys.executable, "-m", "carryall", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


@pytest.mark.slow
def test_mcp_list_shows_each_servers_tools_and_one_line_per_failure(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    everything = everything_server()
    path = _file(
        tmp_path,
        {
            "mcpServers": {
                "everything": {"command": everything.command, "args": everything.args},
                "hostile": {"command": HOSTILE.command, "args": HOSTILE.args},
                "missing": {"command": str(tmp_path / "no-such-server")},
            }
        },
    )
    done = _carryall(tmp_path, "mcp", "list", "--mcp", str(path))
    assert done.returncode == 1
    # carryall declares elicitation, sampling and roots, so the server adds the tools that use them.
    assert "everything (16 tools)" in done.stdout
    # Each description wraps in its column: read as words, it follows its name whole.
    words = " ".join(done.stdout.split())
    assert " everything__trigger-sampling-request " in words
    assert " mcp_read_resource Read a resource an MCP tool result linked to" in words
    assert " everything__get-tiny-image Returns a tiny MCP logo image." in words
    assert " hostile__read_file Named like carryall's built-in read_file." in words
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: MCP server missing: cannot start it: No such file or directory: "
        f"{tmp_path / 'no-such-server'}"
    ]
    assert "Traceback" not in done.stderr


def test_mcp_list_with_a_bad_file_is_one_error_line(tmp_path: Path) -> None:
    done = _carryall(tmp_path, "mcp", "list", "--mcp", str(tmp_path / "nope.json"))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: MCP config {tmp_path / 'nope.json'}: cannot read it: No such file or directory"
    )


def test_sigterm_while_servers_start_stops_them_and_exits_143(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    pid_file = tmp_path / "server.pid"
    sleeper = (
        "import os, pathlib, time; "
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(120)"
    )
    path = _file(
        tmp_path, {"mcpServers": {"slow": {"command": sys.executable, "args": ["-c", sleeper]}}}
    )
    env = {**os.environ, "CARRYALL_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "carryall", "mcp", "list", "--mcp", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the server never started"
            time.sleep(0.1)
        server_pid = int(pid_file.read_text())
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 143, stderr
    assert "Traceback" not in stderr
    assert server_gone(server_pid, within=10), "the MCP server outlived carryall"
